//! `cubicle-shim`: holds one workspace's top process (bubblewrap, or the
//! VMM) so that the workspace outlives the daemon: the containerd-shim /
//! conmon pattern, and nothing more.
//!
//! The daemon starts it in a session of its own; it starts the top process
//! (which dies with it: bubblewrap's `--die-with-parent`, the VMM's
//! `--pdeathsig`), copies the process's output into the workspace's log up
//! to a size limit, and tells whoever connects to its socket how the process
//! is doing: `running <pid>`, and once it ended `exited <how>`. The last word
//! is also kept in a file, for a daemon that comes back after the shim left.
//! Everything it touches is in a root-only folder the daemon made afresh; it
//! reads nothing the workspace wrote.
//!
//! Protocol on stdout (a pipe from the daemon), one line: `ready <pid>` once
//! the top process runs and the socket listens, or `error <why>`.
//!
//! Why a hand-written argument loop and no clap: the only caller is the
//! daemon, with a fixed shape; the shim stays a small, quick-starting binary
//! on std and libc alone, one per workspace.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long output is still copied after the top process ended (its
/// descendants may hold the pipe a moment longer).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
const LOG_FULL: &[u8] = b"\n[cubicle: the log reached its size limit; later output is dropped]\n";

struct Args {
    /// The root-only folder for the socket and the exit record.
    dir: PathBuf,
    log: PathBuf,
    log_max: u64,
    /// `cgroup.procs` (or `tasks`) files the top process writes itself
    /// into before it runs anything.
    join_fds: Vec<RawFd>,
    /// Descriptors the top process inherits (the shim closes its copies).
    pass_fds: Vec<RawFd>,
    argv: Vec<OsString>,
}

impl Args {
    fn parse(mut raw: impl Iterator<Item = OsString>) -> Result<Self, String> {
        let mut dir = None;
        let mut log = None;
        let mut log_max = None;
        let mut join_fds = Vec::new();
        let mut pass_fds = Vec::new();
        while let Some(flag) = raw.next() {
            if flag == "--" {
                break;
            }
            let value = raw
                .next()
                .ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))?;
            let number = || -> Result<i64, String> {
                value
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("{} wants a number", flag.to_string_lossy()))
            };
            match flag.to_str() {
                Some("--dir") => dir = Some(PathBuf::from(&value)),
                Some("--log") => log = Some(PathBuf::from(&value)),
                Some("--log-max") => log_max = Some(number()?.unsigned_abs()),
                Some("--join-fd") => join_fds.push(fd(number()?)?),
                Some("--pass-fd") => pass_fds.push(fd(number()?)?),
                _ => return Err(format!("unknown argument {}", flag.to_string_lossy())),
            }
        }
        let argv: Vec<OsString> = raw.collect();
        if argv.is_empty() {
            return Err("no command after --".into());
        }
        Ok(Self {
            dir: dir.ok_or("--dir is required")?,
            log: log.ok_or("--log is required")?,
            log_max: log_max.ok_or("--log-max is required")?,
            join_fds,
            pass_fds,
            argv,
        })
    }
}

fn fd(n: i64) -> Result<RawFd, String> {
    RawFd::try_from(n)
        .ok()
        .filter(|fd| *fd > 2)
        .ok_or_else(|| format!("{n} is not a descriptor the shim can pass on"))
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(why) => {
            println!("error cubicle-shim: {why}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: setting dispositions to ignore before any thread exists. The
    // daemon's terminal and its pipes are not the shim's business.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            println!("error cubicle-shim: {why}");
            ExitCode::FAILURE
        }
    }
}

/// What watchers have been told, and who is watching.
#[derive(Default)]
struct Watchers {
    streams: Vec<UnixStream>,
    exited: Option<String>,
}

fn run(args: Args) -> Result<(), String> {
    let socket = args.dir.join("sock");
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(|e| format!("binding {}: {e}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let log = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&args.log)
        .map_err(|e| format!("opening {}: {e}", args.log.display()))?;
    let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let stderr = writer.try_clone().map_err(|e| format!("pipe: {e}"))?;
    let join = args.join_fds.clone();
    let mut command = Command::new(&args.argv[0]);
    command
        .args(&args.argv[1..])
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(stderr);
    let shim = libc::pid_t::try_from(std::process::id()).map_err(|e| e.to_string())?;
    // SAFETY: runs in the forked child before exec; only signal, prctl,
    // getppid, write(2) and close(2), all async-signal-safe, and no
    // allocation.
    // - The dispositions the shim ignores are not the workspace's.
    // - It dies with the shim from its first instruction (bubblewrap and
    //   the VMM's setpriv say so again, but only once they run): a shim
    //   killed right after the fork takes it along (the getppid check
    //   closes the race with a shim that was already gone).
    // - It is in the workspace's cgroup before it runs anything, and keeps
    //   no way to move anything else.
    unsafe {
        command.pre_exec(move || {
            for signal in [libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
                libc::signal(signal, libc::SIG_DFL);
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != shim {
                libc::_exit(1);
            }
            for fd in &join {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(*fd);
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting {}: {e}", args.argv[0].to_string_lossy()))?;
    // Dropping the Command closes the shim's write ends of the pipe.
    drop(command);
    for fd in args.join_fds.iter().chain(&args.pass_fds) {
        // SAFETY: these descriptors were handed to the shim for the child
        // alone; nothing in the shim uses them.
        unsafe { libc::close(*fd) };
    }
    let pid = child.id();
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready {pid}").and_then(|()| out.flush());
    // The daemon's pipe is done with: it may be gone long before the shim.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto the shim's own stdout.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }

    let watchers = Arc::new(Mutex::new(Watchers::default()));
    {
        let watchers = watchers.clone();
        std::thread::spawn(move || accept(listener, pid, &watchers));
    }
    let (drained_tx, drained) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        copy_capped(reader, log, args.log_max);
        let _ = drained_tx.send(());
    });
    let how = match child.wait() {
        Ok(status) => format!("exited: {status}"),
        Err(err) => format!("cannot wait for it: {err}"),
    };
    let _ = drained.recv_timeout(DRAIN_GRACE);
    // The record first: a daemon that finds neither socket nor shim reads it.
    let partial = args.dir.join("exit.partial");
    if std::fs::write(&partial, &how).is_ok() {
        let _ = std::fs::rename(&partial, args.dir.join("exit"));
    }
    // Gone before anyone hears the end: whoever is told, finds no socket.
    let _ = std::fs::remove_file(&socket);
    let mut watchers = watchers.lock().unwrap_or_else(|p| p.into_inner());
    for stream in &mut watchers.streams {
        let _ = writeln!(stream, "exited {how}");
    }
    watchers.exited = Some(how);
    Ok(())
}

fn accept(listener: UnixListener, pid: u32, watchers: &Mutex<Watchers>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let mut watchers = watchers.lock().unwrap_or_else(|p| p.into_inner());
        if writeln!(stream, "running {pid}").is_err() {
            continue;
        }
        match &watchers.exited {
            Some(how) => {
                let _ = writeln!(stream, "exited {how}");
            }
            None => {
                // A daemon that went leaves its end closed: drop those.
                watchers.streams.retain(|s| !closed(s));
                watchers.streams.push(stream);
            }
        }
    }
}

/// Whether the watcher hung up (a watcher never sends anything, so any
/// readable end is the end of the stream).
fn closed(stream: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a local buffer, not waiting.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&raw mut byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// Copies the pipe into the log until every writer closed it, keeping at
/// most `max` bytes (then a note, then nothing).
fn copy_capped(mut reader: std::io::PipeReader, mut log: std::fs::File, max: u64) {
    let mut written = 0u64;
    let mut full = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if full {
            continue;
        }
        let room = usize::try_from(max.saturating_sub(written)).unwrap_or(usize::MAX);
        let take = n.min(room);
        if log.write_all(&buf[..take]).is_err() {
            full = true;
            continue;
        }
        written += take as u64;
        if take < n {
            let _ = log.write_all(LOG_FULL);
            full = true;
        }
    }
}
