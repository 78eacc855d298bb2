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
    /// Its user's host uid (the record's `host_uid`).
    uid: u32,
    /// Its services' host uid (`cubicle-guest`, Xvnc, Chromium).
    services_uid: u32,
    /// `jail` or `microvm`: what the host can see of it. A jail's services
    /// are host processes (the test inspects them from outside, as root); a
    /// microVM's are inside the guest, seen only through exec.
    backend: String,
}

impl Ws {
    fn jail(&self) -> bool {
        self.backend == "jail"
    }
}

async fn create(daemon: &Daemon) -> Ws {
    let ws = daemon.create_workspace("{}").await;
    let uid = u32::try_from(ws["host_uid"].as_u64().expect("host_uid in the record")).unwrap();
    Ws {
        id: ws["id"].as_str().unwrap().to_owned(),
        uid,
        services_uid: cubicle_tests::procs::workspace_uids(uid)[1],
        backend: ws["backend"].as_str().unwrap().to_owned(),
    }
}

async fn exec(daemon: &Daemon, id: &str, command: &str) -> (u16, Value) {
    cubicle_tests::desk::exec_status(daemon, id, command).await
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
    service_pid(ws, b"/usr/local/sbin/cubicle-guest\0")
}

/// The host pid of the first process of the workspace's services whose
/// command line starts with `prefix`.
fn service_pid(ws: &Ws, prefix: &[u8]) -> i32 {
    let mut pids = cubicle_tests::procs::of_uid(ws.services_uid);
    pids.sort_unstable();
    pids.into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no {} among the services", String::from_utf8_lossy(prefix)))
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
                    while let Ok(Ok(n @ 1..)) = tokio::time::timeout(
                        cubicle_tests::guard(Duration::from_secs(5)),
                        stream.read(&mut buf),
                    )
                    .await
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
    // Nothing of the guest channel is mounted into the jail any more, and
    // the user cannot make `/run/cubicle` (`/run` is the services').
    let (_, out) = exec(
        daemon,
        &a.id,
        "ls -la /run/cubicle 2>&1; ls /run; mkdir /run/cubicle",
    )
    .await;
    assert!(
        !out["stdout"].as_str().unwrap().contains("guest.sock"),
        "{out}"
    );
    assert_ne!(out["exit_code"], 0, "the user made /run/cubicle: {out}");
    // The issue's path into B's tree (the guest socket is no longer there),
    // then B's socket where the host keeps it, which `guest.sock` ends on.
    let via_proc = format!("/proc/{}/root/run/cubicle/guest.sock", guest_pid(b));
    for (target, name) in [(via_proc, "b-proc"), (b_socket.display().to_string(), "b")] {
        sh(
            daemon,
            &a.id,
            &format!(
                "for d in /tmp /home/user; do ln -sfn {target} $d/guest.sock; ln -sfn {target} $d/{name}.sock; done"
            ),
        )
        .await;
    }
    // Positive control: the planted link, followed from the host as the old
    // daemon did, reaches B's live guest.
    let planted = PathBuf::from(format!("/proc/{}/root/tmp/guest.sock", guest_pid(a)));
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
            "for d in /tmp /home/user; do ln -sfn {} $d/guest.sock; done",
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
    sh(daemon, &a.id, "rm -f /tmp/*.sock /home/user/*.sock").await;
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
def serve(path):
    try: os.unlink(path)
    except FileNotFoundError: pass
    s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen()
    while True:
        c, _ = s.accept()
        with open('/tmp/fake.log', 'a') as log: log.write(path + '\n')
        c.close()
for p in ['/tmp/guest.sock', '/home/user/guest.sock']:
    threading.Thread(target=serve, args=(p,), daemon=True).start()
open('/tmp/fake.ready', 'w').close()
threading.Event().wait()
"#;
    sh(daemon, &a.id, &format!("cat > /tmp/fake.py <<'EOF'\n{fake}\nEOF\nsetsid -f python3 /tmp/fake.py >/dev/null 2>&1; for i in $(seq 50); do [ -e /tmp/fake.ready ] && break; sleep 0.1; done; sleep 0.2")).await;
    // Positive control: the fake listener really listens.
    sh(daemon, &a.id, "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/tmp/guest.sock')\"; sleep 0.2").await;
    assert_eq!(
        sh(daemon, &a.id, "cat /tmp/fake.log").await,
        "/tmp/guest.sock\n"
    );
    for _ in 0..3 {
        lands_in(daemon, a, secret).await;
    }
    assert_eq!(
        sh(daemon, &a.id, "cat /tmp/fake.log").await,
        "/tmp/guest.sock\n",
        "the daemon connected to a listener inside A"
    );

    // Taking the guest's own listening socket: its number is in plain sight,
    // pidfd_open works (control), pidfd_getfd and /proc/<pid>/fd do not
    // (the guest runs as the services' uid: its descriptors are not even
    // listed to the user).
    let steal = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
pid = next(int(p) for p in os.listdir('/proc') if p.isdigit()
           and open(f'/proc/{p}/cmdline', 'rb').read().startswith(b'/usr/local/sbin/cubicle-guest'))
argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
fd = int(argv[argv.index(b'--channel-fd') + 1])
print('fd', fd)
try:
    print('target', os.readlink(f'/proc/{pid}/fd/{fd}').split(':')[0])
except OSError as e:
    print('readlink', errno.errorcode[e.errno])
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
    // Control, from the host: that descriptor of the guest is the socket.
    let fd = out
        .lines()
        .find_map(|l| l.strip_prefix("fd "))
        .unwrap_or_else(|| panic!("{out}"));
    let target = std::fs::read_link(format!("/proc/{}/fd/{fd}", guest_pid(a))).unwrap();
    assert!(
        target.to_string_lossy().starts_with("socket:"),
        "control: {target:?}"
    );
    assert!(out.contains("readlink EACCES\n"), "{out}");
    assert!(out.contains("pidfd_open ok\n"), "control: {out}");
    assert!(out.contains("pidfd_getfd -1 EPERM\n"), "{out}");
    assert!(out.contains("proc open EACCES"), "{out}");
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

/// Issue 9 item 5: from the user's side of a workspace (whatever an agent
/// execs, or the desktop's terminal runs) neither Xvnc's RFB nor Chromium's
/// DevTools can be reached, and no process of the services can be read,
/// entered or signalled. Positive controls: the same clients reach both
/// from where the services are (the host, through the guest channel or the
/// browser's own network namespace), and the gateway's own RFB and CDP
/// paths work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_are_out_of_the_users_reach() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let a = create(&daemon).await;
    rfb_is_closed_to_the_user(&daemon, &a).await;
    devtools_is_closed_to_the_user(&daemon, &a).await;
    services_cannot_be_read_or_signalled(&daemon, &a).await;
    the_user_has_no_capabilities_but_keeps_the_display(&daemon, &a).await;
    files_run_as_the_user(&daemon, &a).await;
}

/// A Python client run by exec: RFB on every way in the user could try.
const RFB_PROBE: &str = r#"
import errno, os, socket
def first_bytes(s, ask=None):
    s.settimeout(3)
    data = b''
    try:
        if ask: s.sendall(ask)
        while len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
            if not ask: break
    except OSError:
        pass
    return data
def tcp(port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(('127.0.0.1', port)); print('tcp', port, 'open', first_bytes(s)[:12])
    except OSError as e: print('tcp', port, errno.errorcode[e.errno])
def unix(path):
    s = socket.socket(socket.AF_UNIX); s.settimeout(3)
    try:
        s.connect(path); print('unix', path, 'open', first_bytes(s)[:12])
    except OSError as e: print('unix', path, errno.errorcode[e.errno])
def pids(prefix):
    out = []
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open(f'/proc/{p}/cmdline', 'rb').read().startswith(prefix): out.append(p)
        except OSError: pass
    return out
for port in (5900, 5901, 9222):
    tcp(port)
unix('/run/cubicle-services/rfb.sock')
xvnc = pids(b'/usr/bin/Xvnc')
print('xvnc pids', len(xvnc))
for p in xvnc:
    unix(f'/proc/{p}/root/run/cubicle-services/rfb.sock')
ports = set()
for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    for line in open(table).read().splitlines()[1:]:
        f = line.split()
        if f[3] == '0A': ports.add(int(f[1].rsplit(':', 1)[1], 16))
print('listening', sorted(ports))
for port in sorted(ports):
    if first_bytes(socket.create_connection(('127.0.0.1', port), timeout=3)).startswith(b'RFB'):
        print('RFB on', port)
    ask = b'GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
    if b'webSocketDebuggerUrl' in first_bytes(socket.create_connection(('127.0.0.1', port), timeout=3), ask):
        print('DevTools on', port)
"#;

async fn rfb_is_closed_to_the_user(daemon: &Daemon, a: &Ws) {
    let out = sh(
        daemon,
        &a.id,
        &format!("python3 - <<'EOF'\n{RFB_PROBE}\nEOF"),
    )
    .await;
    for line in [
        "tcp 5900 ECONNREFUSED",
        "tcp 9222 ECONNREFUSED",
        "unix /run/cubicle-services/rfb.sock EACCES",
        "xvnc pids 1",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let via_proc = out
        .lines()
        .filter(|l| l.starts_with("unix /proc/"))
        .collect::<Vec<_>>();
    assert_eq!(via_proc.len(), 1, "{out}");
    assert!(via_proc[0].ends_with("EACCES"), "{out}");
    assert!(!out.contains(" open "), "a way in was open:\n{out}");
    assert!(
        !out.contains("RFB on") && !out.contains("DevTools on"),
        "{out}"
    );

    // Control: the socket is live, and the same first read gets the RFB
    // banner where the services are (from the host, as root; a microVM's
    // services are not host processes: the guest channel below is its
    // control).
    let mut banner = [0u8; 12];
    if a.jail() {
        let xvnc = service_pid(a, b"/usr/bin/Xvnc\0");
        let path = format!("/proc/{xvnc}/root/run/cubicle-services/rfb.sock");
        let mut raw = tokio::net::UnixStream::connect(&path).await.unwrap();
        raw.read_exact(&mut banner).await.unwrap();
        assert_eq!(&banner, b"RFB 003.008\n", "control: {path}");
    }
    // Control: the guest channel's RFB port, and the gateway's own RFB
    // client (a screenshot).
    let socket = daemon.channel_socket(&a.id);
    let mut channel = cubicle_tests::guest::connect(&socket, 5900).await.unwrap();
    channel.read_exact(&mut banner).await.unwrap();
    assert_eq!(&banner, b"RFB 003.008\n");
    drop(channel);
    let (status, shot) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{}/actions", a.id),
            Some(&json!({"action": "screenshot"}).to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{shot}");
    assert_eq!(shot["result"]["width"], 1280, "{shot}");
}

/// A Python client run by exec: DevTools on TCP, and through /proc into the
/// browser's descriptors, root or network namespace.
const CDP_PROBE: &str = r#"
import errno, os, socket
def pids(prefix):
    out = []
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open(f'/proc/{p}/cmdline', 'rb').read().startswith(prefix): out.append(int(p))
        except OSError: pass
    return sorted(out)
s = socket.socket(); s.settimeout(3)
try:
    s.connect(('127.0.0.1', 9222)); print('devtools open')
except OSError as e: print('devtools', errno.errorcode[e.errno])
browser = pids(b'/usr/lib/chromium/chromium')
print('browser processes', len(browser) > 0)
for pid in browser:
    for what in ('fd', 'fdinfo', 'root/run', 'ns/net', 'mem', 'environ'):
        path = f'/proc/{pid}/{what}'
        try:
            if what in ('fd', 'fdinfo', 'root/run'): os.listdir(path)
            else: os.open(path, os.O_RDONLY)
            print(path, 'OPEN')
        except OSError as e: print(what, errno.errorcode[e.errno])
"#;

async fn devtools_is_closed_to_the_user(daemon: &Daemon, a: &Ws) {
    let out = sh(
        daemon,
        &a.id,
        &format!("python3 - <<'EOF'\n{CDP_PROBE}\nEOF"),
    )
    .await;
    assert!(out.contains("devtools ECONNREFUSED"), "{out}");
    assert!(out.contains("browser processes True"), "{out}");
    assert!(
        !out.contains("OPEN"),
        "a way into the browser was open:\n{out}"
    );
    for what in ["fd", "ns/net", "mem"] {
        assert!(out.contains(&format!("{what} EACCES")), "{what}: {out}");
    }
    let curl = sh(
        daemon,
        &a.id,
        "curl -s -m 3 http://127.0.0.1:9222/json/version; echo rc=$?",
    )
    .await;
    assert!(curl.contains("rc=7"), "curl reached DevTools: {curl}");

    if a.jail() {
        devtools_is_on_no_port_even_in_the_browsers_namespace(a);
    }
    // Control: the guest channel's CDP port (what the gateway uses) runs a
    // real call, and the gateway's discovery answers.
    let mut page = cubicle_tests::cdp::Page::first(&daemon.channel_socket(&a.id))
        .await
        .unwrap();
    let two = page
        .call(
            "Runtime.evaluate",
            json!({"expression": "1 + 1", "returnByValue": true}),
        )
        .await
        .unwrap();
    assert_eq!(two["result"]["value"], 2, "{two}");
    let (status, version) = daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{}/cdp/json/version", a.id),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{version}");
    assert!(version["Browser"].as_str().is_some(), "{version}");
}

/// Not even inside the browser's own network namespace (entered from the
/// host as root: a jail's) does anything answer on the CDP port: DevTools
/// is on a pipe to the supervisor. Control: the egress relay there answers.
fn devtools_is_on_no_port_even_in_the_browsers_namespace(a: &Ws) {
    let chromium = service_pid(a, b"/usr/lib/chromium/chromium\0");
    let inside = |url: &str| {
        let out = std::process::Command::new("nsenter")
            .arg(format!("--net=/proc/{chromium}/ns/net"))
            .args([
                "curl",
                "-s",
                "-m",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                url,
            ])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        inside("http://127.0.0.1:9222/json/version"),
        (Some(7), "000".into())
    );
    let (_, relay) = inside("http://127.0.0.1:3128/");
    assert_ne!(
        relay, "000",
        "control: nothing answered in the browser's namespace"
    );
}

/// A Python script run by exec: every service's /proc entries and a
/// signal, next to the same for a process of the user's own (control).
const PROC_PROBE: &str = r#"
import errno, os, subprocess
def pids(prefix):
    out = []
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open(f'/proc/{p}/cmdline', 'rb').read().startswith(prefix): out.append(int(p))
        except OSError: pass
    return sorted(out)
own = subprocess.Popen(['sleep', '30'])
targets = [('own', own.pid)]
for name, prefix in (('guest', b'/usr/local/sbin/cubicle-guest'), ('xvnc', b'/usr/bin/Xvnc'), ('chromium', b'/usr/lib/chromium/chromium')):
    targets += [(name, pid) for pid in pids(prefix)[:2]]
for name, pid in targets:
    for what in ('mem', 'environ', 'maps', 'fd', 'root', 'cwd', 'ns/user'):
        path = f'/proc/{pid}/{what}'
        try:
            if what in ('fd', 'root', 'cwd'): os.listdir(path)
            else: os.close(os.open(path, os.O_RDONLY))
            print(name, what, 'OPEN')
        except OSError as e: print(name, what, errno.errorcode[e.errno])
    try:
        os.kill(pid, 0); print(name, 'signal OPEN')
    except OSError as e: print(name, 'signal', errno.errorcode[e.errno])
own.kill()
"#;

async fn services_cannot_be_read_or_signalled(daemon: &Daemon, a: &Ws) {
    let out = sh(
        daemon,
        &a.id,
        &format!("python3 - <<'EOF'\n{PROC_PROBE}\nEOF"),
    )
    .await;
    let (own, services): (Vec<&str>, Vec<&str>) =
        out.lines().partition(|line| line.starts_with("own "));
    // Control: the same reads and the signal work on the user's own process.
    assert_eq!(own.len(), 8, "{out}");
    assert!(own.iter().all(|l| l.ends_with(" OPEN")), "control: {own:?}");
    for name in ["guest", "xvnc", "chromium"] {
        assert!(
            services.iter().any(|l| l.starts_with(name)),
            "{name} not probed: {out}"
        );
    }
    let open: Vec<&&str> = services.iter().filter(|l| l.ends_with("OPEN")).collect();
    assert!(open.is_empty(), "the user reached a service: {open:?}");
    assert!(
        services
            .iter()
            .filter(|l| l.contains(" signal "))
            .all(|l| l.ends_with("EPERM")),
        "{out}"
    );
}

async fn the_user_has_no_capabilities_but_keeps_the_display(daemon: &Daemon, a: &Ws) {
    let out = sh(
        daemon,
        &a.id,
        "id -u; grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status; unshare -n true 2>&1; echo net=$?; unshare -U true 2>&1; echo user=$?",
    )
    .await;
    assert!(out.starts_with("1000\n"), "{out}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert!(
            out.contains(&format!("{set}:\t0000000000000000")),
            "{set}: {out}"
        );
    }
    assert!(!out.contains("net=0") && !out.contains("user=0"), "{out}");
    // Control: the supervisor is another uid, and it does hold capabilities
    // (a jail's seen from the host; a microVM's from inside, where any
    // process may read another's `status`).
    let (status, services_uid) = if a.jail() {
        let status = std::fs::read_to_string(format!("/proc/{}/status", guest_pid(a))).unwrap();
        (status, a.services_uid)
    } else {
        let supervisor = "for p in $(pgrep -f ^/usr/local/sbin/cubicle-guest); do grep -q '^Uid:\t1001' /proc/$p/status && cat /proc/$p/status; done";
        (sh(daemon, &a.id, supervisor).await, 1001)
    };
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(uid_line.contains(&services_uid.to_string()), "{uid_line}");
    let eff = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
    assert!(!eff.ends_with("0000000000000000"), "control: {eff}");
    // The user keeps the X display (the desktop's terminal is an X client):
    // X input from the user's own programs is outside the control lock.
    let pointer = sh(daemon, &a.id, "xdotool mousemove 7 9 getmouselocation").await;
    assert!(pointer.starts_with("x:7 y:9"), "{pointer}");
}

async fn files_run_as_the_user(daemon: &Daemon, a: &Ws) {
    // Control: files work as the user, and what they make is the user's.
    let (status, body) = files(daemon, Method::PUT, &a.id, "path=/home/user/mine.txt", b"m").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sh(daemon, &a.id, "stat -c %u /home/user/mine.txt")
            .await
            .trim(),
        "1000"
    );
    let (status, body) = files(daemon, Method::GET, &a.id, "path=/home/user/mine.txt", b"").await;
    assert_eq!((status, body.as_str()), (200, "m"));
    // A folder only the user may enter is a working directory for exec.
    sh(daemon, &a.id, "mkdir -m 700 /home/user/private").await;
    let body = json!({ "command": "pwd", "cwd": "/home/user/private" }).to_string();
    let (status, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{}/exec", a.id),
            Some(&body),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["stdout"], "/home/user/private\n", "{out}");
    // The supervisor serves files, but with the user's permissions: not
    // its own memory or environment, nor the browser's profile.
    let guest_inside = sh(daemon, &a.id, "pgrep -x cubicle-guest").await;
    let guest_inside = guest_inside.trim();
    for path in [
        "/proc/self/environ".to_owned(),
        "/proc/self/mem".to_owned(),
        format!("/proc/{guest_inside}/environ"),
        "/run/cubicle-browser/profile/Default/Preferences".to_owned(),
        "/run/cubicle-services/rfb.sock".to_owned(),
    ] {
        let (status, body) = files(daemon, Method::GET, &a.id, &format!("path={path}"), b"").await;
        assert!(status >= 400, "{path}: {status} {body}");
        assert!(!body.contains("PATH="), "{path}: {body}");
    }
    let (status, body) = files(
        daemon,
        Method::PUT,
        &a.id,
        "path=/run/cubicle-browser/profile/planted",
        b"x",
    )
    .await;
    assert!(status >= 400, "wrote into the browser's profile: {body}");
    // Control: the profile is there, so the refusal above is the wall and
    // not a missing file. A jail's is on the workspace's disk, seen from
    // the host; a microVM's disk is an image, so inside it the guest says
    // the user may not read it (not that it is absent).
    if a.jail() {
        let prefs = daemon
            .workspace_dir(&a.id)
            .join("disk/browser/profile/Default/Preferences");
        assert!(prefs.exists(), "control: {}", prefs.display());
    } else {
        let path = "path=/run/cubicle-browser/profile/Default/Preferences";
        let (status, body) = files(daemon, Method::GET, &a.id, path, b"").await;
        assert!(
            status == 403 && body.contains("permission_denied"),
            "control: {status} {body}"
        );
    }
}
