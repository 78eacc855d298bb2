//! `cubicle-guest --vm`: the duties of PID 1 in a microVM, before the normal
//! supervisor runs.
//!
//! The kernel starts us as init (`init=/usr/local/sbin/cubicle-guest -- --vm
//! ...`: the kernel passes what follows `--` to init as its arguments) on a
//! read-write root (the VMM's copy-on-write overlay on the read-only desktop
//! ext4). [`boot`] mounts the API file systems, brings up `lo`, sets the
//! hostname, then forks while the process is still single-threaded:
//!
//! - PID 1 stays behind, only reaps orphans and takes a fresh identity
//!   from the host after a restore ([`crate::identity_service`]), and when the supervisor child
//!   exits syncs and reboots (`reboot=k` on the command line makes that an
//!   i8042 reset, which the VMM treats as a clean exit).
//! - The child becomes the services' id (1001), as bubblewrap starts the
//!   supervisor in a jail: `SETUID`, `SETGID`, `KILL`, and for its first
//!   moment `SYS_ADMIN` and `NET_ADMIN` (the browser's network namespace),
//!   no-new-privileges, and the seccomp filter the host built for the
//!   jail's processes. It returns to `main`, which sets the services apart
//!   from the user exactly as in a jail ([`crate::user`], [`crate::caps`],
//!   [`crate::endpoints`], [`crate::browser_net`]): the user's processes run
//!   as 1000 with nothing, RFB is a Unix socket in a 0700 folder of 1001,
//!   DevTools is a pipe inside a network namespace of the browser's.
//!
//! The host's files come on a second disk (`/dev/vdb`, read-only ext4, see
//! `cubicle-runtime`'s `microvm::host_disk`), mounted at [`HOST_DIR`]: the
//! egress trust files (shown at `/run/cubicle-trust` and as the system CA
//! bundle, as the jail binds them) and the seccomp filter. A microVM has no
//! network device: egress leaves over vsock ([`crate::egress_relay`]).
//!
use std::ffi::CString;
use std::path::Path;

/// The services' id inside the workspace (Xvnc, Chromium, the supervisor).
pub const SERVICES_ID: u32 = 1001;
/// Where the host's disk (`/dev/vdb`) is mounted.
pub const HOST_DIR: &str = "/run/cubicle-host";
/// The host disk's device.
const HOST_DISK: &str = "/dev/vdb";
/// The seccomp filter on the host disk: the jail's, as raw BPF.
const SECCOMP_FILE: &str = "seccomp.bpf";
/// What the user's processes get on top of it: no vsock (in a jail the
/// jail's filter refuses it to everyone; here the supervisor needs it).
const USER_SECCOMP_FILE: &str = "user-seccomp.bpf";
/// The browser's profile lives on the root disk (kept across restarts, as
/// the jail keeps it on the workspace's disk), shown where the jail shows it.
const BROWSER_STORE: &str = "/var/lib/cubicle-browser";
const BROWSER_HOME: &str = "/run/cubicle-browser";
/// The capabilities the supervisor starts with (linux/capability.h): KILL,
/// SETGID, SETUID, NET_ADMIN, SYS_ADMIN.
const SUPERVISOR_CAPS: [u32; 5] = [5, 6, 7, 12, 21];
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
    #[error("cannot set up {what}: {source}")]
    Prepare {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot become the services' id ({SERVICES_ID}): {step}: {source}")]
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
    mount_host_disk()?;
    prepare_services_dirs()?;
    set_hostname(hostname)?;
    // As root, before the services take over: /run is root's here.
    crate::machine_id::write().map_err(prepare_err(crate::machine_id::PATH))?;
    loopback_up()?;
    // SAFETY: fork is called while the process has exactly one thread (no
    // async runtime, no other thread has been started), so the child may
    // run arbitrary code afterwards.
    match unsafe { libc::fork() } {
        -1 => Err(VmInitError::Fork(std::io::Error::last_os_error())),
        0 => become_services(),
        child => {
            // Threads are fine from here: PID 1 runs no more than this one
            // and its reaping.
            crate::identity_service::spawn();
            reap_until(child)
        }
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

fn prepare_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> VmInitError {
    let what = what.into();
    move |source| VmInitError::Prepare { what, source }
}

/// Mounts the host's disk read-only at [`HOST_DIR`] and shows its trust
/// files where the jail shows them. A VM started without one (an older
/// runtime) goes on: the browser then refuses intercepted sites.
fn mount_host_disk() -> Result<(), VmInitError> {
    if !Path::new(HOST_DISK).exists() {
        eprintln!("cubicle-guest: no host disk ({HOST_DISK}): no egress trust, no seccomp filter");
        return Ok(());
    }
    std::fs::create_dir_all(HOST_DIR).map_err(prepare_err(HOST_DIR))?;
    let flags = SAFE | libc::MS_NOEXEC | libc::MS_RDONLY;
    mount_raw(HOST_DISK, HOST_DIR, "ext4", flags).map_err(prepare_err(HOST_DISK))?;
    let trust = Path::new(HOST_DIR).join("trust");
    if trust.is_dir() {
        let target = "/run/cubicle-trust";
        std::fs::create_dir_all(target).map_err(prepare_err(target))?;
        bind(&trust, Path::new(target), true)?;
        let bundle = trust.join("ca-bundle.crt");
        let system = Path::new("/etc/ssl/certs/ca-certificates.crt");
        if bundle.is_file() && system.is_file() {
            bind(&bundle, system, true)?;
        }
    }
    Ok(())
}

/// The folders the services' id needs where only root may create:
/// its private folder, the browser's home (bound from the root disk), and
/// a fresh `/tmp/.X11-unix` of its own (as the jail's daemon makes it).
fn prepare_services_dirs() -> Result<(), VmInitError> {
    for (dir, mode) in [
        ("/run/cubicle-services", 0o700),
        (BROWSER_STORE, 0o700),
        (BROWSER_HOME, 0o700),
        ("/tmp/.X11-unix", 0o755),
    ] {
        own_dir(Path::new(dir), SERVICES_ID, mode)?;
    }
    bind(Path::new(BROWSER_STORE), Path::new(BROWSER_HOME), false)
}

/// `path` as a directory of `uid` with `mode`, whatever was there.
fn own_dir(path: &Path, uid: u32, mode: u32) -> Result<(), VmInitError> {
    use std::os::unix::fs::PermissionsExt;
    let err = prepare_err(path.display().to_string());
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => std::fs::remove_file(path).map_err(prepare_err(path.display().to_string()))?,
        Err(_) => std::fs::create_dir_all(path).map_err(prepare_err(path.display().to_string()))?,
    }
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)))
        .map_err(err)
}

fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), VmInitError> {
    let what = format!("a bind of {} on {}", source.display(), target.display());
    let (Some(from), Some(to)) = (source.to_str(), target.to_str()) else {
        return Err(prepare_err(what)(std::io::Error::other("not UTF-8")));
    };
    mount_raw(from, to, "", libc::MS_BIND).map_err(prepare_err(what.clone()))?;
    if read_only {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | SAFE;
        mount_raw("", to, "", flags).map_err(prepare_err(what))?;
    }
    Ok(())
}

fn mount_raw(
    source: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
) -> std::io::Result<()> {
    let cstr = |s: &str| CString::new(s).map_err(std::io::Error::other);
    let (source, target, fstype) = (cstr(source)?, cstr(target)?, cstr(fstype)?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // call, or null for no data; mount does not keep them.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// In the forked child: a session of its own, then the services' id with
/// the supervisor's capabilities, no new privileges, and the host's
/// seccomp filter, for good.
fn become_services() -> Result<(), VmInitError> {
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
    // Read before the id change: the host disk is root's.
    let read_filter = |name: &str| match std::fs::read(Path::new(HOST_DIR).join(name)) {
        Ok(bytes) => crate::seccomp_load::parse(&bytes).map(Some),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    };
    let filter = read_filter(SECCOMP_FILE).map_err(prepare_err("the seccomp filter"))?;
    let user_filter =
        read_filter(USER_SECCOMP_FILE).map_err(prepare_err("the user's seccomp filter"))?;
    // SAFETY: setsid takes no arguments and only starts a new session.
    if unsafe { libc::setsid() } == -1 {
        step("setsid", -1)?;
    }
    // SAFETY: prctl, setgroups (an empty list: a null pointer of length 0),
    // setresgid and setresuid only change this process's credentials.
    unsafe {
        step("keepcaps", libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0))?;
        step("setgroups", libc::setgroups(0, std::ptr::null()))?;
        step(
            "setresgid",
            libc::setresgid(SERVICES_ID, SERVICES_ID, SERVICES_ID),
        )?;
        step(
            "setresuid",
            libc::setresuid(SERVICES_ID, SERVICES_ID, SERVICES_ID),
        )?;
        step("keepcaps", libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0))?;
    }
    crate::caps::start_with(&SUPERVISOR_CAPS).map_err(|source| VmInitError::DropUser {
        step: "capset",
        source,
    })?;
    // SAFETY: prctl with integer arguments only.
    step("no_new_privs", unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    })?;
    match filter {
        Some(filter) => {
            crate::seccomp_load::install(&filter).map_err(|source| VmInitError::DropUser {
                step: "seccomp",
                source,
            })?
        }
        None => eprintln!("cubicle-guest: no seccomp filter on the host disk; running without"),
    }
    if let Some(filter) = user_filter {
        crate::user::add_filter(filter);
    }
    // As bubblewrap leaves it in a jail: PATH only, in `/` (the user's
    // home is closed to the services' id).
    for (key, _) in std::env::vars_os() {
        if key != "PATH" {
            // SAFETY: set_var/remove_var are sound while no other thread
            // runs; the child of a single-threaded fork has one thread.
            unsafe { std::env::remove_var(key) };
        }
    }
    // SAFETY: as above, one thread.
    unsafe { std::env::set_var("PATH", PATH) };
    let _ = std::env::set_current_dir("/");
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
