//! The jail backend: each workspace is a bubblewrap sandbox started as
//! unprivileged host uids of its own, with user, pid, net, ipc, uts, cgroup
//! and mount namespaces, the image as a read-only root, a writable home and
//! `/tmp` on the workspace's disk, only a loopback interface, no
//! capabilities for anything the user runs, no further user namespaces, a
//! seccomp filter and resource limits.
//!
//! Why bubblewrap and not our own namespace code: it is small, audited, in
//! Debian, and does exactly this; `crun` does not run on these hosts.
//!
//! # Two uids: the services and the user
//!
//! The gateway is the only way to Xvnc (RFB) and to Chromium's DevTools:
//! that is where the control lock, the CDP policy and the event log are.
//! With one uid for everything, the user's shell (and whatever an agent
//! execs) reached both around the gateway: RFB on `127.0.0.1:5900` with no
//! password, DevTools on `127.0.0.1:9222`, and every other process's
//! memory and descriptors through `/proc` (same uid). So each jail now has
//! two ids inside, each its own host uid ([`userns`]):
//!
//! - **services, 1001** (host: `host_uid + 1`): `cubicle-guest`, Xvnc and
//!   Chromium. RFB is on a Unix socket in a 0700 directory of this uid
//!   (`-rfbunixpath`, `-rfbport -1`: no TCP at all). Chromium runs in a
//!   network namespace of its own, made by `cubicle-guest` at start, and
//!   serves DevTools on no port at all: only over a pipe to `cubicle-guest`
//!   (`--remote-debugging-pipe`), which serves it to the gateway as guest
//!   port 9222 (a port on the browser's own loopback was reachable by the
//!   browser's pages; see `cubicle-guest`'s `devtools_pipe`). The
//!   browser's profile is on the workspace's disk in
//!   a 0700 folder of this uid.
//! - **user, 1000** (host: `host_uid`): the XFCE session, terminals, exec,
//!   the files API (run with the user's file ids). No capabilities; cannot
//!   open the RFB socket, has no route to DevTools, and cannot read or
//!   signal a process of the services uid (the kernel's ptrace check
//!   refuses another uid's `/proc/<pid>/mem` and `fd/`).
//!
//! The X display is shared on purpose: the user's desktop programs are X
//! clients of Xvnc, so a user process can send X input (XTEST) and read the
//! screen. The control lock therefore cannot stop input from a program
//! already running in the workspace (one the agent started before an
//! operator took over keeps its X connection); it stops every new door the
//! agent has (actions, exec, files, CDP page-changing methods).
//!
//! How the two ids are made, and why not otherwise: bubblewrap started as
//! an unprivileged uid maps only that uid, and started as root without a
//! user namespace it would run the sandbox as host ids directly (no uid 1000
//! for the image's user, no `--disable-userns`). The daemon is root, so it
//! makes the user namespace itself with a two-line map and a limit of zero
//! nested user namespaces, and bubblewrap joins it (`--userns`), started
//! as the services uid. `cubicle-guest` starts as 1001 with `SETUID`,
//! `SETGID`, `KILL` (to run the user's processes as 1000 and end them) and,
//! only until its first moment is over, `SYS_ADMIN` and `NET_ADMIN` (the
//! browser's network namespace); nothing it starts inherits any capability.
//! The seccomp filter lets `unshare` through only for a new network
//! namespace, which needs a capability only the supervisor ever has.
//!
//! What is left: `/tmp` is shared, so while Xvnc restarts a user process
//! can put its own socket or lock in `/tmp/.X11-unix` (Xvnc makes it 1777)
//! and so keep the display down or offer the desktop and the browser a
//! display of its own — nothing beyond the X access it has anyway (the
//! daemon makes that folder afresh, the services', at every start).
//! Chromium runs without its own sandbox as the services' uid, so a
//! renderer exploit lands next to RFB and DevTools. A microVM's guest
//! separates the same two ids (`cubicle-guest`'s `vm_init`).

pub mod command;
pub mod guest_log;
pub mod host_socket;
pub mod seccomp;
pub mod userns;

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{Backend, BackendError, Exit, WorkspaceSpec};
use crate::channel::{GuestChannel, GuestPeer};
use crate::limits::Usage;
use crate::limits::cgroup::{self, Hierarchy, WorkspaceCgroup};
use crate::limits::disk::WorkspaceDisk;
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
    /// The `cubicle-shim` binary each jail is started under.
    pub shim_bin: PathBuf,
    /// The Xvnc path inside the image.
    pub xvnc: String,
    /// The installation's egress trust files (`crate::egress::trust`),
    /// shown to every jail; `None` starts jails without them.
    pub egress_trust: Option<PathBuf>,
    seccomp: Vec<u8>,
    /// Where workspace cgroups go here, or why they cannot (then no
    /// workspace starts: limits are not optional).
    cgroups: Result<Hierarchy, String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |source| BackendError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn freeze_err(
    what: &'static str,
    spec: &WorkspaceSpec,
    err: crate::limits::freeze::FreezeError,
) -> BackendError {
    BackendError::Pause {
        what,
        id: spec.id.clone(),
        reason: err.to_string(),
    }
}

impl JailBackend {
    pub fn new(
        rootfs: PathBuf,
        guest_bin: PathBuf,
        shim_bin: PathBuf,
        xvnc: String,
    ) -> Result<Self, BackendError> {
        let seccomp =
            seccomp::jail_filter_bytes().map_err(|e| BackendError::Spawn(e.to_string()))?;
        let cgroups = Hierarchy::detect().map_err(|e| e.to_string());
        Ok(Self {
            rootfs,
            guest_bin,
            shim_bin,
            xvnc,
            egress_trust: None,
            seccomp,
            cgroups,
        })
    }

    /// Jails trust the egress CA through the files in `dir`.
    pub fn with_egress_trust(mut self, dir: PathBuf) -> Self {
        self.egress_trust = Some(dir);
        self
    }

    /// The workspace's cgroup on this host, or why there is none.
    fn cgroup(&self, spec: &WorkspaceSpec) -> Result<WorkspaceCgroup, BackendError> {
        Ok(Hierarchy::workspace_in(&self.cgroups, &spec.id)?)
    }

    /// Makes the workspace's cgroup with its limits and mounts its disk.
    fn apply_limits(&self, spec: &WorkspaceSpec) -> Result<WorkspaceCgroup, BackendError> {
        let cgroup = self.cgroup(spec)?;
        if let Ok(hierarchy) = &self.cgroups {
            hierarchy.prepare()?;
        }
        cgroup.create(&spec.limits)?;
        let disk = WorkspaceDisk::of(&spec.dir);
        disk.ensure_mounted(spec.limits.disk_bytes(), spec.host_uid, spec.services_uid())?;
        disk.reset_x11_dir(spec.services_uid())?;
        Ok(cgroup)
    }

    /// Kills what is left in the workspace's cgroup, removes it, and
    /// unmounts its disk (after emptying its `/tmp` when `clear_tmp`).
    fn release_limits(&self, spec: &WorkspaceSpec, clear_tmp: bool) -> Result<(), BackendError> {
        if let Ok(cgroup) = self.cgroup(spec) {
            cgroup.remove()?;
        }
        let disk = WorkspaceDisk::of(&spec.dir);
        if clear_tmp && disk.is_mounted() && disk.tmp().exists() {
            std::fs::remove_dir_all(disk.tmp()).map_err(io_err(&disk.tmp()))?;
        }
        disk.unmount()?;
        Ok(())
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
        // The disk (home and /tmp) is made and mounted at start.
        Ok(())
    }

    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        let cgroup = self.apply_limits(spec)?;
        // Opened now, written by the child between fork and exec.
        let join = cgroup.open_join_files()?;
        // The guest channel: bound here by root, listened on by the guest.
        // The egress reverse channel's folder (the gateway binds its socket).
        crate::egress::listener::prepare_dir(&spec.dir).map_err(io_err(&spec.dir))?;
        let channel = host_socket::bind(spec)?;
        let channel_fd = channel.as_raw_fd();
        let seccomp = self.write_seccomp(spec)?;
        let seccomp_fd = seccomp.as_raw_fd();
        let userns = userns::create(spec)?;
        let userns_fd = userns.as_raw_fd();
        let fds = command::Fds {
            seccomp: seccomp_fd,
            channel: channel_fd,
            userns: userns_fd,
        };
        // Under a shim of its own, so the workspace outlives the daemon; it
        // drains the output into the root-owned log (see [`guest_log`]).
        let started = crate::shim::launch(crate::shim::Launch {
            shim: &self.shim_bin,
            spec,
            log: spec.dir.join("guest.log"),
            log_max: guest_log::MAX_LOG,
            join_fds: cgroup::raw_fds(&join),
            pass_fds: vec![seccomp_fd, channel_fd, userns_fd],
            argv: command::argv(self, spec, fds),
        });
        drop(seccomp);
        drop(userns);
        drop(join);
        drop(channel);
        started
    }

    fn is_running(&self, spec: &WorkspaceSpec, pid: i32) -> bool {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        proc_scan::is_alive(pid)
            && proc_scan::real_uid(pid) == Some(spec.services_uid())
            && cmdline.starts_with(b"bwrap\0")
    }

    /// The listener must be `cubicle-guest`, which runs as the services uid.
    fn channel(&self, spec: &WorkspaceSpec) -> GuestChannel {
        let peer = GuestPeer {
            uid: spec.services_uid(),
            top_pid: spec.top_pid,
        };
        GuestChannel::new(spec.channel_socket(), peer)
    }

    async fn stop(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        crate::backend::end_processes(spec, STOP_GRACE).await
    }

    /// Freezes the workspace's cgroup: every process of the jail is in it
    /// from its first instruction, so nothing of it keeps running.
    async fn pause(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        let cgroup = self.cgroup(spec)?;
        crate::limits::freeze::freeze(&cgroup)
            .await
            .map_err(|e| freeze_err("pause", spec, e))
    }

    async fn resume(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        let cgroup = self.cgroup(spec)?;
        crate::limits::freeze::thaw(&cgroup)
            .await
            .map_err(|e| freeze_err("resume", spec, e))
    }

    fn clean(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        // `chan` only exists in workspaces started by older versions.
        for sub in ["host", "chan", "tmp", "egress"] {
            let path = spec.dir.join(sub);
            if path.exists() {
                std::fs::remove_dir_all(&path).map_err(io_err(&path))?;
            }
        }
        let _ = std::fs::remove_file(spec.dir.join("seccomp.bpf"));
        self.release_limits(spec, true)
    }

    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        self.release_limits(spec, false)?;
        if spec.dir.exists() {
            std::fs::remove_dir_all(&spec.dir).map_err(io_err(&spec.dir))?;
        }
        Ok(())
    }

    fn usage(&self, spec: &WorkspaceSpec) -> Usage {
        let mut usage = Usage::of_limits(&spec.limits);
        if let Ok(cgroup) = self.cgroup(spec) {
            let measured = cgroup.usage();
            usage.memory_bytes = measured.memory_bytes;
            usage.cpu_usage_usec = measured.cpu_usage_usec;
            usage.pids = measured.pids;
            usage.oom_kills = measured.oom_kills.unwrap_or(0);
        }
        usage.disk_used_bytes = WorkspaceDisk::of(&spec.dir).used_bytes();
        usage
    }
}
