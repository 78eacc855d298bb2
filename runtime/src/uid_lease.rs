//! Host-wide leases on workspace uids, so that two daemons on one host (or
//! two test runs) never hand the same unprivileged uid to two workspaces:
//! stopping one would otherwise end the other's processes, which are found
//! by uid.
//!
//! A lease is an exclusive `flock` on `/run/cubicle/uid-leases/<uid>`, held
//! by the daemon for as long as the workspace exists. The kernel drops it
//! when the daemon dies, as it does the workspace's processes.

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Mutex;

/// Where the lease files live (tmpfs: leases end with the boot).
pub const LEASE_DIR: &str = "/run/cubicle/uid-leases";

/// The leases this daemon holds.
#[derive(Debug)]
pub struct UidLeases {
    dir: PathBuf,
    held: Mutex<HashMap<u32, File>>,
}

impl Default for UidLeases {
    fn default() -> Self {
        Self::new(PathBuf::from(LEASE_DIR))
    }
}

impl UidLeases {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the lease on `uid`; false if another holder has it. Holding
    /// it already counts as taking it.
    pub fn take(&self, uid: u32) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.contains_key(&uid) {
            return true;
        }
        // Private: anyone who can open a lease file can flock it, and so
        // keep every daemon off that uid.
        let private = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .and_then(|()| {
                std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            });
        if private.is_err() {
            // Without a lease folder there is no cross-daemon guard; the
            // caller's own store and the process check still apply.
            tracing::warn!(dir = %self.dir.display(), "cannot create the uid lease folder");
            return true;
        }
        let Ok(file) = File::create(self.dir.join(uid.to_string())) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                held.insert(uid, file);
                true
            }
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(err)) => {
                tracing::warn!(uid, %err, "cannot lock a uid lease");
                false
            }
        }
    }

    /// Gives the lease on `uid` back (its workspace is gone).
    pub fn release(&self, uid: u32) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_leased_by_one_holder_is_refused_to_another() {
        let dir = tempfile::tempdir().unwrap();
        let leases = dir.path().join("leases");
        let first = UidLeases::new(leases.clone());
        let second = UidLeases::new(leases.clone());
        assert!(first.take(1_600_001));
        assert!(first.take(1_600_001), "taking a held lease again is fine");
        assert!(!second.take(1_600_001));
        assert!(second.take(1_600_002));
        first.release(1_600_001);
        assert!(second.take(1_600_001));
        let mode = std::fs::metadata(&leases).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "only the daemon may open (and so lock) leases");
    }
}
