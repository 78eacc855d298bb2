//! One CDP WebSocket: the agent's client on one side, Chromium's endpoint
//! (a WebSocket client handshake over the guest channel) on the other, and
//! every message of both directions through [`inspect`].
//!
//! Bounded: messages up to [`MAX_MESSAGE`](super::MAX_MESSAGE), every send
//! awaited, and the gateway's own answers go through a small bounded queue
//! to the task writing to the client. A client that sends something that is
//! not a CDP call is closed with the reason; the browser and other clients
//! carry on.

use std::time::Duration;

use axum::extract::ws::{self, CloseFrame, Message, WebSocket};
use futures_util::stream::{FuturesUnordered, SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite;

use super::hold;
use crate::cdp::Browser;
use crate::cdp::inspect::{self, Direction, Verdict};
use crate::ops::cdp::{Call, CdpSession};

/// Answers of the gateway waiting to be written to the client.
const ANSWER_QUEUE: usize = 16;
/// How long closing either side may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest close reason a WebSocket close frame carries.
const MAX_CLOSE_REASON: usize = 123;

/// Why a relay ended, and what the client is told.
#[derive(Debug)]
enum End {
    ClientLeft,
    ClientMisbehaved(String),
    BrowserLeft,
    BrowserMisbehaved(String),
}

impl End {
    fn close_frame(&self) -> Option<CloseFrame> {
        let (code, reason) = match self {
            End::ClientLeft => return None,
            End::ClientMisbehaved(reason) => (ws::close_code::POLICY, reason.as_str()),
            End::BrowserLeft => (ws::close_code::AWAY, "the browser closed the connection"),
            End::BrowserMisbehaved(reason) => (ws::close_code::ERROR, reason.as_str()),
        };
        Some(CloseFrame {
            code,
            reason: truncate(reason, MAX_CLOSE_REASON).into(),
        })
    }
}

fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Relays `client` ⇄ `browser` until either side ends.
pub async fn run(client: WebSocket, browser: Browser, cdp: CdpSession) {
    let (mut client_tx, client_rx) = client.split();
    let (mut browser_tx, browser_rx) = browser.split();
    let (answers_tx, answers_rx) = mpsc::channel(ANSWER_QUEUE);
    let end = tokio::select! {
        end = to_browser(client_rx, &mut browser_tx, answers_tx, &cdp) => end,
        end = to_client(browser_rx, &mut client_tx, answers_rx) => end,
    };
    tracing::debug!(workspace = %cdp.workspace, ?end, "CDP connection ended");
    let close_client = async {
        if let Some(frame) = end.close_frame() {
            let _ = client_tx.send(Message::Close(Some(frame))).await;
        }
        let _ = client_tx.close().await;
    };
    let close_browser = async {
        let _ = browser_tx.close().await;
    };
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        tokio::join!(close_client, close_browser)
    })
    .await;
}

/// Client → browser: calls, each inspected; the gateway's answers to the
/// ones it keeps go to `answers`.
async fn to_browser(
    mut client: SplitStream<WebSocket>,
    browser: &mut SplitSink<Browser, tungstenite::Message>,
    answers: mpsc::Sender<String>,
    cdp: &CdpSession,
) -> End {
    // Calls the policy holds, waiting for an operator off this loop.
    let mut parked: FuturesUnordered<hold::Parked> = FuturesUnordered::new();
    loop {
        let next = tokio::select! {
            next = client.next() => next,
            Some(decided) = parked.next(), if !parked.is_empty() => {
                let delivered = match &decided.result {
                    Ok(()) => match tungstenite::Utf8Bytes::try_from(axum::body::Bytes::from(decided.text.clone())) {
                        Ok(text) => browser.send(tungstenite::Message::Text(text)).await.is_ok(),
                        Err(_) => false,
                    },
                    Err(reason) => answers.send(hold::error_answer(&decided, reason)).await.is_ok(),
                };
                if !delivered {
                    return End::BrowserLeft;
                }
                continue;
            }
        };
        let Some(next) = next else {
            return End::ClientLeft;
        };
        let text = match next {
            Ok(Message::Text(text)) => text,
            Ok(Message::Binary(_)) => {
                return End::ClientMisbehaved(
                    "CDP messages are text frames; got a binary frame".into(),
                );
            }
            Ok(Message::Close(_)) | Err(_) => return End::ClientLeft,
            Ok(Message::Ping(_) | Message::Pong(_)) => continue,
        };
        let answer = match inspect::parse(Direction::ToBrowser, &text) {
            Ok(message) => {
                let mut verdict = inspect::inspect(Direction::ToBrowser, &message);
                if verdict == Verdict::Allow {
                    match cdp.call(&message).await {
                        Call::Forward => {}
                        Call::Refuse(reason) => verdict = Verdict::Deny(reason),
                        Call::Hold(_) if parked.len() >= hold::MAX_PARKED => {
                            verdict = Verdict::Deny(format!(
                                "{} calls already wait for an operator on this connection",
                                hold::MAX_PARKED
                            ));
                        }
                        Call::Hold(approval) => {
                            parked.push(hold::park(cdp, approval, &message, text.to_string()));
                            continue;
                        }
                    }
                }
                inspect::answer(&message, &verdict)
            }
            Err(err) => return End::ClientMisbehaved(err.to_string()),
        };
        let delivered = match answer {
            Some(answer) => answers.send(answer).await.is_ok(),
            None => {
                let Ok(text) = tungstenite::Utf8Bytes::try_from(axum::body::Bytes::from(text))
                else {
                    return End::ClientMisbehaved("text frame is not UTF-8".into());
                };
                browser.send(tungstenite::Message::Text(text)).await.is_ok()
            }
        };
        if !delivered {
            return End::BrowserLeft;
        }
    }
}

/// Browser → client: replies and events, each inspected, interleaved with
/// the gateway's own answers.
async fn to_client(
    mut browser: SplitStream<Browser>,
    client: &mut SplitSink<WebSocket, Message>,
    mut answers: mpsc::Receiver<String>,
) -> End {
    loop {
        let outgoing = tokio::select! {
            answer = answers.recv() => match answer {
                Some(answer) => answer.into(),
                None => return End::ClientLeft,
            },
            next = browser.next() => match from_browser(next) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(end) => return end,
            },
        };
        if client.send(Message::Text(outgoing)).await.is_err() {
            return End::ClientLeft;
        }
    }
}

/// One item from the browser: `Some(text)` to forward, `None` to skip.
fn from_browser(
    next: Option<Result<tungstenite::Message, tungstenite::Error>>,
) -> Result<Option<ws::Utf8Bytes>, End> {
    let text = match next {
        Some(Ok(tungstenite::Message::Text(text))) => text,
        Some(Ok(tungstenite::Message::Binary(_))) => {
            return Err(End::BrowserMisbehaved(
                "the browser sent a binary frame".into(),
            ));
        }
        Some(Ok(tungstenite::Message::Close(_))) | Some(Err(_)) | None => {
            return Err(End::BrowserLeft);
        }
        Some(Ok(_)) => return Ok(None),
    };
    let message = inspect::parse(Direction::ToClient, &text)
        .map_err(|err| End::BrowserMisbehaved(err.to_string()))?;
    if inspect::inspect(Direction::ToClient, &message) != Verdict::Allow {
        return Ok(None);
    }
    ws::Utf8Bytes::try_from(axum::body::Bytes::from(text))
        .map(Some)
        .map_err(|_| End::BrowserMisbehaved("the browser sent text that is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let long = "é".repeat(200);
        let frame = End::ClientMisbehaved(long).close_frame().unwrap();
        assert!(frame.reason.len() <= MAX_CLOSE_REASON);
        assert_eq!(frame.code, ws::close_code::POLICY);
        assert!(End::ClientLeft.close_frame().is_none());
    }
}
