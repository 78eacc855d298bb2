//! Workspace lifecycle operations: create, list, get, start, stop, delete.

use cubicle_runtime::limits::Usage;
use cubicle_runtime::manager::ManagerError;
use cubicle_runtime::state::WorkspaceRecord;
use serde_json::json;

use super::audit::EventKind;
use super::guard_rails::{self, Chosen};
use super::{OpContext, Permission, access};
use crate::error::OpError;
use crate::ops::Core;
use crate::wire::workspace::CreateAsk;

/// Creates a workspace owned by the caller; returns it once ready, with
/// the guard rails it was given. Which rails the caller may have is
/// decided here, for every door ([`guard_rails::choose`]: the server's
/// defaults or the named template's, narrower ones, or wider ones for
/// those who may manage them); they are in place before any process of it
/// starts (its policy, egress, recording and time limits are what its
/// start reads), never patched in while it already runs.
pub async fn create(
    state: &Core,
    ctx: &OpContext,
    ask: CreateAsk,
) -> Result<(WorkspaceRecord, Chosen), OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let CreateAsk {
        mut request,
        rails,
        template,
        profile,
        snapshot,
        count: _,
    } = ask;
    request.owner_token = Some(ctx.token.id.clone());
    let chosen = guard_rails::choose(state, ctx, &rails, template.as_deref());
    let defaults = state.manager.default_time_limits();
    let detail = json!({
        "name": request.name,
        "geometry": request.geometry,
        "template": template,
        "profile": profile,
        "from_snapshot": snapshot,
        "asked": rails.describe(),
        "rails": chosen.as_ref().ok().map(|c| c.describe(defaults)),
    });
    let kind = EventKind::WorkspaceCreate;
    let started = state.audit.begin(ctx, kind, None, detail).await?;
    let profile = match &profile {
        Some(name) => super::profiles::for_create(state, ctx, name)
            .await
            .map(Some),
        None => Ok(None),
    };
    let snapshot = match &snapshot {
        Some(id) => super::snapshots::for_create(state, ctx, id).await.map(Some),
        None => Ok(None),
    };
    let asked = chosen.and_then(|chosen| profile.map(|profile| (chosen, profile)));
    let chosen = match asked.and_then(|(chosen, profile)| snapshot.map(|s| (chosen, profile, s))) {
        Ok((chosen, profile, snapshot)) => {
            request.profile = profile.map(|row| row.id);
            request.snapshot = snapshot;
            chosen
        }
        Err(err) => {
            let detail = json!({ "reason": err.message });
            let refused = Err(err);
            started.finish_on(None, &refused, detail).await;
            return refused;
        }
    };
    if let Some(snapshot) = &request.snapshot
        && let Err(err) = super::snapshots::fits(state, snapshot, &chosen.limits)
    {
        let detail = json!({ "reason": err.message });
        let refused = Err(err);
        started.finish_on(None, &refused, detail).await;
        return refused;
    }
    request.limits = Some(chosen.limits);
    // The pool's workspaces run with the server's defaults: only a create
    // that gets exactly those may take one.
    // A profile is loaded as the browser starts: a pooled one has started.
    // A pool filled from a snapshot serves only creates from it (the
    // manager matches the snapshot).
    request.from_pool = request.profile.is_none()
        && chosen.egress.is_none()
        && chosen.policy == state.gates.default_policy
        && chosen.time_limits.is_empty()
        && chosen.record;
    let prepare = |ws: WorkspaceRecord| {
        let chosen = &chosen;
        async move {
            apply(state, ctx, &ws.id, chosen)
                .await
                .map_err(|e| format!("cannot set its guard rails: {}", e.message))
        }
    };
    let snapshot_sha256 = request.snapshot.as_ref().map(|s| s.sha256.clone());
    let created = state.manager.create_or_take(request, prepare).await;
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
                json!({
                    "backend": ws.backend,
                    "from_pool": pooled,
                    "snapshot_sha256": snapshot_sha256,
                }),
            )
        }
        Err(ManagerError::StartFailed { id, reason }) => {
            (Some(id.clone()), json!({ "reason": reason }))
        }
        Err(err) => (None, json!({ "reason": err.to_string() })),
    };
    let created = created.map(|(ws, _)| (ws, chosen)).map_err(OpError::from);
    started
        .finish_on(workspace.as_deref(), &created, detail)
        .await;
    created
}

/// `count` workspaces from one snapshot (`ask.count`), started at once,
/// each its own create (and event); what each came to, in order.
pub async fn create_many(
    state: &Core,
    ctx: &OpContext,
    ask: CreateAsk,
) -> Vec<Result<(WorkspaceRecord, Chosen), OpError>> {
    let count = ask.count.unwrap_or(1).min(super::snapshots::MAX_FORKS);
    let creates = (0..count).map(|_| create(state, ctx, ask.clone()));
    futures_util::future::join_all(creates).await
}

/// Puts workspace `id`'s guard rails where its start reads them (each
/// setting its own event in its chain), before it runs.
async fn apply(state: &Core, ctx: &OpContext, id: &str, chosen: &Chosen) -> Result<(), OpError> {
    state
        .gates
        .assign(&state.store, id, &chosen.policy, Some(&ctx.token.id))
        .await?;
    if let Some(egress) = &chosen.egress {
        super::egress::set_at_create(state, ctx, id, egress.clone()).await?;
    }
    if !chosen.time_limits.is_empty() {
        super::expiry::set_at_create(state, ctx, id, chosen.time_limits).await?;
    }
    if !chosen.record {
        super::replay::opt_out(state, ctx, id).await?;
    }
    Ok(())
}

/// The warm pool's counters (size, ready, filling, hits, misses, failures).
pub fn pool(state: &Core, ctx: &OpContext) -> Result<cubicle_runtime::pool::PoolStats, OpError> {
    ctx.require(Permission::WorkspacesView)?;
    Ok(state.manager.pool_stats())
}

/// The workspaces the caller may see.
pub async fn list(state: &Core, ctx: &OpContext) -> Result<Vec<WorkspaceRecord>, OpError> {
    ctx.require(Permission::WorkspacesView)?;
    let all = state.manager.list().await?;
    Ok(all.into_iter().filter(|ws| ctx.sees(ws)).collect())
}

pub async fn get(state: &Core, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await
}

/// What the workspace uses now, next to its limits.
pub async fn usage(state: &Core, ctx: &OpContext, id: &str) -> Result<Usage, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    Ok(state.manager.usage(id).await?)
}

pub async fn start(state: &Core, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(state, ctx, id)?;
    let manager = state.manager.clone();
    let run = async move { manager.start(id).await.map_err(OpError::from) };
    let kind = EventKind::WorkspaceStart;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

pub async fn stop(state: &Core, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(state, ctx, id)?;
    let run = async {
        state.hosts.close_screen(id);
        state.manager.stop(id).await.map_err(OpError::from)
    };
    let kind = EventKind::WorkspaceStop;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

/// Freezes a running workspace (memory kept, no CPU); until it is resumed
/// it refuses input and every other change with 409 `paused`.
pub async fn pause(state: &Core, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(state, ctx, id)?;
    let run = async { state.manager.pause(id).await.map_err(OpError::from) };
    let kind = EventKind::WorkspacePause;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

/// Thaws a paused workspace: the same desktop continues.
pub async fn resume(state: &Core, ctx: &OpContext, id: &str) -> Result<WorkspaceRecord, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(state, ctx, id)?;
    let run = async { state.manager.resume(id).await.map_err(OpError::from) };
    let kind = EventKind::WorkspaceResume;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}

pub async fn delete(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(state, ctx, id)?;
    let run = async {
        state.hosts.close_screen(id);
        state.manager.delete(id).await.map_err(OpError::from)
    };
    let kind = EventKind::WorkspaceDelete;
    state
        .audit
        .run(ctx, kind, Some(id), json!({}), run, |_| json!({}))
        .await
}
