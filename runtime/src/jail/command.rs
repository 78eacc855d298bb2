//! The command line that starts one jail: `prlimit` (resource limits) →
//! `setpriv` (the workspace's own unprivileged uid) → `bwrap` (namespaces,
//! mounts, capabilities, seccomp) → `cubicle-guest`. Each execs the next, so
//! the whole chain is one process, the daemon's child, and bubblewrap's
//! `--die-with-parent` ties the workspace to the daemon.

use std::os::fd::RawFd;

use crate::backend::WorkspaceSpec;
use crate::unprivileged::{self, Groups, Limits};

use super::JailBackend;

/// Per-workspace limits (per uid, so per workspace: each has its own uid).
const MAX_PROCESSES: u32 = 4096;
const MAX_OPEN_FILES: u32 = 16384;
/// Size of the workspace's `/dev/shm`.
const SHM_BYTES: u64 = 512 * 1024 * 1024;
/// Size of the workspace's `/run`. bubblewrap 0.8 takes `--size` only before
/// `--tmpfs`, so `/dev` (`--dev`) keeps the kernel's default size; like every
/// tmpfs inside, what is written there counts against the memory limit.
const RUN_BYTES: u64 = 64 * 1024 * 1024;

/// `seccomp_fd` and `channel_fd` are inherited: the filter bubblewrap
/// reads, and the guest channel socket `cubicle-guest` listens on.
pub fn argv(
    jail: &JailBackend,
    spec: &WorkspaceSpec,
    seccomp_fd: RawFd,
    channel_fd: RawFd,
) -> Vec<String> {
    // Home and /tmp live on the workspace's disk (its disk limit).
    let disk = crate::limits::disk::WorkspaceDisk::of(&spec.dir);
    let limits = Limits {
        processes: MAX_PROCESSES,
        open_files: MAX_OPEN_FILES,
    };
    let mut argv = unprivileged::prefix(spec.host_uid, limits, Groups::Clear);
    argv.extend([
        "--".into(),
        "bwrap".into(),
        "--unshare-all".into(),
        "--unshare-user".into(),
        "--disable-userns".into(),
        "--die-with-parent".into(),
        "--new-session".into(),
        "--ro-bind".into(),
        jail.rootfs.display().to_string(),
        "/".into(),
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
        "--size".into(),
        SHM_BYTES.to_string(),
        "--tmpfs".into(),
        "/dev/shm".into(),
        "--size".into(),
        RUN_BYTES.to_string(),
        "--tmpfs".into(),
        "/run".into(),
    ]);
    // No directory of the guest channel is mounted: its socket arrives as
    // `channel_fd` (see `crate::channel` for why).
    for (host, guest) in [
        (disk.home().display().to_string(), "/home/user"),
        (disk.tmp().display().to_string(), "/tmp"),
    ] {
        argv.extend(["--bind".into(), host, guest.into()]);
    }
    argv.extend([
        "--ro-bind".into(),
        jail.guest_bin.display().to_string(),
        "/usr/local/sbin/cubicle-guest".into(),
        "--hostname".into(),
        spec.id.clone(),
        "--uid".into(),
        "1000".into(),
        "--gid".into(),
        "1000".into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--clearenv".into(),
        "--setenv".into(),
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/bin:/bin".into(),
        "--chdir".into(),
        "/home/user".into(),
        "--seccomp".into(),
        seccomp_fd.to_string(),
        "--".into(),
        "/usr/local/sbin/cubicle-guest".into(),
        "--channel-fd".into(),
        channel_fd.to_string(),
        "--geometry".into(),
        spec.geometry.to_string(),
        "--xvnc".into(),
        jail.xvnc.clone(),
    ]);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jail_drops_everything_and_runs_as_the_workspace_uid() {
        let jail =
            JailBackend::new("/img".into(), "/bin/guest".into(), "/usr/bin/Xvnc".into()).unwrap();
        let spec = WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: 1_600_007,
            dir: "/data/workspaces/ws-1".into(),
            top_pid: None,
            limits: Default::default(),
        };
        let argv = argv(&jail, &spec, 9, 11);
        let joined = argv.join(" ");
        for needle in [
            "--reuid=1600007",
            "--unshare-all --unshare-user --disable-userns --die-with-parent",
            "--ro-bind /img /",
            "--cap-drop ALL",
            "--seccomp 9",
            "--bind /data/workspaces/ws-1/disk/home /home/user",
            "--bind /data/workspaces/ws-1/disk/tmp /tmp",
            "--size 67108864 --tmpfs /run",
            "cubicle-guest --channel-fd 11 --geometry 1280x800",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in {joined}");
        }
        assert!(!joined.contains("--share-net"));
        // Nothing the host connects to is mounted where the guest can write.
        assert!(!joined.contains("/run/cubicle"), "{joined}");
        assert!(!joined.contains("/host"), "{joined}");
    }
}
