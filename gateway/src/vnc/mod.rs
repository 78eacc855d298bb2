//! The live view: a WebSocket carrying the workspace's RFB stream (binary
//! frames, the `binary` subprotocol noVNC asks for) to and from Xvnc through
//! the guest channel, one Xvnc connection per viewer.
//!
//! The gateway does both RFB handshakes itself ([`handshake`]). The
//! viewer→workspace direction is parsed ([`rfb_parse`]) and filtered
//! ([`filter`]): input reaches the desktop only from the holder of the
//! control lock ([`crate::control`]); malformed RFB closes that viewer with a
//! reason. The workspace→viewer direction goes through a bounded queue per
//! viewer; a viewer that falls too far behind is dropped ([`bridge`]).

pub mod bridge;
pub mod filter;
pub mod handshake;
pub mod rfb_parse;

use crate::api::path::Path;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::response::Response;
use cubicle_guest::ports;

use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::{EventKind, OpContext, Permission, access};
use serde_json::json;

/// Largest WebSocket message a viewer may send (a whole ClientCutText fits).
const MAX_VIEWER_MESSAGE: usize = rfb_parse::MAX_CUT_TEXT + 64 * 1024;

/// The live view.
#[utoipa::path(get, path = "/v1/workspaces/{id}/vnc", tag = "live view", params(("id" = String, Path)),
    responses((status = 101, description = "WebSocket (subprotocol `binary`) carrying the desktop's RFB 3.8 stream; input is forwarded only from the holder of the control lock"),
        crate::openapi::InGuest))]
pub async fn upgrade(
    State(state): State<AppState>,
    caller: OpContext,
    Path(id): Path<String>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // The gate first: a workspace the caller may not see is a 404 whatever
    // the request looks like.
    let channel = access::guest(&state, &caller, &id, Permission::ScreenView).await?;
    let ws = ws.map_err(|rejection| {
        ApiError::new(
            rejection.status(),
            "bad_request",
            format!("expected a WebSocket upgrade: {}", rejection.body_text()),
        )
    })?;
    let turn = handshake::turn().await;
    let mut guest = channel.connect(ports::RFB).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            "guest_unreachable",
            format!("cannot reach the workspace's display: {e}"),
        )
    })?;
    let server_init = handshake::with_display(&mut guest).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            "display_unavailable",
            e.to_string(),
        )
    })?;
    drop(turn);
    // An open live view keeps the workspace in use (idle timeouts).
    let watching = state.audit.activity().watch(&id);
    state
        .audit
        .note(
            Some(&caller),
            EventKind::LiveViewOpen,
            Some(&id),
            json!({}),
            None,
        )
        .await?;
    let audit = state.audit.clone();
    let ctx = caller.clone();
    let workspace = id.clone();
    let viewer = bridge::Viewer {
        control: state.control.subscribe(&id),
        revoked: state
            .revocations
            .watch(state.store.clone(), &caller.token.id),
        token: caller.token.clone(),
        workspace: id,
        server_init,
        state: state.clone(),
        ctx: caller.clone(),
    };
    Ok(ws
        .protocols(["binary"])
        .max_message_size(MAX_VIEWER_MESSAGE)
        .on_upgrade(move |socket| async move {
            let opened = std::time::Instant::now();
            let close = bridge::run(socket, guest, viewer).await;
            drop(watching);
            // Who ended it and why: the viewer (1000), or the gateway with
            // its reason (revoked token, malformed RFB, too slow, ...).
            let detail = json!({
                "code": close.code,
                "by": if close.code == 1000 { "viewer" } else { "gateway" },
                "reason": close.reason,
                "seconds": opened.elapsed().as_secs(),
            });
            let noted = audit
                .note(Some(&ctx), EventKind::LiveViewClose, Some(&workspace), detail, None)
                .await;
            if let Err(err) = noted {
                tracing::error!(workspace = %workspace, err = %err.message, "cannot record a live view's close");
            }
        }))
}
