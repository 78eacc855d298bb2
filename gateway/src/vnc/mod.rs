//! The live view: a WebSocket carrying the workspace's RFB stream (binary
//! frames, the `binary` subprotocol noVNC asks for) to and from Xvnc through
//! the guest channel.
//!
//! Both directions are copied with a fixed buffer and awaited sends, so a slow
//! viewer slows only its own stream: nothing is queued without bound.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use cubicle_guest::ports;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

const CHUNK: usize = 64 * 1024;

pub async fn upgrade(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let record = state.manager.running(&id).await?;
    let spec = state.manager.spec(&record);
    let channel = cubicle_runtime::backend::Backend::channel(state.manager.backend(), &spec);
    let guest = channel.connect(ports::RFB).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            "guest_unreachable",
            format!("cannot reach the workspace's display: {e}"),
        )
    })?;
    Ok(ws
        .protocols(["binary"])
        .max_message_size(CHUNK * 16)
        .on_upgrade(move |socket| bridge(socket, guest, id)))
}

async fn bridge(socket: WebSocket, guest: UnixStream, id: String) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (mut guest_rx, mut guest_tx) = guest.into_split();
    let to_guest = async {
        while let Some(Ok(message)) = ws_rx.next().await {
            match message {
                Message::Binary(bytes) => guest_tx.write_all(&bytes).await.ok()?,
                Message::Close(_) => return None,
                _ => {}
            }
        }
        None::<()>
    };
    let to_viewer = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = guest_rx.read(&mut buf).await.ok()?;
            if n == 0 {
                return None::<()>;
            }
            let frame = Message::Binary(buf[..n].to_vec().into());
            ws_tx.send(frame).await.ok()?;
        }
    };
    tokio::select! {
        _ = to_guest => {},
        _ = to_viewer => {},
    }
    tracing::debug!(workspace = %id, "live view closed");
}
