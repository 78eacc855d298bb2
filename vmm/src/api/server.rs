//! The API server loop: polls the listening socket and the VM's exit event
//! on one thread, and answers each request before taking the next.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::http::{self, Request};
use crate::builder::{self, BuildOptions};
use crate::config::VmConfig;
use crate::hardening::{self, ThreadKind};
use crate::snapshot::SnapshotError;
use crate::snapshot::memory::Pages;
use crate::vmm::{VmState, Vmm};
use crate::vstate::exit::ExitReason;

/// Errors that end the API server.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The socket cannot be created.
    #[error("cannot listen on API socket {path}: remove a stale file there or choose another path")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Hardening after start failed.
    #[error(transparent)]
    Hardening(#[from] hardening::HardeningError),
    /// The VM failed to start.
    #[error(transparent)]
    Start(#[from] crate::vmm::VmmError),
}

/// Removes the socket file when the server ends.
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Server {
    listener: UnixListener,
    _file: SocketFile,
    config: Option<VmConfig>,
    vmm: Option<Vmm>,
    seccomp: bool,
    done: Option<ExitReason>,
}

/// Serves an unconfigured VM until it stops.
pub fn serve_until_stopped(socket: &Path, seccomp: bool) -> Result<ExitCode, OpError> {
    Server::bind(socket, None, seccomp)?.run()
}

/// Serves an already built VM (started here) until it stops.
pub fn serve_running(socket: &Path, mut vmm: Vmm, seccomp: bool) -> Result<ExitCode, OpError> {
    let server = Server::bind(socket, None, seccomp)?;
    vmm.start()?;
    let mut server = Server {
        vmm: Some(vmm),
        ..server
    };
    server.harden()?;
    server.run()
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: &'a str,
    message: String,
}

type Reply = (u16, String);

fn error(status: u16, code: &str, message: impl ToString) -> Reply {
    let body = ErrorBody {
        error: ErrorDetail {
            code,
            message: message.to_string(),
        },
    };
    (status, serde_json::to_string(&body).unwrap_or_default())
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// Binds `socket` so that it appears only once it listens: a client that
/// waits for the path and connects (every client of this API does) would
/// otherwise land between `bind` and `listen` and be refused. The socket is
/// made under a temporary name in the same directory and hard-linked into
/// place, which, unlike a rename, fails on an existing file (a stale socket
/// is the caller's to remove, as the error says).
fn bind_listening(socket: &Path) -> std::io::Result<UnixListener> {
    let mut name = socket.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".binding-{}", std::process::id()));
    let temporary = socket.with_file_name(name);
    let _ = std::fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary)?;
    let linked = std::fs::hard_link(&temporary, socket);
    let _ = std::fs::remove_file(&temporary);
    linked.map(|()| listener)
}

impl Server {
    fn bind(socket: &Path, config: Option<VmConfig>, seccomp: bool) -> Result<Server, OpError> {
        let listener = bind_listening(socket).map_err(|source| OpError::Bind {
            path: socket.into(),
            source,
        })?;
        let file = SocketFile(socket.into());
        Ok(Server {
            listener,
            _file: file,
            config,
            vmm: None,
            seccomp,
            done: None,
        })
    }

    fn harden(&self) -> Result<(), OpError> {
        if self.seccomp {
            hardening::apply(ThreadKind::Vmm)?;
        }
        Ok(())
    }

    fn run(&mut self) -> Result<ExitCode, OpError> {
        while self.done.is_none() {
            let (listener_ready, vm_exited) = self.poll();
            if vm_exited && let Some(vmm) = self.vmm.as_mut() {
                self.done = Some(vmm.stop());
            }
            if listener_ready && let Ok((stream, _)) = self.listener.accept() {
                self.serve(stream);
            }
        }
        let reason = self.done.take().unwrap_or(ExitReason::Stopped);
        Ok(reason.exit_code())
    }

    /// Waits for a connection or a guest exit.
    fn poll(&self) -> (bool, bool) {
        let mut fds = vec![libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(vmm) = &self.vmm {
            fds.push(libc::pollfd {
                fd: vmm.exit_event().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n <= 0 {
            return (false, false);
        }
        (
            fds[0].revents != 0,
            fds.get(1).is_some_and(|f| f.revents != 0),
        )
    }

    fn serve(&mut self, mut stream: UnixStream) {
        // A client that stalls mid-request cannot hold the VMM forever.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let (status, body) = match http::read_request(&mut stream) {
            Ok(request) => self.handle(&request),
            Err(e) => error(400, "bad_request", e),
        };
        // The client may have gone away; nothing to do about it.
        let _ = http::write_response(&mut stream, status, &body);
    }

    fn handle(&mut self, r: &Request) -> Reply {
        match (r.method.as_str(), r.path.as_str()) {
            ("PUT", "/vm/config") => self.configure(&r.body),
            ("PUT", "/vm/start") => self.start(),
            ("PUT", "/vm/pause") => self.with_vmm(|v| v.pause()),
            ("PUT", "/vm/resume") => self.with_vmm(|v| v.resume()),
            ("PUT", "/vm/stop") => self.stop(),
            ("PUT", "/vm/snapshot") => self.snapshot(&r.body),
            ("GET", "/vm/metrics") => self.metrics(),
            ("GET", "/vm") => (200, format!("{{\"state\":\"{}\"}}", self.state_name())),
            (
                _,
                "/vm/config" | "/vm/start" | "/vm/pause" | "/vm/resume" | "/vm/stop"
                | "/vm/snapshot" | "/vm/metrics" | "/vm",
            ) => error(
                405,
                "method_not_allowed",
                "use PUT for actions and GET for /vm and /vm/metrics",
            ),
            _ => error(
                404,
                "not_found",
                format!("no endpoint {}; see vmm/README.md", r.path),
            ),
        }
    }

    fn state_name(&self) -> &'static str {
        match (&self.vmm, &self.config) {
            (Some(v), _) => match v.state() {
                VmState::Ready => "ready",
                VmState::Running => "running",
                VmState::Paused => "paused",
                VmState::Stopped => "stopped",
            },
            (None, Some(_)) => "configured",
            (None, None) => "empty",
        }
    }

    fn configure(&mut self, body: &[u8]) -> Reply {
        if self.vmm.is_some() {
            return error(
                409,
                "already_started",
                "the VM is already started; its configuration cannot change",
            );
        }
        let text = String::from_utf8_lossy(body);
        let config = match VmConfig::from_json(&text, "request body") {
            Ok(c) => c,
            Err(e) => return error(400, "bad_config", chain(&e)),
        };
        if let Err(e) = config.validate() {
            return error(400, "bad_config", chain(&e));
        }
        self.config = Some(config);
        (204, String::new())
    }

    fn start(&mut self) -> Reply {
        if self.vmm.is_some() {
            return error(409, "already_started", "the VM is already started");
        }
        let Some(config) = &self.config else {
            return error(409, "not_configured", "PUT /vm/config first");
        };
        let options = BuildOptions {
            seccomp: self.seccomp,
            forbidden_syscall_test: false,
        };
        let mut vmm = match builder::build(config, options) {
            Ok(v) => v,
            Err(e) => return error(400, "build_failed", chain(&e)),
        };
        if let Err(e) = vmm.start() {
            return error(500, "start_failed", chain(&e));
        }
        self.vmm = Some(vmm);
        match self.harden() {
            Ok(()) => (204, String::new()),
            Err(e) => error(500, "hardening_failed", chain(&e)),
        }
    }

    fn with_vmm(&mut self, f: impl FnOnce(&mut Vmm) -> Result<(), crate::vmm::VmmError>) -> Reply {
        let Some(vmm) = self.vmm.as_mut() else {
            return error(409, "not_started", "PUT /vm/start first");
        };
        match f(vmm) {
            Ok(()) => (204, String::new()),
            Err(e) => error(409, "wrong_state", chain(&e)),
        }
    }

    fn snapshot(&mut self, body: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Paths {
            state_path: PathBuf,
            memory_path: PathBuf,
            #[serde(default)]
            diff: bool,
        }
        let paths: Paths = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => {
                return error(
                    400,
                    "bad_request",
                    format!("the body must be {{\"state_path\", \"memory_path\", \"diff\"?}}: {e}"),
                );
            }
        };
        let Some(vmm) = self.vmm.as_mut() else {
            return error(409, "not_started", "PUT /vm/start first");
        };
        let pages = if paths.diff { Pages::Dirty } else { Pages::All };
        match vmm.snapshot(&paths.state_path, &paths.memory_path, pages) {
            Ok(info) => (200, serde_json::to_string(&info).unwrap_or_default()),
            Err(e @ SnapshotError::NotPaused(_)) => error(409, "wrong_state", chain(&e)),
            Err(e @ SnapshotError::Exists(_)) => error(409, "exists", chain(&e)),
            Err(e @ SnapshotError::NoDiff) => error(409, "no_base", chain(&e)),
            Err(e) => error(500, "snapshot_failed", chain(&e)),
        }
    }

    fn stop(&mut self) -> Reply {
        self.done = Some(self.vmm.as_mut().map_or(ExitReason::Stopped, Vmm::stop));
        (204, String::new())
    }

    fn metrics(&self) -> Reply {
        let Some(vmm) = &self.vmm else {
            return error(409, "not_started", "metrics exist once the VM is started");
        };
        match serde_json::to_string(&vmm.metrics()) {
            Ok(body) => (200, body),
            Err(e) => error(500, "metrics_failed", e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_appears_listening_and_never_replaces_a_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let socket = dir.path().join("api.sock");
        // Watch for the path from another thread, as a client does, and
        // connect the moment it shows: it must already listen.
        let watched = socket.clone();
        let client = std::thread::spawn(move || {
            while !watched.exists() {
                std::hint::spin_loop();
            }
            std::os::unix::net::UnixStream::connect(&watched)
        });
        let listener = bind_listening(&socket).expect("binds");
        assert!(client.join().expect("no panic").is_ok(), "connect refused");
        drop(listener);
        // The socket is still there (the daemon's SocketFile removes it):
        // a second bind is refused, and leaves no temporary name behind.
        let err = bind_listening(&socket).expect_err("an existing file is kept");
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("lists")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("api.sock")]);
    }
}
