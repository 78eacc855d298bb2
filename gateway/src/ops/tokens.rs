//! Tokens: make one (its secret is in the answer and nowhere else), list
//! them, revoke one. The REST door and the CLI (root on the host, acting as
//! [`OpContext::host_cli`]) call the same operations, so both are checked
//! and written to the event log the same way: no event, no operation.
//!
//! These take the store and the event writer rather than the daemon's
//! whole state: the CLI has no daemon.

use cubicle_runtime::state::Store;
use cubicle_runtime::tokens::{self, Role, Token, TokenInfo};
use serde_json::json;

use super::audit::Audit;
use super::{EventKind, OpContext, Permission};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::wire::token::TokenRequest;

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Makes a token; returns it with its secret (shown this once).
/// Whether the caller's role may create tokens at all: the door asks before
/// it reads the body, so a caller without the role gets 403, never a 400
/// about a body it may not send.
pub fn may_create(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::TokensManage)
}

pub async fn create(
    store: &Store,
    audit: &Audit,
    ctx: &OpContext,
    new: TokenRequest,
) -> Result<(Token, String), OpError> {
    may_create(ctx)?;
    let detail = json!({ "name": new.name, "role": new.role, "scope": new.scope });
    let run = async move {
        tokens::create(store, &new.name, new.role, new.scope)
            .await
            .map_err(store_error)
    };
    let summary = |(token, _): &(Token, String)| json!({ "token": token.id });
    audit
        .run(ctx, EventKind::TokenCreate, None, detail, run, summary)
        .await
}

/// Every token (never a secret).
pub async fn list(store: &Store, ctx: &OpContext) -> Result<Vec<TokenInfo>, OpError> {
    ctx.require(Permission::TokensManage)?;
    tokens::list(store).await.map_err(store_error)
}

/// What a revoke did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    Now,
    /// It was revoked before: nothing changed, no event.
    Already,
}

/// Revokes token `id` in the store (the last live admin token is kept).
/// `also` runs inside the operation once it is revoked: the daemon ends
/// the token's open connections there.
pub async fn revoke(
    store: &Store,
    audit: &Audit,
    ctx: &OpContext,
    id: &str,
    also: impl FnOnce(),
) -> Result<Revoked, OpError> {
    ctx.require(Permission::TokensManage)?;
    let token = tokens::get(store, id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            OpError::new(
                ErrorKind::NotFound,
                "not_found",
                format!(
                    "no token with id {id:?} (`cubicle token list` or GET /v1/tokens lists them)"
                ),
            )
        })?;
    if token.revoked_at.is_some() {
        return Ok(Revoked::Already);
    }
    let admins = tokens::live_admins(store).await.map_err(store_error)?;
    if token.role == Role::Admin && admins <= 1 {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "last_admin",
            format!(
                "{id} is the last live admin token: create another admin token before revoking it"
            ),
        ));
    }
    let run = async {
        tokens::revoke(store, id).await.map_err(store_error)?;
        also();
        Ok(())
    };
    let detail = json!({ "token": id });
    audit
        .run(
            ctx,
            EventKind::TokenRevoke,
            None,
            detail,
            run,
            |_| json!({}),
        )
        .await?;
    Ok(Revoked::Now)
}

/// Revokes token `id` in the running daemon: its open live views and event
/// streams close, and any control it holds goes back to the agent.
pub async fn revoke_live(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    let revoked = revoke(&state.store, &state.audit, ctx, id, || {
        state.revocations.revoke(id);
    })
    .await?;
    if revoked == Revoked::Now {
        let by = ctx.actor();
        state.control.release_token(&state.store, id, &by).await?;
    }
    Ok(())
}
