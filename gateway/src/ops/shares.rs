//! Share links: a URL that opens one workspace's live view for a person
//! without a token of their own. Behind it is a token of role `viewer`
//! (view mode: the screen, never input) or `guest` (control mode: the
//! screen, and the controls once they take them; their input reaches the
//! desktop only while they hold them, as an operator's does), reaching only
//! that workspace, until it expires or is revoked. The secret is in the
//! URL's fragment, which browsers never send to the server; the share page
//! sends it as a bearer token. A dead link answers 410 on every door and
//! shows nothing of the workspace ([`crate::auth`]); revoking one closes
//! its open live views at once and gives back control it held.
//!
//! Operators and admins make, list and revoke them; each is an event, and
//! so is every open of the share page (`share.open`), beside the live
//! view's own `live_view.open`.

use cubicle_runtime::tokens::{self, Role, Scope, Share};
use serde::Serialize;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::wire::share::ShareMode;

/// A share link as the API shows it (the secret only once, at its making).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ShareView {
    pub id: String,
    pub workspace: String,
    /// `view` or `control`.
    pub mode: &'static str,
    /// `live`, `expired` or `revoked`.
    pub state: &'static str,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    /// The link to send (make only): `/share#<secret>`, to be opened on
    /// this gateway's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl ShareView {
    fn of(share: &Share) -> Self {
        let now = cubicle_runtime::state::now_ms();
        Self {
            id: share.id.clone(),
            workspace: share.workspace.clone(),
            mode: mode_of(share.role),
            state: if share.revoked_at.is_some() {
                "revoked"
            } else if share.expires_at <= now {
                "expired"
            } else {
                "live"
            },
            created_at_ms: share.created_at,
            expires_at_ms: share.expires_at,
            revoked_at_ms: share.revoked_at,
            url: None,
        }
    }
}

fn mode_of(role: Role) -> &'static str {
    if role == Role::Guest {
        "control"
    } else {
        "view"
    }
}

/// What the share page learns when it opens: the workspace and what it may
/// do there.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ShareOpened {
    pub workspace: String,
    pub mode: &'static str,
    pub expires_at_ms: i64,
}

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether the caller's role may make share links: asked before a body is
/// read.
pub fn may_manage(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::SharesManage)
}

/// Makes a share link to workspace `id`.
pub async fn create(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    mode: ShareMode,
    expires_in_s: u64,
) -> Result<ShareView, OpError> {
    may_manage(ctx)?;
    access::workspace(core, ctx, id, Permission::SharesManage).await?;
    let role = match mode {
        ShareMode::View => Role::Viewer,
        ShareMode::Control => Role::Guest,
    };
    let expires_at = cubicle_runtime::state::now_ms() + (expires_in_s as i64) * 1000;
    let name = format!("share link ({}) of {id}", mode_of(role));
    let detail = json!({ "mode": mode_of(role), "expires_at_ms": expires_at });
    let store = &core.store;
    let run = async {
        let (token, secret) = tokens::create_share(store, id, role, &name, expires_at)
            .await
            .map_err(store_error)?;
        let share = Share {
            id: token.id,
            workspace: id.to_owned(),
            role,
            name,
            created_at: cubicle_runtime::state::now_ms(),
            expires_at,
            revoked_at: None,
        };
        let mut view = ShareView::of(&share);
        view.url = Some(format!("/share#{secret}"));
        Ok(view)
    };
    core.audit
        .run(
            ctx,
            EventKind::ShareCreate,
            Some(id),
            detail,
            run,
            |view: &ShareView| json!({ "share": view.id }),
        )
        .await
}

/// Workspace `id`'s share links, dead ones included.
pub async fn list(core: &Core, ctx: &OpContext, id: &str) -> Result<Vec<ShareView>, OpError> {
    may_manage(ctx)?;
    access::workspace(core, ctx, id, Permission::SharesManage).await?;
    let shares = tokens::shares_of(&core.store, id)
        .await
        .map_err(store_error)?;
    Ok(shares.iter().map(ShareView::of).collect())
}

/// Revokes share link `share` of workspace `id`: its open live views close
/// at once, control it held goes back to the agent, and the link answers
/// 410 from then on.
pub async fn revoke(core: &Core, ctx: &OpContext, id: &str, share: &str) -> Result<(), OpError> {
    may_manage(ctx)?;
    access::workspace(core, ctx, id, Permission::SharesManage).await?;
    let shares = tokens::shares_of(&core.store, id)
        .await
        .map_err(store_error)?;
    let Some(found) = shares.iter().find(|s| s.id == share) else {
        return Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!(
                "workspace {id} has no share link {share:?} (GET /v1/workspaces/{id}/shares lists them)"
            ),
        ));
    };
    if found.revoked_at.is_some() {
        return Ok(());
    }
    let store = &core.store;
    let run = async {
        tokens::revoke(store, share).await.map_err(store_error)?;
        core.revocations.revoke(share);
        Ok(())
    };
    let detail = json!({ "share": share });
    core.audit
        .run(ctx, EventKind::ShareRevoke, Some(id), detail, run, |_| {
            json!({})
        })
        .await?;
    let by = ctx.actor();
    core.control.release_token(&core.store, share, &by).await?;
    Ok(())
}

/// The share page opening with the caller's link: which workspace, what
/// it may do (an event each time).
pub async fn open(core: &Core, ctx: &OpContext) -> Result<ShareOpened, OpError> {
    let not_a_share = || {
        OpError::new(
            ErrorKind::BadRequest,
            "not_a_share_link",
            "this is for share links' tokens (the part after # in a /share link); other tokens open / instead",
        )
    };
    let workspace = match (&ctx.token.role, &ctx.token.scope) {
        (Role::Viewer | Role::Guest, Scope::Only(ids)) if ids.len() == 1 => ids[0].clone(),
        _ => return Err(not_a_share()),
    };
    let shares = tokens::shares_of(&core.store, &workspace)
        .await
        .map_err(store_error)?;
    let share = shares
        .iter()
        .find(|s| s.id == ctx.token.id)
        .ok_or_else(not_a_share)?;
    access::workspace(core, ctx, &workspace, Permission::ScreenView).await?;
    let opened = ShareOpened {
        workspace: workspace.clone(),
        mode: mode_of(share.role),
        expires_at_ms: share.expires_at,
    };
    let detail = json!({ "share": share.id, "mode": opened.mode });
    let run = async { Ok(opened) };
    core.audit
        .run(
            ctx,
            EventKind::ShareOpen,
            Some(&workspace),
            detail,
            run,
            |_| json!({}),
        )
        .await
}
