//! Who holds a workspace's controls: read it, take over, hand back, follow
//! it. The lock itself and its events are [`crate::control::Controls`];
//! these are the operations every door calls.

use tokio::sync::watch;

use super::{OpContext, Permission, access};
use crate::control::Control;
use crate::error::OpError;
use crate::ops::Core;

/// Who holds workspace `id`'s controls now.
pub async fn get(state: &Core, ctx: &OpContext, id: &str) -> Result<Control, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    Ok(state.control.current(id))
}

/// The caller (an operator or admin) takes over running workspace `id`:
/// agent input gets 409 until it hands back.
pub async fn take(state: &Core, ctx: &OpContext, id: &str) -> Result<Control, OpError> {
    access::running(state, ctx, id, Permission::ControlHold).await?;
    Ok(state.control.take(&state.store, id, ctx).await?)
}

/// The caller hands workspace `id`'s controls back to the agent.
pub async fn release(state: &Core, ctx: &OpContext, id: &str) -> Result<Control, OpError> {
    access::workspace(state, ctx, id, Permission::ControlHold).await?;
    Ok(state.control.release(&state.store, id, ctx).await?)
}

/// Follows who holds workspace `id`'s controls (the current holder first).
pub async fn follow(
    state: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<watch::Receiver<Control>, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    let mut control = state.control.subscribe(id);
    control.mark_changed();
    Ok(control)
}
