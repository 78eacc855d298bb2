//! `cubicle-guest --vm`: the duties of PID 1 in a microVM, before the normal
//! supervisor runs.
//!
//! The kernel starts us as init (`init=/usr/local/sbin/cubicle-guest -- --vm
//! ...`: the kernel passes what follows `--` to init as its arguments) on a
//! read-write root (the VMM's copy-on-write overlay on the read-only desktop
//! ext4). [`boot`] mounts the API file systems, brings up `lo`, sets the
//! hostname, then forks while the process is still single-threaded:
//!
//! - PID 1 stays behind, only reaps orphans, and when the supervisor child
//!   exits syncs and reboots (`reboot=k` on the command line makes that an
//!   i8042 reset, which the VMM treats as a clean exit).
//! - The child drops to the workspace user (uid/gid 1000, no supplementary
//!   groups, no-new-privileges), as the whole jail already runs, and returns
//!   to `main` to run the supervisor. Dropping the whole supervisor (not
//!   only its services) keeps exec and file operations as the workspace
//!   user too, exactly as in the jail; the vsock ports it binds (1024, 5900,
//!   9222) are all above the reserved range, so it needs no capability.
//!
//! Unverified here: these hosts' `/dev/kvm` is PVM and cannot boot a stock
//! kernel, so this path has only been compiled and unit-tested, never run as
//! a real init (vmm/tests/linux_boot.rs is where that boot belongs).

use std::ffi::CString;
use std::path::Path;

/// The workspace user inside the image (`useradd --uid 1000 user`).
pub const USER_ID: u32 = 1000;
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What can go wrong while becoming init.
#[derive(Debug, thiserror::Error)]
pub enum VmInitError {
    #[error(
        "--vm makes cubicle-guest the init of a microVM, but this is pid {0}; run without --vm in a jail"
    )]
    NotInit(i32),
    #[error("cannot mount {fstype} on {target}: {source}")]
    Mount {
        fstype: &'static str,
        target: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set the hostname to {name:?}: {source}")]
    Hostname {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot bring up the loopback interface (`ip link set lo up`): {0}")]
    Loopback(String),
    #[error("cannot fork the supervisor: {0}")]
    Fork(#[source] std::io::Error),
    #[error("cannot become the workspace user (uid {USER_ID}): {step}: {source}")]
    DropUser {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// One file system PID 1 mounts.
#[derive(Debug, Clone, Copy)]
pub struct MountSpec {
    pub fstype: &'static str,
    pub target: &'static str,
    pub flags: libc::c_ulong,
    pub data: &'static str,
}

const SAFE: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV;

/// The mounts, in order (a parent before what is mounted inside it).
/// `/dev` is skipped when the kernel already mounted devtmpfs there
/// (`CONFIG_DEVTMPFS_MOUNT`).
pub const MOUNTS: [MountSpec; 7] = [
    spec("proc", "/proc", SAFE | libc::MS_NOEXEC, ""),
    spec("sysfs", "/sys", SAFE | libc::MS_NOEXEC, ""),
    spec("devtmpfs", "/dev", libc::MS_NOSUID, "mode=0755"),
    spec(
        "devpts",
        "/dev/pts",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        "mode=0620,ptmxmode=0666,gid=5",
    ),
    spec("tmpfs", "/dev/shm", SAFE, "mode=1777,size=512m"),
    spec("tmpfs", "/tmp", SAFE, "mode=1777"),
    spec("tmpfs", "/run", SAFE, "mode=0755"),
];

const fn spec(
    fstype: &'static str,
    target: &'static str,
    flags: libc::c_ulong,
    data: &'static str,
) -> MountSpec {
    MountSpec {
        fstype,
        target,
        flags,
        data,
    }
}

/// Becomes the VM's init. Returns only in the forked child, already running
/// as the workspace user; PID 1 itself never returns from here.
pub fn boot(hostname: &str) -> Result<(), VmInitError> {
    let pid = std::process::id() as i32;
    if pid != 1 {
        return Err(VmInitError::NotInit(pid));
    }
    for spec in &MOUNTS {
        mount(spec)?;
    }
    set_hostname(hostname)?;
    loopback_up()?;
    // SAFETY: fork is called while the process has exactly one thread (no
    // async runtime, no other thread has been started), so the child may
    // run arbitrary code afterwards.
    match unsafe { libc::fork() } {
        -1 => Err(VmInitError::Fork(std::io::Error::last_os_error())),
        0 => become_user(),
        child => reap_until(child),
    }
}

fn mount(spec: &MountSpec) -> Result<(), VmInitError> {
    let err = |source| VmInitError::Mount {
        fstype: spec.fstype,
        target: spec.target,
        source,
    };
    if spec.fstype == "devtmpfs" && is_mountpoint(Path::new(spec.target)) {
        return Ok(());
    }
    std::fs::create_dir_all(spec.target).map_err(err)?;
    let cstr = |s: &str| CString::new(s).map_err(|e| err(std::io::Error::other(e)));
    let (fstype, target, data) = (cstr(spec.fstype)?, cstr(spec.target)?, cstr(spec.data)?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the call;
    // mount does not keep them.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            spec.flags,
            data.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(err(std::io::Error::last_os_error()))
    }
}

/// Whether something is mounted on `path` (it sits on another device than
/// its parent). The image's own `/dev` may hold static nodes, so their
/// presence says nothing.
fn is_mountpoint(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let parent = path.parent().unwrap_or(Path::new("/"));
    match (std::fs::metadata(path), std::fs::metadata(parent)) {
        (Ok(inner), Ok(outer)) => inner.dev() != outer.dev(),
        _ => false,
    }
}

fn set_hostname(name: &str) -> Result<(), VmInitError> {
    // SAFETY: the pointer and length describe `name`'s bytes, which the
    // kernel copies; no NUL terminator is needed.
    let rc = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(VmInitError::Hostname {
            name: name.to_owned(),
            source: std::io::Error::last_os_error(),
        })
    }
}

fn loopback_up() -> Result<(), VmInitError> {
    let status = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .env_clear()
        .env("PATH", PATH)
        .status()
        .map_err(|err| VmInitError::Loopback(err.to_string()))?;
    if status.success() {
        Ok(())
    } else {
        Err(VmInitError::Loopback(status.to_string()))
    }
}

/// In the forked child: a session of its own, then uid/gid 1000 for good.
fn become_user() -> Result<(), VmInitError> {
    let step = |step: &'static str, rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(VmInitError::DropUser {
                step,
                source: std::io::Error::last_os_error(),
            })
        }
    };
    // SAFETY: setsid takes no arguments and only starts a new session.
    if unsafe { libc::setsid() } == -1 {
        step("setsid", -1)?;
    }
    // SAFETY: setgroups (with an empty list), setresgid, setresuid and prctl
    // only change this process's credentials; no pointer is dereferenced
    // (setgroups gets a null list of length 0).
    unsafe {
        step("setgroups", libc::setgroups(0, std::ptr::null()))?;
        step("setresgid", libc::setresgid(USER_ID, USER_ID, USER_ID))?;
        step("setresuid", libc::setresuid(USER_ID, USER_ID, USER_ID))?;
        step(
            "no_new_privs",
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
        )?;
    }
    // SAFETY: set_var is sound while no other thread runs; the child of a
    // single-threaded fork has exactly one thread and starts no runtime yet.
    unsafe {
        std::env::set_var("PATH", PATH);
        std::env::set_var("HOME", "/home/user");
        std::env::set_var("USER", "user");
        std::env::set_var("LOGNAME", "user");
    }
    let _ = std::env::set_current_dir("/home/user");
    Ok(())
}

/// PID 1's whole life after the fork: reap every child that ends (orphans
/// re-parent to us) until the supervisor is among them, then reboot.
fn reap_until(supervisor: libc::pid_t) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`, a live local.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == supervisor {
            eprintln!("cubicle-guest: supervisor ended (wait status {status}); rebooting");
            break;
        }
        if pid == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            eprintln!("cubicle-guest: no children left; rebooting");
            break;
        }
    }
    reboot()
}

/// Ends the VM: sync, then reboot, which with `reboot=k` is an i8042 reset
/// the VMM turns into a clean exit. Only PID 1 may do this; any other
/// caller just exits (never reboot a host by mistake).
pub fn reboot() -> ! {
    if std::process::id() != 1 {
        std::process::exit(1);
    }
    // SAFETY: sync and reboot take no pointers; we are PID 1 of the VM, so
    // RB_AUTOBOOT restarts (ends) the VM and nothing else.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_AUTOBOOT);
    }
    // reboot only returns on failure; exiting PID 1 panics the kernel,
    // which with `panic=1` also resets the VM.
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_mounted_before_what_they_hold() {
        let order: Vec<&str> = MOUNTS.iter().map(|m| m.target).collect();
        let dev = order.iter().position(|t| *t == "/dev").unwrap();
        for inner in ["/dev/pts", "/dev/shm"] {
            assert!(order.iter().position(|t| *t == inner).unwrap() > dev);
        }
        for target in ["/proc", "/sys", "/tmp", "/run"] {
            assert!(order.contains(&target), "{target} not mounted");
        }
    }

    #[test]
    fn writable_tmpfs_are_sticky_and_nothing_allows_setuid() {
        for spec in MOUNTS {
            assert_ne!(
                spec.flags & libc::MS_NOSUID,
                0,
                "{} allows setuid",
                spec.target
            );
            if matches!(spec.target, "/tmp" | "/dev/shm") {
                assert!(spec.data.contains("mode=1777"), "{}", spec.target);
            }
        }
    }

    #[test]
    fn mountpoints_are_told_from_plain_directories() {
        assert!(is_mountpoint(Path::new("/proc")));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("plain")).unwrap();
        assert!(!is_mountpoint(&dir.path().join("plain")));
    }

    #[test]
    fn refuses_to_be_init_outside_a_vm() {
        // Boot must refuse before touching anything (no mount, no hostname,
        // no fork). Never run it as PID 1 (a container's entrypoint).
        if std::process::id() == 1 {
            return;
        }
        assert!(matches!(boot("ws-test"), Err(VmInitError::NotInit(_))));
    }
}
