//! `cubicle-shim` as the daemon uses it (`cubicle_runtime::shim`): the
//! process it holds, the log it drains, how a watcher learns of the end, a
//! second watcher as a restarted daemon, a killed shim, and a socket that is
//! not the shim's.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use cubicle_runtime::backend::WorkspaceSpec;
use cubicle_runtime::shim::{self, Launch};

const SHIM: &str = env!("CARGO_BIN_EXE_cubicle-shim");

fn spec_at(dir: &Path) -> WorkspaceSpec {
    WorkspaceSpec {
        id: "ws-shim".into(),
        geometry: Default::default(),
        host_uid: 1_600_007,
        dir: dir.to_owned(),
        top_pid: None,
        limits: Default::default(),
    }
}

/// The shim's peer check wants root (it is the daemon's shim); elsewhere
/// the test says it is skipped (`scripts/test` counts the line).
fn not_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    cubicle_skip::skip("the shim is root's (run as root)");
    true
}

fn launch(
    spec: &WorkspaceSpec,
    log_max: u64,
    script: &str,
) -> (
    i32,
    tokio::sync::oneshot::Receiver<cubicle_runtime::backend::Exit>,
) {
    shim::launch(Launch {
        shim: Path::new(SHIM),
        spec,
        log: spec.dir.join("top.log"),
        log_max,
        join_fds: Vec::new(),
        pass_fds: Vec::new(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
    })
    .expect("the shim starts the process")
}

async fn ended(rx: tokio::sync::oneshot::Receiver<cubicle_runtime::backend::Exit>) -> String {
    tokio::time::timeout(Duration::from_secs(20), rx)
        .await
        .expect("the end is reported within 20 s")
        .expect("the watcher reports")
        .description
}

fn alive(pid: i32) -> bool {
    cubicle_runtime::proc_scan::is_alive(pid)
}

#[tokio::test]
async fn the_shim_reports_the_exit_and_keeps_at_most_the_log_cap() {
    if not_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_at(dir.path());
    std::fs::write(dir.path().join("top.log"), "left from the last start").unwrap();
    let (pid, rx) = launch(
        &spec,
        100_000,
        "printf start; head -c 300000 /dev/zero | tr '\\0' x; printf end >&2; exit 3",
    );
    assert!(pid > 1);
    let how = ended(rx).await;
    assert_eq!(how, "exited: exit status: 3");
    let log = std::fs::read(dir.path().join("top.log")).unwrap();
    assert!(log.starts_with(b"start"), "{:?}", &log[..20]);
    assert!(log.len() < 100_200, "the cap holds: {} bytes", log.len());
    assert!(
        String::from_utf8_lossy(&log).ends_with("later output is dropped]\n"),
        "a note says output was dropped"
    );
    // The last word is kept for a daemon that comes back after the shim.
    let record = std::fs::read_to_string(dir.path().join("shim/exit")).unwrap();
    assert_eq!(record, "exited: exit status: 3");
    assert!(
        !dir.path().join("shim/sock").exists(),
        "the socket goes with the shim"
    );
}

#[tokio::test]
async fn a_second_watcher_as_a_restarted_daemon_follows_the_same_process() {
    if not_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_at(dir.path());
    let (pid, first) = launch(&spec, 4096, "exec sleep 60");
    let second = shim::attach(&spec, pid)
        .await
        .expect("a restarted daemon re-attaches");
    // The shim is not in the daemon's session: Ctrl-C at its terminal and
    // the daemon's process group do not reach it.
    let shim_pid = cubicle_runtime::proc_scan::parent_pid(pid).unwrap();
    // SAFETY: getsid of a live pid we started.
    assert_eq!(unsafe { libc::getsid(shim_pid) }, shim_pid);
    assert!(alive(pid));
    // SAFETY: killing the process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(ended(first).await, "exited: signal: 9 (SIGKILL)");
    assert_eq!(ended(second).await, "exited: signal: 9 (SIGKILL)");
}

#[tokio::test]
async fn a_killed_shim_is_reported_as_such_and_takes_the_process_with_it() {
    if not_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_at(dir.path());
    // As the jail and the VMM do (bubblewrap's --die-with-parent).
    let (pid, rx) = launch(&spec, 4096, "exec setpriv --pdeathsig KILL sleep 60");
    let shim_pid = cubicle_runtime::proc_scan::parent_pid(pid).unwrap();
    // SAFETY: killing the shim this test started.
    unsafe { libc::kill(shim_pid, libc::SIGKILL) };
    let how = ended(rx).await;
    assert!(how.contains("ended without a word"), "{how}");
    assert!(how.contains("killed"), "{how}");
    for _ in 0..50 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    panic!("the process outlived its shim: {stat}");
}

#[tokio::test]
async fn a_socket_that_is_not_the_shim_of_that_process_is_refused() {
    if not_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_at(dir.path());
    let (pid, rx) = launch(&spec, 4096, "exec sleep 60");
    // The shim is not this test process's parent, nor the parent of the
    // test process itself: asking it about another pid is refused.
    let me = i32::try_from(std::process::id()).unwrap();
    let err = shim::attach(&spec, me).await.unwrap_err();
    assert!(err.contains("is not held by the shim"), "{err}");
    // A listener of someone else's at the shim's path: refused too.
    let other = tempfile::tempdir().unwrap();
    let fake = spec_at(other.path());
    std::fs::create_dir(other.path().join("shim")).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(other.path().join("shim/sock")).unwrap();
    let err = shim::attach(&fake, pid).await.unwrap_err();
    assert!(err.contains("is not held by the shim"), "{err}");
    // SAFETY: killing the process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    ended(rx).await;
}

#[tokio::test]
async fn a_process_that_ends_at_once_is_reported_with_how_it_ended() {
    if not_root() {
        return;
    }
    // Often gone, with its shim, before the watcher connects: the shim's
    // record says how it ended.
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec_at(dir.path());
        let (_, rx) = launch(&spec, 4096, "exit 7");
        assert_eq!(ended(rx).await, "exited: exit status: 7");
    }
}

#[tokio::test]
async fn passed_descriptors_reach_the_process_and_the_shim_keeps_no_copy() {
    if not_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_at(dir.path());
    let (mut reader, writer) = std::io::pipe().unwrap();
    let fd = writer.as_raw_fd();
    let (_, rx) = shim::launch(Launch {
        shim: Path::new(SHIM),
        spec: &spec,
        log: spec.dir.join("top.log"),
        log_max: 4096,
        join_fds: Vec::new(),
        pass_fds: vec![fd],
        // bash: dash takes only one-digit descriptors in redirections.
        argv: vec!["bash".into(), "-c".into(), format!("echo through >&{fd}")],
    })
    .unwrap();
    drop(writer);
    ended(rx).await;
    // EOF only comes when no process holds the write end any more.
    let mut got = String::new();
    reader.read_to_string(&mut got).unwrap();
    assert_eq!(got, "through\n");
}
