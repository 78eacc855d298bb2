//! The command line that starts one jail: `prlimit` (resource limits) →
//! `setpriv` (the workspace's services uid) → `bwrap` (joins the two-id user
//! namespace the daemon made; namespaces, mounts, capabilities, seccomp) →
//! `cubicle-guest`. Each execs the next, so
//! the whole chain is one process, the child of the workspace's shim
//! (`crate::shim`), and bubblewrap's `--die-with-parent` ties the
//! workspace to the shim, not to the daemon.

use std::os::fd::RawFd;

use crate::backend::WorkspaceSpec;
use crate::unprivileged::{self, Groups, Limits};

use super::JailBackend;
use super::userns::SERVICES_ID;

/// Per-workspace limits (per uid, so per workspace: each has its own uid):
/// `ulimit -u` and `ulimit -n` inside (the e2e `isolation` tests read them).
pub const MAX_PROCESSES: u32 = 4096;
pub const MAX_OPEN_FILES: u32 = 16384;
/// Size of the workspace's `/dev/shm`.
const SHM_BYTES: u64 = 512 * 1024 * 1024;
/// Size of the workspace's `/run`. bubblewrap 0.8 takes `--size` only before
/// `--tmpfs`, so `/dev` (`--dev`) keeps the kernel's default size; like every
/// tmpfs inside, what is written there counts against the memory limit.
const RUN_BYTES: u64 = 64 * 1024 * 1024;

/// The capabilities `cubicle-guest` starts with, inside the jail's user
/// namespace only. It keeps `SETUID`/`SETGID` (to run the user's processes
/// as the user, and its files ops with the user's file ids) and `KILL`
/// (to end them), uses `SYS_ADMIN` and `NET_ADMIN` once at start (the
/// browser's own network namespace) and drops them; no child of it ever
/// has any (see `cubicle-guest`'s `caps` module).
pub const GUEST_CAPS: [&str; 5] = [
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_SYS_ADMIN",
    "CAP_NET_ADMIN",
];

/// Where the browser's profile (on the workspace's disk) is mounted.
pub const BROWSER_HOME: &str = "/run/cubicle-browser";

/// The inherited descriptors of one jail start.
#[derive(Debug, Clone, Copy)]
pub struct Fds {
    /// The seccomp filter bubblewrap reads.
    pub seccomp: RawFd,
    /// The guest channel socket `cubicle-guest` listens on.
    pub channel: RawFd,
    /// The workspace's user namespace ([`super::userns`]).
    pub userns: RawFd,
}

pub fn argv(jail: &JailBackend, spec: &WorkspaceSpec, fds: Fds) -> Vec<String> {
    // Home and /tmp live on the workspace's disk (its disk limit).
    let disk = crate::limits::disk::WorkspaceDisk::of(&spec.dir);
    let limits = Limits {
        processes: MAX_PROCESSES,
        open_files: MAX_OPEN_FILES,
    };
    // bubblewrap runs as the services uid, the owner of the namespace it
    // joins; every namespace but the user's is new (`--unshare-all` would
    // ask for a user namespace too).
    let mut argv = unprivileged::prefix(spec.services_uid(), limits, Groups::Clear);
    argv.extend([
        "--".into(),
        "bwrap".into(),
        "--userns".into(),
        fds.userns.to_string(),
        "--assert-userns-disabled".into(),
        "--unshare-ipc".into(),
        "--unshare-pid".into(),
        "--unshare-net".into(),
        "--unshare-uts".into(),
        "--unshare-cgroup".into(),
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
    // `fds.channel` (see `crate::channel` for why).
    // The reverse channel to the egress proxy, and the files that make the
    // workspace trust its CA (`crate::egress::listener`, `crate::egress::trust`).
    argv.extend(egress_binds(jail, spec));
    for (host, guest) in [
        (disk.home().display().to_string(), "/home/user"),
        (disk.tmp().display().to_string(), "/tmp"),
        (disk.browser().display().to_string(), BROWSER_HOME),
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
        SERVICES_ID.to_string(),
        "--gid".into(),
        SERVICES_ID.to_string(),
        "--cap-drop".into(),
        "ALL".into(),
    ]);
    for cap in GUEST_CAPS {
        argv.extend(["--cap-add".into(), cap.into()]);
    }
    argv.extend([
        "--clearenv".into(),
        "--setenv".into(),
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/bin:/bin".into(),
        // The user's home is closed to the services' id.
        "--chdir".into(),
        "/".into(),
        "--seccomp".into(),
        fds.seccomp.to_string(),
        "--".into(),
        "/usr/local/sbin/cubicle-guest".into(),
        "--channel-fd".into(),
        fds.channel.to_string(),
        "--geometry".into(),
        spec.geometry.to_string(),
        "--xvnc".into(),
        jail.xvnc.clone(),
    ]);
    argv
}

fn egress_binds(jail: &JailBackend, spec: &WorkspaceSpec) -> Vec<String> {
    use crate::egress::{listener, trust};
    let mut binds = vec![
        "--ro-bind".into(),
        listener::dir_of(&spec.dir).display().to_string(),
        listener::GUEST_DIR.into(),
    ];
    if let Some(dir) = &jail.egress_trust {
        binds.extend([
            "--ro-bind".into(),
            dir.display().to_string(),
            trust::GUEST_DIR.into(),
            "--ro-bind".into(),
            dir.join("ca-bundle.crt").display().to_string(),
            trust::SYSTEM_BUNDLE.into(),
        ]);
    }
    binds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jail_joins_the_two_id_namespace_as_the_services_uid() {
        let jail = JailBackend::new(
            "/img".into(),
            "/bin/guest".into(),
            "/bin/shim".into(),
            "/usr/bin/Xvnc".into(),
        )
        .unwrap();
        let spec = WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: 1_600_007,
            dir: "/data/workspaces/ws-1".into(),
            top_pid: None,
            limits: Default::default(),
        };
        let fds = Fds {
            seccomp: 9,
            channel: 11,
            userns: 12,
        };
        let argv = argv(&jail, &spec, fds);
        let joined = argv.join(" ");
        for needle in [
            "--reuid=1600008",
            "--userns 12 --assert-userns-disabled --unshare-ipc --unshare-pid --unshare-net --unshare-uts --unshare-cgroup --die-with-parent",
            "--uid 1001 --gid 1001 --cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --cap-add CAP_KILL --cap-add CAP_SYS_ADMIN --cap-add CAP_NET_ADMIN --clearenv",
            "--bind /data/workspaces/ws-1/disk/browser /run/cubicle-browser",
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
        assert!(
            !joined.contains("--unshare-user"),
            "the namespace is the daemon's"
        );
        // Nothing the host connects to is mounted where the guest can write.
        assert!(
            !argv
                .iter()
                .any(|a| a == "/run/cubicle" || a.starts_with("/run/cubicle/")),
            "{joined}"
        );
        assert!(!joined.contains("/host"), "{joined}");
    }
}
