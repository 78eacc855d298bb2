//! The isolation backend trait: how a workspace's machine is made, started,
//! stopped and destroyed, and how its guest is reached. The same
//! `cubicle-guest` runs inside every backend.

use std::path::PathBuf;

use crate::channel::{GuestChannel, GuestPeer};
use crate::geometry::Geometry;
use crate::limits::{Limits, Usage};

/// Everything a backend needs to know about one workspace.
#[derive(Debug, Clone)]
pub struct WorkspaceSpec {
    pub id: String,
    pub geometry: Geometry,
    /// The unprivileged host uid of the workspace's user: its shell, its
    /// desktop session, whatever an agent execs, its files (inside: 1000).
    /// The services run as [`WorkspaceSpec::services_uid`].
    pub host_uid: u32,
    /// The workspace's directory under the data dir (its writable layer).
    pub dir: PathBuf,
    /// The host pid of its top process while it runs (what the guest
    /// channel's peer must descend from); `None` when it does not.
    pub top_pid: Option<i32>,
    /// What it may use (memory, CPU, tasks, disk).
    pub limits: Limits,
}

/// Host uids handed to one workspace: the user's and the services'.
pub const UIDS_PER_WORKSPACE: u32 = 2;

/// The host uid of the services (guest supervisor, Xvnc, Chromium) of the
/// workspace whose user is `host_uid`: the next one, leased with it. Why
/// two: see [`crate::jail`].
pub fn services_uid_of(host_uid: u32) -> u32 {
    host_uid + 1
}

impl WorkspaceSpec {
    /// The host uid its services run as (inside: 1001); only the jail
    /// uses it (a microVM runs as [`WorkspaceSpec::host_uid`] alone).
    pub fn services_uid(&self) -> u32 {
        services_uid_of(self.host_uid)
    }

    /// The jail's guest channel socket: bound by the daemon in `host/`, a
    /// root-only directory inside `dir` that the workspace cannot see (see
    /// [`crate::channel`] for why the host owns this path).
    pub fn channel_socket(&self) -> PathBuf {
        self.dir.join("host").join("guest.sock")
    }

    /// Who must be listening on its guest channel.
    pub fn guest_peer(&self) -> GuestPeer {
        GuestPeer {
            uid: self.host_uid,
            top_pid: self.top_pid,
        }
    }
}

/// How a started workspace ended, as seen by its backend.
#[derive(Debug, Clone)]
pub struct Exit {
    pub description: String,
    /// How far the boot had got, where the backend can tell (the microVM's
    /// console): said only when a start fails, since a workspace that ends
    /// after it was ready has long passed every stage.
    pub boot_stage: Option<&'static str>,
}

impl Exit {
    pub fn new(description: String) -> Self {
        Self {
            description,
            boot_stage: None,
        }
    }

    /// For a start that failed: the stage first, where there is one.
    pub fn before_ready(&self) -> String {
        match self.boot_stage {
            Some(stage) => format!("{stage}; {}", self.description),
            None => self.description.clone(),
        }
    }
}

/// What can go wrong in a backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("workspace directory {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the workspace: {0}")]
    Spawn(String),
    #[error("the {0} backend is not available on this host: {1}")]
    Unavailable(&'static str, String),
    #[error("cannot apply the workspace's limits: {0}")]
    Cgroup(#[from] crate::limits::cgroup::CgroupError),
    #[error("workspace disk: {0}")]
    Disk(#[from] crate::limits::disk::DiskError),
    #[error("cannot {what} workspace {id}: {reason}")]
    Pause {
        what: &'static str,
        id: String,
        reason: String,
    },
    #[error("cannot snapshot workspace {id} (it runs on): {reason}")]
    Snapshot { id: String, reason: String },
    #[error("processes of workspace {id} survived the stop: pids {pids:?}")]
    Survivors { id: String, pids: Vec<i32> },
}

/// An isolation backend.
pub trait Backend: Send + Sync + 'static {
    /// The name stored with each workspace (`jail`, `microvm`).
    fn name(&self) -> &'static str;

    /// Makes the workspace's writable layer on disk.
    fn create(&self, spec: &WorkspaceSpec) -> Result<(), BackendError>;

    /// Starts the workspace's processes; returns the host pid of its top
    /// process and a future that resolves when that process ends.
    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError>;

    /// Whether the workspace's top process `pid` still runs (used to
    /// re-attach after a daemon restart).
    fn is_running(&self, spec: &WorkspaceSpec, pid: i32) -> bool;

    /// Ends every process of the workspace; returns once none is left.
    fn stop(
        &self,
        spec: &WorkspaceSpec,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send;

    /// Freezes every process of the workspace: its memory is kept, it gets
    /// no CPU time and answers nothing until [`Backend::resume`]. Returns
    /// once everything is frozen.
    fn pause(
        &self,
        spec: &WorkspaceSpec,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(Err(BackendError::Pause {
            what: "pause",
            id: spec.id.clone(),
            reason: format!("the {} backend cannot pause", self.name()),
        }))
    }

    /// Thaws a paused workspace; its processes continue where they were.
    fn resume(
        &self,
        spec: &WorkspaceSpec,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(Err(BackendError::Pause {
            what: "resume",
            id: spec.id.clone(),
            reason: format!("the {} backend cannot resume", self.name()),
        }))
    }

    /// Whether it saves a running workspace's whole machine (`memory`
    /// snapshots); the others snapshot the user's files only.
    fn memory_snapshots(&self) -> bool {
        false
    }

    /// Saves running workspace `spec`'s whole machine as snapshot `id`
    /// under `files`: paused for it and resumed after, whatever happens.
    /// Either every file is in place or none is.
    fn snapshot_memory(
        &self,
        spec: &WorkspaceSpec,
        files: &crate::snapshots::Files,
        id: &str,
    ) -> impl std::future::Future<Output = Result<crate::snapshots::MemoryParts, BackendError>> + Send
    {
        let _ = (files, id);
        std::future::ready(Err(BackendError::Unavailable(
            self.name(),
            format!(
                "workspace {} cannot have its memory saved: only microVMs can",
                spec.id
            ),
        )))
    }

    /// Starts the workspace from memory snapshot `image` instead of
    /// booting it: its disk becomes the snapshot's, and its machine goes
    /// on from where the snapshot caught it (see [`Backend::start`]).
    fn start_restored(
        &self,
        spec: &WorkspaceSpec,
        image: &crate::snapshots::MemoryImage,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        Err(BackendError::Unavailable(
            self.name(),
            format!(
                "snapshot {} holds a microVM's memory, which workspace {} cannot run from",
                image.id, spec.id
            ),
        ))
    }

    /// Removes what a stopped workspace left in its runtime state (sockets,
    /// temporary files) but keeps its home.
    fn clean(&self, spec: &WorkspaceSpec) -> Result<(), BackendError>;

    /// Removes the workspace's writable layer entirely.
    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError>;

    /// What the workspace uses now, next to its limits. A backend that
    /// measures nothing gives the limits alone.
    fn usage(&self, spec: &WorkspaceSpec) -> Usage {
        Usage::of_limits(&spec.limits)
    }

    /// How to reach the guest; the channel refuses any listener but the
    /// workspace's own (its uid, under `spec.top_pid`).
    fn channel(&self, spec: &WorkspaceSpec) -> GuestChannel {
        GuestChannel::new(spec.channel_socket(), spec.guest_peer())
    }
}

/// Ends every process of the workspace (all of its two uids'): SIGTERM,
/// `grace`, then SIGKILL. An error names the pids that survived even that.
pub async fn end_processes(
    spec: &WorkspaceSpec,
    grace: std::time::Duration,
) -> Result<(), BackendError> {
    let (user, services) = tokio::join!(
        crate::proc_scan::end_uid(spec.host_uid, grace),
        crate::proc_scan::end_uid(spec.services_uid(), grace),
    );
    let survivors: Vec<i32> = user.into_iter().chain(services).collect();
    if survivors.is_empty() {
        Ok(())
    } else {
        Err(BackendError::Survivors {
            id: spec.id.clone(),
            pids: survivors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn the_boot_stage_is_said_only_for_a_start_that_failed() {
        let exit = Exit {
            description: "cubicle-vmm exited with status 159".into(),
            boot_stage: Some("stage: readiness (init ran; the desktop did not come up)"),
        };
        assert_eq!(
            exit.before_ready(),
            "stage: readiness (init ran; the desktop did not come up); cubicle-vmm exited with status 159"
        );
        // A crash after it ran is described as it is, with no stage.
        assert_eq!(exit.description, "cubicle-vmm exited with status 159");
        assert_eq!(
            Exit::new("signal: 9".into()).before_ready(),
            "signal: 9",
            "a backend that cannot tell the stage adds none"
        );
    }
}
