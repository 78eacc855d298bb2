//! Jailer-style confinement of the VMM process, as Firecracker's jailer
//! confines Firecracker: started as root (inside whatever cgroup its parent
//! put it in), the process makes a mount namespace of its own whose root is
//! an empty tmpfs on `--jail-root` holding only what its configuration
//! names, `pivot_root`s into it, drops to an unprivileged uid with no
//! capabilities at all (bounding, ambient and inheritable sets cleared) and
//! no new privileges, and only then builds the VM. The per-thread seccomp
//! filters ([`crate::hardening`]) follow as before.
//!
//! Inside the new root (read-only, nosuid, noexec):
//!
//! | path | bound from | mode |
//! | --- | --- | --- |
//! | `/kernel`, `/initrd` | the kernel and initrd | read-only |
//! | `/disks/<n>` | disk `n`'s image | read-only when it has an overlay or is `ro` |
//! | `/disks/<n>.overlay` | disk `n`'s overlay | read-write |
//! | `/dev/kvm` | `/dev/kvm` (or `--jail-kvm`) | read-write |
//! | `/vsock/` | the directory of the vsock socket | read-write |
//! | `/serial/`, `/api/` | the directories of the serial log and the API socket | read-write |
//!
//! Directories, not files, for the sockets and the log: a socket is made
//! after the jail is up, and the vsock device connects to `<uds>_<port>`
//! sockets that someone else makes in the same directory at any time. So a
//! host path `<dir>/<name>_<port>` is `/vsock/<name>_<port>` inside.
//!
//! Every bind source is opened `O_PATH | O_NOFOLLOW` and checked for its
//! type before it is mounted through `/proc/self/fd/N`: a symlink planted in
//! place of an overlay by an earlier, compromised run of the same uid cannot
//! make root bind another file.
//!
//! Why here and not a separate jailer binary that then execs the VMM: the
//! VMM is linked dynamically against the host's libc, so an exec after
//! `pivot_root` would need the loader and libraries inside the root
//! (Firecracker's jailer copies in a static binary). Confining the process
//! before anything of the VM is built gives the same walls with nothing
//! else in the root. And not in the runtime: the daemon's side would have
//! to fork into a namespace between the shim and the VMM, splitting one
//! sequence over three processes.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::config::VmConfig;

/// Size of the root tmpfs: it only ever holds empty mount points.
const ROOT_TMPFS: &str = "size=64k,nr_inodes=64,mode=0755";
/// prctl's unused arguments, as the full word the kernel reads.
const ZERO: libc::c_ulong = 0;
/// Where the VMM opens KVM, inside its root.
const KVM: &str = "/dev/kvm";

/// Who the VMM becomes, and where its root goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailSpec {
    /// An empty directory of root's; the new root is a tmpfs mounted on it
    /// (in the VMM's own mount namespace only).
    pub root: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the VMM needs `/dev/kvm`'s group and no other).
    pub groups: Vec<u32>,
    /// The KVM device node to bind at `/dev/kvm` (the host's `/dev/kvm`,
    /// or a node of the same device with another group).
    pub kvm: PathBuf,
}

/// Which step of confinement failed, and why.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error("jail: {stage}")]
    Stage {
        stage: String,
        #[source]
        source: std::io::Error,
    },
    #[error("jail: {what} {path} is not {expected}; {fix}")]
    Kind {
        what: &'static str,
        path: String,
        expected: &'static str,
        fix: &'static str,
    },
    #[error("jail: {what} {path} must be an absolute path with a file name")]
    Path { what: &'static str, path: String },
}

fn stage(stage: impl Into<String>) -> impl FnOnce(std::io::Error) -> JailError {
    move |source| JailError::Stage {
        stage: stage.into(),
        source,
    }
}

/// What a bind source must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    CharDevice,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::CharDevice => "a character device",
        }
    }
}

/// One bind mount into the new root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// What it is, for error messages ("kernel", "disk 0 overlay").
    pub what: String,
    /// The host path.
    pub source: PathBuf,
    /// The absolute path inside the new root.
    pub target: PathBuf,
    pub kind: Kind,
    pub writable: bool,
}

/// The binds `config` (and the API socket) need, and the same
/// configuration with every path as seen inside the new root.
pub fn plan(
    config: &VmConfig,
    api_socket: Option<&Path>,
    kvm: &Path,
) -> Result<(Vec<Bind>, VmConfig, Option<PathBuf>), JailError> {
    plan_machine(config, api_socket, kvm, true)
}

/// Where the directory snapshots are written to is seen inside the jail.
pub const SNAPSHOT_DIR: &str = "/snapshots";

/// The binds of a VM restored from a snapshot: as [`plan`], without the
/// kernel and initrd (nothing boots). Its memory files are opened before
/// the jail (`MemoryFiles::open`), so they need no bind.
pub fn plan_restore(
    config: &VmConfig,
    api_socket: Option<&Path>,
    kvm: &Path,
) -> Result<(Vec<Bind>, VmConfig, Option<PathBuf>), JailError> {
    plan_machine(config, api_socket, kvm, false)
}

/// A directory the jailed VMM may write snapshots into, seen inside as
/// [`SNAPSHOT_DIR`] (the API's snapshot paths are then inside paths).
pub fn snapshot_dir_bind(dir: &Path) -> Bind {
    Bind {
        what: "snapshot directory".into(),
        source: dir.to_owned(),
        target: SNAPSHOT_DIR.into(),
        kind: Kind::Dir,
        writable: true,
    }
}

fn plan_machine(
    config: &VmConfig,
    api_socket: Option<&Path>,
    kvm: &Path,
    boots: bool,
) -> Result<(Vec<Bind>, VmConfig, Option<PathBuf>), JailError> {
    let mut binds = Vec::new();
    let mut inside = config.clone();
    let mut bind = |what: String, source: &Path, target: PathBuf, kind: Kind, writable: bool| {
        binds.push(Bind {
            what,
            source: source.to_owned(),
            target: target.clone(),
            kind,
            writable,
        });
        target
    };
    if boots {
        inside.kernel = bind(
            "kernel".into(),
            &config.kernel,
            "/kernel".into(),
            Kind::File,
            false,
        );
    }
    if let (true, Some(initrd)) = (boots, &config.initrd) {
        inside.initrd = Some(bind(
            "initrd".into(),
            initrd,
            "/initrd".into(),
            Kind::File,
            false,
        ));
    }
    for (n, (disk, seen)) in config.disks.iter().zip(&mut inside.disks).enumerate() {
        let writable = !disk.read_only && disk.overlay.is_none();
        let target = PathBuf::from(format!("/disks/{n}"));
        seen.path = bind(
            format!("disk {n} image"),
            &disk.path,
            target,
            Kind::File,
            writable,
        );
        if let Some(overlay) = &disk.overlay {
            let target = PathBuf::from(format!("/disks/{n}.overlay"));
            seen.overlay = Some(bind(
                format!("disk {n} overlay"),
                overlay,
                target,
                Kind::File,
                true,
            ));
        }
    }
    let mut dir_of = |what: &'static str, path: &Path, at: &str| -> Result<PathBuf, JailError> {
        let (parent, name) = split(what, path)?;
        let dir = bind(
            format!("{what} directory"),
            parent,
            at.into(),
            Kind::Dir,
            true,
        );
        Ok(dir.join(name))
    };
    if let (Some(vsock), Some(seen)) = (&config.vsock, &mut inside.vsock) {
        seen.uds_path = dir_of("vsock socket", &vsock.uds_path, "/vsock")?;
    }
    if let Some(log) = &config.serial_log {
        inside.serial_log = Some(dir_of("serial log", log, "/serial")?);
    }
    let api = api_socket
        .map(|socket| dir_of("API socket", socket, "/api"))
        .transpose()?;
    binds.push(Bind {
        what: "KVM device".into(),
        source: kvm.to_owned(),
        target: KVM.into(),
        kind: Kind::CharDevice,
        writable: true,
    });
    Ok((binds, inside, api))
}

/// An absolute path's directory and file name.
fn split<'a>(what: &'static str, path: &'a Path) -> Result<(&'a Path, &'a Path), JailError> {
    match (path.is_absolute(), path.parent(), path.file_name()) {
        (true, Some(parent), Some(name)) => Ok((parent, Path::new(name))),
        _ => Err(JailError::Path {
            what,
            path: path.display().to_string(),
        }),
    }
}

/// Confines the calling process (see the module docs). Must run single-
/// threaded, as root, before anything of the VM is built; on error the
/// process must exit (its namespace, and every mount in it, goes with it).
pub fn enter(spec: &JailSpec, binds: &[Bind]) -> Result<(), JailError> {
    // SAFETY: unshare takes a flag word only.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) }).map_err(stage("new mount namespace"))?;
    // Nothing mounted from here on reaches the host's namespace.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(stage("making mounts private"))?;
    check_root_dir(&spec.root)?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(
        Some(Path::new("tmpfs")),
        &spec.root,
        Some("tmpfs"),
        flags,
        Some(ROOT_TMPFS),
    )
    .map_err(stage(format!("tmpfs root on {}", spec.root.display())))?;
    for bind in binds {
        bind_one(&spec.root, bind)?;
    }
    pivot(&spec.root)?;
    drop_privileges(spec)
}

/// The root must be a real directory of root's (the jail runs as root and
/// mounts on it).
fn check_root_dir(root: &Path) -> Result<(), JailError> {
    let meta = std::fs::symlink_metadata(root).map_err(stage(format!(
        "jail root {} (make it an empty directory of root's)",
        root.display()
    )))?;
    if !meta.is_dir() || meta.uid() != 0 {
        return Err(JailError::Kind {
            what: "jail root",
            path: root.display().to_string(),
            expected: "a directory owned by root",
            fix: "remove it and start again",
        });
    }
    Ok(())
}

/// Opens `bind.source` without following a symlink, checks its type,
/// makes its mount point under `root` and binds it there.
fn bind_one(root: &Path, bind: &Bind) -> Result<(), JailError> {
    let what = &bind.what;
    let source = open_no_follow(&bind.source).map_err(stage(format!(
        "{what} {} cannot be opened",
        bind.source.display()
    )))?;
    let meta = std::fs::File::from(source.try_clone().map_err(stage("dup"))?)
        .metadata()
        .map_err(stage(format!("{what} {}", bind.source.display())))?;
    let kind_ok = match bind.kind {
        Kind::File => meta.is_file(),
        Kind::Dir => meta.is_dir(),
        Kind::CharDevice => meta.file_type().is_char_device(),
    };
    if !kind_ok {
        return Err(JailError::Kind {
            what: "bind source",
            path: format!("{} ({what})", bind.source.display()),
            expected: bind.kind.expected(),
            fix: "a symlink is never followed here",
        });
    }
    let relative = bind.target.strip_prefix("/").unwrap_or(&bind.target);
    let target = root.join(relative);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(stage(format!(
            "mount point directory {} for the {what}",
            bind.target.display()
        )))?;
    }
    let made = match bind.kind {
        Kind::Dir => std::fs::create_dir(&target),
        Kind::File | Kind::CharDevice => std::fs::File::create(&target).map(drop),
    };
    made.map_err(stage(format!(
        "mount point {} for the {what}",
        bind.target.display()
    )))?;
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", source.as_raw_fd()));
    let bound = format!(
        "binding the {what} {} at {}",
        bind.source.display(),
        bind.target.display()
    );
    mount(Some(by_fd.as_path()), &target, None, libc::MS_BIND, None).map_err(stage(&bound))?;
    // A bind takes its source mount's flags; set ours (a second call: the
    // kernel ignores them on the first). The device keeps `dev`.
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NOEXEC;
    if bind.kind != Kind::CharDevice {
        flags |= libc::MS_NODEV;
    }
    if !bind.writable {
        flags |= libc::MS_RDONLY;
    }
    mount(None, &target, None, flags, None).map_err(stage(format!("{bound} (remount)")))
}

fn open_no_follow(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(file.into())
}

/// `pivot_root(".", ".")` in the new root, then the old root detached and
/// the new one made read-only.
fn pivot(root: &Path) -> Result<(), JailError> {
    std::env::set_current_dir(root).map_err(stage("entering the new root"))?;
    let dot = c".";
    // SAFETY: pivot_root with two NUL-terminated literal paths.
    let pivoted = unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) };
    check(pivoted as i32).map_err(stage("pivot_root"))?;
    // SAFETY: umount2 with a NUL-terminated literal path and a flag word.
    check(unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) })
        .map_err(stage("detaching the old root"))?;
    std::env::set_current_dir("/").map_err(stage("chdir /"))?;
    let flags = libc::MS_REMOUNT
        | libc::MS_BIND
        | libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC;
    mount(None, Path::new("/"), None, flags, None).map_err(stage("making the root read-only"))
}

/// Every capability out of every set, the workspace's ids, no new
/// privileges, and death with the parent (the uid change cleared it).
fn drop_privileges(spec: &JailSpec) -> Result<(), JailError> {
    for cap in 0..64 as libc::c_ulong {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, ZERO, ZERO, ZERO) } != 0 {
            let err = std::io::Error::last_os_error();
            // EINVAL: past the kernel's last capability.
            if err.raw_os_error() == Some(libc::EINVAL) && cap > 0 {
                break;
            }
            return Err(stage(format!(
                "dropping capability {cap} from the bounding set"
            ))(err));
        }
    }
    // SAFETY: prctl with integer arguments only.
    let cleared = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            ZERO,
            ZERO,
            ZERO,
        )
    };
    check(cleared).map_err(stage("clearing ambient capabilities"))?;
    let groups: Vec<libc::gid_t> = spec.groups.clone();
    // SAFETY: `groups` is a live slice of gid_t of the length passed.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })
        .map_err(stage(format!("setgroups {:?}", spec.groups)))?;
    // SAFETY: integer arguments only.
    check(unsafe { libc::setresgid(spec.gid, spec.gid, spec.gid) })
        .map_err(stage(format!("setresgid {}", spec.gid)))?;
    // SAFETY: integer arguments only. From root to a non-zero uid without
    // KEEPCAPS the kernel clears the permitted and effective sets.
    check(unsafe { libc::setresuid(spec.uid, spec.uid, spec.uid) })
        .map_err(stage(format!("setresuid {}", spec.uid)))?;
    clear_capabilities()?;
    crate::hardening::set_no_new_privs()
        .map_err(|e| stage("no_new_privs")(std::io::Error::other(e.to_string())))?;
    // SAFETY: prctl with integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            ZERO,
            ZERO,
            ZERO,
        )
    })
    .map_err(stage("parent-death signal"))
}

/// capset(2) with every set empty (the inheritable set survives setuid).
fn clear_capabilities() -> Result<(), JailError> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: a version-3 header and the two data words it expects, both
    // live for the call; the kernel only reads `data`.
    let set = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    check(set as i32).map_err(stage("clearing the capability sets"))
}

fn check(result: i32) -> std::io::Result<()> {
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn cstring(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

/// mount(2) with optional source, type and data.
fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(|t| cstring(Path::new(t))).transpose()?;
    let data = data.map(|d| cstring(Path::new(d))).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string alive for
    // the call; the kernel reads `data` as a string for tmpfs and ignores
    // it for binds.
    let result = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    check(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DiskConfig, VsockConfig};

    fn config() -> VmConfig {
        VmConfig {
            kernel: "/var/lib/cubicle/kernel/vmlinux".into(),
            initrd: None,
            cmdline: "console=ttyS0".into(),
            memory_mib: 256,
            vcpus: 1,
            disks: vec![
                DiskConfig {
                    id: "root".into(),
                    path: "/img/desktop.ext4".into(),
                    read_only: false,
                    overlay: Some("/ws/disk/vm/overlay.img".into()),
                },
                DiskConfig {
                    id: "scratch".into(),
                    path: "/ws/scratch.img".into(),
                    read_only: false,
                    overlay: None,
                },
            ],
            vsock: Some(VsockConfig {
                guest_cid: 3,
                uds_path: "/ws/chan/guest.sock".into(),
            }),
            serial_log: Some("/ws/vm/serial.log".into()),
        }
    }

    #[test]
    fn plan_binds_only_what_the_config_names_and_rewrites_its_paths() {
        let api = PathBuf::from("/ws/vm/vmm.sock");
        let (binds, inside, api) = plan(&config(), Some(&api), Path::new("/dev/kvm")).unwrap();
        let table: Vec<(&str, &str, Kind, bool)> = binds
            .iter()
            .map(|b| {
                (
                    b.source.to_str().unwrap(),
                    b.target.to_str().unwrap(),
                    b.kind,
                    b.writable,
                )
            })
            .collect();
        assert_eq!(
            table,
            [
                (
                    "/var/lib/cubicle/kernel/vmlinux",
                    "/kernel",
                    Kind::File,
                    false
                ),
                ("/img/desktop.ext4", "/disks/0", Kind::File, false),
                (
                    "/ws/disk/vm/overlay.img",
                    "/disks/0.overlay",
                    Kind::File,
                    true
                ),
                ("/ws/scratch.img", "/disks/1", Kind::File, true),
                ("/ws/chan", "/vsock", Kind::Dir, true),
                ("/ws/vm", "/serial", Kind::Dir, true),
                ("/ws/vm", "/api", Kind::Dir, true),
                ("/dev/kvm", "/dev/kvm", Kind::CharDevice, true),
            ]
        );
        assert_eq!(inside.kernel, Path::new("/kernel"));
        assert_eq!(inside.disks[0].path, Path::new("/disks/0"));
        assert_eq!(
            inside.disks[0].overlay.as_deref(),
            Some(Path::new("/disks/0.overlay"))
        );
        // Port P's socket is `<uds>_P` on both sides of the bind.
        assert_eq!(
            inside.vsock.unwrap().uds_path,
            Path::new("/vsock/guest.sock")
        );
        assert_eq!(inside.serial_log.unwrap(), Path::new("/serial/serial.log"));
        assert_eq!(api.unwrap(), Path::new("/api/vmm.sock"));
        assert_eq!(inside.cmdline, "console=ttyS0");
    }

    #[test]
    fn relative_socket_paths_are_refused() {
        let mut bad = config();
        bad.vsock = Some(VsockConfig {
            guest_cid: 3,
            uds_path: "guest.sock".into(),
        });
        let err = plan(&bad, None, Path::new("/dev/kvm"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("vsock socket guest.sock"), "{err}");
    }
}
