//! Time limits, the gateway's half: who used which workspace last (every
//! operation of the core with a caller touches its workspace and keeps it
//! in use while it runs; an open live view keeps it in use for as long as
//! it is open), the sweeper that
//! expires workspaces past their TTL or idle timeout (stop, home kept, or
//! delete, as set), and setting a workspace's limits at create.
//!
//! The rule itself is [`cubicle_runtime::time_limits::due`]; the limits a
//! workspace runs under are [`cubicle_runtime::manager::Manager::time_limits`].

use std::time::Duration;

use cubicle_runtime::state::{WorkspaceState, now_ms};
use cubicle_runtime::time_limits::{self, Expiry, OnExpiry, TimeLimitsSetting};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::OpError;
use crate::ops::Core;
use crate::wire::time_limits::TimeLimitsView;

/// How often the sweeper looks.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Sets workspace `id`'s own time limits as its creator asked (an event).
pub async fn set_at_create(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    setting: TimeLimitsSetting,
) -> Result<(), OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesCreate).await?;
    let effective = setting.over(state.manager.default_time_limits());
    let detail = json!({ "time_limits": TimeLimitsView::from(&effective) });
    let run = async {
        time_limits::set(&state.store, id, &setting)
            .await
            .map_err(|e| OpError::internal(format!("cannot store the time limits: {e}")))
    };
    let kind = EventKind::WorkspaceTimeLimits;
    state
        .audit
        .run(ctx, kind, Some(id), detail, run, |_| json!({}))
        .await
}

/// The time limits workspace `id` runs under, for its view.
pub async fn view_of(state: &Core, id: &str) -> Result<TimeLimitsView, OpError> {
    let limits = state.manager.time_limits(id).await?;
    Ok(TimeLimitsView::from(&limits))
}

/// Expires workspaces whose time is up, until `cancel`; the task it runs
/// in is owned by the daemon's serve loop.
pub async fn sweep(state: Core, cancel: CancellationToken) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        let Ok(records) = state.manager.list().await else {
            continue;
        };
        for record in records {
            // `stopping` with no operation on it: an expiry (or a stop)
            // that failed half-way; it is tried again, not left there.
            let stuck = record.state == WorkspaceState::Stopping && !state.manager.busy(&record.id);
            if !(stuck
                || matches!(
                    record.state,
                    WorkspaceState::Running | WorkspaceState::Paused
                ))
            {
                continue;
            }
            let Ok(limits) = state.manager.time_limits(&record.id).await else {
                continue;
            };
            if limits.is_none() {
                continue;
            }
            let (started, active, watched) = state.audit.activity().of(&record);
            if let Some(why) = time_limits::due(&limits, now_ms(), started, active, watched) {
                expire(&state, &record.id, why, limits.on_expiry).await;
            }
        }
    }
}

/// Stops or deletes workspace `id` because its time is up: the event
/// first (no event, no operation), then the operation, then its outcome.
async fn expire(state: &Core, id: &str, why: Expiry, action: OnExpiry) {
    let detail = json!({ "reason": why.as_str(), "action": action.as_str() });
    let kind = EventKind::WorkspaceExpire;
    let noted = state
        .audit
        .note(None, kind, Some(id), detail.clone(), Some("started"))
        .await;
    if let Err(err) = noted {
        tracing::error!(workspace = id, err = %err.message, "cannot record an expiry; not expiring");
        return;
    }
    tracing::info!(
        workspace = id,
        reason = why.as_str(),
        action = action.as_str(),
        "workspace expired"
    );
    state.hosts.close_screen(id);
    let result = match action {
        OnExpiry::Stop => state.manager.stop(id).await.map(|_| ()),
        OnExpiry::Delete => state.manager.delete(id).await,
    };
    let outcome = match result.map_err(OpError::from) {
        Ok(()) => "ok".to_owned(),
        Err(err) => {
            tracing::warn!(workspace = id, err = %err.message, "expiry failed; trying again");
            format!("error:{}", err.code)
        }
    };
    if let Err(err) = state
        .audit
        .note(None, kind, Some(id), detail, Some(&outcome))
        .await
    {
        tracing::error!(workspace = id, err = %err.message, "cannot record an expiry's outcome");
    }
}
