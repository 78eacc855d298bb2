//! The reverse channel of a jail: the host's listening socket that the
//! workspace's `cubicle-guest` relays its `127.0.0.1:3128` connections to.
//!
//! The same rule as the guest channel ([`crate::channel`]) holds the other
//! way round. The host makes the socket itself, in `<ws dir>/egress/`, a
//! directory of root's (0755) that the jail sees read-only at
//! `/run/cubicle-egress`: the workspace can connect to it but cannot
//! replace, move or shadow it. Every accepted connection is checked with
//! `SO_PEERCRED`: its process must run as one of the workspace's own uids
//! and descend from its top process, else it is closed unread. (The socket
//! is mode 0666 so that both of the workspace's uids can connect; another
//! host user reaching it is refused by that check.)

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::UnixListener;

use super::proxy::WorkspaceProxy;
use crate::proc_scan;

/// The socket's name inside the egress directory.
pub const SOCKET_NAME: &str = "proxy.sock";
/// Where the jail sees the egress directory.
pub const GUEST_DIR: &str = "/run/cubicle-egress";

/// The host directory of a workspace's egress socket.
pub fn dir_of(workspace_dir: &Path) -> PathBuf {
    workspace_dir.join("egress")
}

/// Makes `<ws dir>/egress/` root's and 0755, refusing a symlink or a
/// directory of anyone else (the workspace dir itself is root's).
pub fn prepare_dir(workspace_dir: &Path) -> std::io::Result<PathBuf> {
    let dir = dir_of(workspace_dir);
    match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => return Err(err),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory of uid {me}; remove it and start the workspace again",
                dir.display()
            ),
        ));
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// Who may connect: the workspace's uids, in the tree of its top process.
#[derive(Debug, Clone)]
pub struct EgressPeer {
    pub uids: Vec<u32>,
    pub top_pid: i32,
}

impl EgressPeer {
    pub fn check(&self, uid: u32, pid: Option<i32>) -> Result<(), String> {
        let pid = pid.unwrap_or(0);
        if self.uids.contains(&uid) && pid > 0 && proc_scan::descends_from(pid, self.top_pid) {
            return Ok(());
        }
        Err(format!(
            "egress peer uid {uid} pid {pid} is not the workspace's (uids {:?} under pid {})",
            self.uids, self.top_pid
        ))
    }
}

/// Binds a fresh listening socket in `<ws dir>/egress/`.
pub fn bind(workspace_dir: &Path) -> std::io::Result<UnixListener> {
    let dir = prepare_dir(workspace_dir)?;
    bind_at(&dir.join(SOCKET_NAME))
}

/// Binds a fresh listening socket at `path` (a microVM's: where its VMM
/// connects for the guest's vsock port 3128), replacing what is there.
/// `remove_file` and `bind` never follow a symlink in the last component;
/// the caller owns the directory's identity (the workspace dir is root's).
pub fn bind_at(path: &Path) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// Accepts connections until the proxy shuts down; each one whose peer
/// passes is served by `proxy`.
pub async fn accept_loop(listener: UnixListener, peer: EgressPeer, proxy: Arc<WorkspaceProxy>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = proxy.closed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(%err, "egress accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let checked = stream
            .peer_cred()
            .map_err(|e| e.to_string())
            .and_then(|cred| peer.check(cred.uid(), cred.pid()));
        match checked {
            Ok(()) => proxy.serve(stream),
            Err(why) => {
                tracing::warn!(workspace = proxy.workspace(), %why, "egress: refused a connection")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_check_wants_a_workspace_uid_in_its_tree() {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let me = std::process::id() as i32;
        let parent = proc_scan::parent_pid(me).unwrap();
        let ok = EgressPeer {
            uids: vec![uid, uid + 1],
            top_pid: parent,
        };
        ok.check(uid, Some(me)).unwrap();
        assert!(ok.check(uid + 7, Some(me)).is_err(), "another uid");
        assert!(ok.check(uid, None).is_err(), "no pid");
        let elsewhere = EgressPeer {
            uids: vec![uid],
            top_pid: i32::MAX,
        };
        assert!(elsewhere.check(uid, Some(me)).is_err(), "outside the tree");
    }

    #[test]
    fn the_dir_is_roots_and_a_symlink_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = prepare_dir(root.path()).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
        let other = tempfile::tempdir().unwrap();
        let elsewhere = other.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, other.path().join("egress")).unwrap();
        assert!(prepare_dir(other.path()).is_err());
    }
}
