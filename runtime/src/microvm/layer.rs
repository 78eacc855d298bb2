//! A microVM workspace on disk, under its directory `<dir>` (root-owned,
//! mode 0711, as in the jail):
//!
//! | path | owner | what |
//! | --- | --- | --- |
//! | `vm-base` | root | the desktop ext4 the overlay was made over |
//! | `vmm.log` | root | the VMM's stdout and stderr |
//! | `disk.img`, `disk/` | root | the workspace's size-capped ext4 ([`WorkspaceDisk`]), mounted while it runs |
//! | `disk/overlay.img` | ws uid | copy-on-write overlay (sparse, base-sized): the workspace's writes |
//! | `vm/serial.log` | ws uid | the guest console (COM1) |
//! | `vm/vmm.sock` | ws uid | the VMM's API socket |
//! | `vm/host.ext4` | ws uid, 0400 | the host disk (`super::host_disk`), made at every start (a restore: the snapshot's) |
//! | `vm-snap/` | ws uid, 0700 | where the VMM writes a snapshot (its `/snapshots`); the daemon copies each file out and removes it |
//! | `chan/` | root, group ws, 1770 | the sockets of the guest channel |
//! | `chan/guest.sock` | ws uid | the VMM's hybrid vsock socket = the guest channel |
//! | `chan/guest.sock_<P>` | root | the daemon's listener for guest connections to host port P |
//! | `vmm-root/` | root, empty | where the VMM mounts its own root ([`cubicle_vmm::jail`]) |
//!
//! The overlay lives on the workspace's disk, an ext4 image of the disk
//! limit: a guest that fills its root gets I/O errors from its virtio-blk
//! device when that filesystem is full, and the host's filesystem gives up
//! at most the image's size. The VMM sees the overlay, the base, the
//! kernel, `chan/` and `vm/` in its own root, nothing else of the host.
//!
//! `chan/` is shared by the VMM, which makes `guest.sock` there, and the
//! daemon, which makes `guest.sock_<P>` for the VMM to connect to. So it is
//! root's with the sticky bit, writable by the workspace's group: the VMM
//! can make and remove its own entries but can neither remove, rename nor
//! replace the daemon's, and nothing of the workspace can replace `chan/`
//! itself (its parent is root's). The host connects to `guest.sock`
//! without following a symlink and only if its listener is the VMM (see
//! [`crate::channel`]).
//!
//! An overlay only makes sense over the base it was made on, so a workspace
//! keeps booting the base named in `vm-base` even after the image is
//! rebuilt; new workspaces get the current one.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt, chown};
use std::path::{Path, PathBuf};

use crate::backend::{BackendError, WorkspaceSpec};
use crate::limits::disk::WorkspaceDisk;

const LOG_TAIL_BYTES: u64 = 1024;
/// `chan/`: sticky, group-writable (see the module docs).
const CHAN_MODE: u32 = 0o1770;

/// The files of one microVM workspace.
#[derive(Debug, Clone)]
pub struct Layer {
    dir: PathBuf,
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |source| BackendError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Layer {
    pub fn of(spec: &WorkspaceSpec) -> Self {
        Self {
            dir: spec.dir.clone(),
        }
    }

    pub fn vm_dir(&self) -> PathBuf {
        self.dir.join("vm")
    }
    /// The workspace's size-capped disk, which holds the overlay.
    pub fn disk(&self) -> WorkspaceDisk {
        WorkspaceDisk::of(&self.dir)
    }
    pub fn overlay(&self) -> PathBuf {
        self.disk().mount_point().join("overlay.img")
    }
    /// Where the overlay was before it moved onto the disk.
    fn legacy_overlay(&self) -> PathBuf {
        self.vm_dir().join("overlay.img")
    }
    pub fn serial_log(&self) -> PathBuf {
        self.vm_dir().join("serial.log")
    }
    pub fn api_socket(&self) -> PathBuf {
        self.vm_dir().join("vmm.sock")
    }
    /// The VMM's hybrid vsock socket: the guest channel.
    pub fn vsock_socket(&self) -> PathBuf {
        self.dir.join("chan").join("guest.sock")
    }
    /// The read-only host disk (`super::host_disk`), made at every start.
    pub fn host_disk(&self) -> PathBuf {
        self.vm_dir().join("host.ext4")
    }
    /// The host path of the socket the VMM connects to when the guest
    /// connects to host port `port`: `<vsock socket>_<port>`, as
    /// Firecracker's hybrid vsock names it. The VMM sees `chan/` as its
    /// `/vsock/`, so this is the same socket on both sides of its root.
    /// The daemon binds it (it is root's, in the sticky `chan/`).
    pub fn vsock_port_socket(&self, port: u32) -> PathBuf {
        let mut name = self.vsock_socket().into_os_string();
        name.push(format!("_{port}"));
        PathBuf::from(name)
    }
    /// The empty directory the VMM mounts its own root on.
    pub fn vmm_root(&self) -> PathBuf {
        self.dir.join("vmm-root")
    }
    pub fn vmm_log(&self) -> PathBuf {
        self.dir.join("vmm.log")
    }
    fn base_record(&self) -> PathBuf {
        self.dir.join("vm-base")
    }
    /// Where the VMM writes a snapshot (seen inside its root as
    /// `/snapshots`).
    pub fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("vm-snap")
    }

    /// The base this workspace's overlay was made over.
    pub fn base(&self) -> Result<PathBuf, BackendError> {
        let record = self.base_record();
        let text = std::fs::read_to_string(&record).map_err(io_err(&record))?;
        Ok(PathBuf::from(text.trim_end()))
    }

    /// Makes memory snapshot `image`'s disks this workspace's: its overlay
    /// (over the base it was made on) and its host disk, each copied beside
    /// and checked against the digest it was taken with before it replaces
    /// what was there. The disk must be mounted. Nothing is replaced when a
    /// copy fails (a full disk, a changed file).
    pub fn put_snapshot_disks(
        &self,
        uid: u32,
        image: &crate::snapshots::MemoryImage,
    ) -> Result<(), BackendError> {
        let base = Path::new(&image.parts.base_image);
        owned_dir(&self.vm_dir(), uid)?;
        let overlay = copy_beside(&image.disk, &self.overlay(), uid, 0o600)?;
        let host = copy_beside(&image.host_disk, &self.host_disk(), uid, 0o400)?;
        for (copy, expected, what) in [
            (&overlay, &image.parts.disk_sha256, "disk"),
            (&host, &image.parts.host_disk_sha256, "host disk"),
        ] {
            if copy.digest != *expected {
                return Err(BackendError::Spawn(format!(
                    "snapshot {}'s {what} file {} is not the one it was taken as (SHA-256 {}, taken as {expected}): refused; remove the snapshot",
                    image.id,
                    copy.from.display(),
                    copy.digest
                )));
            }
        }
        overlay.replace()?;
        host.replace()?;
        self.write_base_record(base)
    }

    /// Records `base` as what the overlay was made over (written beside,
    /// renamed into place).
    fn write_base_record(&self, base: &Path) -> Result<(), BackendError> {
        let partial = self.dir.join(".vm-base.partial");
        std::fs::write(&partial, base.as_os_str().as_encoded_bytes()).map_err(io_err(&partial))?;
        let record = self.base_record();
        std::fs::rename(&partial, &record).map_err(io_err(&record))
    }

    /// The workspace directory itself: root-owned, traversable by its uid.
    pub fn create_dir(&self) -> Result<(), BackendError> {
        std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o711))
            .map_err(io_err(&self.dir))
    }

    /// The base this workspace boots, making its overlay over `current` if
    /// it has none yet. The disk must be mounted: the overlay is on it.
    pub fn ensure_overlay(&self, uid: u32, current: &Path) -> Result<PathBuf, BackendError> {
        let overlay = self.overlay();
        let record = self.base_record();
        if let Ok(text) = std::fs::read_to_string(&record) {
            let base = PathBuf::from(text.trim_end());
            if !base.is_file() {
                return Err(BackendError::Spawn(format!(
                    "the desktop image {} this workspace's disk was made over is gone; its writes cannot be read without it: delete the workspace and create a new one",
                    base.display()
                )));
            }
            self.migrate_overlay()?;
            check_owned_file(&overlay, uid)?;
            return Ok(base);
        }
        let size = std::fs::metadata(current).map_err(io_err(current))?.len();
        let file = std::fs::File::create(&overlay).map_err(io_err(&overlay))?;
        file.set_len(size).map_err(io_err(&overlay))?;
        chown(&overlay, Some(uid), Some(uid)).map_err(io_err(&overlay))?;
        std::fs::set_permissions(&overlay, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(&overlay))?;
        // Written last: a record means the overlay is complete.
        self.write_base_record(current)?;
        Ok(current.to_owned())
    }

    /// Moves an overlay from before the disk existed onto the disk (sparse),
    /// once.
    fn migrate_overlay(&self) -> Result<(), BackendError> {
        let legacy = self.legacy_overlay();
        let Ok(meta) = std::fs::symlink_metadata(&legacy) else {
            return Ok(());
        };
        if !meta.is_file() {
            return Err(BackendError::Spawn(format!(
                "{} is not a regular file; remove it",
                legacy.display()
            )));
        }
        tracing::info!(overlay = %legacy.display(), "moving a microVM overlay onto its workspace disk");
        let copied = std::process::Command::new("cp")
            .args(["--sparse=always", "--preserve=mode,ownership", "--"])
            .arg(&legacy)
            .arg(self.overlay())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .map_err(io_err(&legacy))?;
        if !copied.status.success() {
            let _ = std::fs::remove_file(self.overlay());
            return Err(BackendError::Spawn(format!(
                "cannot move the overlay {} onto the workspace disk ({}): raise the workspace's disk limit: {}",
                legacy.display(),
                self.disk().mount_point().display(),
                String::from_utf8_lossy(&copied.stderr).trim()
            )));
        }
        std::fs::remove_file(&legacy).map_err(io_err(&legacy))
    }

    /// Directories the VMM writes into or is rooted on, and no stale
    /// sockets (the VMM refuses a vsock or API socket path that exists).
    pub fn prepare_run(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        owned_dir(&self.vm_dir(), spec.host_uid)?;
        owned_dir(&self.snapshot_dir(), spec.host_uid)?;
        let chan = self.vsock_socket();
        let chan_dir = chan.parent().expect("vsock_socket() is a file in chan/");
        root_dir(chan_dir, spec.host_uid, CHAN_MODE)?;
        root_dir(&self.vmm_root(), 0, 0o755)?;
        for socket in [chan, self.api_socket()] {
            match std::fs::remove_file(&socket) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err(&socket)(err));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Removes sockets of a stopped VM; keeps the overlay and the logs.
    pub fn clean(&self) -> Result<(), BackendError> {
        if let Some(chan) = self.vsock_socket().parent()
            && chan.exists()
        {
            std::fs::remove_dir_all(chan).map_err(io_err(chan))?;
        }
        let _ = std::fs::remove_file(self.api_socket());
        Ok(())
    }

    /// What the guest's console last said (its last 6 lines, control
    /// characters dropped), and how far the boot got by its last 256 KiB
    /// (for a start that ended before the desktop was ready). The console
    /// is the VMM's file (the workspace's uid): opened without following a
    /// symlink, and only if it is a regular file. The guest writes it, so
    /// both are its word, only ever shown, never acted on.
    pub fn console(&self) -> Console {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.serial_log();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path);
        let mut bytes = Vec::new();
        if let Ok(mut file) = file
            && file.metadata().is_ok_and(|m| m.is_file())
        {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = file.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
            let _ = file.read_to_end(&mut bytes);
        }
        let text: String = String::from_utf8_lossy(&bytes)
            .chars()
            .filter(|c| *c == '\n' || !c.is_control())
            .collect();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut tail = lines[lines.len().saturating_sub(6)..].join(" | ");
        if let Some((cut, _)) = tail.char_indices().nth(1500) {
            tail.truncate(cut);
        }
        Console {
            stage: boot_stage(&text),
            tail,
        }
    }

    /// The last lines of the VMM's log, on one line, for an exit message.
    pub fn vmm_log_tail(&self) -> String {
        let Ok(mut file) = std::fs::File::open(self.vmm_log()) else {
            return "(no vmm.log)".into();
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

/// The end of a guest's console, for an exit message.
pub struct Console {
    /// How far the boot got, by what the console said.
    pub stage: &'static str,
    /// Its last lines, on one line.
    pub tail: String,
}

/// How far a boot got, from what its console said (its tail is enough:
/// the kernel's banner and init's line come early, but every later line
/// means they came).
fn boot_stage(console: &str) -> &'static str {
    if console.trim().is_empty() {
        "stage: VMM start (the guest printed nothing)"
    } else if console.contains("cubicle-guest") || console.contains("as init process") {
        "stage: readiness (init ran; the desktop did not come up)"
    } else if console.contains("Kernel panic") {
        "stage: kernel (it panicked before init)"
    } else {
        "stage: kernel (init never ran)"
    }
}

/// A private directory owned by the workspace uid.
fn owned_dir(path: &Path, uid: u32) -> Result<(), BackendError> {
    std::fs::create_dir_all(path).map_err(io_err(path))?;
    chown(path, Some(uid), Some(uid)).map_err(io_err(path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io_err(path))
}

/// `dir` as a directory of root's (group `gid`, `mode`), refusing anything
/// else found there: a symlink, or a directory of another owner that is
/// not an earlier version's `chan/` of the workspace uid `gid`.
fn root_dir(dir: &Path, gid: u32, mode: u32) -> Result<(), BackendError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(io_err(dir)(err));
        }
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // Versions before the jail made `chan/` the workspace uid's own.
    let earlier = gid != 0 && meta.uid() == gid;
    if !meta.is_dir() || !(meta.uid() == me || earlier) {
        return Err(BackendError::Spawn(format!(
            "{} must be a directory owned by uid {me} (the daemon); remove it and start the workspace again",
            dir.display()
        )));
    }
    // lchown: `dir` is a directory, never a link (checked above; its parent
    // is root's, so it cannot have been swapped since).
    std::os::unix::fs::lchown(dir, Some(me), Some(gid)).map_err(io_err(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(io_err(dir))
}

/// A snapshot's file copied beside where it goes, not yet in place.
struct Beside {
    from: PathBuf,
    partial: PathBuf,
    target: PathBuf,
    digest: String,
    kept: bool,
}

impl Beside {
    /// Renames the copy over its target (a link there is replaced, never
    /// followed).
    fn replace(mut self) -> Result<(), BackendError> {
        std::fs::rename(&self.partial, &self.target).map_err(io_err(&self.target))?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Copies `from` (a snapshot's file, the daemon's own) to a new file of
/// `uid` beside `target`, holes kept ([`crate::sparse_copy`]). The copy is
/// made with `O_EXCL` after removing whatever was at its name, so a link
/// the workspace left there is never written through.
fn copy_beside(from: &Path, target: &Path, uid: u32, mode: u32) -> Result<Beside, BackendError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = target.as_os_str().to_owned();
    name.push(".partial");
    let partial = PathBuf::from(name);
    match std::fs::remove_file(&partial) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_err(&partial)(err));
        }
        _ => {}
    }
    let source = std::fs::File::open(from).map_err(io_err(from))?;
    let copy = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&partial)
        .map_err(io_err(&partial))?;
    let mut beside = Beside {
        from: from.to_owned(),
        partial: partial.clone(),
        target: target.to_owned(),
        digest: String::new(),
        kept: false,
    };
    let copied = crate::sparse_copy::copy_extents(&source, &copy).map_err(io_err(&partial))?;
    copy.sync_all().map_err(io_err(&partial))?;
    std::os::unix::fs::fchown(&copy, Some(uid), Some(uid)).map_err(io_err(&partial))?;
    copy.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io_err(&partial))?;
    beside.digest = copied.sha256;
    Ok(beside)
}

/// The overlay must be a regular file of the workspace uid (never a link).
fn check_owned_file(path: &Path, uid: u32) -> Result<(), BackendError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| {
        BackendError::Spawn(format!(
            "the workspace's disk overlay {} is missing ({source}); its writes are lost: delete the workspace and create a new one",
            path.display()
        ))
    })?;
    if !meta.is_file() || meta.uid() != uid {
        return Err(BackendError::Spawn(format!(
            "{} must be a regular file of uid {uid}; remove it to start over from the image",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn spec(dir: &Path) -> WorkspaceSpec {
        WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            // Our own uid: chown to it works without root.
            host_uid: std::fs::metadata(dir).unwrap().uid(),
            dir: dir.join("ws-1"),
            top_pid: None,
            limits: Default::default(),
        }
    }

    /// The disk's mount point as a plain folder (the real one is a loop
    /// mount, made at start; see `runtime/tests/microvm.rs`).
    fn layer_with_disk(spec: &WorkspaceSpec) -> Layer {
        let layer = Layer::of(spec);
        layer.create_dir().unwrap();
        std::fs::create_dir_all(layer.disk().mount_point()).unwrap();
        layer
    }

    #[test]
    fn overlay_is_sparse_base_sized_on_the_disk_and_pinned_to_its_base() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let base = root.path().join("desktop.ext4");
        std::fs::File::create(&base)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let layer = layer_with_disk(&spec);
        assert_eq!(layer.ensure_overlay(spec.host_uid, &base).unwrap(), base);
        assert_eq!(layer.overlay(), spec.dir.join("disk/overlay.img"));
        let meta = std::fs::metadata(layer.overlay()).unwrap();
        assert_eq!(meta.len(), 64 << 20);
        assert_eq!(meta.blocks(), 0, "overlay must start sparse");
        assert_eq!(meta.mode() & 0o777, 0o600);

        // A rebuilt image does not move an existing workspace off its base.
        let newer = root.path().join("newer.ext4");
        std::fs::write(&newer, "x").unwrap();
        assert_eq!(layer.ensure_overlay(spec.host_uid, &newer).unwrap(), base);

        std::fs::remove_file(&base).unwrap();
        let err = layer.ensure_overlay(spec.host_uid, &newer).unwrap_err();
        assert!(err.to_string().contains("delete the workspace"), "{err}");
    }

    #[test]
    fn a_failed_boot_says_how_far_it_got_and_never_follows_a_planted_console() {
        let dir = tempfile::tempdir().unwrap();
        let layer = Layer::of(&spec(dir.path()));
        std::fs::create_dir_all(layer.vm_dir()).unwrap();
        assert!(layer.console().stage.starts_with("stage: VMM start"));
        std::fs::write(
            layer.serial_log(),
            "Linux version 6.1\nKernel panic - not syncing: VFS\n",
        )
        .unwrap();
        let console = layer.console();
        assert!(console.stage.starts_with("stage: kernel (it panicked"));
        assert!(
            console.tail.ends_with("Kernel panic - not syncing: VFS"),
            "{}",
            console.tail
        );
        std::fs::write(
            layer.serial_log(),
            "Run /usr/local/sbin/cubicle-guest as init process\n\x1b[2mxfce4 died\n",
        )
        .unwrap();
        let console = layer.console();
        assert!(console.stage.starts_with("stage: readiness"));
        assert!(
            !console.tail.contains('\x1b'),
            "control characters pass: {}",
            console.tail
        );
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        std::fs::remove_file(layer.serial_log()).unwrap();
        std::os::unix::fs::symlink(&secret, layer.serial_log()).unwrap();
        let console = layer.console();
        assert!(!console.tail.contains("host secret"), "{}", console.tail);
    }

    #[test]
    fn an_overlay_replaced_by_a_symlink_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let base = root.path().join("desktop.ext4");
        std::fs::write(&base, "base").unwrap();
        let layer = layer_with_disk(&spec);
        layer.ensure_overlay(spec.host_uid, &base).unwrap();
        let target = root.path().join("host-secret");
        std::fs::write(&target, "secret").unwrap();
        std::fs::remove_file(layer.overlay()).unwrap();
        std::os::unix::fs::symlink(&target, layer.overlay()).unwrap();
        let err = layer.ensure_overlay(spec.host_uid, &base).unwrap_err();
        assert!(err.to_string().contains("regular file"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret");
    }

    #[test]
    fn an_overlay_from_before_the_disk_moves_onto_it_sparse() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let base = root.path().join("desktop.ext4");
        std::fs::write(&base, "base").unwrap();
        let layer = layer_with_disk(&spec);
        // An earlier version: the record, and the overlay in `vm/`.
        std::fs::write(
            spec.dir.join("vm-base"),
            base.as_os_str().as_encoded_bytes(),
        )
        .unwrap();
        std::fs::create_dir_all(layer.vm_dir()).unwrap();
        let legacy = layer.vm_dir().join("overlay.img");
        let file = std::fs::File::create(&legacy).unwrap();
        file.set_len(8 << 20).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, b"guest wrote this", 4 << 20).unwrap();
        assert_eq!(layer.ensure_overlay(spec.host_uid, &base).unwrap(), base);
        assert!(!legacy.exists());
        let moved = std::fs::read(layer.overlay()).unwrap();
        assert_eq!(&moved[4 << 20..(4 << 20) + 16], b"guest wrote this");
        let meta = std::fs::metadata(layer.overlay()).unwrap();
        assert!(
            meta.blocks() * 512 < 1 << 20,
            "still sparse: {} blocks",
            meta.blocks()
        );
    }

    #[test]
    fn port_sockets_sit_beside_the_vsock_socket() {
        let root = tempfile::tempdir().unwrap();
        let layer = Layer::of(&spec(root.path()));
        assert_eq!(
            layer.vsock_port_socket(3128),
            root.path().join("ws-1/chan/guest.sock_3128")
        );
        // The VMM connects to `<its uds>_<port>`: the same name.
        let mut expected = layer.vsock_socket().into_os_string();
        expected.push("_3128");
        assert_eq!(layer.vsock_port_socket(3128).as_os_str(), expected);
    }

    #[test]
    fn prepare_makes_chan_sticky_and_roots_and_removes_stale_sockets() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let layer = Layer::of(&spec);
        layer.create_dir().unwrap();
        layer.prepare_run(&spec).unwrap();
        let chan = std::fs::metadata(spec.dir.join("chan")).unwrap();
        assert_eq!(chan.mode() & 0o7777, 0o1770);
        assert_eq!(chan.gid(), spec.host_uid);
        let vmm_root = std::fs::symlink_metadata(layer.vmm_root()).unwrap();
        assert!(vmm_root.is_dir());
        assert_eq!(std::fs::read_dir(layer.vmm_root()).unwrap().count(), 0);
        std::fs::write(layer.vsock_socket(), "").unwrap();
        std::fs::write(layer.api_socket(), "").unwrap();
        layer.prepare_run(&spec).unwrap();
        assert!(!layer.vsock_socket().exists());
        assert!(!layer.api_socket().exists());
        layer.clean().unwrap();
        assert!(!spec.dir.join("chan").exists());
    }

    #[test]
    fn a_symlink_in_place_of_chan_or_the_vmm_root_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let layer = Layer::of(&spec);
        layer.create_dir().unwrap();
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, spec.dir.join("chan")).unwrap();
        assert!(layer.prepare_run(&spec).is_err());
        std::fs::remove_file(spec.dir.join("chan")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, layer.vmm_root()).unwrap();
        let err = layer.prepare_run(&spec).unwrap_err();
        assert!(err.to_string().contains("vmm-root"), "{err}");
        let mode = std::fs::metadata(&elsewhere).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o755, "the link's target was left alone");
    }
}
