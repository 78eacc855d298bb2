//! The jail's guest channel socket, made by the daemon: bound (not
//! listening) at `<dir>/host/guest.sock` in a root-only directory, then
//! inherited by `cubicle-guest`, which calls `listen()` on it. Why the host
//! owns this path: see [`crate::channel`].

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use crate::backend::{BackendError, WorkspaceSpec};

use super::io_err;

/// Binds a fresh Unix stream socket at `spec.channel_socket()`, after
/// making its directory root's and private (0700) and removing what an
/// earlier run left there. The socket is close-on-exec; the caller clears
/// that for the one child that must inherit it.
pub fn bind(spec: &WorkspaceSpec) -> Result<OwnedFd, BackendError> {
    let path = spec.channel_socket();
    let dir = path
        .parent()
        .expect("channel_socket() is a file inside the workspace dir");
    private_dir(dir)?;
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&path)(err)),
        _ => {}
    }
    bind_unbound(&path).map_err(io_err(&path))
}

/// `dir` as a directory of the daemon's own uid, mode 0700, refusing
/// anything else found there (a symlink, another owner's directory).
fn private_dir(dir: &Path) -> Result<(), BackendError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(io_err(dir)(err));
        }
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(BackendError::Spawn(format!(
            "{} must be a directory owned by uid {me} (the daemon); remove it and start the workspace again",
            dir.display()
        )));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io_err(dir))
}

/// A `SOCK_STREAM | SOCK_CLOEXEC` Unix socket bound at `path`, not listening.
pub(crate) fn bind_unbound(path: &Path) -> std::io::Result<OwnedFd> {
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "socket path is {} bytes, over the {}-byte limit of a Unix socket address; use a shorter data directory",
                bytes.len(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (slot, &byte) in addr.sun_path.iter_mut().zip(bytes) {
        *slot = byte as libc::c_char;
    }
    // SAFETY: socket has no memory preconditions; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor socket() just returned; nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `addr` is a valid, NUL-terminated sockaddr_un of `len` bytes
    // that outlives the call; `socket` is an open socket descriptor.
    let bound = unsafe {
        libc::bind(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            (&raw const addr).cast::<libc::sockaddr>(),
            len,
        )
    };
    if bound != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn spec(dir: &Path) -> WorkspaceSpec {
        WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: 1_600_007,
            dir: dir.to_owned(),
            top_pid: None,
            limits: Default::default(),
        }
    }

    #[test]
    fn socket_is_bound_in_a_private_dir_and_listens_only_when_asked() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let fd = bind(&spec).unwrap();
        let dir = spec.channel_socket().parent().unwrap().to_owned();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        // Bound but not listening: a connect is refused until listen().
        let refused = std::os::unix::net::UnixStream::connect(spec.channel_socket()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // SAFETY: `fd` is an open socket descriptor owned by this test.
        assert_eq!(unsafe { libc::listen(fd.as_raw_fd(), 8) }, 0);
        std::os::unix::net::UnixStream::connect(spec.channel_socket()).unwrap();
        // A second start replaces the stale socket.
        drop(fd);
        bind(&spec).unwrap();
    }

    #[test]
    fn a_symlink_in_place_of_the_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.path().join("host")).unwrap();
        assert!(bind(&spec).is_err());
        assert!(!elsewhere.join("guest.sock").exists());
    }
}
