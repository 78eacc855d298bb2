//! The jail's isolation (README "Isolation (jail backend)"), proven from
//! inside a running workspace through `exec`: each wall is tried with the
//! call an escape would make, and the same probe run on the host, outside
//! any jail, is the positive control (it gets through, or fails with
//! another errno), so a refusal inside is the jail's doing.
//!
//! Elsewhere: the seccomp filters call by call in a child process
//! (`runtime/src/jail/seccomp.rs`, `vmm/src/hardening.rs`), AF_VSOCK and
//! the guest channel (`walls.rs`), the cgroup's memory, pids and disk limits
//! (`limits.rs`).

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::process::Command;

use cubicle_runtime::jail::command::{MAX_OPEN_FILES, MAX_PROCESSES};
use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::json;

/// Each probe runs in a forked child (an `unshare` that works must not
/// change the probe itself) and prints `name result`, the result being
/// `OK`, an errno name, or a value.
const PROBE: &str = r#"
import ctypes, errno, fcntl, os, resource, socket, sys, termios, time
libc = ctypes.CDLL(None, use_errno=True)
HOST, PORT = sys.argv[1], int(sys.argv[2])

def call(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return "OK"

def probe(name, fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except OSError as e:
            out = errno.errorcode.get(e.errno, "errno%s" % e.errno)
        except Exception as e:
            out = "EXC-" + type(e).__name__
        os.write(w, str(out).encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    print(name, out.decode())

CLONE_NEWUSER = 0x10000000

def clone_user():
    # clone(CLONE_NEWUSER | SIGCHLD): the namespace limit, not the filter.
    r = libc.syscall(56, CLONE_NEWUSER | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    return call(r)

def tiocsti():
    m, s = os.openpty()
    fcntl.ioctl(s, termios.TIOCSTI, b"x")
    return "OK"

def tiocgwinsz():
    m, s = os.openpty()
    fcntl.ioctl(s, termios.TIOCGWINSZ, b"\0" * 8)
    return "OK"

def ptrace_own_child():
    pid = os.fork()
    if pid == 0:
        time.sleep(10)
        os._exit(0)
    try:
        return call(libc.ptrace(16, pid, 0, 0))  # PTRACE_ATTACH
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)

def connect(host):
    s = socket.socket()
    s.settimeout(5)
    s.connect((host, PORT))
    return "OK"

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return line.split()[1]
    return "none"

def interfaces():
    lines = open("/proc/net/dev").read().splitlines()[2:]
    return ",".join(sorted(l.split(":")[0].strip() for l in lines))

def root_mount():
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        if f[4] == "/":
            return f[5].split(",")[0]
    return "none"

def create(path):
    with open(path, "w") as f:
        f.write("x")
    return "OK"

probe("unshare-user", lambda: call(libc.unshare(CLONE_NEWUSER)))
probe("clone-user", clone_user)
probe("tiocsti", tiocsti)
probe("tiocgwinsz", tiocgwinsz)
probe("mount", lambda: call(libc.mount(b"none", b"/nonexistent-cubicle", b"tmpfs", 0, None)))
probe("ptrace-own-child", ptrace_own_child)
probe("connect-host", lambda: connect(HOST))
probe("interfaces", interfaces)
probe("cap-eff", lambda: status("CapEff"))
probe("cap-prm", lambda: status("CapPrm"))
probe("cap-amb", lambda: status("CapAmb"))
probe("seccomp", lambda: status("Seccomp"))
probe("nproc", lambda: "%d:%d" % resource.getrlimit(resource.RLIMIT_NPROC))
probe("nofile", lambda: "%d:%d" % resource.getrlimit(resource.RLIMIT_NOFILE))
probe("root-mount", root_mount)
if len(sys.argv) > 3:
    # Inside only (on the host these would write to its root).
    probe("create-in-etc", lambda: create("/etc/cubicle-probe"))
    probe("create-in-usr-bin", lambda: create("/usr/bin/cubicle-probe"))
    probe("truncate-os-release", lambda: create("/etc/os-release"))
    probe("create-in-home", lambda: create(sys.argv[3] + "/cubicle-probe"))
"#;

/// The probe's answers by name.
fn answers(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// The host's first global IPv4 address: not loopback, reachable from the
/// host itself.
fn host_address() -> Option<String> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let cidr = line.split_whitespace().nth(3)?;
            Some(cidr.split('/').next()?.to_owned())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jail_holds_from_inside_a_workspace() {
    let Some(host) = host_address() else {
        return cubicle_tests::skip("this host has no global IPv4 address to try to reach");
    };
    // A listener on the host's own address that counts who reached it.
    let listener = TcpListener::bind((host.as_str(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();

    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap();

    let command = format!("python3 - {host} {port} /home/user <<'EOF'\n{PROBE}\nEOF");
    let body = json!({ "command": command, "timeout_ms": 60000 }).to_string();
    let (status, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["exit_code"], 0, "{out}");
    let inside = answers(out["stdout"].as_str().unwrap());
    let mut accepted_inside = 0;
    while let Ok((mut stream, peer)) = listener.accept() {
        let mut first = [0u8; 1];
        let _ = stream.read(&mut first);
        eprintln!("the host listener was reached from {peer}");
        accepted_inside += 1;
    }

    // The control: the same probe on the host, outside any jail, as root.
    let control = tokio::task::spawn_blocking({
        let host = host.clone();
        move || {
            Command::new("python3")
                .args(["-c", PROBE, &host, &port.to_string()])
                .output()
                .expect("python3 runs on the host")
        }
    })
    .await
    .unwrap();
    assert!(control.status.success(), "{control:?}");
    let outside = answers(&String::from_utf8_lossy(&control.stdout));
    let reached = std::iter::from_fn(|| listener.accept().ok()).count();
    eprintln!("inside: {inside:?}\noutside: {outside:?}");

    let expect = |name: &str, inside_value: &str| {
        let got = inside.get(name).map(String::as_str);
        assert_eq!(got, Some(inside_value), "{name} inside: {inside:?}");
        assert_ne!(
            outside.get(name).map(String::as_str),
            Some(inside_value),
            "control: {name} outside the jail gives the same: {outside:?}"
        );
    };
    // No further user namespaces: the filter refuses unshare, the
    // namespace's own limit (max_user_namespaces 0) refuses clone.
    expect("unshare-user", "EPERM");
    expect("clone-user", "ENOSPC");
    // The seccomp deny list: terminal injection and mount are EPERM, and so
    // is tracing one's own child (allowed to any process without it).
    expect("tiocsti", "EPERM");
    expect("mount", "EPERM");
    expect("ptrace-own-child", "EPERM");
    expect("seccomp", "2");
    // ...while the terminal itself works.
    assert_eq!(inside["tiocgwinsz"], "OK", "{inside:?}");
    // Loopback only: the host's own address is unreachable, only `lo` exists.
    assert_eq!(outside["connect-host"], "OK", "control: {outside:?}");
    assert_eq!(reached, 1, "control: the host listener counts connections");
    assert_ne!(inside["connect-host"], "OK", "{inside:?}");
    assert_eq!(accepted_inside, 0, "the workspace reached the host");
    expect("interfaces", "lo");
    // All capabilities dropped.
    for set in ["cap-eff", "cap-prm", "cap-amb"] {
        assert_eq!(inside[set], "0000000000000000", "{set}: {inside:?}");
    }
    assert_ne!(
        outside["cap-eff"], "0000000000000000",
        "control: {outside:?}"
    );
    // Process and file limits are the jail's, not what the daemon had.
    expect("nproc", &format!("{MAX_PROCESSES}:{MAX_PROCESSES}"));
    expect("nofile", &format!("{MAX_OPEN_FILES}:{MAX_OPEN_FILES}"));
    // The image is a read-only mount: creating or truncating a file there
    // is EROFS (a permission refusal would be EACCES), while the home,
    // a writable bind, takes the same write.
    expect("root-mount", "ro");
    for name in ["create-in-etc", "create-in-usr-bin", "truncate-os-release"] {
        assert_eq!(inside[name], "EROFS", "{name}: {inside:?}");
    }
    assert_eq!(inside["create-in-home"], "OK", "control: {inside:?}");
}
