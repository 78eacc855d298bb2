//! Files the gateway hands to a page's file input (`stage_upload`): kept
//! under the browser's home, which belongs to the services' id, so the
//! workspace's user can neither read an upload nor swap it for another
//! file between the gateway's check and the browser's read. Each upload
//! gets a folder of its own (0700) named at random, its file created new
//! (0600, never through a link); the oldest folders go once more than
//! [`KEPT`] are kept, as a page reads its file when it is chosen.
//!
//! Runs with the services' own ids (not the user's, as the files ops do).

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{ErrorCode, FileInfo, FileKind, InvalidField, MAX_FILE, StageUpload};

use crate::files::FilesError;

/// Uploads kept at once.
const KEPT: usize = 16;

/// Writes `request`'s file under `root` (made if missing); its metadata,
/// named by its absolute path.
pub fn stage(root: &Path, request: StageUpload) -> Result<FileInfo, FilesError> {
    let name = &request.name;
    let one_component = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0']);
    if !one_component {
        return Err(FilesError::Invalid(InvalidField {
            field: "name",
            code: ErrorCode::BadRequest,
            reason: "one path component of 1..=255 bytes, without '/', NUL, '.' or '..'".into(),
        }));
    }
    let bytes = B64.decode(&request.data)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(FilesError::TooLarge {
            what: "the content",
            size: bytes.len() as u64,
        });
    }
    let io = |err| FilesError::io(root, err);
    match DirBuilder::new().mode(0o700).create(root) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(err)),
        _ => {}
    }
    prune(root);
    let folder = root.join(random_name().map_err(io)?);
    DirBuilder::new().mode(0o700).create(&folder).map_err(io)?;
    let path = folder.join(name);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    Ok(FileInfo {
        name: path.display().to_string(),
        kind: FileKind::File,
        size: bytes.len() as u64,
        mode: 0o600,
        mtime_ms: 0,
        link_target: None,
    })
}

/// Removes the oldest upload folders past [`KEPT`] - 1, making room for one.
fn prune(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut folders: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            Some((meta.modified().ok()?, entry.path()))
        })
        .collect();
    if folders.len() < KEPT {
        return;
    }
    folders.sort();
    for (_, path) in folders.iter().take(folders.len() + 1 - KEPT) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// 16 hex digits from the kernel's random source.
fn random_name() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(name: &str, data: &[u8]) -> StageUpload {
        StageUpload {
            name: name.into(),
            data: B64.encode(data),
        }
    }

    #[test]
    fn an_upload_is_kept_apart_and_only_so_many() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("uploads");
        let info = stage(&root, upload("report.pdf", b"%PDF-1.4")).unwrap();
        assert!(info.name.ends_with("/report.pdf"), "{}", info.name);
        assert_eq!(std::fs::read(&info.name).unwrap(), b"%PDF-1.4");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(Path::new(&info.name)), 0o600);
        assert_eq!(mode(Path::new(&info.name).parent().unwrap()), 0o700);
        assert_eq!(mode(&root), 0o700);
        for name in ["", ".", "..", "a/b", "a\0b", &"x".repeat(256)] {
            assert!(stage(&root, upload(name, b"x")).is_err(), "{name:?}");
        }
        for n in 0..KEPT + 4 {
            stage(&root, upload(&format!("f{n}"), b"x")).unwrap();
        }
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), KEPT);
    }
}
