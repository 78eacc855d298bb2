//! `POST /v1/workspaces/{id}/exec` (run to completion) and
//! `GET /v1/workspaces/{id}/exec/ws` (streamed, with stdin) as the
//! workspace user, with `DISPLAY=:0` and `HOME=/home/user`.
//!
//! Request body: `{"argv": [...]}` or `{"command": "shell line"}` (run by
//! `/bin/bash -lc`), optional `"env": {K: V}`, `"cwd": "/abs"`,
//! `"timeout_ms"` (1..=600000, default 30000), `"stdin"` (text) or
//! `"stdin_base64"`. Answer: `{exit_code, signal, timed_out, duration_ms,
//! stdout, stderr, stdout_truncated, stderr_truncated}`; each output is
//! kept up to 1 MiB, as UTF-8 text (lossy), plus `stdout_base64` /
//! `stderr_base64` with the exact bytes when they are not valid UTF-8.
//! A timeout kills the command's process group: `timed_out` is true and
//! `signal` is 9.
//!
//! The WebSocket form takes the same fields in the query (`arg=` repeated,
//! or `command=`; `cwd=`, `timeout_ms=` (default 600000), `env=K=V`
//! repeated). The server sends JSON text frames `{"stdout": text}` /
//! `{"stderr": text}` (plus `*_base64` when a chunk is not UTF-8), then
//! `{"exit_code", "signal", "timed_out", "duration_ms"}` and closes; or
//! `{"error": {code, message}}`. The client sends binary frames (raw stdin),
//! `{"stdin": text}`, and `{"stdin_eof": true}`. Closing the socket kills the
//! command.

use crate::wire::path::Path;
use axum::Json;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::response::Response;
use cubicle_image::control::{ExecExit, ExecRequest, MAX_TIMEOUT_MS};
use cubicle_runtime::guest_ops::{ExecEvents, ExecOutput, ExecStdin, GuestOpError, StreamEvent};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};
use crate::wire::exec::{ExecBody, ExecResult, text_and_bytes};

/// The largest WebSocket message a client may send (stdin).
const MAX_WS_MESSAGE: usize = 1024 * 1024;

#[utoipa::path(post, path = "/v1/workspaces/{id}/exec", tag = "shell", params(("id" = String, Path)), request_body = crate::wire::exec::ExecBody, responses((status = 200, body = crate::wire::exec::ExecResult), crate::wire::doc::InGuest, crate::wire::doc::Held, crate::wire::doc::TooLarge))]
pub async fn run(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    ops::exec::may_run(&ctx)?;
    let request = ExecBody::parse(&body)?;
    let output = ops::exec::run(&state, &ctx, &id, &request).await?;
    Ok(Json(view(output)))
}

fn exit_fields(exit: &ExecExit) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("exit_code".into(), json!(exit.exit_code));
    fields.insert("signal".into(), json!(exit.signal));
    fields.insert("timed_out".into(), json!(exit.timed_out));
    fields.insert("duration_ms".into(), json!(exit.duration_ms));
    fields
}

/// Adds `name` as text, and `name_base64` when the bytes are not UTF-8.
fn put_output(fields: &mut Map<String, Value>, name: &str, bytes: &[u8]) {
    let (text, exact) = text_and_bytes(bytes);
    fields.insert(name.into(), json!(text));
    if let Some(exact) = exact {
        fields.insert(format!("{name}_base64"), json!(exact));
    }
}

fn view(output: ExecOutput) -> Value {
    serde_json::to_value(ExecResult::from(&output)).unwrap_or(Value::Null)
}

/// Parses the WebSocket form's query.
pub fn parse_ws_query(raw: Option<&str>) -> Result<ExecRequest, OpError> {
    let mut request = ExecRequest {
        timeout_ms: MAX_TIMEOUT_MS,
        ..ExecRequest::default()
    };
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "arg" => request.argv.push(value.into_owned()),
            "command" => request.command = Some(value.into_owned()),
            "cwd" => request.cwd = Some(value.into_owned()),
            "timeout_ms" => {
                request.timeout_ms = value
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms))
                    .ok_or_else(|| {
                        OpError::bad_request(format!(
                            "timeout_ms: must be a whole number of milliseconds in 1..={MAX_TIMEOUT_MS}, not {value:?}"
                        ))
                    })?;
            }
            "env" => {
                let (name, val) = value.split_once('=').ok_or_else(|| {
                    OpError::bad_request(format!("env: {value:?} is not NAME=VALUE"))
                })?;
                request.env.insert(name.to_owned(), val.to_owned());
            }
            "access_token" | "wait" | "approval" => {}
            other => {
                return Err(OpError::bad_request(format!(
                    "unknown query parameter {other:?}: allowed are arg, command, cwd, timeout_ms, env"
                )));
            }
        }
    }
    request
        .validate()
        .map_err(|e| OpError::from(GuestOpError::from(e)))?;
    Ok(request)
}

/// `GET .../exec/ws`: starts the command, then upgrades.
#[utoipa::path(get, path = "/v1/workspaces/{id}/exec/ws", tag = "shell", params(("id" = String, Path),
        ("arg" = Option<Vec<String>>, Query, description = "argv, repeated"), ("command" = Option<String>, Query), ("cwd" = Option<String>, Query),
        ("timeout_ms" = Option<u64>, Query), ("env" = Option<Vec<String>>, Query, description = "NAME=VALUE, repeated")),
    responses((status = 101, description = "WebSocket: the server sends {\"stdout\"}/{\"stderr\"} frames then the exit; the client sends stdin"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "Not a WebSocket upgrade, or a query parameter it cannot take; the message names it"),
        crate::wire::doc::InGuest, crate::wire::doc::Held))]
pub async fn upgrade(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, OpError> {
    // The gate before the upgrade check: another caller's workspace is a
    // 404 whatever the request looks like.
    ops::exec::may_stream(&state, &ctx, &id).await?;
    let ws = ws.map_err(|rejection| {
        OpError::new(
            ErrorKind::Transport(rejection.status()),
            "bad_request",
            format!("expected a WebSocket upgrade: {}", rejection.body_text()),
        )
    })?;
    let request = parse_ws_query(query.as_deref())?;
    let (events, stdin) = ops::exec::open_stream(&state, &ctx, &id, &request).await?;
    let revoked = state.revocations.watch(state.store.clone(), &ctx.token.id);
    Ok(ws
        .max_message_size(MAX_WS_MESSAGE)
        .on_upgrade(move |socket| async move {
            // A revoked token ends the stream (the socket is dropped, and
            // with it the command, whose process group is killed).
            tokio::select! {
                () = bridge(socket, events, stdin) => {}
                () = revoked.revoked() => {}
            }
        }))
}

async fn bridge(socket: WebSocket, mut events: ExecEvents, mut stdin: ExecStdin) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let ended = tokio::select! {
        ended = forward_output(&mut events, &mut ws_tx) => ended,
        ended = forward_input(&mut ws_rx, &mut stdin) => ended,
    };
    if let Err(err) = ended {
        let frame = json!({ "error": { "code": err.code, "message": err.message } });
        let _ = ws_tx.send(Message::Text(frame.to_string().into())).await;
    }
    let _ = ws_tx.send(Message::Close(None)).await;
    // Dropping `stdin` here hangs up: a command still running is killed.
}

type WsTx = SplitSink<WebSocket, Message>;

async fn send_json(ws_tx: &mut WsTx, value: Value) -> Result<(), OpError> {
    ws_tx
        .send(Message::Text(value.to_string().into()))
        .await
        .map_err(|e| OpError::bad_request(format!("the client went away: {e}")))
}

/// Bytes of one output stream, with a split UTF-8 sequence carried over to
/// the next chunk so text frames never cut a character.
#[derive(Default)]
struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    fn frame(&mut self, name: &str, bytes: &[u8], last: bool) -> Option<Value> {
        self.pending.extend_from_slice(bytes);
        let keep = match std::str::from_utf8(&self.pending) {
            Err(err) if err.error_len().is_none() && !last => {
                self.pending.len() - err.valid_up_to()
            }
            _ => 0,
        };
        let chunk: Vec<u8> = self.pending.drain(..self.pending.len() - keep).collect();
        if chunk.is_empty() {
            return None;
        }
        let mut fields = Map::new();
        put_output(&mut fields, name, &chunk);
        Some(Value::Object(fields))
    }
}

async fn forward_output(events: &mut ExecEvents, ws_tx: &mut WsTx) -> Result<(), OpError> {
    let (mut out, mut err) = (Utf8Carry::default(), Utf8Carry::default());
    loop {
        let (frame, exit) = match events.next().await.map_err(OpError::from)? {
            Some(StreamEvent::Stdout(bytes)) => (out.frame("stdout", &bytes, false), None),
            Some(StreamEvent::Stderr(bytes)) => (err.frame("stderr", &bytes, false), None),
            Some(StreamEvent::Exit(exit)) => (None, Some(exit)),
            None => return Ok(()),
        };
        if let Some(frame) = frame {
            send_json(ws_tx, frame).await?;
        }
        if let Some(exit) = exit {
            let rest = [
                out.frame("stdout", &[], true),
                err.frame("stderr", &[], true),
            ];
            for frame in rest.into_iter().flatten() {
                send_json(ws_tx, frame).await?;
            }
            return send_json(ws_tx, Value::Object(exit_fields(&exit))).await;
        }
    }
}

async fn forward_input(
    ws_rx: &mut SplitStream<WebSocket>,
    stdin: &mut ExecStdin,
) -> Result<(), OpError> {
    while let Some(Ok(message)) = ws_rx.next().await {
        match message {
            Message::Binary(bytes) => stdin.write(&bytes).await.map_err(OpError::from)?,
            Message::Text(text) => stdin_message(text.as_str(), stdin).await?,
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    // The client closed or went away: nobody reads the output any more.
    Ok(())
}

async fn stdin_message(text: &str, stdin: &mut ExecStdin) -> Result<(), OpError> {
    let bad = || {
        OpError::bad_request(format!(
            "client message {:.100?} is not {{\"stdin\": text}} or {{\"stdin_eof\": true}}",
            text
        ))
    };
    let value: Value = serde_json::from_str(text).map_err(|_| bad())?;
    if let Some(data) = value.get("stdin").and_then(Value::as_str) {
        return stdin.write(data.as_bytes()).await.map_err(OpError::from);
    }
    if value.get("stdin_eof") == Some(&Value::Bool(true)) {
        return stdin.close().await.map_err(OpError::from);
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        ExecBody::parse(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn bad_exec_bodies_name_the_field() {
        assert!(message(r#"{"argv":[]}"#).starts_with("argv"));
        assert!(message("{}").starts_with("argv"));
        assert!(message(r#"{"argv":["x"],"timeout_ms":-1}"#).starts_with("timeout_ms"));
        assert!(message(r#"{"argv":["x"],"timeout_ms":1e12}"#).starts_with("timeout_ms"));
        assert!(message(r#"{"argv":["x"],"cwd":"tmp"}"#).starts_with("cwd"));
        assert!(message(r#"{"argv":["x"],"env":{"A":1}}"#).starts_with("env.A"));
        assert!(message(r#"{"argv":[1]}"#).starts_with("argv[0]"));
        assert!(message(r#"{"argv":["x"],"shell":true}"#).contains("shell"));
        assert!(message("nope").contains("JSON"));
        let request = ExecBody::parse(br#"{"command":"echo hi","stdin":"x"}"#).unwrap();
        assert_eq!(request.program().unwrap()[0], "/bin/bash");
        assert_eq!(request.stdin.as_deref(), Some("eA=="));
    }

    #[test]
    fn ws_query_has_repeated_args() {
        let request = parse_ws_query(Some("arg=ls&arg=-l%20a&access_token=t&env=A=b%3Dc")).unwrap();
        assert_eq!(request.argv, ["ls", "-l a"]);
        assert_eq!(request.env["A"], "b=c");
        assert!(parse_ws_query(Some("")).is_err());
        assert!(
            parse_ws_query(Some("arg=x&timeout_ms=0"))
                .unwrap_err()
                .message
                .starts_with("timeout_ms")
        );
    }

    #[test]
    fn text_frames_never_cut_a_character() {
        let mut carry = Utf8Carry::default();
        let euro = "€".as_bytes();
        assert_eq!(carry.frame("stdout", &euro[..1], false), None);
        assert_eq!(
            carry.frame("stdout", &euro[1..], false),
            Some(json!({"stdout": "€"}))
        );
        let bad = carry.frame("stdout", &[0xff], true).unwrap();
        assert_eq!(bad["stdout_base64"], "/w==");
    }
}
