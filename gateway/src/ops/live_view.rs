//! The live view as operations: who may watch, opening the display for a
//! viewer (one Xvnc connection each, both RFB handshakes done here), and
//! the record of its end. The WebSocket door ([`crate::vnc`]) only checks
//! the upgrade and carries bytes; each message's input is judged by the
//! control lock and the gate as it passes ([`crate::vnc::bridge`]).

use cubicle_image::ports;
use cubicle_runtime::channel::GuestChannel;
use serde_json::json;
use tokio::net::UnixStream;

use super::activity::Watching;
use super::{EventKind, OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::vnc::bridge::{Close, Viewer};
use crate::vnc::handshake;

/// The channel to workspace `id`'s display, if the caller may watch it:
/// asked before the WebSocket upgrade, so a workspace the caller may not
/// see is a 404 whatever the request looks like.
pub async fn may_view(state: &Core, ctx: &OpContext, id: &str) -> Result<GuestChannel, OpError> {
    access::guest(state, ctx, id, Permission::ScreenView).await
}

/// One viewer's open display.
pub struct Opened {
    /// Its own connection to Xvnc, past the RFB handshake.
    pub guest: UnixStream,
    pub viewer: Viewer,
    /// Keeps the workspace in use (idle timeouts) while it is open.
    pub watching: Watching,
}

/// Opens workspace `id`'s display for the caller: its own Xvnc connection
/// with the handshake done, then the `live_view.open` event (no event, no
/// view).
pub async fn open(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    channel: &GuestChannel,
) -> Result<Opened, OpError> {
    let host = state.hosts.get(id);
    let turn = host.display_turn().await;
    let mut guest = channel.connect(ports::RFB).await.map_err(|e| {
        OpError::new(
            ErrorKind::Unreachable,
            "guest_unreachable",
            format!("cannot reach the workspace's display: {e}"),
        )
    })?;
    let server_init = handshake::with_display(&mut guest)
        .await
        .map_err(|e| OpError::new(ErrorKind::Unreachable, "display_unavailable", e.to_string()))?;
    drop(turn);
    let watching = state.audit.activity().watch(id);
    state
        .audit
        .note(
            Some(ctx),
            EventKind::LiveViewOpen,
            Some(id),
            json!({}),
            None,
        )
        .await?;
    let viewer = Viewer {
        control: state.control.subscribe(id),
        revoked: state.revocations.watch(state.store.clone(), &ctx.token.id),
        token: ctx.token.clone(),
        workspace: id.to_owned(),
        server_init,
        state: state.clone(),
        ctx: ctx.clone(),
    };
    Ok(Opened {
        guest,
        viewer,
        watching,
    })
}

/// Records how a live view ended: by the viewer (1000), or by the gateway
/// with its reason (revoked token, malformed RFB, too slow, ...).
pub async fn closed(state: &Core, ctx: &OpContext, id: &str, close: &Close, seconds: u64) {
    let detail = json!({
        "code": close.code,
        "by": if close.code == 1000 { "viewer" } else { "gateway" },
        "reason": close.reason,
        "seconds": seconds,
    });
    let noted = state
        .audit
        .note(Some(ctx), EventKind::LiveViewClose, Some(id), detail, None)
        .await;
    if let Err(err) = noted {
        tracing::error!(workspace = %id, err = %err.message, "cannot record a live view's close");
    }
}
