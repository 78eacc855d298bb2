//! Attacks on the walls between workspaces, and between a workspace and the
//! host, through the real `cubicle serve` and real jails (issue 9, items 1
//! and 6). Each attack first shows, as a positive control, that the setup is
//! really what an attacker would build (the planted symlink reaches its
//! target, the fake listener listens, the mode parameter is honoured), then
//! that the daemon's exec and files on workspace A still land in A, or fail
//! cleanly, and that nothing reaches the target.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One workspace as the test sees it.
struct Ws {
    id: String,
    uid: u32,
}

async fn create(daemon: &Daemon) -> Ws {
    let ws = daemon.create_workspace("{}").await;
    Ws {
        id: ws["id"].as_str().unwrap().to_owned(),
        uid: u32::try_from(ws["host_uid"].as_u64().expect("host_uid in the record")).unwrap(),
    }
}

async fn exec(daemon: &Daemon, id: &str, command: &str) -> (u16, Value) {
    let body = json!({ "command": command }).to_string();
    daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body),
        )
        .await
        .unwrap()
}

/// Runs a shell line that must succeed in `id`; returns its stdout.
async fn sh(daemon: &Daemon, id: &str, command: &str) -> String {
    let (status, out) = exec(daemon, id, command).await;
    assert_eq!(status, 200, "{command}: {out}");
    assert_eq!(out["exit_code"], 0, "{command}: {out}");
    out["stdout"].as_str().unwrap().to_owned()
}

/// A raw files request with the admin token; status and body.
async fn files(
    daemon: &Daemon,
    method: Method,
    id: &str,
    query: &str,
    body: &[u8],
) -> (u16, String) {
    let client = reqwest::Client::new();
    let response = client
        .request(
            method,
            daemon.url(&format!("/v1/workspaces/{id}/files?{query}")),
        )
        .bearer_auth(&daemon.token)
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// The host pid of the workspace's `cubicle-guest` (inside its namespaces).
fn guest_pid(ws: &Ws) -> i32 {
    cubicle_tests::procs::of_uid(ws.uid)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"/usr/local/sbin/cubicle-guest\0"))
        })
        .expect("the workspace's cubicle-guest runs")
}

/// A Unix socket listener the test owns, counting connections and bytes.
#[derive(Clone, Default)]
struct Tripwire {
    heard: Arc<Mutex<(usize, usize)>>,
}

impl Tripwire {
    fn listen(path: &Path) -> Self {
        let listener = tokio::net::UnixListener::bind(path).unwrap();
        let wire = Self::default();
        let heard = wire.heard.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                heard.lock().unwrap().0 += 1;
                let heard = heard.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 256];
                    while let Ok(Ok(n @ 1..)) =
                        tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await
                    {
                        heard.lock().unwrap().1 += n;
                    }
                });
            }
        });
        wire
    }

    /// (connections, bytes) so far.
    fn heard(&self) -> (usize, usize) {
        *self.heard.lock().unwrap()
    }

    fn reset(&self) {
        *self.heard.lock().unwrap() = (0, 0);
    }
}

/// Exec and files on A answer from A: A's hostname, no B secret.
async fn lands_in(daemon: &Daemon, a: &Ws, secret: &str) {
    let (status, out) = exec(daemon, &a.id, "hostname; cat /home/user/secret 2>/dev/null").await;
    assert_eq!(status, 200, "{out}");
    let stdout = out["stdout"].as_str().unwrap();
    assert_eq!(stdout.lines().next(), Some(a.id.as_str()), "{out}");
    assert!(!stdout.contains(secret), "B's secret came out of A: {out}");
    let (status, body) = files(daemon, Method::GET, &a.id, "path=/home/user/secret", b"").await;
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains(secret), "{body}");
}

/// Exec on A fails cleanly (an error, never B's or the host's answer).
async fn refused(daemon: &Daemon, a: &Ws, secret: &str) -> String {
    let (status, out) = exec(daemon, &a.id, "hostname; cat /home/user/secret").await;
    assert!(
        status >= 400,
        "exec on a swapped channel answered {status}: {out}"
    );
    assert!(!out.to_string().contains(secret), "{out}");
    out.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walls_hold_between_workspaces_and_the_host() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let a = create(&daemon).await;
    let b = create(&daemon).await;
    let secret = format!(
        "b-secret-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    sh(
        &daemon,
        &b.id,
        &format!("echo {secret} > /home/user/secret"),
    )
    .await;
    assert_eq!(
        sh(&daemon, &b.id, "cat /home/user/secret").await.trim(),
        secret
    );

    let b_socket = daemon.workspace_dir(&b.id).join("host/guest.sock");
    let a_socket = daemon.workspace_dir(&a.id).join("host/guest.sock");
    assert!(b_socket.exists() && a_socket.exists());

    // A root-only host socket that records whether it ever got bytes.
    let private = data.path().join("root-only");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let host_socket = private.join("host.sock");
    let wire = Tripwire::listen(&host_socket);

    symlinks_planted_inside_a_lead_nowhere(
        &daemon,
        &a,
        &b,
        &secret,
        &b_socket,
        &host_socket,
        &wire,
    )
    .await;
    a_swapped_channel_is_refused_before_a_byte(
        &daemon,
        &a,
        &secret,
        &a_socket,
        &b_socket,
        &host_socket,
        &wire,
    )
    .await;
    a_fake_listener_inside_a_hears_nothing(&daemon, &a, &secret).await;
    setuid_bits_never_reach_the_disk(&daemon, &a).await;
    vsock_is_refused_inside(&daemon, &a).await;

    // B was never disturbed, and A still works.
    assert_eq!(sh(&daemon, &b.id, "hostname").await.trim(), b.id);
    assert_eq!(
        sh(&daemon, &b.id, "cat /home/user/secret").await.trim(),
        secret
    );
    lands_in(&daemon, &a, &secret).await;
}

/// (a), (b): inside A, the attack of issue 9: symlinks to B's guest socket
/// and to a root-only host socket, wherever A can write.
async fn symlinks_planted_inside_a_lead_nowhere(
    daemon: &Daemon,
    a: &Ws,
    b: &Ws,
    secret: &str,
    b_socket: &Path,
    host_socket: &Path,
    wire: &Tripwire,
) {
    // Nothing of the guest channel is mounted into the jail any more.
    let (_, out) = exec(daemon, &a.id, "ls -la /run/cubicle 2>&1; ls /run").await;
    assert!(
        !out["stdout"].as_str().unwrap().contains("guest.sock"),
        "{out}"
    );
    // The issue's path into B's tree (the guest socket is no longer there),
    // then B's socket where the host keeps it, which `guest.sock` ends on.
    let via_proc = format!("/proc/{}/root/run/cubicle/guest.sock", guest_pid(b));
    for (target, name) in [(via_proc, "b-proc"), (b_socket.display().to_string(), "b")] {
        sh(
            daemon,
            &a.id,
            &format!(
                "mkdir -p /run/cubicle && for d in /run/cubicle /tmp /home/user; do ln -sfn {target} $d/guest.sock; ln -sfn {target} $d/{name}.sock; done"
            ),
        )
        .await;
    }
    // Positive control: the planted link, followed from the host as the old
    // daemon did, reaches B's live guest.
    let planted = PathBuf::from(format!(
        "/proc/{}/root/run/cubicle/guest.sock",
        guest_pid(a)
    ));
    let stream = cubicle_tests::guest::connect(&planted, 1024).await;
    assert!(
        stream.is_ok(),
        "control: the planted link must reach B: {stream:?}"
    );
    drop(stream);
    lands_in(daemon, a, secret).await;

    // The same trick aimed at the root-only host socket.
    sh(
        daemon,
        &a.id,
        &format!(
            "for d in /run/cubicle /tmp /home/user; do ln -sfn {} $d/guest.sock; done",
            host_socket.display()
        ),
    )
    .await;
    let mut control = tokio::net::UnixStream::connect(&planted).await.unwrap();
    control.write_all(b"control").await.unwrap();
    drop(control);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        wire.heard(),
        (1, 7),
        "control: the planted link reaches the host socket"
    );
    wire.reset();
    lands_in(daemon, a, secret).await;
    let (status, body) = files(daemon, Method::PUT, &a.id, "path=/home/user/x.txt", b"hi").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(wire.heard(), (0, 0), "the host socket heard the daemon");
    sh(
        daemon,
        &a.id,
        "rm -f /run/cubicle/*.sock /tmp/*.sock /home/user/*.sock",
    )
    .await;
}

/// (a), (b) one wall deeper: even if the path the daemon connects to were
/// swapped (the test does it as root, which no workspace can), the peer
/// check refuses another workspace's or the host's listener, and a symlink
/// is never followed.
async fn a_swapped_channel_is_refused_before_a_byte(
    daemon: &Daemon,
    a: &Ws,
    secret: &str,
    a_socket: &Path,
    b_socket: &Path,
    host_socket: &Path,
    wire: &Tripwire,
) {
    // The workspace uid cannot write where the daemon's socket is.
    let dir = a_socket.parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    let as_a = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={}", a.uid),
            &format!("--regid={}", a.uid),
            "--clear-groups",
            "touch",
        ])
        .arg(dir.join("planted"))
        .output()
        .unwrap();
    assert!(
        !as_a.status.success(),
        "A's uid wrote into {}",
        dir.display()
    );

    let real = dir.join("guest.sock.real");
    std::fs::rename(a_socket, &real).unwrap();
    // B's listener under A's name: a real socket, the wrong peer.
    std::fs::hard_link(b_socket, a_socket).unwrap();
    let message = refused(daemon, a, secret).await;
    assert!(message.contains("refusing"), "{message}");
    // The root-only host socket under A's name: connected, not one byte.
    std::fs::remove_file(a_socket).unwrap();
    std::fs::hard_link(host_socket, a_socket).unwrap();
    refused(daemon, a, secret).await;
    let (connections, bytes) = wire.heard();
    assert!(
        connections >= 1,
        "control: the daemon did reach the host socket"
    );
    assert_eq!(bytes, 0, "the host socket got bytes from the daemon");
    wire.reset();
    // Symlinks are never followed: nothing even connects.
    for target in [b_socket, host_socket] {
        std::fs::remove_file(a_socket).unwrap();
        std::os::unix::fs::symlink(target, a_socket).unwrap();
        let message = refused(daemon, a, secret).await;
        assert!(message.contains("not a socket"), "{message}");
    }
    assert_eq!(wire.heard(), (0, 0));
    std::fs::remove_file(a_socket).unwrap();
    std::fs::rename(&real, a_socket).unwrap();
    lands_in(daemon, a, secret).await;
}

/// (c): a process in A that listens where the guest used to, or tries to
/// take the guest's listening socket, gets nothing beyond A.
async fn a_fake_listener_inside_a_hears_nothing(daemon: &Daemon, a: &Ws, secret: &str) {
    let fake = r#"
import os, socket, threading
os.makedirs('/run/cubicle', exist_ok=True)
def serve(path):
    try: os.unlink(path)
    except FileNotFoundError: pass
    s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen()
    while True:
        c, _ = s.accept()
        with open('/tmp/fake.log', 'a') as log: log.write(path + '\n')
        c.close()
for p in ['/run/cubicle/guest.sock', '/tmp/guest.sock', '/home/user/guest.sock']:
    threading.Thread(target=serve, args=(p,), daemon=True).start()
open('/tmp/fake.ready', 'w').close()
threading.Event().wait()
"#;
    sh(daemon, &a.id, &format!("cat > /tmp/fake.py <<'EOF'\n{fake}\nEOF\nsetsid -f python3 /tmp/fake.py >/dev/null 2>&1; for i in $(seq 50); do [ -e /tmp/fake.ready ] && break; sleep 0.1; done; sleep 0.2")).await;
    // Positive control: the fake listener really listens.
    sh(daemon, &a.id, "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/run/cubicle/guest.sock')\"; sleep 0.2").await;
    assert_eq!(
        sh(daemon, &a.id, "cat /tmp/fake.log").await,
        "/run/cubicle/guest.sock\n"
    );
    for _ in 0..3 {
        lands_in(daemon, a, secret).await;
    }
    assert_eq!(
        sh(daemon, &a.id, "cat /tmp/fake.log").await,
        "/run/cubicle/guest.sock\n",
        "the daemon connected to a listener inside A"
    );

    // Taking the guest's own listening socket: its number is in plain sight,
    // pidfd_open works (control), pidfd_getfd and /proc/<pid>/fd do not.
    let steal = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
pid = next(int(p) for p in os.listdir('/proc') if p.isdigit()
           and open(f'/proc/{p}/cmdline', 'rb').read().startswith(b'/usr/local/sbin/cubicle-guest'))
argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
fd = int(argv[argv.index(b'--channel-fd') + 1])
print('target', os.readlink(f'/proc/{pid}/fd/{fd}').split(':')[0])
pidfd = os.pidfd_open(pid)
print('pidfd_open ok')
got = libc.syscall(438, pidfd, fd, 0)
print('pidfd_getfd', got, errno.errorcode.get(ctypes.get_errno()))
try:
    os.open(f'/proc/{pid}/fd/{fd}', os.O_RDWR)
    print('proc open ok')
except OSError as e:
    print('proc open', errno.errorcode[e.errno])
"#;
    let out = sh(daemon, &a.id, &format!("python3 - <<'EOF'\n{steal}\nEOF")).await;
    assert!(
        out.contains("target socket\n"),
        "control: the fd is the socket: {out}"
    );
    assert!(out.contains("pidfd_open ok\n"), "control: {out}");
    assert!(out.contains("pidfd_getfd -1 EPERM\n"), "{out}");
    assert!(!out.contains("proc open ok"), "{out}");
    sh(daemon, &a.id, "pkill -f 'python3 /tmp/fak[e].py'; rm -f /run/cubicle/guest.sock /tmp/guest.sock /home/user/guest.sock").await;
}

/// (d): `PUT files` never makes a setuid, setgid or sticky file.
async fn setuid_bits_never_reach_the_disk(daemon: &Daemon, a: &Ws) {
    let (status, body) = files(
        daemon,
        Method::PUT,
        &a.id,
        "path=/home/user/tool&mode=0750",
        b"#!/bin/sh\n",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sh(daemon, &a.id, "stat -c %a /home/user/tool").await.trim(),
        "750",
        "control"
    );
    for mode in ["4755", "2755", "6777", "1777"] {
        let (status, body) = files(
            daemon,
            Method::PUT,
            &a.id,
            &format!("path=/home/user/tool&mode={mode}"),
            b"#!/bin/sh\n",
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let on_disk = sh(daemon, &a.id, "stat -c %a /home/user/tool").await;
        let expected = &mode[1..];
        assert_eq!(on_disk.trim(), expected, "asked {mode}");
    }
}

/// (e): no vsock from the jail.
async fn vsock_is_refused_inside(daemon: &Daemon, a: &Ws) {
    // Control: the host itself is not what refuses (EPERM comes from the
    // filter; a host without vsock says "Address family not supported").
    let host = std::process::Command::new("python3")
        .args([
            "-c",
            "import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)",
        ])
        .output()
        .unwrap();
    let host_err = String::from_utf8_lossy(&host.stderr);
    assert!(
        !host_err.contains("Operation not permitted"),
        "host: {host_err}"
    );
    let out = sh(daemon, &a.id, "python3 -c \"import socket; socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(); print(int(socket.AF_VSOCK))\"").await;
    assert_eq!(
        out.trim(),
        "40",
        "control: Python has AF_VSOCK and makes sockets"
    );
    let (status, out) = exec(
        daemon,
        &a.id,
        "python3 -c \"import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\"",
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_ne!(out["exit_code"], 0, "{out}");
    let stderr = out["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("PermissionError") && stderr.contains("Operation not permitted"),
        "{out}"
    );
}
