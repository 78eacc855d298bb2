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

use crate::wire::path::Path;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::response::Response;

use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};

/// Largest WebSocket message a viewer may send (a whole ClientCutText fits).
const MAX_VIEWER_MESSAGE: usize = rfb_parse::MAX_CUT_TEXT + 64 * 1024;

/// The live view.
#[utoipa::path(get, path = "/v1/workspaces/{id}/vnc", tag = "live view", params(("id" = String, Path)),
    responses((status = 101, description = "WebSocket (subprotocol `binary`) carrying the desktop's RFB 3.8 stream; input is forwarded only from the holder of the control lock"),
        crate::wire::doc::InGuest))]
pub async fn upgrade(
    State(state): State<AppState>,
    caller: OpContext,
    Path(id): Path<String>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, OpError> {
    // The gate first: a workspace the caller may not see is a 404 whatever
    // the request looks like.
    let channel = ops::live_view::may_view(&state, &caller, &id).await?;
    let ws = ws.map_err(|rejection| {
        OpError::new(
            ErrorKind::Transport(rejection.status()),
            "bad_request",
            format!("expected a WebSocket upgrade: {}", rejection.body_text()),
        )
    })?;
    let opened = ops::live_view::open(&state, &caller, &id, &channel).await?;
    Ok(ws
        .protocols(["binary"])
        .max_message_size(MAX_VIEWER_MESSAGE)
        .on_upgrade(move |socket| async move {
            let started = std::time::Instant::now();
            let ops::live_view::Opened {
                guest,
                viewer,
                watching,
            } = opened;
            let close = bridge::run(socket, guest, viewer).await;
            drop(watching);
            let seconds = started.elapsed().as_secs();
            ops::live_view::closed(&state, &caller, &id, &close, seconds).await;
        }))
}
