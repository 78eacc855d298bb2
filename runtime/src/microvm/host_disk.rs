//! The host disk: a small read-only ext4 the microVM sees as `/dev/vdb`,
//! holding what a jail gets as bind mounts from the host. `cubicle-guest`'s
//! init mounts it at `/run/cubicle-host` and uses:
//!
//! - `trust/`: the installation's egress trust files (`crate::egress::trust`:
//!   `ca.pem`, `ca-bundle.crt`, `nssdb/`), shown at `/run/cubicle-trust` and
//!   over the system CA bundle, as in the jail;
//! - `seccomp.bpf`: the jail's seccomp filter for the supervisor and all
//!   it starts (`crate::jail::seccomp::vm_filter_bytes`), and
//!   `user-seccomp.bpf`, what the user's processes get on top of it (no
//!   vsock: `vm_user_filter_bytes`).
//!
//! Made afresh at every start from the host's files, so a guest that wrote
//! to it (it cannot: the VMM opens it read-only) gets the host's back.
//! `mkfs.ext4 -d` builds it from a staging folder without mounting
//! anything.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::backend::BackendError;

use super::layer::io_err;

/// Big enough for the trust files (an NSS database and a CA bundle, well
/// under 1 MiB) and the filter; ext4 needs a few MiB for itself.
const SIZE_BYTES: u64 = 8 << 20;

/// Builds `image` (replacing it) from the trust folder, if any, and the
/// seccomp filter; the VMM's uid `uid` may read it, nobody else.
pub fn build(image: &Path, trust: Option<&Path>, uid: u32) -> Result<(), BackendError> {
    let filter = |made: Result<Vec<u8>, crate::jail::seccomp::SeccompError>| {
        made.map_err(|e| {
            BackendError::Spawn(format!("cannot build the guest's seccomp filter: {e}"))
        })
    };
    let filters = [
        (
            "seccomp.bpf",
            filter(crate::jail::seccomp::vm_filter_bytes())?,
        ),
        (
            "user-seccomp.bpf",
            filter(crate::jail::seccomp::vm_user_filter_bytes())?,
        ),
    ];
    build_with(image, trust, &filters, uid)
}

fn build_with(
    image: &Path,
    trust: Option<&Path>,
    filters: &[(&str, Vec<u8>)],
    uid: u32,
) -> Result<(), BackendError> {
    let stage = image.with_extension("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(io_err(&stage))?;
    }
    std::fs::create_dir(&stage).map_err(io_err(&stage))?;
    let built = fill(&stage, trust, filters).and_then(|()| make_ext4(&stage, image, uid));
    let removed = std::fs::remove_dir_all(&stage).map_err(io_err(&stage));
    built.and(removed)
}

fn fill(
    stage: &Path,
    trust: Option<&Path>,
    filters: &[(&str, Vec<u8>)],
) -> Result<(), BackendError> {
    for (name, bytes) in filters {
        let path = stage.join(name);
        std::fs::write(&path, bytes).map_err(io_err(&path))?;
    }
    if let Some(trust) = trust {
        copy_tree(trust, &stage.join("trust"))?;
    }
    Ok(())
}

/// Copies regular files and folders (the trust folder is the daemon's own;
/// anything else in it, such as a symlink, is left out).
fn copy_tree(from: &Path, to: &Path) -> Result<(), BackendError> {
    std::fs::create_dir(to).map_err(io_err(to))?;
    for entry in std::fs::read_dir(from).map_err(io_err(from))? {
        let entry = entry.map_err(io_err(from))?;
        let kind = entry.file_type().map_err(io_err(&entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(io_err(&target))?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))
                .map_err(io_err(&target))?;
        }
    }
    Ok(())
}

fn make_ext4(stage: &Path, image: &Path, uid: u32) -> Result<(), BackendError> {
    let partial: PathBuf = image.with_extension("partial");
    let file = std::fs::File::create(&partial).map_err(io_err(&partial))?;
    file.set_len(SIZE_BYTES).map_err(io_err(&partial))?;
    drop(file);
    let out = Command::new("mkfs.ext4")
        .args([
            "-q",
            "-F",
            "-L",
            "cubicle-host",
            "-E",
            "root_owner=0:0",
            "-d",
        ])
        .arg(stage)
        .arg(&partial)
        .output()
        .map_err(|err| {
            BackendError::Spawn(format!(
                "cannot run mkfs.ext4 for the host disk: {err} (install e2fsprogs)"
            ))
        })?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(BackendError::Spawn(format!(
            "mkfs.ext4 could not build the host disk {}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::os::unix::fs::chown(&partial, Some(uid), Some(uid)).map_err(io_err(&partial))?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o400))
        .map_err(io_err(&partial))?;
    std::fs::rename(&partial, image).map_err(io_err(image))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_filter_and_the_trust_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let trust = dir.path().join("trust");
        std::fs::create_dir_all(trust.join("nssdb")).unwrap();
        std::fs::write(trust.join("ca.pem"), "PEM").unwrap();
        std::fs::write(trust.join("nssdb/cert9.db"), "db").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", trust.join("planted")).unwrap();
        let image = dir.path().join("host.ext4");
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let filters = [("seccomp.bpf", b"12345678".to_vec())];
        build_with(&image, Some(&trust), &filters, me).unwrap();
        let listing = Command::new("debugfs")
            .args(["-R", "ls -p /trust"])
            .arg(&image)
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout);
        assert!(listing.contains("/ca.pem/"), "{listing}");
        assert!(listing.contains("/nssdb/"), "{listing}");
        assert!(
            !listing.contains("planted"),
            "a symlink was copied: {listing}"
        );
        let filter = Command::new("debugfs")
            .args(["-R", "cat /seccomp.bpf"])
            .arg(&image)
            .output()
            .unwrap();
        assert_eq!(filter.stdout, b"12345678");
        let mode = std::fs::metadata(&image).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        assert!(
            !image.with_extension("stage").exists(),
            "staging left behind"
        );
    }
}
