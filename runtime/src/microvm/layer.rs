//! A microVM workspace on disk, under its directory `<dir>` (root-owned,
//! mode 0711, as in the jail):
//!
//! | path | owner | what |
//! | --- | --- | --- |
//! | `vm-base` | root | the desktop ext4 the overlay was made over |
//! | `vmm.log` | root | the VMM's stdout and stderr |
//! | `vm/overlay.img` | ws uid | copy-on-write overlay (sparse, base-sized): the workspace's writes |
//! | `vm/serial.log` | ws uid | the guest console (COM1) |
//! | `vm/vmm.sock` | ws uid | the VMM's API socket |
//! | `vm/host.ext4` | ws uid, 0400 | the host disk (`super::host_disk`), made at every start |
//! | `chan/guest.sock` | ws uid | the VMM's hybrid vsock socket = the guest channel |
//! | `chan/guest.sock_3128` | root, 0666 | the daemon's egress listener, reached by the VMM for guest-initiated vsock port 3128 |
//!
//! The VMM (the workspace uid) makes the guest channel socket itself, so
//! unlike the jail's it sits in a directory of that uid: the host connects
//! to it without following a symlink and only if its listener is the VMM
//! (see [`crate::channel`]).
//!
//! An overlay only makes sense over the base it was made on, so a workspace
//! keeps booting the base named in `vm-base` even after the image is
//! rebuilt; new workspaces get the current one.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use crate::backend::{BackendError, WorkspaceSpec};

const LOG_TAIL_BYTES: u64 = 1024;

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
    pub fn overlay(&self) -> PathBuf {
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
    /// Where the VMM connects when the guest connects to host port `port`
    /// (`<vsock socket>_<port>`): the daemon listens there (egress).
    pub fn vsock_port_socket(&self, port: u32) -> PathBuf {
        let mut path = self.vsock_socket().into_os_string();
        path.push(format!("_{port}"));
        PathBuf::from(path)
    }
    /// The read-only host disk (`super::host_disk`), made at every start.
    pub fn host_disk(&self) -> PathBuf {
        self.vm_dir().join("host.ext4")
    }
    pub fn vmm_log(&self) -> PathBuf {
        self.dir.join("vmm.log")
    }
    fn base_record(&self) -> PathBuf {
        self.dir.join("vm-base")
    }

    /// The workspace directory itself: root-owned, traversable by its uid.
    pub fn create_dir(&self) -> Result<(), BackendError> {
        std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o711))
            .map_err(io_err(&self.dir))
    }

    /// The base this workspace boots, making its overlay over `current` if
    /// it has none yet.
    pub fn ensure_overlay(&self, uid: u32, current: &Path) -> Result<PathBuf, BackendError> {
        owned_dir(&self.vm_dir(), uid)?;
        let record = self.base_record();
        if let Ok(text) = std::fs::read_to_string(&record) {
            let base = PathBuf::from(text.trim_end());
            if !base.is_file() {
                return Err(BackendError::Spawn(format!(
                    "the desktop image {} this workspace's disk was made over is gone; its writes cannot be read without it: delete the workspace and create a new one",
                    base.display()
                )));
            }
            return Ok(base);
        }
        let size = std::fs::metadata(current).map_err(io_err(current))?.len();
        let overlay = self.overlay();
        let file = std::fs::File::create(&overlay).map_err(io_err(&overlay))?;
        file.set_len(size).map_err(io_err(&overlay))?;
        chown(&overlay, Some(uid), Some(uid)).map_err(io_err(&overlay))?;
        std::fs::set_permissions(&overlay, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(&overlay))?;
        // Written last: a record means the overlay is complete.
        let partial = self.dir.join(".vm-base.partial");
        std::fs::write(&partial, current.as_os_str().as_encoded_bytes())
            .map_err(io_err(&partial))?;
        std::fs::rename(&partial, &record).map_err(io_err(&record))?;
        Ok(current.to_owned())
    }

    /// Directories the VMM writes into, and no stale sockets (the VMM
    /// refuses a vsock or API socket path that exists).
    pub fn prepare_run(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        owned_dir(&self.vm_dir(), spec.host_uid)?;
        let chan = self.vsock_socket();
        if let Some(dir) = chan.parent() {
            owned_dir(dir, spec.host_uid)?;
        }
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

/// A private directory owned by the workspace uid.
fn owned_dir(path: &Path, uid: u32) -> Result<(), BackendError> {
    std::fs::create_dir_all(path).map_err(io_err(path))?;
    chown(path, Some(uid), Some(uid)).map_err(io_err(path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io_err(path))
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

    #[test]
    fn overlay_is_sparse_base_sized_and_pinned_to_its_base() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let base = root.path().join("desktop.ext4");
        std::fs::File::create(&base)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let layer = Layer::of(&spec);
        layer.create_dir().unwrap();
        assert_eq!(layer.ensure_overlay(spec.host_uid, &base).unwrap(), base);
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
    fn prepare_removes_stale_sockets_and_clean_keeps_the_disk() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec(root.path());
        let layer = Layer::of(&spec);
        layer.create_dir().unwrap();
        layer.prepare_run(&spec).unwrap();
        std::fs::write(layer.vsock_socket(), "").unwrap();
        std::fs::write(layer.api_socket(), "").unwrap();
        std::fs::write(layer.overlay(), "data").unwrap();
        layer.prepare_run(&spec).unwrap();
        assert!(!layer.vsock_socket().exists());
        assert!(!layer.api_socket().exists());
        layer.clean().unwrap();
        assert!(layer.overlay().exists());
    }
}
