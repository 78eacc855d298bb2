//! Workspace lifecycle operations: create, list, get, start, stop, delete.

use cubicle_runtime::limits::{LimitsRequest, Usage};
use cubicle_runtime::manager::{CreateRequest, ManagerError};
use cubicle_runtime::state::WorkspaceRecord;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::app::AppState;
use crate::error::ApiError;
use crate::wire::workspace::LimitsBody;

/// Creates a workspace owned by the caller; returns it once ready.
pub async fn create(
    state: &AppState,
    ctx: &OpContext,
    mut request: CreateRequest,
    limits: Option<LimitsRequest>,
    policy: Option<String>,
) -> Result<WorkspaceRecord, ApiError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let policy = state.gates.resolve(policy.as_deref())?;
    request.owner_token = Some(ctx.token.id.clone());
    let limits = state
        .manager
        .resolve_limits(&limits.unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    request.limits = Some(limits);
    let detail = json!({
        "name": request.name,
        "geometry": request.geometry,
        "limits": LimitsBody::from(&limits),
        "policy": policy,
    });
    let kind = EventKind::WorkspaceCreate;
    let started = state.audit.begin(ctx, kind, None, detail).await?;
    let created = state.manager.create_or_take(request).await;
    // The outcome row is the workspace's: made and running (or taken ready
    // from the warm pool), or made and removed again with the reason.
    let (workspace, detail) = match &created {
        Ok((ws, pooled)) => {
            if *pooled {
                // Its time limits count from now, not from when it was pooled.
                state.audit.activity().started(&ws.id);
            }
            (
                Some(ws.id.clone()),
                json!({ "backend": ws.backend, "from_pool": pooled }),
            )
        }
        Err(ManagerError::StartFailed { id, reason }) => {
            (Some(id.clone()), json!({ "reason": reason }))
        }
        Err(err) => (None, json!({ "reason": err.to_string() })),
    };
    let created = match created.map(|(ws, _)| ws).map_err(ApiError::from) {
        Ok(ws) => state
            .gates
            .assign(&state.store, &ws.id, &policy, Some(&ctx.token.id))
            .await
            .map(|()| ws),
        Err(err) => Err(err),
    };
    started
        .finish_on(workspace.as_deref(), &created, detail)
        .await;
    created
}

/// The warm pool's counters (size, ready, filling, hits, misses, failures).
pub fn pool(
    state: &AppState,
    ctx: &OpContext,
) -> Result<cubicle_runtime::pool::PoolStats, ApiError> {
    ctx.require(Permission::WorkspacesView)?;
    Ok(state.manager.pool_stats())
}

/// The workspaces the caller may see.
pub async fn list(state: &AppState, ctx: &OpContext) -> Result<Vec<WorkspaceRecord>, ApiError> {
    ctx.require(Permission::WorkspacesView)?;
    let all = state.manager.list().await?;
    Ok(all.into_iter().filter(|ws| ctx.sees(ws)).collect())
}

pub async fn get(state: &AppState, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await
}

/// What the workspace uses now, next to its limits.
pub async fn usage(state: &AppState, ctx: &OpContext, id: &str) -> Result<Usage, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    Ok(state.manager.usage(id).await?)
}

pub async fn start(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
) -> Result<WorkspaceRecord, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    let manager = state.manager.clone();
    let run = async move { manager.start(id).await.map_err(ApiError::from) };
    let kind = EventKind::WorkspaceStart;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

pub async fn stop(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
) -> Result<WorkspaceRecord, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    let run = async {
        state.screens.close(id);
        state.manager.stop(id).await.map_err(ApiError::from)
    };
    let kind = EventKind::WorkspaceStop;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

/// Freezes a running workspace (memory kept, no CPU); until it is resumed
/// it refuses input and every other change with 409 `paused`.
pub async fn pause(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
) -> Result<WorkspaceRecord, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    let run = async { state.manager.pause(id).await.map_err(ApiError::from) };
    let kind = EventKind::WorkspacePause;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

/// Thaws a paused workspace: the same desktop continues.
pub async fn resume(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
) -> Result<WorkspaceRecord, ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    let run = async { state.manager.resume(id).await.map_err(ApiError::from) };
    let kind = EventKind::WorkspaceResume;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

pub async fn delete(state: &AppState, ctx: &OpContext, id: &str) -> Result<(), ApiError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    let run = async {
        state.screens.close(id);
        state.manager.delete(id).await.map_err(ApiError::from)
    };
    let kind = EventKind::WorkspaceDelete;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}
