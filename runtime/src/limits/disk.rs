//! The workspace's disk: a sparse ext4 image `<dir>/disk.img` of the
//! workspace's disk limit, mounted by the daemon on a loop device at
//! `<dir>/disk` (nosuid, nodev) while the workspace runs. Its `home` and
//! `tmp` folders are the workspace's `/home/user` and `/tmp`, so filling
//! them stops at the limit with ENOSPC inside, and the host's filesystem
//! gives up at most the image's size.
//!
//! Why an image and not project quotas: the data filesystem here is ext4
//! without the `quota`/`project` feature, and turning that on needs an
//! unmounted filesystem. The image persists across stop and start (the home
//! survives) and goes with the workspace's directory on delete.
//!
//! One filesystem on the image at a time. A stopped jail's mount namespace
//! (its binds of `home`, `tmp`, `browser`) can outlive its last process for
//! a while (the kernel frees it after the exit, later under load), and with
//! it the image's filesystem and loop device. So a stop flushes the
//! filesystem to the image before it unmounts, and a start never sets up a
//! second loop device while the first still holds the image: it waits for
//! it to go, or mounts that device (sharing the live filesystem).

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const IMAGE: &str = "disk.img";
const MOUNT: &str = "disk";
/// Mount options of every workspace disk.
const OPTIONS: &str = "nosuid,nodev,noatime";
/// How long a start waits for the filesystem of the last run to go away.
const RELEASE_WAIT: Duration = Duration::from_secs(10);
const RELEASE_POLL: Duration = Duration::from_millis(50);

/// What can go wrong with a workspace's disk.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("workspace disk {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {output}")]
    Tool { command: String, output: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DiskError + '_ {
    move |source| DiskError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One workspace's disk image and its mount point.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceDisk {
    image: PathBuf,
    mount: PathBuf,
    /// The home of a workspace made before disks existed.
    legacy_home: PathBuf,
}

impl WorkspaceDisk {
    /// The disk of the workspace whose directory is `dir`.
    pub fn of(dir: &Path) -> Self {
        Self {
            image: dir.join(IMAGE),
            mount: dir.join(MOUNT),
            legacy_home: dir.join("home"),
        }
    }

    /// The host folder that is the workspace's `/home/user`.
    pub fn home(&self) -> PathBuf {
        self.mount.join("home")
    }

    /// The host folder that is the workspace's `/tmp`.
    pub fn tmp(&self) -> PathBuf {
        self.mount.join("tmp")
    }

    /// The host folder of the workspace's browser (its profile), the
    /// services uid's alone.
    pub fn browser(&self) -> PathBuf {
        self.mount.join("browser")
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount
    }

    /// Makes the image if there is none (sparse, `bytes` long, ext4), mounts
    /// it, and lays it out: `home` of `user_uid` (0750: its group is the
    /// user's, which the services also hold, so the browser can upload the
    /// user's files; nobody else's), `browser` of
    /// `services_uid` (0700), and `tmp` shared by both like any `/tmp`
    /// (root's, 1777: neither uid can rename the other's entries away). A
    /// home from before disks existed is moved onto the new disk.
    pub fn ensure_mounted(
        &self,
        bytes: u64,
        user_uid: u32,
        services_uid: u32,
    ) -> Result<(), DiskError> {
        self.ensure_mounted_empty(bytes)?;
        for (dir, owner, mode) in [
            (self.home(), user_uid, 0o750),
            (self.browser(), services_uid, 0o700),
            (self.tmp(), 0, 0o1777),
        ] {
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            chown(&dir, Some(owner), Some(owner)).map_err(io_err(&dir))?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
                .map_err(io_err(&dir))?;
        }
        self.migrate_legacy_home()
    }

    /// Makes the image if there is none (sparse, `bytes` long, ext4) and
    /// mounts it, its root folder root's and 0711 (traversable: what is
    /// below is each user's own). Nothing is laid out: the microVM keeps
    /// only its overlay there.
    pub fn ensure_mounted_empty(&self, bytes: u64) -> Result<(), DiskError> {
        if !self.image.exists() {
            self.make_image(bytes)?;
        }
        std::fs::create_dir_all(&self.mount).map_err(io_err(&self.mount))?;
        if !self.is_mounted() {
            self.mount_image(RELEASE_WAIT)?;
        }
        std::fs::set_permissions(&self.mount, std::fs::Permissions::from_mode(0o711))
            .map_err(io_err(&self.mount))
    }

    /// Before a start (nothing of the workspace runs): `/tmp/.X11-unix`
    /// made afresh as `uid`'s (the X server's), 0755, so no user process
    /// can have put a socket of its own where the desktop's X clients and
    /// the browser look for the display; and a stale X lock removed.
    pub fn reset_x11_dir(&self, uid: u32) -> Result<(), DiskError> {
        let tmp = self.tmp();
        let lock = tmp.join(".X0-lock");
        match std::fs::symlink_metadata(&lock) {
            Ok(_) => std::fs::remove_file(&lock).map_err(io_err(&lock))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(io_err(&lock)(err)),
        }
        let dir = tmp.join(".X11-unix");
        match std::fs::symlink_metadata(&dir) {
            // remove_dir_all does not follow a symlink; it removes it.
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?,
            Ok(_) => std::fs::remove_file(&dir).map_err(io_err(&dir))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(io_err(&dir)(err)),
        }
        std::fs::create_dir(&dir).map_err(io_err(&dir))?;
        std::os::unix::fs::lchown(&dir, Some(uid), Some(uid)).map_err(io_err(&dir))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(io_err(&dir))
    }

    fn make_image(&self, bytes: u64) -> Result<(), DiskError> {
        let partial = self.image.with_extension("img.partial");
        let file = std::fs::File::create(&partial).map_err(io_err(&partial))?;
        file.set_len(bytes).map_err(io_err(&partial))?;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(&partial))?;
        drop(file);
        // No reserved blocks (the workspace gets all of its limit); lazy
        // init and no discard keep creation quick and the image sparse.
        run(Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-m",
                "0",
                "-L",
                "cubicle-ws",
                "-E",
                "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
            ])
            .arg(&partial))?;
        std::fs::rename(&partial, &self.image).map_err(io_err(&self.image))
    }

    /// Copies a pre-disk `<dir>/home` onto the disk, then removes it.
    fn migrate_legacy_home(&self) -> Result<(), DiskError> {
        if !self.legacy_home.is_dir() {
            return Ok(());
        }
        tracing::info!(home = %self.legacy_home.display(), "moving a workspace home onto its disk");
        let mut source = self.legacy_home.clone().into_os_string();
        source.push("/.");
        run(Command::new("cp").arg("-a").arg(source).arg(self.home()))?;
        std::fs::remove_dir_all(&self.legacy_home).map_err(io_err(&self.legacy_home))
    }

    /// Whether the disk is mounted at its mount point now.
    pub fn is_mounted(&self) -> bool {
        let Ok(point) = self.mount.canonicalize() else {
            return false;
        };
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        mount_points(&mountinfo).any(|p| p == point)
    }

    /// Mounts the image at the mount point. If a loop device still holds
    /// the image (the filesystem of the last run, not freed yet), waits up
    /// to `wait` for it to go; if it stays, mounts that device, so the live
    /// filesystem is shared: a second loop device would be a second
    /// filesystem on the same blocks, reading what the first has not
    /// written yet and later overwriting what this one wrote.
    fn mount_image(&self, wait: Duration) -> Result<(), DiskError> {
        let mut mount = Command::new("mount");
        mount.args(["-t", "ext4"]);
        match self.wait_released(wait) {
            None => mount
                .args(["-o", &format!("loop,{OPTIONS}")])
                .arg(&self.image),
            Some(device) => {
                tracing::warn!(
                    image = %self.image.display(),
                    device = %device.display(),
                    "the workspace disk's last filesystem is still alive; mounting its loop device again"
                );
                mount.args(["-o", OPTIONS]).arg(device)
            }
        };
        run(mount.arg(&self.mount))
    }

    /// Waits up to `limit` until no loop device holds the image; the one
    /// that still does after that, if any.
    fn wait_released(&self, limit: Duration) -> Option<PathBuf> {
        let deadline = Instant::now() + limit;
        loop {
            let device = self.loop_device()?;
            if Instant::now() >= deadline {
                return Some(device);
            }
            std::thread::sleep(RELEASE_POLL);
        }
    }

    /// The loop device backed by the image, if one is.
    fn loop_device(&self) -> Option<PathBuf> {
        let image = self.image.canonicalize().ok()?;
        let devices = std::fs::read_dir("/sys/block").ok()?;
        devices.filter_map(Result::ok).find_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with("loop") {
                return None;
            }
            let backing = std::fs::read_to_string(entry.path().join("loop/backing_file")).ok()?;
            (Path::new(backing.trim_end()) == image).then(|| Path::new("/dev").join(name))
        })
    }

    /// Writes everything of the mounted filesystem to the image: what the
    /// workspace wrote last may still be only in memory, and the filesystem
    /// can outlive this mount (see the module docs).
    fn flush(&self) -> Result<(), DiskError> {
        use std::os::fd::AsRawFd;
        let dir = std::fs::File::open(&self.mount).map_err(io_err(&self.mount))?;
        // SAFETY: syncfs takes a descriptor, which `dir` keeps open for the
        // whole call.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(io_err(&self.mount)(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Flushes the disk to its image and unmounts it (lazily if something
    /// still holds it); the image stays. Nothing to do when it is not
    /// mounted.
    pub fn unmount(&self) -> Result<(), DiskError> {
        if !self.is_mounted() {
            return Ok(());
        }
        self.flush()?;
        if run(Command::new("umount").arg(&self.mount)).is_err() {
            tracing::warn!(mount = %self.mount.display(), "disk busy; unmounting lazily");
            run(Command::new("umount").arg("-l").arg(&self.mount))?;
        }
        Ok(())
    }

    /// Bytes used on the disk, while it is mounted.
    pub fn used_bytes(&self) -> Option<u64> {
        if !self.is_mounted() {
            return None;
        }
        let stat = statvfs(&self.mount)?;
        let used = stat.blocks.checked_sub(stat.free)?;
        used.checked_mul(stat.fragment)
    }
}

/// Block counts of a filesystem, as `statvfs(3)` gives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsSpace {
    pub fragment: u64,
    pub blocks: u64,
    pub free: u64,
    pub available: u64,
}

/// `statvfs(3)` of `path`.
pub fn statvfs(path: &Path) -> Option<FsSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stat` a valid, writable
    // statvfs that outlives the call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(FsSpace {
        fragment: stat.f_frsize,
        blocks: stat.f_blocks,
        free: stat.f_bfree,
        available: stat.f_bavail,
    })
}

/// The mount points listed in a `/proc/self/mountinfo`.
fn mount_points(mountinfo: &str) -> impl Iterator<Item = PathBuf> + '_ {
    mountinfo.lines().filter_map(|line| {
        let point = line.split(' ').nth(4)?;
        Some(PathBuf::from(point.replace("\\040", " ")))
    })
}

fn run(command: &mut Command) -> Result<(), DiskError> {
    let described = format!("{command:?}");
    let output = command
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|e| DiskError::Tool {
            command: described.clone(),
            output: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if text.is_empty() {
        text = output.status.to_string();
    }
    Err(DiskError::Tool {
        command: described,
        output: text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_inside_the_workspace_dir() {
        let disk = WorkspaceDisk::of(Path::new("/data/workspaces/ws-1"));
        assert_eq!(disk.home(), Path::new("/data/workspaces/ws-1/disk/home"));
        assert_eq!(disk.tmp(), Path::new("/data/workspaces/ws-1/disk/tmp"));
        assert_eq!(disk.image, Path::new("/data/workspaces/ws-1/disk.img"));
    }

    #[test]
    fn finds_mount_points() {
        let info = "36 25 0:31 / /sys rw - sysfs sysfs rw\n50 36 7:0 / /data/a\\040b/disk rw - ext4 /dev/loop0 rw\n";
        let points: Vec<PathBuf> = mount_points(info).collect();
        assert_eq!(points[1], Path::new("/data/a b/disk"));
    }

    /// On the real host (root only): writing past the disk's size fails
    /// with ENOSPC, the image stays sparse-ish, and the home survives an
    /// unmount and a mount again.
    #[test]
    fn a_full_disk_says_enospc_and_keeps_its_files() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to mount");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let disk = WorkspaceDisk::of(dir.path());
        std::fs::create_dir(&disk.legacy_home).unwrap();
        std::fs::write(disk.legacy_home.join("old.txt"), "from before").unwrap();
        disk.ensure_mounted(64 << 20, 65534, 65533).unwrap();
        assert!(disk.is_mounted());
        assert!(
            !disk.legacy_home.exists(),
            "the old home moved onto the disk"
        );
        let kept = disk.home().join("old.txt");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "from before");
        let chunk = vec![7u8; 1 << 20];
        let mut file = std::fs::File::create(disk.tmp().join("fill")).unwrap();
        let err = (0..100)
            .find_map(|_| std::io::Write::write_all(&mut file, &chunk).err())
            .expect("100 MiB cannot fit on a 64 MiB disk");
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        drop(file);
        assert!(disk.used_bytes().unwrap() > 32 << 20);
        disk.unmount().unwrap();
        assert!(!disk.is_mounted());
        disk.ensure_mounted(64 << 20, 65534, 65533).unwrap();
        assert!(kept.exists());
        let owner_mode = |path: PathBuf| {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path).unwrap();
            (meta.uid(), meta.mode() & 0o7777)
        };
        assert_eq!(owner_mode(disk.home()), (65534, 0o750));
        assert_eq!(owner_mode(disk.browser()), (65533, 0o700));
        assert_eq!(owner_mode(disk.tmp()), (0, 0o1777));
        std::os::unix::fs::symlink("/etc", disk.tmp().join(".X11-unix")).unwrap();
        std::fs::write(disk.tmp().join(".X0-lock"), "1").unwrap();
        disk.reset_x11_dir(65533).unwrap();
        assert_eq!(owner_mode(disk.tmp().join(".X11-unix")), (65533, 0o755));
        assert!(!disk.tmp().join(".X0-lock").exists());
        assert_eq!(
            owner_mode(PathBuf::from("/etc")).0,
            0,
            "the symlink was not followed"
        );
        disk.unmount().unwrap();
    }

    /// On the real host (root only): a filesystem that outlives its
    /// unmount (as a stopped jail's mount namespace can keep it) is flushed
    /// to the image first, and the next mount shares it instead of putting
    /// a second filesystem on the same image.
    #[test]
    fn a_disk_still_held_elsewhere_is_flushed_and_shared_not_mounted_twice() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to mount");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let disk = WorkspaceDisk::of(dir.path());
        disk.ensure_mounted(64 << 20, 65534, 65533).unwrap();
        // What holds it on: a bind of the home elsewhere, as a jail has.
        let held = dir.path().join("held");
        std::fs::create_dir(&held).unwrap();
        run(Command::new("mount")
            .arg("--bind")
            .arg(disk.home())
            .arg(&held))
        .unwrap();
        std::fs::write(held.join("last.txt"), "written just before the stop").unwrap();
        disk.unmount().unwrap();
        assert!(!disk.is_mounted());
        let device = disk
            .loop_device()
            .expect("the held filesystem keeps its loop device");
        // Flushed: the image itself has the file, whatever reads it next.
        let dump = Command::new("debugfs")
            .args(["-R", "cat /home/last.txt"])
            .arg(&disk.image)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&dump.stdout),
            "written just before the stop"
        );
        disk.mount_image(Duration::ZERO).unwrap();
        assert!(disk.is_mounted());
        assert_eq!(
            disk.loop_device(),
            Some(device),
            "one loop device for the image"
        );
        let devices = std::fs::read_dir("/sys/block")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                std::fs::read_to_string(e.path().join("loop/backing_file"))
                    .is_ok_and(|b| Path::new(b.trim_end()) == disk.image.canonicalize().unwrap())
            })
            .count();
        assert_eq!(devices, 1, "a second filesystem on the same image");
        assert_eq!(
            std::fs::read_to_string(disk.home().join("last.txt")).unwrap(),
            "written just before the stop"
        );
        run(Command::new("umount").arg(&held)).unwrap();
        disk.unmount().unwrap();
        // Released now: the next mount waits for nothing.
        assert!(disk.wait_released(Duration::from_secs(10)).is_none());
    }

    #[test]
    fn statvfs_of_root_has_blocks() {
        let space = statvfs(Path::new("/")).unwrap();
        assert!(space.blocks > 0 && space.fragment > 0);
        assert!(statvfs(Path::new("/no/such/path")).is_none());
    }
}
