//! The jail backend: each workspace is a bubblewrap sandbox started as its
//! own unprivileged host uid, with user, pid, net, ipc, uts, cgroup and mount
//! namespaces, the image as a read-only root, a writable home and `/tmp` from
//! the workspace directory, only a loopback interface, no capabilities, no
//! further user namespaces, a seccomp filter and resource limits.
//!
//! Why bubblewrap and not our own namespace code: it is small, audited, in
//! Debian, and does exactly this; `crun` does not run on these hosts.

pub mod command;
pub mod host_socket;
pub mod seccomp;

use std::os::fd::AsRawFd;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::backend::{Backend, BackendError, Exit, WorkspaceSpec};
use crate::proc_scan;

/// Grace period between SIGTERM and SIGKILL when a workspace stops.
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// How the jail backend runs workspaces.
#[derive(Debug, Clone)]
pub struct JailBackend {
    /// The image's root filesystem folder.
    pub rootfs: PathBuf,
    /// The `cubicle-guest` binary to run inside (bound read-only).
    pub guest_bin: PathBuf,
    /// The Xvnc path inside the image.
    pub xvnc: String,
    seccomp: Vec<u8>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |source| BackendError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl JailBackend {
    pub fn new(rootfs: PathBuf, guest_bin: PathBuf, xvnc: String) -> Result<Self, BackendError> {
        let seccomp =
            seccomp::jail_filter_bytes().map_err(|e| BackendError::Spawn(e.to_string()))?;
        Ok(Self {
            rootfs,
            guest_bin,
            xvnc,
            seccomp,
        })
    }

    /// A private directory owned by the workspace uid.
    fn owned_dir(path: &Path, uid: u32) -> Result<(), BackendError> {
        std::fs::create_dir_all(path).map_err(io_err(path))?;
        chown(path, Some(uid), Some(uid)).map_err(io_err(path))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io_err(path))
    }

    fn write_seccomp(&self, spec: &WorkspaceSpec) -> Result<std::fs::File, BackendError> {
        let path = spec.dir.join("seccomp.bpf");
        std::fs::write(&path, &self.seccomp).map_err(io_err(&path))?;
        std::fs::File::open(&path).map_err(io_err(&path))
    }
}

impl Backend for JailBackend {
    fn name(&self) -> &'static str {
        "jail"
    }

    fn create(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        std::fs::create_dir_all(&spec.dir).map_err(io_err(&spec.dir))?;
        // Root-owned, traversable by the workspace uid, listable by nobody.
        std::fs::set_permissions(&spec.dir, std::fs::Permissions::from_mode(0o711))
            .map_err(io_err(&spec.dir))?;
        Self::owned_dir(&spec.dir.join("home"), spec.host_uid)
    }

    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        for sub in ["home", "tmp"] {
            Self::owned_dir(&spec.dir.join(sub), spec.host_uid)?;
        }
        // The guest channel: bound here by root, listened on by the guest.
        let channel = host_socket::bind(spec)?;
        let channel_fd = channel.as_raw_fd();
        let seccomp = self.write_seccomp(spec)?;
        let seccomp_fd = seccomp.as_raw_fd();
        let log_path = spec.dir.join("guest.log");
        let log = std::fs::File::create(&log_path).map_err(io_err(&log_path))?;
        let log_err = log.try_clone().map_err(io_err(&log_path))?;
        let argv = command::argv(self, spec, seccomp_fd, channel_fd);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(false);
        // SAFETY: the closure runs in the forked child before exec and only
        // calls fcntl, which is async-signal-safe; it clears close-on-exec on
        // the seccomp and channel fds so bubblewrap (and nothing spawned
        // elsewhere) gets them.
        unsafe {
            cmd.pre_exec(move || {
                for fd in [seccomp_fd, channel_fd] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| BackendError::Spawn(format!("{}: {e}", argv[0])))?;
        drop(seccomp);
        drop(channel);
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| BackendError::Spawn("bubblewrap exited at once".into()))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let description = match child.wait().await {
                Ok(status) => format!("sandbox exited: {status}"),
                Err(err) => format!("cannot wait for the sandbox: {err}"),
            };
            let _ = tx.send(Exit { description });
        });
        Ok((pid, rx))
    }

    fn is_running(&self, spec: &WorkspaceSpec, pid: i32) -> bool {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        proc_scan::is_alive(pid)
            && proc_scan::real_uid(pid) == Some(spec.host_uid)
            && cmdline.starts_with(b"bwrap\0")
    }

    async fn stop(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        crate::backend::end_processes(spec, STOP_GRACE).await
    }

    fn clean(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        // `chan` only exists in workspaces started by older versions.
        for sub in ["host", "chan", "tmp"] {
            let path = spec.dir.join(sub);
            if path.exists() {
                std::fs::remove_dir_all(&path).map_err(io_err(&path))?;
            }
        }
        let _ = std::fs::remove_file(spec.dir.join("seccomp.bpf"));
        Ok(())
    }

    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        if spec.dir.exists() {
            std::fs::remove_dir_all(&spec.dir).map_err(io_err(&spec.dir))?;
        }
        Ok(())
    }
}
