//! What the gateway keeps per running workspace (its host: screen session,
//! CDP session, recorder, egress proxy; and its control lock) follows the
//! runtime's lifecycle stream: the host's services start when the workspace
//! runs and the host is torn down with one `stop` when it stops, crashes or
//! is deleted, whoever caused it (an API call, the exit watcher, reconcile,
//! shutdown). Crashes and
//! runs the runtime saw by itself become events here, written by the daemon.

use cubicle_runtime::lifecycle::{Change, Lifecycle};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::audit::EventKind;

use crate::ops::Core;

/// Follows the lifecycle stream until `cancel`; the task it runs in is
/// owned by the daemon's serve loop.
pub async fn follow(
    state: Core,
    mut changes: tokio::sync::broadcast::Receiver<Lifecycle>,
    cancel: CancellationToken,
) {
    loop {
        let change = tokio::select! {
            () = cancel.cancelled() => return,
            change = changes.recv() => change,
        };
        match change {
            Ok(change) => apply(&state, change).await,
            Err(RecvError::Lagged(missed)) => {
                tracing::error!(
                    missed,
                    "lifecycle follower fell behind; closing every screen session to resync"
                );
                state.hosts.close_all_screens();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn apply(state: &Core, Lifecycle { workspace, change }: Lifecycle) {
    if change == Change::Running {
        state.audit.activity().started(&workspace);
        state.replay.start_recording(&state.recording(), &workspace);
        super::egress::start(state, &workspace).await;
    }
    if change.ends_running() {
        // Egress first (downloads in flight go with it), then the last
        // video segment is sealed, then the sessions go.
        state.hosts.stop(&workspace).await;
    }
    // A paused workspace takes no input, not even on live views opened
    // before; its screen session stops asking Xvnc for updates meanwhile.
    match change {
        Change::Paused => {
            state.control.set_paused(&workspace, true);
            if let Some(host) = state.hosts.find(&workspace) {
                host.set_paused(true);
            }
        }
        Change::Resumed => {
            state.control.set_paused(&workspace, false);
            if let Some(host) = state.hosts.find(&workspace) {
                host.set_paused(false);
            }
        }
        _ if change.ends_running() => {
            state.control.set_paused(&workspace, false);
            state.audit.activity().forget(&workspace);
        }
        _ => {}
    }
    if change == Change::Deleted {
        // What the gateway kept of it from its create: nothing stays.
        state.slots.remove(&workspace);
    }
    let event = match &change {
        Change::Running => Some((EventKind::WorkspaceRunning, json!({}))),
        Change::Crashed { reason } => {
            Some((EventKind::WorkspaceCrashed, json!({ "reason": reason })))
        }
        Change::ProfileLoaded {
            profile,
            size,
            sha256,
        } => Some((
            EventKind::ProfileLoad,
            json!({ "profile": profile, "size": size, "sha256": sha256 }),
        )),
        Change::ProfileSaved {
            profile,
            size,
            sha256,
        } => Some((
            EventKind::ProfileSave,
            json!({ "profile": profile, "size": size, "sha256": sha256 }),
        )),
        Change::ProfileNotSaved { profile, reason } => Some((
            EventKind::ProfileNotSaved,
            json!({ "profile": profile, "reason": reason }),
        )),
        Change::SnapshotRestored { snapshot, sha256 } => Some((
            EventKind::SnapshotRestore,
            json!({ "snapshot": snapshot, "sha256": sha256 }),
        )),
        _ => None,
    };
    if let Some((kind, detail)) = event {
        let noted = state
            .audit
            .note(None, kind, Some(&workspace), detail, None)
            .await;
        if let Err(err) = noted {
            tracing::error!(workspace, err = %err.message, "cannot record a lifecycle event");
        }
    }
    if change.ends_running() {
        // Its chain is signed up to here whenever it stops, however.
        if let Err(err) = state.replay.checkpoint(&workspace).await {
            tracing::error!(workspace, %err, "cannot sign the audit checkpoint of a stopped workspace");
        }
    }
}
