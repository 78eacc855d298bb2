//! The gate every workspace operation passes: the caller's permission, then
//! the workspace's existence and the caller's scope (a workspace outside it
//! is answered exactly like one that does not exist, so ids cannot be
//! probed), then, for operations that change the workspace, the control
//! lock. A paused workspace refuses everything that would reach it (input,
//! exec, files, the browser, the live view) with 409 `paused`, whoever asks:
//! [`running`] for each new request, and the control lock's pause flag for
//! connections that were open before the pause ([`under_control`],
//! [`agent_held_off`]).

use cubicle_runtime::backend::Backend;
use cubicle_runtime::channel::GuestChannel;
use cubicle_runtime::manager::ManagerError;
use cubicle_runtime::state::{WorkspaceRecord, WorkspaceState};

use super::{OpContext, Permission, permission};
use crate::control::ControlError;
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// Workspace `id`, if the caller has `permission` and may see it (a
/// deleted one is gone here, as for an id that never existed).
pub async fn workspace(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<WorkspaceRecord, OpError> {
    let record = any_workspace(state, ctx, id, permission).await?;
    if record.state == WorkspaceState::Deleted {
        return Err(ManagerError::NotFound(id.to_owned()).into());
    }
    Ok(record)
}

/// Workspace `id` in any state, deleted included (its history stays
/// readable), if the caller has `permission` and may see it.
pub async fn any_workspace(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<WorkspaceRecord, OpError> {
    ctx.require(permission)?;
    let record = state
        .store
        .get(id)
        .await
        .map_err(|e| OpError::internal(e.to_string()))?;
    match record {
        Some(record) if ctx.sees(&record) => Ok(record),
        _ => Err(ManagerError::NotFound(id.to_owned()).into()),
    }
}

/// Like [`workspace`], and it must be running.
pub async fn running(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<WorkspaceRecord, OpError> {
    let record = workspace(state, ctx, id, permission).await?;
    if record.state == WorkspaceState::Paused {
        return Err(ControlError::Paused {
            workspace: record.id,
        }
        .into());
    }
    if record.state != WorkspaceState::Running {
        return Err(ManagerError::Conflict {
            id: record.id,
            state: record.state.as_str(),
            reason: "it is not running".into(),
        }
        .into());
    }
    Ok(record)
}

/// The guest channel of a running workspace the caller may use.
pub async fn guest(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<GuestChannel, OpError> {
    let record = running(state, ctx, id, permission).await?;
    Ok(state
        .manager
        .backend()
        .channel(&state.manager.spec(&record)))
}

/// Refuses screen input (pointer, keys, typing) to workspace `id` while an
/// operator other than the caller holds its controls (409 `control_held`),
/// and anyone's while it is paused (409 `paused`). Only the holder's input
/// reaches the desktop then.
pub fn under_control(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    state
        .control
        .check_input(
            id,
            &ctx.token,
            permission::granted(ctx.token.role, Permission::ControlHold),
        )
        .map_err(OpError::from)
}

/// Refuses any other change to workspace `id` (exec, file writes and
/// deletes, CDP calls that change the page) from the agent while an operator
/// holds its controls. People who may hold control themselves (operators,
/// admins) may still look and fix things during a take-over: the lock is
/// there to stop the agent, and their actions are in the event log.
pub fn agent_held_off(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    state.control.check_running(id)?;
    if permission::granted(ctx.token.role, Permission::ControlHold) {
        return Ok(());
    }
    under_control(state, ctx, id)
}

/// Refuses a lifecycle change (start, stop, pause, resume, delete) of
/// workspace `id` from the agent while an operator holds its controls (409
/// `control_held`): an agent must not resume what the operator paused, or
/// stop and start its way out of a take-over. Operators and admins still
/// may. Unlike [`agent_held_off`], a paused workspace passes: resuming it
/// is one of these changes.
pub fn lifecycle_held_off(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    if permission::granted(ctx.token.role, Permission::ControlHold) {
        return Ok(());
    }
    // The caller's role may not hold control, so it is never the holder.
    state
        .control
        .check_holder(id, &ctx.token, false)
        .map_err(OpError::from)
}

/// The 502 for a workspace whose display cannot be reached.
pub fn display_unavailable(err: impl std::fmt::Display) -> OpError {
    OpError::new(
        ErrorKind::Unreachable,
        "display_unavailable",
        err.to_string(),
    )
}

/// Whether the caller may open an MCP session: its tools act on
/// workspaces (input, exec, files), so auditors may not.
pub fn mcp_session(ctx: OpContext) -> Result<OpContext, OpError> {
    ctx.require(Permission::Input)?;
    Ok(ctx)
}
