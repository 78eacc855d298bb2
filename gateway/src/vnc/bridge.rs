//! One viewer's live-view connection: three loops in one task (viewer →
//! parser → filter → Xvnc; Xvnc → bounded queue; queue → viewer), ended by
//! whichever finishes first, by a control change that needs nothing but a
//! release, or by the viewer's token being revoked. The end is reported to
//! the viewer as a WebSocket close frame with a reason.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use cubicle_runtime::tokens::Token;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

use super::filter::{self, HeldInput, Verdict};
use super::handshake::{self, ViewerHandshake};
use super::rfb_parse::{Kind, RfbParser};
use crate::revocation::RevocationWatch;
use crate::slots::Control;

/// Bytes read from Xvnc at a time (one queued WebSocket message at most).
const CHUNK: usize = 64 * 1024;
/// Messages queued for one viewer before it counts as too far behind
/// (at most `QUEUE * CHUNK` = 16 MiB).
const QUEUE: usize = 256;
/// How long a half-received message may wait for the rest.
const PARTIAL_LIMIT: Duration = Duration::from_secs(5);
/// How long the close frame may take to leave.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);
/// The longest close reason a close frame can carry.
const MAX_REASON: usize = 123;

/// Who is watching what.
pub struct Viewer {
    pub token: Token,
    pub workspace: String,
    pub control: watch::Receiver<Control>,
    pub revoked: RevocationWatch,
    /// Xvnc's ServerInit, replayed to the viewer.
    pub server_init: Vec<u8>,
    /// The operations core, which judges each paste (`clipboard` rules).
    pub state: crate::ops::Core,
    pub ctx: crate::ops::OpContext,
}

/// Why a connection ended, as told to the viewer (and kept in the
/// `live_view.close` event).
#[derive(Debug)]
pub struct Close {
    /// The WebSocket close code: 1000 when the viewer left.
    pub code: u16,
    /// Empty when the viewer left.
    pub reason: String,
}

impl Close {
    fn new(code: u16, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
    /// The viewer left; nothing to tell.
    fn gone() -> Self {
        Self::new(1000, "")
    }
    fn protocol(reason: impl std::fmt::Display) -> Self {
        Self::new(1002, format!("malformed RFB: {reason}"))
    }
}

pub async fn run(socket: WebSocket, guest: UnixStream, viewer: Viewer) -> Close {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (guest_rx, guest_tx) = guest.into_split();
    let (queue_tx, queue_rx) = mpsc::channel(QUEUE);
    let mut parser = RfbParser::default();
    let greeted = tokio::time::timeout(
        handshake::limit(),
        greet(&mut ws_tx, &mut ws_rx, &mut parser, &viewer.server_init),
    );
    let close = match greeted.await {
        Ok(Ok(())) => {
            let to_guest = viewer_to_guest(ws_rx, guest_tx, parser, &viewer);
            let from_guest = guest_to_queue(guest_rx, queue_tx);
            let to_viewer = queue_to_viewer(&mut ws_tx, queue_rx);
            tokio::select! {
                close = to_guest => close,
                close = from_guest => close,
                close = to_viewer => close,
                () = viewer.revoked.revoked() => Close::new(1008, "token revoked"),
            }
        }
        Ok(Err(close)) => close,
        Err(_) => Close::new(
            1002,
            "the viewer did not finish the RFB handshake within 10 s",
        ),
    };
    if close.code == 1000 {
        tracing::debug!(workspace = %viewer.workspace, token = %viewer.token.id, "live view closed");
    } else {
        tracing::info!(workspace = %viewer.workspace, token = %viewer.token.id, code = close.code, reason = %close.reason, "live view closed by the gateway");
    }
    if close.code != 1000 {
        let frame = CloseFrame {
            code: close.code,
            reason: truncate(&close.reason).into(),
        };
        let _ = tokio::time::timeout(CLOSE_LIMIT, ws_tx.send(Message::Close(Some(frame)))).await;
    }
    close
}

fn truncate(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// Plays the RFB server for the viewer's handshake; bytes after its
/// ClientInit stay in `parser`.
async fn greet(
    ws_tx: &mut SplitSink<WebSocket, Message>,
    ws_rx: &mut SplitStream<WebSocket>,
    parser: &mut RfbParser,
    server_init: &[u8],
) -> Result<(), Close> {
    let send = |bytes: Vec<u8>| Message::Binary(bytes.into());
    let mut state = ViewerHandshake::default();
    let gone = |_| Close::gone();
    ws_tx
        .send(send(handshake::VERSION.to_vec()))
        .await
        .map_err(gone)?;
    loop {
        let bytes = match ws_rx.next().await {
            Some(Ok(Message::Binary(bytes))) => bytes,
            Some(Ok(Message::Text(_))) => {
                return Err(Close::new(1003, "RFB travels in binary WebSocket messages"));
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            _ => return Err(Close::gone()),
        };
        parser.push(&bytes);
        while let Some(message) = parser.next_message().map_err(Close::protocol)? {
            let kind = message.kind;
            if let Some(answer) = state.answer(kind, server_init) {
                ws_tx.send(send(answer)).await.map_err(gone)?;
            }
            if kind == Kind::ClientInit {
                return Ok(());
            }
        }
    }
}

/// Parses and filters what the viewer sends; releases the holder's pressed
/// keys and buttons when it loses control or leaves.
async fn viewer_to_guest(
    mut ws_rx: SplitStream<WebSocket>,
    mut guest_tx: OwnedWriteHalf,
    mut parser: RfbParser,
    viewer: &Viewer,
) -> Close {
    let mut control = viewer.control.clone();
    let mut held = HeldInput::default();
    let mut bytes = axum::body::Bytes::new();
    let close = loop {
        // First round: what arrived with the ClientInit, before waiting.
        parser.push(&std::mem::take(&mut bytes));
        let may_input = {
            let now = control.borrow();
            crate::ops::control::holds(&now, &viewer.token) && !now.paused
        };
        // Whole messages, up to each paste, which the policy judges first.
        let forwarded = loop {
            let (out, paste) = match forward(&mut parser, may_input, &mut held) {
                Ok(next) => next,
                Err(close) => break Err(close),
            };
            if !out.is_empty() && guest_tx.write_all(&out).await.is_err() {
                break Err(Close::new(
                    1011,
                    "the workspace's display stopped answering",
                ));
            }
            let Some(paste) = paste else { break Ok(()) };
            let allowed = match filter::cut_text(&paste) {
                Some(text) => {
                    crate::ops::actions::paste(&viewer.state, &viewer.ctx, &viewer.workspace, &text)
                        .await
                        .is_ok()
                }
                None => false,
            };
            if allowed && guest_tx.write_all(&paste).await.is_err() {
                break Err(Close::new(
                    1011,
                    "the workspace's display stopped answering",
                ));
            }
        };
        if let Err(close) = forwarded {
            break close;
        }
        let limit = if parser.pending() > 0 {
            PARTIAL_LIMIT
        } else {
            Duration::MAX
        };
        let message = tokio::select! {
            changed = control.changed() => {
                if changed.is_err() {
                    break Close::new(1001, "the workspace's control lock went away");
                }
                if !crate::ops::control::holds(&control.borrow_and_update(), &viewer.token) {
                    let release = held.release();
                    if !release.is_empty() && guest_tx.write_all(&release).await.is_err() {
                        break Close::new(1011, "the workspace's display stopped answering");
                    }
                }
                continue;
            }
            message = tokio::time::timeout(limit, ws_rx.next()) => message,
        };
        bytes = match message {
            Err(_) => break truncated(&parser, "nothing more for 5 s").unwrap_or_else(Close::gone),
            Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => {
                break truncated(&parser, "the viewer left").unwrap_or_else(Close::gone);
            }
            Ok(Some(Ok(Message::Binary(bytes)))) => bytes,
            Ok(Some(Ok(Message::Text(_)))) => {
                break Close::new(1003, "RFB travels in binary WebSocket messages");
            }
            Ok(Some(Ok(_))) => axum::body::Bytes::new(),
        };
    };
    let release = held.release();
    if !release.is_empty() {
        let _ = guest_tx.write_all(&release).await;
    }
    close
}

fn truncated(parser: &RfbParser, then: &'static str) -> Option<Close> {
    parser.truncated(then).map(Close::protocol)
}

/// The bytes to send on for the whole messages the parser now holds, up
/// to the first paste (a ClientCutText that may pass), which is returned
/// apart for the policy to judge.
fn forward(
    parser: &mut RfbParser,
    may_input: bool,
    held: &mut HeldInput,
) -> Result<(Vec<u8>, Option<Vec<u8>>), Close> {
    let mut out = Vec::new();
    loop {
        match parser.next_message() {
            Ok(None) => return Ok((out, None)),
            Ok(Some(message)) => {
                if let Verdict::Forward(bytes) = filter::decide(&message, may_input, held) {
                    if message.kind == Kind::ClientCutText {
                        return Ok((out, Some(bytes.into_owned())));
                    }
                    out.extend_from_slice(&bytes);
                }
            }
            Err(err) => return Err(Close::protocol(err)),
        }
    }
}

/// Reads Xvnc's stream into the viewer's queue, never waiting on the viewer.
async fn guest_to_queue(mut guest_rx: OwnedReadHalf, queue: mpsc::Sender<Vec<u8>>) -> Close {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match guest_rx.read(&mut buf).await {
            Ok(0) | Err(_) => {
                return Close::new(1001, "the workspace's display closed (stopped or deleted?)");
            }
            Ok(n) => n,
        };
        match queue.try_send(buf[..n].to_vec()) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                return Close::new(1008, "viewer too far behind (16 MiB queued): reconnect");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Close::gone(),
        }
    }
}

async fn queue_to_viewer(
    ws_tx: &mut SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<Vec<u8>>,
) -> Close {
    while let Some(bytes) = queue.recv().await {
        if ws_tx.send(Message::Binary(bytes.into())).await.is_err() {
            return Close::gone();
        }
    }
    Close::gone()
}
