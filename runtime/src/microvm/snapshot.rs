//! Memory snapshots of a microVM workspace: its whole machine saved while
//! paused, and new VMs (forks, or itself rolled back) started from it.
//!
//! Taking one, in order:
//!
//! 1. `PUT /vm/pause`, then `PUT /vm/snapshot` on the VMM's API: the VMM
//!    writes its state file and guest memory into its `/snapshots`
//!    (`vm-snap/` of the workspace, the only place its jail may write).
//! 2. Still paused, the daemon copies the root disk's overlay and the host
//!    disk, so disk and memory are of the same instant.
//! 3. `PUT /vm/resume` — always, whatever failed before.
//! 4. The state and memory files are copied out of `vm-snap/` into the
//!    daemon's snapshot folder (root's, `0600`) and removed there. They
//!    are the VMM's files, so the workspace's: each is opened without
//!    following a link, and only if it is a regular file of the
//!    workspace's uid with one name; the copy, not the VMM's file, is what
//!    is hashed and kept, so the VMM cannot change it afterwards.
//!
//! Every file is written beside its place and renamed in only when all
//! four are complete; a failure leaves none of them.
//!
//! A restore starts a VMM with `--restore` (see [`super::command`]) over a
//! copy of the snapshot's overlay and host disk (checked against their
//! digests as they are copied), with the workspace's own vsock socket,
//! console, cgroup and jail. The memory file is mapped copy-on-write by
//! each VMM, so forks share the pages none of them has written.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{BackendError, WorkspaceSpec};
use crate::snapshots::{Files, MemoryParts, Partial};
use crate::sparse_copy::{Copied, copy_extents};

use super::MicrovmBackend;
use super::layer::Layer;

/// How long the VMM may take to write a snapshot (its whole written RAM).
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(600);
/// Where the jailed VMM sees [`Layer::snapshot_dir`].
const VMM_SNAPSHOT_DIR: &str = "/snapshots";

/// The VMM's answer to `PUT /vm/snapshot`.
#[derive(Debug, serde::Deserialize)]
struct VmmSnapshot {
    /// The guest's RAM, bytes.
    memory_size: u64,
}

/// A file copied into the snapshot folder, not yet in place.
struct Copy {
    partial: Partial,
    copied: Copied,
}

fn failed(spec: &WorkspaceSpec, reason: impl std::fmt::Display) -> BackendError {
    BackendError::Snapshot {
        id: spec.id.clone(),
        reason: reason.to_string(),
    }
}

impl MicrovmBackend {
    /// Takes memory snapshot `id` of running workspace `spec` into `files`.
    pub(super) async fn take_memory(
        &self,
        spec: &WorkspaceSpec,
        files: &Files,
        id: &str,
    ) -> Result<MemoryParts, BackendError> {
        let layer = Layer::of(spec);
        let base = layer.base()?;
        super::vmm_put(spec, "pause").await?;
        let disks = self.save_paused(spec, files, id).await;
        let resumed = super::vmm_put(spec, "resume").await;
        let taken = match disks {
            Ok((memory_size, disks)) => {
                let (spec, files, id) = (spec.clone(), files.clone(), id.to_owned());
                tokio::task::spawn_blocking(move || {
                    keep_all(&spec, &files, &id, memory_size, disks, &base)
                })
                .await
                .map_err(|e| BackendError::Spawn(e.to_string()))?
            }
            Err(err) => Err(err),
        };
        remove_written(&layer.snapshot_dir(), id);
        resumed?;
        taken
    }

    /// The VMM's files and copies of both disks, while the VM is paused.
    async fn save_paused(
        &self,
        spec: &WorkspaceSpec,
        files: &Files,
        id: &str,
    ) -> Result<(u64, [Copy; 2]), BackendError> {
        let layer = Layer::of(spec);
        let body = serde_json::json!({
            "state_path": format!("{VMM_SNAPSHOT_DIR}/{id}.vmstate"),
            "memory_path": format!("{VMM_SNAPSHOT_DIR}/{id}.memory"),
        })
        .to_string();
        let reply = super::api::put_json(
            &layer.api_socket(),
            spec.guest_peer(),
            "/vm/snapshot",
            &body,
            SNAPSHOT_TIMEOUT,
        )
        .await
        .map_err(|e| failed(spec, e))?;
        let written: VmmSnapshot = serde_json::from_str(&reply)
            .map_err(|e| failed(spec, format!("the VMM's reply {reply:.200}: {e}")))?;
        let (spec, files, id) = (spec.clone(), files.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || {
            let layer = Layer::of(&spec);
            let disk = copy_in(
                &spec,
                &files,
                &layer.overlay(),
                &id,
                "overlay",
                files.disk(&id),
            )?;
            let host = copy_in(
                &spec,
                &files,
                &layer.host_disk(),
                &id,
                "host",
                files.host_disk(&id),
            )?;
            Ok((written.memory_size, [disk, host]))
        })
        .await
        .map_err(|e| BackendError::Spawn(e.to_string()))?
    }

    /// Starts `spec` from memory snapshot `image` (see the module docs).
    pub(super) fn launch_restored(
        &self,
        spec: &WorkspaceSpec,
        cgroup: &crate::limits::cgroup::WorkspaceCgroup,
        image: &crate::snapshots::MemoryImage,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<crate::backend::Exit>), BackendError> {
        image
            .check_fits(super::command::guest_memory_mib(spec) << 20)
            .map_err(BackendError::Spawn)?;
        let layer = Layer::of(spec);
        layer.put_snapshot_disks(spec.host_uid, image)?;
        layer.prepare_run(spec)?;
        let argv = super::command::restore_argv(self, spec, image)
            .map_err(|e| BackendError::Spawn(e.to_string()))?;
        self.spawn_vmm(spec, cgroup, argv)
    }
}

/// Copies the workspace's file `from` (written by its VMM: checked before
/// it is read) into the snapshot folder as `target`, not yet in place.
fn copy_in(
    spec: &WorkspaceSpec,
    files: &Files,
    from: &Path,
    id: &str,
    what: &str,
    target: PathBuf,
) -> Result<Copy, BackendError> {
    let source = open_written(from, spec.host_uid).map_err(|e| failed(spec, e))?;
    let partial = files
        .partial_file(&format!("{id}.{what}"), target)
        .map_err(|e| failed(spec, format!("the snapshot folder: {e}")))?;
    let copied = copy_extents(&source, partial.file())
        .map_err(|e| failed(spec, format!("copying {}: {e}", from.display())))?;
    Ok(Copy { partial, copied })
}

/// Opens `path`, a file of the workspace's: never through a link, never
/// a FIFO or device (opened non-blocking, then checked), only a regular
/// file of `uid` with no other name.
fn open_written(path: &Path, uid: u32) -> Result<File, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() || meta.uid() != uid || meta.nlink() != 1 {
        return Err(format!(
            "{} is not a regular file of uid {uid} with one name: refused",
            path.display()
        ));
    }
    Ok(file)
}

/// Copies the VMM's state and memory files out of `vm-snap/`, then puts
/// all four files in place.
fn keep_all(
    spec: &WorkspaceSpec,
    files: &Files,
    id: &str,
    memory_size: u64,
    disks: [Copy; 2],
    base: &Path,
) -> Result<MemoryParts, BackendError> {
    let dir = Layer::of(spec).snapshot_dir();
    let written = |what: &str, target: PathBuf| {
        copy_in(
            spec,
            files,
            &dir.join(format!("{id}.{what}")),
            id,
            what,
            target,
        )
    };
    let state = written("vmstate", files.state(id))?;
    let memory = written("memory", files.memory(id))?;
    let [disk, host] = disks;
    let parts = MemoryParts {
        state_sha256: state.copied.sha256.clone(),
        memory_size: i64::try_from(memory_size).unwrap_or(i64::MAX),
        memory_bytes: i64::try_from(memory.copied.data_bytes).unwrap_or(i64::MAX),
        memory_sha256: memory.copied.sha256.clone(),
        disk_bytes: i64::try_from(disk.copied.data_bytes).unwrap_or(i64::MAX),
        disk_sha256: disk.copied.sha256.clone(),
        host_disk_sha256: host.copied.sha256.clone(),
        base_image: base.display().to_string(),
    };
    let keep = |copy: Copy| {
        copy.partial
            .keep_file()
            .map_err(|e| failed(spec, format!("the snapshot folder: {e}")))
    };
    let kept = keep(state)
        .and_then(|()| keep(memory))
        .and_then(|()| keep(disk))
        .and_then(|()| keep(host));
    if kept.is_err() {
        let _ = files.remove(id);
    }
    kept.map(|()| parts)
}

/// Removes what the VMM wrote for snapshot `id` (root removes entries of
/// a directory it does not own without following anything).
fn remove_written(dir: &Path, id: &str) {
    for name in [format!("{id}.vmstate"), format!("{id}.memory")] {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        // SAFETY: getuid has no preconditions and cannot fail.
        unsafe { libc::getuid() }
    }

    /// What the VMM leaves in `vm-snap/` is the workspace's: a link, a
    /// second name for another file, a FIFO (which would block a plain
    /// open) or another uid's file is refused before a byte is read.
    #[test]
    fn only_a_plain_file_of_the_workspace_with_one_name_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("a.memory");
        std::fs::write(&good, b"guest memory").unwrap();
        assert!(open_written(&good, me()).is_ok());
        assert!(open_written(&good, me() + 1).is_err(), "another uid's file");

        let link = dir.path().join("link.memory");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(
            open_written(&link, me()).is_err(),
            "a symlink is never followed"
        );

        let second = dir.path().join("second.memory");
        std::fs::hard_link(&good, &second).unwrap();
        let err = open_written(&second, me()).unwrap_err();
        assert!(err.contains("one name"), "{err}");

        let fifo = dir.path().join("fifo.memory");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = open_written(&fifo, me()).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
