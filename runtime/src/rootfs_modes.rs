//! The built image's root filesystem as host users see it: root-owned, with
//! no group- or world-writable entry and no set-user/group-id file.
//!
//! Why: the jail bind-mounts the rootfs read-only, so every workspace uid
//! must be able to traverse the image cache down to it, and so can every
//! other host user. The image itself holds `tmp/` and `var/tmp/` (mode
//! 1777), group-writable directories of groups that exist on the host too
//! (`var/mail`, `var/local`), files owned by service uids (and `home/user`
//! by uid 1000), and set-uid programs. Left as built, any host user could
//! write into the image every workspace runs (or run its set-uid
//! programs). Inside the jail none of it matters (the root is read-only,
//! other uids are unmapped and `no_new_privs` is set), so the host copy is
//! [`harden`]ed: each such entry becomes root's, without those bits, and
//! what it was is recorded in the image folder. The microVM boots the image
//! as its own root, where those owners and modes matter, so
//! [`restore_commands`] turns the record into `debugfs` commands that put
//! them back in the ext4 form.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// In the image folder once its rootfs is hardened: one line per changed
/// entry, `<uid> <gid> <octal st_mode> <path>` (path absolute in the image).
pub const RECORD: &str = "host-modes-v1";

/// Group/other write and set-uid/set-gid on files.
const WRITE_BITS: u32 = 0o022;
const SETID_BITS: u32 = 0o6000;

/// What can go wrong hardening a rootfs.
#[derive(Debug, thiserror::Error)]
pub enum RootfsModesError {
    #[error("cannot harden the image's rootfs at {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RootfsModesError + '_ {
    move |source| RootfsModesError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Hardens `<image_dir>/rootfs` once (the record says it was done); needs
/// root to change owners. Symlinks are left alone (their modes are unused).
pub fn harden(image_dir: &Path) -> Result<(), RootfsModesError> {
    let record = image_dir.join(RECORD);
    if record.exists() {
        return Ok(());
    }
    let rootfs = image_dir.join("rootfs");
    let mut lines = String::new();
    walk(&rootfs, &rootfs, &mut lines)?;
    let partial = image_dir.join(format!(".{RECORD}.partial"));
    std::fs::write(&partial, lines).map_err(io_err(&partial))?;
    std::fs::rename(&partial, &record).map_err(io_err(&record))
}

/// The mode an entry keeps on the host, if it must change.
fn host_mode(meta: &Metadata) -> Option<u32> {
    let perms = meta.mode() & 0o7777;
    let mut safe = perms & !WRITE_BITS;
    if meta.is_file() {
        safe &= !SETID_BITS;
    }
    let owned = meta.uid() == 0 && meta.gid() == 0;
    (safe != perms || !owned).then_some(safe)
}

fn walk(root: &Path, dir: &Path, lines: &mut String) -> Result<(), RootfsModesError> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(io_err(&path))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        if let Some(mode) = host_mode(&meta) {
            // Owner first: chown clears set-id bits, and the new mode is set last.
            std::os::unix::fs::lchown(&path, Some(0), Some(0)).map_err(io_err(&path))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(io_err(&path))?;
            let inside = Path::new("/").join(path.strip_prefix(root).unwrap_or(&path));
            lines.push_str(&format!(
                "{} {} {:o} {}\n",
                meta.uid(),
                meta.gid(),
                meta.mode(),
                inside.display()
            ));
        }
        if meta.is_dir() {
            walk(root, &path, lines)?;
        }
    }
    Ok(())
}

/// `debugfs -w` commands that give the ext4 form back the owners and modes
/// the record says the image was built with. A path `debugfs` cannot take
/// (whitespace, quotes, not UTF-8) is skipped: it keeps the host's safe mode.
pub fn restore_commands(image_dir: &Path) -> String {
    let Ok(record) = std::fs::read(image_dir.join(RECORD)) else {
        return String::new();
    };
    let mut commands = String::new();
    for line in record.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let mut fields = line.splitn(4, ' ');
        let (Some(uid), Some(gid), Some(mode), Some(path)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let numeric = [uid, gid].iter().all(|n| n.parse::<u32>().is_ok())
            && u32::from_str_radix(mode, 8).is_ok();
        let plain = Path::new(path)
            .as_os_str()
            .as_bytes()
            .iter()
            .all(|&b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if numeric && plain && path.starts_with('/') {
            commands.push_str(&format!(
                "sif {path} uid {uid}\nsif {path} gid {gid}\nsif {path} mode 0{mode}\n"
            ));
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn writable_setid_and_foreign_entries_become_roots_and_are_recorded() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return cubicle_skip::skip("needs root to chown");
        }
        let image = tempfile::tempdir().unwrap();
        let rootfs = image.path().join("rootfs");
        let set = |rel: &str, mode: u32| {
            std::fs::set_permissions(rootfs.join(rel), std::fs::Permissions::from_mode(mode))
                .unwrap();
        };
        for dir in ["tmp", "var/tmp", "var/mail", "home/user", "usr/bin"] {
            std::fs::create_dir_all(rootfs.join(dir)).unwrap();
        }
        std::fs::write(rootfs.join("usr/bin/su"), "x").unwrap();
        std::fs::write(rootfs.join("usr/bin/ls"), "x").unwrap();
        std::os::unix::fs::symlink("/tmp", rootfs.join("link")).unwrap();
        set("tmp", 0o1777);
        set("var/tmp", 0o1777);
        set("var/mail", 0o2775);
        set("usr/bin/su", 0o4755);
        set("usr/bin/ls", 0o755);
        std::os::unix::fs::chown(rootfs.join("home/user"), Some(1000), Some(1000)).unwrap();

        harden(image.path()).unwrap();
        assert_eq!(mode_of(&rootfs.join("tmp")), 0o1755);
        assert_eq!(mode_of(&rootfs.join("var/tmp")), 0o1755);
        assert_eq!(mode_of(&rootfs.join("var/mail")), 0o2755);
        assert_eq!(mode_of(&rootfs.join("usr/bin/su")), 0o755);
        assert_eq!(mode_of(&rootfs.join("usr/bin/ls")), 0o755);
        assert_eq!(
            std::fs::metadata(rootfs.join("home/user")).unwrap().uid(),
            0
        );

        let commands = restore_commands(image.path());
        for needle in [
            "sif /tmp mode 041777\n",
            "sif /var/tmp mode 041777\n",
            "sif /usr/bin/su mode 0104755\n",
            "sif /home/user uid 1000\n",
            "sif /home/user gid 1000\n",
        ] {
            assert!(
                commands.contains(needle),
                "missing {needle:?} in {commands}"
            );
        }
        assert!(!commands.contains("/usr/bin/ls"), "{commands}");
        assert!(!commands.contains("/link"), "{commands}");

        // Done once: a second call changes nothing, even by hand-made bits.
        set("tmp", 0o1777);
        harden(image.path()).unwrap();
        assert_eq!(mode_of(&rootfs.join("tmp")), 0o1777);
    }

    #[test]
    fn a_record_line_debugfs_cannot_take_is_skipped() {
        let image = tempfile::tempdir().unwrap();
        std::fs::write(
            image.path().join(RECORD),
            "0 0 41777 /tmp\n0 0 40777 /a b\n0 0 40777 /q\"x\nbad line\n0 0 zz /x\n",
        )
        .unwrap();
        assert_eq!(
            restore_commands(image.path()),
            "sif /tmp uid 0\nsif /tmp gid 0\nsif /tmp mode 041777\n"
        );
    }
}
