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
use super::rfb_parse::RfbParser;
use crate::control::Control;
use crate::revocation::RevocationWatch;

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
}

/// Why a connection ended, as told to the viewer.
#[derive(Debug)]
struct Close {
    code: u16,
    reason: String,
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

pub async fn run(socket: WebSocket, guest: UnixStream, viewer: Viewer) {
    let (mut ws_tx, ws_rx) = socket.split();
    let (guest_rx, guest_tx) = guest.into_split();
    let (queue_tx, queue_rx) = mpsc::channel(QUEUE);
    let close = {
        let to_guest = viewer_to_guest(ws_rx, guest_tx, &viewer);
        let from_guest = guest_to_queue(guest_rx, queue_tx);
        let to_viewer = queue_to_viewer(&mut ws_tx, queue_rx);
        tokio::select! {
            close = to_guest => close,
            close = from_guest => close,
            close = to_viewer => close,
            () = viewer.revoked.revoked() => Close::new(1008, "token revoked"),
        }
    };
    tracing::debug!(workspace = %viewer.workspace, token = %viewer.token.id, code = close.code, reason = %close.reason, "live view closed");
    if close.code != 1000 {
        let frame = CloseFrame {
            code: close.code,
            reason: truncate(&close.reason).into(),
        };
        let _ = tokio::time::timeout(CLOSE_LIMIT, ws_tx.send(Message::Close(Some(frame)))).await;
    }
}

fn truncate(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// Parses and filters what the viewer sends; releases the holder's pressed
/// keys and buttons when it loses control or leaves.
async fn viewer_to_guest(
    mut ws_rx: SplitStream<WebSocket>,
    mut guest_tx: OwnedWriteHalf,
    viewer: &Viewer,
) -> Close {
    let mut control = viewer.control.clone();
    let mut parser = RfbParser::default();
    let mut held = HeldInput::default();
    let close = loop {
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
                if !control.borrow_and_update().is_held_by(&viewer.token) {
                    let release = held.release();
                    if !release.is_empty() && guest_tx.write_all(&release).await.is_err() {
                        break Close::new(1011, "the workspace's display stopped answering");
                    }
                }
                continue;
            }
            message = tokio::time::timeout(limit, ws_rx.next()) => message,
        };
        let bytes = match message {
            Err(_) => break truncated(&parser, "nothing more for 5 s").unwrap_or_else(Close::gone),
            Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => {
                break truncated(&parser, "the viewer left").unwrap_or_else(Close::gone);
            }
            Ok(Some(Ok(Message::Binary(bytes)))) => bytes,
            Ok(Some(Ok(Message::Text(_)))) => {
                break Close::new(1003, "RFB travels in binary WebSocket messages");
            }
            Ok(Some(Ok(_))) => continue,
        };
        parser.push(&bytes);
        let may_input = control.borrow().is_held_by(&viewer.token);
        match forward(&mut parser, may_input, &mut held) {
            Ok(out) if out.is_empty() => {}
            Ok(out) => {
                if guest_tx.write_all(&out).await.is_err() {
                    break Close::new(1011, "the workspace's display stopped answering");
                }
            }
            Err(close) => break close,
        }
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

/// The bytes to send on for every whole message the parser now holds.
fn forward(
    parser: &mut RfbParser,
    may_input: bool,
    held: &mut HeldInput,
) -> Result<Vec<u8>, Close> {
    let mut out = Vec::new();
    loop {
        match parser.next_message() {
            Ok(None) => return Ok(out),
            Ok(Some(message)) => {
                if let Verdict::Forward(bytes) = filter::decide(&message, may_input, held) {
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
