//! The CDP proxy: a workspace's Chromium DevTools endpoint, for agents.
//!
//! | route under `/v1/workspaces/{id}/cdp` | what |
//! | --- | --- |
//! | `/json/version`, `/json/version/` | Chromium's, with `webSocketDebuggerUrl` on the gateway |
//! | `/json`, `/json/list` (also with `/`) | the targets, each `webSocketDebuggerUrl` on the gateway |
//! | `` (WebSocket) | the browser endpoint |
//! | `/page/{target}` (WebSocket) | one target's endpoint |
//!
//! So Playwright's `connectOverCDP(url, {headers})` and Puppeteer's
//! `connect` work unchanged with a token. Chromium serves DevTools on no
//! port, only over a pipe to the workspace's supervisor, which serves it to
//! the guest channel (port 9222) with a session per connection; so the
//! gateway is its only client. Every message of every connection passes through
//! [`crate::cdp::inspect::inspect`], the hook for the policy. Agents, operators and
//! admins may use the browser; auditors may not.
//!
//! Read [`relay`] for the WebSocket side, [`crate::cdp::inspect`] for what is allowed.

mod hold;
mod relay;

use crate::wire::path::Path;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::cdp::{CdpError, MAX_MESSAGE, discovery, open_browser, rewrite};
use crate::error::OpError;
use crate::ops::{EventKind, OpContext};
use crate::revocation::RevocationWatch;

/// The CDP routes.
pub fn routes() -> Router<AppState> {
    let base = "/v1/workspaces/{id}/cdp";
    let mut router = Router::new()
        .route(base, get(browser_socket))
        .route(&format!("{base}/page/{{target}}"), get(page_socket));
    for path in ["/json/version", "/json/version/"] {
        router = router.route(&format!("{base}{path}"), get(json_version));
    }
    for path in ["/json", "/json/", "/json/list", "/json/list/"] {
        router = router.route(&format!("{base}{path}"), get(json_list));
    }
    router
}

/// Chromium's discovery document at `path`, and the origin its URLs are
/// rewritten to.
async fn discover(
    state: &AppState,
    caller: &OpContext,
    id: &str,
    headers: &HeaderMap,
    uri: &Uri,
    path: &str,
) -> Result<(Value, rewrite::PublicOrigin), OpError> {
    let channel = crate::ops::cdp::may_use_browser(state, caller, id).await?;
    let origin = rewrite::PublicOrigin::of_request(headers, uri)?;
    Ok((discovery::get_json(&channel, path).await?, origin))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/cdp/json/version", tag = "browser", params(("id" = String, Path)), responses((status = 200, description = "Chromium's /json/version with webSocketDebuggerUrl pointing at the gateway; the WebSocket is GET /v1/workspaces/{id}/cdp"), crate::wire::doc::InGuest))]
pub async fn json_version(
    State(state): State<AppState>,
    caller: OpContext,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, OpError> {
    let (version, origin) = discover(&state, &caller, &id, &headers, &uri, "/json/version").await?;
    Ok(Json(rewrite::version(version, &origin, &id)))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/cdp/json/list", tag = "browser", params(("id" = String, Path)), responses((status = 200, description = "Targets, with URLs rewritten to the gateway"), crate::wire::doc::InGuest))]
pub async fn json_list(
    State(state): State<AppState>,
    caller: OpContext,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, OpError> {
    let (targets, origin) = discover(&state, &caller, &id, &headers, &uri, "/json/list").await?;
    Ok(Json(rewrite::list(targets, &origin, &id)))
}

/// WebSocket to the browser endpoint (its path is learnt from
/// `/json/version` each time: it changes when Chromium restarts).
#[utoipa::path(get, path = "/v1/workspaces/{id}/cdp", tag = "browser", params(("id" = String, Path)),
    responses((status = 101, description = "WebSocket to the browser endpoint (CDP); every call is inspected, logged, and refused while an operator holds control if it changes the page"),
        crate::wire::doc::InGuest))]
pub async fn browser_socket(
    State(state): State<AppState>,
    caller: OpContext,
    Path(id): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, OpError> {
    let channel = crate::ops::cdp::may_use_browser(&state, &caller, &id).await?;
    let upgrade = upgrade.map_err(|e| CdpError::NotWebSocket(e.body_text()))?;
    let version = discovery::get_json(&channel, "/json/version").await?;
    let path = rewrite::browser_path(&version)?;
    let browser = open_browser(&channel, &path).await?;
    accept(state, caller, upgrade, browser, id, "browser").await
}

/// WebSocket to one target (`/devtools/page/{target}`).
#[utoipa::path(get, path = "/v1/workspaces/{id}/cdp/page/{target}", tag = "browser", params(("id" = String, Path), ("target" = String, Path)),
    responses((status = 101, description = "WebSocket to one target (CDP), inspected like the browser endpoint"),
        crate::wire::doc::InGuest))]
pub async fn page_socket(
    State(state): State<AppState>,
    caller: OpContext,
    Path((id, target)): Path<(String, String)>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, OpError> {
    let channel = crate::ops::cdp::may_use_browser(&state, &caller, &id).await?;
    if !rewrite::valid_target(&target) {
        return Err(CdpError::BadTarget(target).into());
    }
    let upgrade = upgrade.map_err(|e| CdpError::NotWebSocket(e.body_text()))?;
    let path = format!("/devtools/page/{target}");
    let browser = open_browser(&channel, &path)
        .await
        .map_err(|err| match err {
            CdpError::Handshake { .. } => CdpError::NoTarget(target),
            other => other,
        })?;
    accept(state, caller, upgrade, browser, id, &path).await
}

/// Relays until either side ends or the caller's token is revoked (then
/// both sockets are dropped, which closes them).
async fn accept(
    state: AppState,
    ctx: OpContext,
    upgrade: WebSocketUpgrade,
    browser: crate::cdp::Browser,
    id: String,
    target: &str,
) -> Result<Response, OpError> {
    let revoked: RevocationWatch = state.revocations.watch(state.store.clone(), &ctx.token.id);
    let detail = json!({ "target": target });
    state
        .audit
        .note(
            Some(&ctx),
            EventKind::CdpOpen,
            Some(&id),
            detail.clone(),
            None,
        )
        .await?;
    Ok(upgrade
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            let audit = state.audit.clone();
            let cdp = crate::ops::cdp::CdpSession {
                state: state.core.clone(),
                ctx: ctx.clone(),
                workspace: id.clone(),
            };
            tokio::select! {
                () = relay::run(socket, browser, cdp) => {}
                () = revoked.revoked() => {}
            }
            let closed = audit
                .note(Some(&ctx), EventKind::CdpClose, Some(&id), detail, None)
                .await;
            if let Err(err) = closed {
                tracing::error!(workspace = %id, err = %err.message, "cannot record a CDP close");
            }
        })
        .into_response())
}
