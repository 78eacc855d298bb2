//! The auditor's operations: export a workspace's sealed record as a
//! bundle, verify it (the check `cubicle audit verify` makes), list the
//! recorded sessions and read their segments. Deleted workspaces stay
//! reachable here ([`recorded`]); scope rules apply as everywhere.

use std::path::PathBuf;

use cubicle_recorder::bundle::is_segment_name;
use cubicle_recorder::verify::Report;
use cubicle_runtime::chain_store::{self, SegmentRow};
use cubicle_runtime::events::{self, Event};
use cubicle_runtime::manager::ManagerError;
use cubicle_runtime::state::WorkspaceRecord;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::replay::export::ExportError;

/// Most events one replay timeline holds.
const TIMELINE_MAX: usize = 50_000;

/// Workspace `id` like [`super::access::workspace`] finds it, deleted ones
/// included: what happened in a workspace stays reviewable after it is gone.
async fn recorded(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<WorkspaceRecord, OpError> {
    ctx.require(permission)?;
    match state.store.get(id).await {
        Ok(Some(record)) if ctx.sees(&record) => Ok(record),
        Ok(_) => Err(ManagerError::NotFound(id.to_owned()).into()),
        Err(err) => Err(OpError::internal(err.to_string())),
    }
}

fn export_error(err: ExportError) -> OpError {
    OpError::internal(format!("cannot export the audit record: {err}"))
}

/// The bundle of workspace `id` (a tar in an unnamed file) and the seq its
/// chain is signed up to. The export itself is an event, inside the bundle.
pub async fn export(
    state: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<(u64, std::fs::File), OpError> {
    recorded(state, ctx, id, Permission::AuditExport).await?;
    let replay = state.replay.clone();
    let run = async move {
        let upto = replay
            .checkpoint(id)
            .await
            .map_err(|e| export_error(e.into()))?;
        let file = replay.export(id, upto).await.map_err(export_error)?;
        Ok((upto, file))
    };
    state
        .audit
        .run(
            ctx,
            EventKind::AuditExport,
            Some(id),
            json!({}),
            run,
            |(upto, _)| json!({ "signed_seq": upto }),
        )
        .await
}

/// Exports workspace `id` and verifies the bundle against this daemon's key.
pub async fn verify(state: &Core, ctx: &OpContext, id: &str) -> Result<Report, OpError> {
    recorded(state, ctx, id, Permission::AuditExport).await?;
    state.replay.verify(id).await.map_err(export_error)
}

/// A workspace with what was recorded of it.
pub struct Recorded {
    pub workspace: WorkspaceRecord,
    pub segments: Vec<SegmentRow>,
}

/// Every workspace the caller may see that has recorded segments, deleted
/// ones included, newest first.
pub async fn recordings(state: &Core, ctx: &OpContext) -> Result<Vec<Recorded>, OpError> {
    ctx.require(Permission::AuditExport)?;
    let internal = |e: cubicle_runtime::state::StateError| OpError::internal(e.to_string());
    let workspaces = state.store.list_all().await.map_err(internal)?;
    let segments = chain_store::segments(&state.store, None)
        .await
        .map_err(internal)?;
    let mut out: Vec<Recorded> = workspaces
        .into_iter()
        .filter(|ws| ctx.sees(ws))
        .map(|workspace| Recorded {
            segments: segments
                .iter()
                .filter(|s| s.workspace_id == workspace.id)
                .cloned()
                .collect(),
            workspace,
        })
        .filter(|r| !r.segments.is_empty())
        .collect();
    out.reverse();
    Ok(out)
}

/// One workspace's recording and its event timeline.
pub async fn recording(
    state: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<(Recorded, Vec<Event>), OpError> {
    let workspace = recorded(state, ctx, id, Permission::AuditExport).await?;
    let internal = |e: cubicle_runtime::state::StateError| OpError::internal(e.to_string());
    let segments = chain_store::segments(&state.store, Some(id))
        .await
        .map_err(internal)?;
    let mut timeline = Vec::new();
    let mut after = 0;
    while timeline.len() < TIMELINE_MAX {
        let page = events::list(&state.store, Some(id), after, 1000)
            .await
            .map_err(internal)?;
        let Some(last) = page.last() else { break };
        after = last.id;
        timeline.extend(page);
    }
    Ok((
        Recorded {
            workspace,
            segments,
        },
        timeline,
    ))
}

/// The path of segment `file` of workspace `id`: only a file its chain
/// seals is served.
pub async fn segment(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    file: &str,
) -> Result<PathBuf, OpError> {
    recorded(state, ctx, id, Permission::AuditExport).await?;
    let missing = || {
        OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("workspace {id} has no sealed segment {file:?}"),
        )
    };
    if !is_segment_name(file) {
        return Err(missing());
    }
    let sealed = chain_store::segments(&state.store, Some(id))
        .await
        .map_err(|e| OpError::internal(e.to_string()))?
        .iter()
        .any(|s| s.detail["file"] == file);
    let path = state.replay.config.recordings_of(id).join(file);
    if !sealed || !path.is_file() {
        return Err(missing());
    }
    Ok(path)
}

/// Turns recording off for workspace `id`, which the caller just created
/// with `record: false`: what was recorded since it started is thrown away
/// unsealed, and it is not recorded again.
pub async fn opt_out(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    recorded(state, ctx, id, Permission::WorkspacesCreate).await?;
    state
        .replay
        .opt_out(&state.recording(), id)
        .await
        .map_err(|e| OpError::internal(format!("cannot turn recording off for {id}: {e}")))
}
