//! The daemon's side of `cubicle-shim` (`src/bin/cubicle-shim.rs`): a
//! workspace's top process is started under a shim of its own, in a
//! session of its own, so that a daemon crash, `kill -9` or upgrade does not
//! end it. The next daemon re-attaches by connecting to the shim's socket.
//!
//! The shim's folder, `<workspace dir>/shim`, is made afresh by the daemon
//! at every start, root-only: the workspace can neither see nor plant
//! anything there. Every connection checks that the peer is root and is the
//! top process's parent before a word of it is believed.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use crate::backend::{BackendError, Exit, WorkspaceSpec};

/// How long a shim may take to start the top process and say so.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The shim's root-only folder of a workspace.
pub fn dir_of(spec: &WorkspaceSpec) -> PathBuf {
    spec.dir.join("shim")
}

/// One top process to start under a shim.
pub struct Launch<'a> {
    /// The `cubicle-shim` binary.
    pub shim: &'a Path,
    pub spec: &'a WorkspaceSpec,
    /// Where the process's stdout and stderr go (truncated now), and how
    /// much of them is kept.
    pub log: PathBuf,
    pub log_max: u64,
    /// Open `cgroup.procs` files the process joins before it runs.
    pub join_fds: Vec<RawFd>,
    /// Descriptors the process inherits.
    pub pass_fds: Vec<RawFd>,
    pub argv: Vec<String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |source| BackendError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Starts `launch.argv` under a new shim; returns the top process's pid and
/// a receiver that gets how it ended. Must be called inside the tokio
/// runtime (the watch is a task).
pub fn launch(launch: Launch<'_>) -> Result<(i32, oneshot::Receiver<Exit>), BackendError> {
    let dir = dir_of(launch.spec);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
    }
    std::fs::create_dir(&dir).map_err(io_err(&dir))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io_err(&dir))?;
    let mut command = Command::new(launch.shim);
    command
        .arg("--dir")
        .arg(&dir)
        .arg("--log")
        .arg(&launch.log)
        .arg("--log-max")
        .arg(launch.log_max.to_string());
    for fd in &launch.join_fds {
        command.arg("--join-fd").arg(fd.to_string());
    }
    for fd in &launch.pass_fds {
        command.arg("--pass-fd").arg(fd.to_string());
    }
    command
        .arg("--")
        .args(&launch.argv)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let inherited: Vec<RawFd> = launch
        .join_fds
        .iter()
        .chain(&launch.pass_fds)
        .copied()
        .collect();
    // SAFETY: runs in the forked child before exec; setsid and fcntl are
    // async-signal-safe and nothing is allocated. A session of its own: the
    // daemon's terminal (Ctrl-C) and process group are not the shim's.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            for fd in &inherited {
                if libc::fcntl(*fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut shim = command
        .spawn()
        .map_err(|e| BackendError::Spawn(format!("{}: {e}", launch.shim.display())))?;
    let stdout = shim.stdout.take().expect("stdout was piped");
    let word = read_line_within(stdout, READY_TIMEOUT);
    let shim_pid = shim.id();
    // The daemon reaps its own shims; a later daemon's are init's.
    std::thread::spawn(move || shim.wait());
    let pid = match word {
        Ok(line) => match line.strip_prefix("ready ").map(str::parse::<i32>) {
            Some(Ok(pid)) => pid,
            _ => {
                let why = line.strip_prefix("error ").unwrap_or(&line);
                return Err(BackendError::Spawn(format!(
                    "{}: {why}",
                    launch.argv.first().map_or("", String::as_str)
                )));
            }
        },
        Err(why) => {
            return Err(BackendError::Spawn(format!(
                "cubicle-shim (pid {shim_pid}) did not start the workspace: {why}"
            )));
        }
    };
    // Connected before this returns: a shim killed a moment later is then
    // seen as killed, not as unreachable.
    let shim_pid = i32::try_from(shim_pid).ok();
    let stream = match connect(&dir, pid, shim_pid) {
        Ok(stream) => stream,
        // A process that ended at once: its shim kept the last word and
        // left before anyone connected.
        Err(why) => {
            let (tx, rx) = oneshot::channel();
            let how =
                std::fs::read_to_string(dir.join("exit")).map_err(|_| BackendError::Spawn(why))?;
            let _ = tx.send(Exit::new(how));
            return Ok((pid, rx));
        }
    };
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(follow(stream, &dir).await);
    });
    Ok((pid, rx))
}

/// Re-attaches to the shim holding `pid` (after a daemon restart): the
/// receiver gets how the process ended. An error says why there is no
/// shim to follow.
pub async fn attach(spec: &WorkspaceSpec, pid: i32) -> Result<oneshot::Receiver<Exit>, String> {
    let dir = dir_of(spec);
    let stream = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || connect(&dir, pid, None))
            .await
            .map_err(|e| format!("cannot reach its shim: {e}"))??
    };
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(follow(stream, &dir).await);
    });
    Ok(rx)
}

/// Connects to the shim in `dir`, checks it is root and `shim` (the
/// daemon that started it knows its pid; a later one takes the parent of
/// `pid`, which is running), and reads its first word, which must be
/// `running <pid>`.
fn connect(dir: &Path, pid: i32, shim: Option<i32>) -> Result<AsyncBufReader<UnixStream>, String> {
    let socket = dir.join("sock");
    let stream = std::os::unix::net::UnixStream::connect(&socket)
        .map_err(|e| format!("cannot reach its shim at {}: {e}", socket.display()))?;
    let (uid, peer) = peer_of(&stream)
        .map_err(|e| format!("cannot tell who listens on {}: {e}", socket.display()))?;
    let parent = shim.or_else(|| crate::proc_scan::parent_pid(pid));
    if uid != 0 || Some(peer) != parent {
        return Err(format!(
            "{} is not held by the shim of pid {pid} (peer uid {uid}, pid {peer}; parent {parent:?})",
            socket.display(),
        ));
    }
    stream
        .set_read_timeout(Some(READY_TIMEOUT))
        .map_err(|e| format!("reading its shim: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(|e| format!("reading its shim: {e}"))?;
    if line.trim_end() != format!("running {pid}") {
        return Err(format!(
            "its shim says {:?}, not running {pid}",
            line.trim_end()
        ));
    }
    // Nothing is buffered past the first line: the shim says nothing more
    // until the end.
    let stream = reader.into_inner();
    stream
        .set_read_timeout(None)
        .and_then(|()| stream.set_nonblocking(true))
        .and_then(|()| UnixStream::from_std(stream))
        .map(AsyncBufReader::new)
        .map_err(|e| format!("following its shim: {e}"))
}

/// The uid and pid of the process at the other end of `stream`.
fn peer_of(stream: &std::os::unix::net::UnixStream) -> std::io::Result<(u32, i32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a ucred of the given length on the stack.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.uid, cred.pid))
}

/// Waits for the shim's last word; a shim that went without one was killed
/// (and the workspace with it).
async fn follow(mut stream: AsyncBufReader<UnixStream>, dir: &Path) -> Exit {
    let mut line = String::new();
    let read = stream.read_line(&mut line).await;
    if let Some(how) = line.trim_end().strip_prefix("exited ") {
        return Exit::new(how.to_owned());
    }
    let pid = stream.get_ref().peer_cred().ok().and_then(|c| c.pid());
    match std::fs::read_to_string(dir.join("exit")) {
        Ok(how) => Exit::new(how),
        Err(_) => Exit::new(format!(
            "its shim (pid {}) ended without a word{}: it was killed, and the workspace with it",
            pid.map_or_else(|| "?".to_owned(), |p| p.to_string()),
            read.err().map(|e| format!(" ({e})")).unwrap_or_default()
        )),
    }
}

/// One line from `pipe` within `timeout`.
fn read_line_within(pipe: std::process::ChildStdout, timeout: Duration) -> Result<String, String> {
    let mut poll = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one pollfd on the stack, for the call's duration.
    let ready = unsafe { libc::poll(&raw mut poll, 1, millis) };
    if ready <= 0 {
        return Err(format!("no word within {timeout:?}"));
    }
    let mut line = String::new();
    BufReader::new(pipe)
        .read_line(&mut line)
        .map_err(|e| format!("reading it: {e}"))?;
    if line.is_empty() {
        return Err("it exited without a word".into());
    }
    Ok(line.trim_end().to_owned())
}
