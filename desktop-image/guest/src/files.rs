//! Files ops: read, write, list, stat, delete, as the workspace user.
//!
//! Paths go through [`normalise_path`]. Reads and writes open the path
//! non-blocking and check with `fstat` that it is a regular file before
//! touching its content, so a FIFO or a device (`/dev/zero`) is refused
//! instead of hanging or streaming forever. Sizes are capped at
//! [`MAX_FILE`]. Only `/home/user` and `/tmp` are writable: the image root
//! is read-only.
//!
//! Writes and deletes never follow a symbolic link, at any step of the
//! path ([`parent_no_links`]): the host's policy judges the path it sent
//! (`/home/user/.bashrc` may be held for a person), and a link
//! (`/home/user/notes -> .bashrc`) must not carry a write past that
//! judgement. Such a path is refused, naming where the link leads, so the
//! caller can ask for the real path, which is judged as itself. A file
//! with more than one hard link is refused for writing for the same
//! reason. The walk opens each directory with `O_NOFOLLOW` below the one
//! before (through `/proc/self/fd`), so a link swapped in while it walks is
//! refused too.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{
    DeletePath, DirListing, ErrorCode, ErrorReply, FileData, FileInfo, FileKind, InvalidField,
    MAX_ENTRIES, MAX_FILE, PathArg, ReadFile, WriteFile, normalise_path,
};

/// Where the workspace user may write.
const WRITABLE: [&str; 2] = ["/home/user", "/tmp"];
/// Paths `delete` refuses: the root and the writable mount points.
const PROTECTED: [&str; 3] = ["/", "/home/user", "/tmp"];

/// Why a files op failed.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("{path}: {source}{hint}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("{0} is a directory: list it instead, or give a file's path")]
    IsDir(String),
    #[error("{0} is a FIFO, socket or device, not a regular file: refused")]
    Special(String),
    #[error(
        "{path} is {size} bytes, over the {MAX_FILE}-byte limit: read it in parts with offset and max_len"
    )]
    TooLargeRead { path: String, size: u64 },
    #[error("{what} is {size} bytes, over the {MAX_FILE}-byte limit")]
    TooLarge { what: &'static str, size: u64 },
    #[error("data is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("mode {0:#o} is not a permission mode (0..=0o7777)")]
    Mode(u32),
    #[error("refusing to delete {0}: it is the root or a mount point of the workspace")]
    Protected(String),
    #[error(
        "{path} goes through the symbolic link {link}{leads}: writes and deletes do not follow links; give the real path"
    )]
    Symlink {
        path: String,
        link: String,
        leads: String,
    },
    #[error(
        "{path} has {links} hard links: writes to a file with other names are refused; write to a new file instead"
    )]
    HardLinked { path: String, links: u64 },
}

impl FilesError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        let denied = matches!(
            source.kind(),
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
        );
        let writable = WRITABLE.iter().any(|dir| path.starts_with(dir));
        let hint = if denied && !writable {
            " (the workspace's root is read-only: only /home/user and /tmp are writable)"
        } else {
            ""
        };
        Self::Io {
            path: path.display().to_string(),
            source,
            hint,
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            Self::Invalid(invalid) => invalid.code,
            Self::Io { source, .. } => io_code(source),
            Self::IsDir(_) => ErrorCode::IsADirectory,
            Self::Special(_) => ErrorCode::SpecialFile,
            Self::TooLargeRead { .. } | Self::TooLarge { .. } => ErrorCode::TooLarge,
            Self::Base64(_) | Self::Mode(_) | Self::Protected(_) => ErrorCode::BadRequest,
            Self::Symlink { .. } | Self::HardLinked { .. } => ErrorCode::PermissionDenied,
        }
    }
}

fn io_code(err: &std::io::Error) -> ErrorCode {
    match err.kind() {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => ErrorCode::PermissionDenied,
        ErrorKind::IsADirectory => ErrorCode::IsADirectory,
        ErrorKind::NotADirectory => ErrorCode::NotADirectory,
        ErrorKind::DirectoryNotEmpty => ErrorCode::NotEmpty,
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => ErrorCode::NoSpace,
        ErrorKind::FileTooLarge => ErrorCode::TooLarge,
        // ENXIO: a FIFO opened for writing with no reader.
        _ if err.raw_os_error() == Some(libc::ENXIO) => ErrorCode::SpecialFile,
        _ => ErrorCode::Io,
    }
}

impl From<FilesError> for ErrorReply {
    fn from(err: FilesError) -> Self {
        ErrorReply::new(err.code(), err.to_string())
    }
}

/// The refusal for `path`, whose prefix `link` is a symbolic link.
fn symlink_error(path: &Path, link: &Path) -> FilesError {
    // Where it leads: resolved when the target exists, else as written.
    let real = std::fs::canonicalize(link).or_else(|_| {
        std::fs::read_link(link).map(|target| match link.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        })
    });
    let leads = real
        .map(|real| {
            let rest = path.strip_prefix(link).unwrap_or(Path::new(""));
            format!(" (it leads to {})", real.join(rest).display())
        })
        .unwrap_or_default();
    FilesError::Symlink {
        path: path.display().to_string(),
        link: link.display().to_string(),
        leads,
    }
}

/// The directory holding `path` (absolute and normalised), opened without
/// following a symbolic link at any step, as a `/proc/self/fd` path that
/// names exactly that directory, with the file it holds; and the open
/// directory, which must stay open while that path is used.
fn parent_no_links(path: &Path) -> Result<(File, std::path::PathBuf), FilesError> {
    use std::os::fd::AsRawFd;
    let io = |err| FilesError::io(path, err);
    let open_dir = |at: &Path| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(at)
    };
    let mut dir = open_dir(Path::new("/")).map_err(io)?;
    let mut walked = std::path::PathBuf::from("/");
    let names: Vec<_> = path.components().skip(1).collect();
    let Some((last, parents)) = names.split_last() else {
        return Err(FilesError::Protected("/".into()));
    };
    for name in parents {
        walked.push(name);
        let below = Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
        dir = match open_dir(&below) {
            Ok(next) => next,
            Err(err) => {
                let is_link = std::fs::symlink_metadata(&below)
                    .is_ok_and(|meta| meta.file_type().is_symlink());
                return Err(match is_link {
                    true => symlink_error(path, &walked),
                    false => io(err),
                });
            }
        };
    }
    let inside = Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(last);
    Ok((dir, inside))
}

/// Opens `path` without blocking on FIFOs or devices and checks it is a
/// regular file.
fn open_regular(path: &Path, options: &mut OpenOptions) -> Result<(File, Metadata), FilesError> {
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|err| FilesError::io(path, err))?;
    let meta = file.metadata().map_err(|err| FilesError::io(path, err))?;
    if meta.is_dir() {
        return Err(FilesError::IsDir(path.display().to_string()));
    }
    if !meta.is_file() {
        return Err(FilesError::Special(path.display().to_string()));
    }
    Ok((file, meta))
}

/// [`open_regular`] of `inside` (named `path` in errors) with
/// `O_NOFOLLOW`: a link as the last component is refused.
fn open_regular_no_link(
    path: &Path,
    inside: &Path,
    options: &mut OpenOptions,
) -> Result<(File, Metadata), FilesError> {
    let io = |err: std::io::Error| match err.raw_os_error() {
        Some(libc::ELOOP) => symlink_error(path, path),
        _ => FilesError::io(path, err),
    };
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(inside)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(FilesError::IsDir(path.display().to_string()));
    }
    if !meta.is_file() {
        return Err(FilesError::Special(path.display().to_string()));
    }
    Ok((file, meta))
}

pub fn read(request: ReadFile) -> Result<FileData, FilesError> {
    let path = normalise_path("path", &request.path)?;
    if let Some(max) = request.max_len
        && max > MAX_FILE
    {
        return Err(FilesError::TooLarge {
            what: "max_len",
            size: max,
        });
    }
    let (mut file, meta) = open_regular(&path, OpenOptions::new().read(true))?;
    let size = meta.len();
    let rest = size.saturating_sub(request.offset);
    let len = match request.max_len {
        Some(max) => max.min(rest),
        None if rest > MAX_FILE => {
            return Err(FilesError::TooLargeRead {
                path: request.path,
                size,
            });
        }
        None => rest,
    };
    let io = |err| FilesError::io(&path, err);
    file.seek(SeekFrom::Start(request.offset)).map_err(io)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes).map_err(io)?;
    let end = request.offset.saturating_add(bytes.len() as u64);
    Ok(FileData {
        data: B64.encode(&bytes),
        offset: request.offset,
        size,
        eof: end >= size,
    })
}

/// Set-user-id, set-group-id and sticky: never set through the files API, so
/// a caller cannot plant a setuid file even where the guest's user could.
const SPECIAL_BITS: u32 = 0o7000;

pub fn write(request: WriteFile) -> Result<FileInfo, FilesError> {
    let path = normalise_path("path", &request.path)?;
    if let Some(mode) = request.mode
        && mode > 0o7777
    {
        return Err(FilesError::Mode(mode));
    }
    let bytes = B64.decode(&request.data)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(FilesError::TooLarge {
            what: "the content",
            size: bytes.len() as u64,
        });
    }
    let (_dir, inside) = parent_no_links(&path)?;
    let mut options = OpenOptions::new();
    options
        .write(true)
        .append(request.append)
        .create(true)
        .mode(request.mode.unwrap_or(0o644) & !SPECIAL_BITS);
    // Not O_TRUNC: truncate only once it is known to be a regular file.
    let (mut file, meta) = open_regular_no_link(&path, &inside, &mut options)?;
    if meta.nlink() > 1 {
        return Err(FilesError::HardLinked {
            path: path.display().to_string(),
            links: meta.nlink(),
        });
    }
    let io = |err| FilesError::io(&path, err);
    if !request.append {
        file.set_len(0).map_err(io)?;
    }
    file.write_all(&bytes).map_err(io)?;
    // The asked-for mode, or the file's own, either without special bits.
    let current = file.metadata().map_err(io)?.mode();
    let mode = request.mode.unwrap_or(current) & 0o7777 & !SPECIAL_BITS;
    if mode != current & 0o7777 {
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    let meta = file.metadata().map_err(io)?;
    Ok(info(path.display().to_string(), &meta, None))
}

pub fn list(request: PathArg) -> Result<DirListing, FilesError> {
    let path = normalise_path("path", &request.path)?;
    let io = |err| FilesError::io(&path, err);
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in std::fs::read_dir(&path).map_err(io)? {
        let entry = entry.map_err(io)?;
        if entries.len() == MAX_ENTRIES {
            truncated = true;
            break;
        }
        // An entry removed since read_dir saw it is left out.
        let Ok(meta) = entry.metadata() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push(info(name, &meta, link_target(&entry.path(), &meta)));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(DirListing {
        path: path.display().to_string(),
        entries,
        truncated,
    })
}

pub fn stat(request: PathArg) -> Result<FileInfo, FilesError> {
    let path = normalise_path("path", &request.path)?;
    let meta = std::fs::symlink_metadata(&path).map_err(|err| FilesError::io(&path, err))?;
    let target = link_target(&path, &meta);
    Ok(info(path.display().to_string(), &meta, target))
}

pub fn delete(request: DeletePath) -> Result<FileInfo, FilesError> {
    let path = normalise_path("path", &request.path)?;
    if PROTECTED.iter().any(|p| path == Path::new(p)) {
        return Err(FilesError::Protected(path.display().to_string()));
    }
    let io = |err| FilesError::io(&path, err);
    // The last component may be a link: that removes the link, not what
    // it leads to. The directories above it may not.
    let (_dir, inside) = parent_no_links(&path)?;
    let meta = std::fs::symlink_metadata(&inside).map_err(io)?;
    let removed = info(
        path.display().to_string(),
        &meta,
        link_target(&inside, &meta),
    );
    match (meta.is_dir(), request.recursive) {
        (true, true) => std::fs::remove_dir_all(&inside),
        (true, false) => std::fs::remove_dir(&inside),
        (false, _) => std::fs::remove_file(&inside),
    }
    .map_err(io)?;
    Ok(removed)
}

fn link_target(path: &Path, meta: &Metadata) -> Option<String> {
    meta.file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path).ok())
        .flatten()
        .map(|target| target.to_string_lossy().into_owned())
}

fn info(name: String, meta: &Metadata, link_target: Option<String>) -> FileInfo {
    let kind = meta.file_type();
    FileInfo {
        name,
        kind: if kind.is_symlink() {
            FileKind::Symlink
        } else if kind.is_dir() {
            FileKind::Dir
        } else if kind.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        },
        size: meta.len(),
        mode: meta.mode() & 0o7777,
        mtime_ms: meta
            .mtime()
            .saturating_mul(1000)
            .saturating_add(meta.mtime_nsec() / 1_000_000),
        link_target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary directory")
    }

    fn path(dir: &tempfile::TempDir, name: &str) -> String {
        dir.path().join(name).display().to_string()
    }

    fn write_text(path: &str, text: &str) -> Result<FileInfo, FilesError> {
        write(WriteFile {
            path: path.to_owned(),
            data: B64.encode(text),
            mode: None,
            append: false,
        })
    }

    /// A link to a file a rule holds (`.bashrc`), or to a directory it
    /// holds (`.ssh`), never carries a write or a delete to it.
    #[test]
    fn writes_and_deletes_do_not_follow_links() {
        let dir = tmp();
        let real = path(&dir, "bashrc");
        std::fs::write(&real, "safe").unwrap();
        std::fs::create_dir(path(&dir, "ssh")).unwrap();
        std::fs::write(path(&dir, "ssh/id"), "key").unwrap();
        std::os::unix::fs::symlink(&real, path(&dir, "notes")).unwrap();
        std::os::unix::fs::symlink(path(&dir, "ssh"), path(&dir, "keys")).unwrap();

        let err = write_text(&path(&dir, "notes"), "evil").unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, FilesError::Symlink { .. }), "{message}");
        assert!(message.contains(&format!("leads to {real}")), "{message}");
        let err = write_text(&path(&dir, "keys/id"), "evil").unwrap_err();
        assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
        let err = write_text(&path(&dir, "keys/new"), "evil").unwrap_err();
        assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
        let err = delete(DeletePath {
            path: path(&dir, "keys/id"),
            recursive: false,
        })
        .unwrap_err();
        assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "safe");
        assert_eq!(
            std::fs::read_to_string(path(&dir, "ssh/id")).unwrap(),
            "key"
        );

        // A hard link is another name for the same bytes: refused too.
        std::fs::hard_link(&real, path(&dir, "twin")).unwrap();
        let err = write_text(&path(&dir, "twin"), "evil").unwrap_err();
        assert!(
            matches!(err, FilesError::HardLinked { links: 2, .. }),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "safe");

        // The real paths work; deleting a link removes the link only.
        write_text(&path(&dir, "ssh/new"), "ok").unwrap();
        delete(DeletePath {
            path: path(&dir, "notes"),
            recursive: false,
        })
        .unwrap();
        assert!(std::fs::symlink_metadata(path(&dir, "notes")).is_err());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "safe");
        delete(DeletePath {
            path: path(&dir, "ssh"),
            recursive: true,
        })
        .unwrap();
        assert!(std::fs::metadata(path(&dir, "ssh")).is_err());
    }

    #[test]
    fn setuid_setgid_and_sticky_bits_are_never_written() {
        let dir = tmp();
        let file = path(&dir, "tool");
        for asked in [0o4755, 0o2755, 0o1777, 0o7777] {
            let written = write(WriteFile {
                path: file.clone(),
                data: B64.encode(b"#!/bin/sh\n"),
                mode: Some(asked),
                append: false,
            })
            .unwrap();
            let on_disk = std::fs::metadata(&file).unwrap().mode() & 0o7777;
            assert_eq!(on_disk, asked & 0o777, "asked {asked:#o}");
            assert_eq!(written.mode, on_disk);
        }
        // A special bit already on the file goes on the next write too.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4750)).unwrap();
        write(WriteFile {
            path: file.clone(),
            data: B64.encode(b"x"),
            mode: None,
            append: false,
        })
        .unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o750);
    }

    #[test]
    fn write_then_read_is_byte_exact_and_windowed() {
        let dir = tmp();
        let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let file = path(&dir, "bin");
        let written = write(WriteFile {
            path: file.clone(),
            data: B64.encode(&bytes),
            mode: Some(0o600),
            append: false,
        })
        .unwrap();
        assert_eq!((written.size, written.mode), (70_000, 0o600));
        let appended = write(WriteFile {
            path: file.clone(),
            data: B64.encode(b"tail"),
            mode: None,
            append: true,
        })
        .unwrap();
        assert_eq!(
            (appended.size, appended.mode),
            (70_004, 0o600),
            "appended, mode kept"
        );
        let tail = read(ReadFile {
            path: file.clone(),
            offset: 70_000,
            max_len: None,
        })
        .unwrap();
        assert_eq!(B64.decode(&tail.data).unwrap(), b"tail");
        write(WriteFile {
            path: file.clone(),
            data: B64.encode(&bytes),
            mode: None,
            append: false,
        })
        .unwrap();
        let whole = read(ReadFile {
            path: file.clone(),
            offset: 0,
            max_len: None,
        })
        .unwrap();
        assert_eq!(B64.decode(whole.data).unwrap(), bytes);
        assert!(whole.eof);
        let part = read(ReadFile {
            path: file,
            offset: 10,
            max_len: Some(5),
        })
        .unwrap();
        assert_eq!(B64.decode(part.data).unwrap(), &bytes[10..15]);
        assert!(!part.eof);
    }

    #[test]
    fn errors_carry_codes_a_host_can_map() {
        let dir = tmp();
        let code = |err: FilesError| err.code();
        let missing = path(&dir, "missing");
        assert_eq!(
            code(
                read(ReadFile {
                    path: missing.clone(),
                    offset: 0,
                    max_len: None
                })
                .unwrap_err()
            ),
            ErrorCode::NotFound
        );
        assert_eq!(
            code(
                read(ReadFile {
                    path: path(&dir, ""),
                    offset: 0,
                    max_len: None
                })
                .unwrap_err()
            ),
            ErrorCode::IsADirectory
        );
        assert_eq!(
            code(stat(PathArg { path: "rel".into() }).unwrap_err()),
            ErrorCode::NotAbsolute
        );
        assert_eq!(
            code(
                read(ReadFile {
                    path: "/dev/zero".into(),
                    offset: 0,
                    max_len: None
                })
                .unwrap_err()
            ),
            ErrorCode::SpecialFile
        );
        let big = read(ReadFile {
            path: missing,
            offset: 0,
            max_len: Some(MAX_FILE + 1),
        });
        assert_eq!(code(big.unwrap_err()), ErrorCode::TooLarge);
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), b"x").unwrap();
        let not_empty = delete(DeletePath {
            path: path(&dir, "d"),
            recursive: false,
        });
        assert_eq!(code(not_empty.unwrap_err()), ErrorCode::NotEmpty);
        assert_eq!(
            code(
                delete(DeletePath {
                    path: "/".into(),
                    recursive: true
                })
                .unwrap_err()
            ),
            ErrorCode::BadRequest
        );
        assert!(
            delete(DeletePath {
                path: path(&dir, "d"),
                recursive: true
            })
            .is_ok()
        );
        assert!(!dir.path().join("d").exists());
    }

    #[test]
    fn listing_is_sorted_with_types() {
        let dir = tmp();
        std::fs::write(dir.path().join("b"), b"12").unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("b", dir.path().join("c")).unwrap();
        let listing = list(PathArg {
            path: path(&dir, ""),
        })
        .unwrap();
        let names: Vec<_> = listing
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("a", FileKind::Dir),
                ("b", FileKind::File),
                ("c", FileKind::Symlink)
            ]
        );
        assert_eq!(listing.entries[1].size, 2);
        assert_eq!(listing.entries[2].link_target.as_deref(), Some("b"));
    }
}
