//! Who holds a workspace's controls: read it, take over, hand back, follow
//! it. The lock itself and its events are [`crate::control::Controls`];
//! these are the operations every door calls.

use tokio::sync::watch;

use super::{OpContext, Permission, access};
use cubicle_runtime::tokens::Token;

use crate::error::OpError;
use crate::ops::Core;
use crate::slots::Control;

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
    let may_override = super::permission::granted(ctx.token.role, Permission::ControlOverride);
    Ok(state
        .control
        .release(&state.store, id, ctx, may_override)
        .await?)
}

/// The agent calls for a person on running workspace `id` (`reason`: text
/// as [`super::approvals::check_text`] judges it): the page shows
/// the workspace as waiting, a `control.call` event fires webhooks, and
/// the call stands until an operator takes over. Any role that may ask a
/// person (agents, operators, admins).
pub async fn call(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    reason: &str,
) -> Result<Control, OpError> {
    ctx.require(Permission::ApprovalsAsk)?;
    super::approvals::check_text("reason", reason, true)?;
    access::running(state, ctx, id, Permission::ApprovalsAsk).await?;
    Ok(state.control.call(&state.store, id, ctx, reason).await?)
}

/// Whether the caller's role may call a person at all (a 403 before any
/// 400 about the body).
pub fn may_call(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::ApprovalsAsk)
}

/// Whether `token` holds `control`: it is the holder, and its role may
/// hold control at all (a holder restored from the log that names a token
/// of another role gives it nothing).
pub fn holds(control: &Control, token: &Token) -> bool {
    super::permission::granted(token.role, Permission::ControlHold) && control.is_held_by(token)
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

#[cfg(test)]
mod tests {
    use cubicle_runtime::tokens::Role;

    use super::*;
    use crate::slots::Holder;

    #[test]
    fn a_reason_is_words_a_person_reads() {
        use crate::ops::approvals::{MAX_REASON, check_text};
        assert!(check_text("reason", "log in to the bank, please\nthen hand back", true).is_ok());
        // Optional (a decision's reason): blank is fine, the rest is not.
        assert!(check_text("reason", "", false).is_ok());
        for bad in ["", "   ", "\u{1b}[31mred", &"x".repeat(MAX_REASON + 1)] {
            let err = check_text("reason", bad, true).unwrap_err();
            assert!(
                err.message.starts_with("reason:"),
                "{bad:?}: {}",
                err.message
            );
        }
    }

    /// A holder restored from the log naming an auditor's or an agent's
    /// token gives that token no input; the operator it names holds.
    #[test]
    fn only_a_role_that_may_hold_control_holds_it() {
        let token = |role| Token {
            id: "tok-a".into(),
            name: "a".into(),
            role,
            scope: Default::default(),
        };
        let control = Control {
            holder: Holder::Operator {
                token_id: "tok-a".into(),
                name: "a".into(),
                role: "operator".into(),
            },
            since_ms: 0,
            paused: false,
            call: None,
        };
        for role in [Role::Agent, Role::Auditor] {
            assert!(!holds(&control, &token(role)), "{role:?}");
        }
        for role in [Role::Operator, Role::Admin] {
            assert!(holds(&control, &token(role)), "{role:?}");
        }
    }
}
