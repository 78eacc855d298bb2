//! `cubicle mcp`: MCP's stdio transport for clients that launch a server
//! (Claude Desktop and the like), bridged to a running gateway's `/v1/mcp`.
//!
//! Each JSON-RPC line read on stdin is POSTed to the gateway with the token;
//! each message in the answer (plain JSON, or the `data:` of SSE events) is
//! written to stdout as one line. Messages are forwarded concurrently (a long
//! `exec` does not hold up a `ping`), replies are written whole, one at a
//! time. When the gateway cannot be reached or refuses the call, a request
//! gets a JSON-RPC error saying why; a notification is only logged. Logs go
//! to stderr: stdout carries protocol messages only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Replies waiting to be written to stdout.
const OUT_QUEUE: usize = 64;
/// JSON-RPC error codes of the bridge.
const PARSE_ERROR: i64 = -32700;
const GATEWAY_ERROR: i64 = -32000;

/// What can stop the bridge.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("reading stdin failed: {0}")]
    Stdin(#[source] std::io::Error),
    #[error("writing stdout failed (the MCP client went away?): {0}")]
    Stdout(#[source] std::io::Error),
    #[error("--url {0:?} is not an http:// or https:// URL of a cubicle gateway")]
    BadUrl(String),
}

/// Forwards one message at a time to the gateway.
struct Bridge {
    http: reqwest::Client,
    endpoint: String,
    token: String,
    /// The protocol version `initialize` settled on, sent on later requests
    /// as the HTTP transport asks.
    version: Mutex<Option<String>>,
}

/// Runs the bridge until stdin ends and every forwarded message is answered.
pub async fn run(url: &str, token: &str) -> Result<(), StdioError> {
    let base = url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(StdioError::BadUrl(url.to_owned()));
    }
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(StdioError::Client)?;
    let bridge = Arc::new(Bridge {
        http,
        endpoint: format!("{base}{}", super::PATH),
        token: token.to_owned(),
        version: Mutex::new(None),
    });
    tracing::info!(endpoint = %bridge.endpoint, "MCP stdio bridge ready");
    let (out_tx, out_rx) = mpsc::channel::<String>(OUT_QUEUE);
    let mut writer = tokio::spawn(write_lines(out_rx));
    let mut tasks = JoinSet::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let read = loop {
        let line = tokio::select! {
            line = lines.next_line() => line,
            // The writer only ends early when stdout is gone.
            written = &mut writer => break flatten(written),
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break Ok(()),
            Err(err) => break Err(StdioError::Stdin(err)),
        };
        if line.trim().is_empty() {
            continue;
        }
        let (bridge, out) = (bridge.clone(), out_tx.clone());
        tasks.spawn(async move {
            for reply in bridge.forward(&line).await {
                if out.send(reply).await.is_err() {
                    return;
                }
            }
        });
        while tasks.try_join_next().is_some() {}
    };
    while tasks.join_next().await.is_some() {}
    drop(out_tx);
    read?;
    if writer.is_finished() {
        return Ok(());
    }
    flatten(writer.await)
}

fn flatten(
    joined: Result<Result<(), StdioError>, tokio::task::JoinError>,
) -> Result<(), StdioError> {
    joined.map_err(|e| StdioError::Stdout(std::io::Error::other(e)))?
}

/// Writes each reply as one line, flushing after each.
async fn write_lines(mut replies: mpsc::Receiver<String>) -> Result<(), StdioError> {
    let mut stdout = tokio::io::stdout();
    while let Some(reply) = replies.recv().await {
        let mut line = reply.into_bytes();
        line.push(b'\n');
        stdout.write_all(&line).await.map_err(StdioError::Stdout)?;
        stdout.flush().await.map_err(StdioError::Stdout)?;
    }
    Ok(())
}

fn rpc_error(id: Value, code: i64, message: String) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

impl Bridge {
    /// Sends one stdin line; returns the lines to write back.
    async fn forward(&self, line: &str) -> Vec<String> {
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(err) => {
                tracing::warn!(%err, "stdin line is not JSON");
                let reason = format!("stdin line is not JSON: {err}");
                return vec![rpc_error(Value::Null, PARSE_ERROR, reason)];
            }
        };
        // A request has a method and an id; it must get an answer.
        let request_id = message.get("method").and(message.get("id")).cloned();
        match self.post(line).await {
            Ok(replies) => {
                self.note_version(&replies);
                replies.iter().map(Value::to_string).collect()
            }
            Err(reason) => {
                tracing::warn!(%reason, "forwarding to the gateway failed");
                request_id
                    .map(|id| vec![rpc_error(id, GATEWAY_ERROR, reason)])
                    .unwrap_or_default()
            }
        }
    }

    /// POSTs one message; returns the messages the gateway answered with.
    async fn post(&self, line: &str) -> Result<Vec<Value>, String> {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            "application/json".parse().map_err(|_| "header")?,
        );
        headers.insert(
            ACCEPT,
            "application/json, text/event-stream"
                .parse()
                .map_err(|_| "header")?,
        );
        let auth = format!("Bearer {}", self.token)
            .parse()
            .map_err(|_| "the token has characters a header cannot carry".to_owned())?;
        headers.insert(AUTHORIZATION, auth);
        for (name, value) in routing_headers(line) {
            if let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                value.parse(),
            ) {
                headers.insert(name, value);
            }
        }
        let settled = self
            .version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // A message that names its protocol version (in `_meta`, or an
        // `initialize`'s params) is sent with that version in the header:
        // the server refuses a mismatch or a missing header. Others carry
        // the version `initialize` settled on.
        let version = requested_version(line).or(settled);
        if let Some(version) = version.and_then(|v| v.parse().ok()) {
            headers.insert("mcp-protocol-version", version);
        }
        let response = self
            .http
            .post(&self.endpoint)
            .headers(headers)
            .body(line.to_owned())
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot reach the gateway at {}: {e} (is `cubicle serve` running there?)",
                    self.endpoint
                )
            })?;
        let status = response.status();
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response
            .text()
            .await
            .map_err(|e| format!("the gateway's answer was cut off: {e}"))?;
        if !status.is_success() {
            return Err(refusal(status, &body));
        }
        let payloads = if is_sse { sse_data(&body) } else { vec![body] };
        Ok(payloads
            .iter()
            .filter(|p| !p.trim().is_empty())
            .filter_map(|p| serde_json::from_str::<Value>(p).ok())
            .flat_map(|v| match v {
                Value::Array(items) => items,
                other => vec![other],
            })
            .collect())
    }

    /// Remembers the protocol version from an `initialize` result.
    fn note_version(&self, replies: &[Value]) {
        let found = replies
            .iter()
            .find_map(|r| r.pointer("/result/protocolVersion")?.as_str());
        if let Some(version) = found {
            *self.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        }
    }
}

/// The routing headers MCP 2026-07-28 (SEP-2243) asks of a request sent
/// on its own: `Mcp-Method`, and `Mcp-Name` for methods that act on a named
/// thing (a tool, a prompt, a resource, a task). Servers of that version
/// refuse a request without them; older ones ignore them. A value a header
/// cannot carry as it is goes as `=?base64?...?=`. Batches carry none (the
/// version that wants these headers has no batches).
fn routing_headers(line: &str) -> Vec<(&'static str, String)> {
    let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut headers = vec![("mcp-method", header_value(method))];
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    let name = key.and_then(|key| message.get("params")?.get(key)?.as_str());
    if let Some(name) = name {
        headers.push(("mcp-name", header_value(name)));
    }
    headers
}

/// `value` as a header value: itself when it is visible ASCII without
/// leading or trailing blanks, else base64 between `=?base64?` and `?=`.
fn header_value(value: &str) -> String {
    let blank_edge = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let looks_encoded = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b)) && !blank_edge && !looks_encoded;
    match plain {
        true => value.to_owned(),
        false => format!("=?base64?{}?=", B64.encode(value)),
    }
}

/// Where a request names its protocol version (MCP 2026-07-28 and later).
const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The protocol version a message (or the first of a batch that has one)
/// names: its `_meta` entry, or the version an `initialize` asks for.
fn requested_version(line: &str) -> Option<String> {
    let message: Value = serde_json::from_str(line).ok()?;
    let items = match message {
        Value::Array(items) => items,
        other => vec![other],
    };
    items.iter().find_map(|m| {
        let params = m.get("params")?;
        if let Some(version) = params.get("_meta").and_then(|meta| meta.get(VERSION_META)) {
            return version.as_str().map(str::to_owned);
        }
        (m.get("method")?.as_str()? == "initialize")
            .then(|| params.get("protocolVersion")?.as_str().map(str::to_owned))
            .flatten()
    })
}

/// Why the gateway refused, from its `{"error": {"message"}}` body if any.
fn refusal(status: reqwest::StatusCode, body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.chars().take(300).collect());
    format!("the gateway answered {status}: {message}")
}

/// The `data` of each event in an SSE body.
fn sse_data(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in body.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(rest) = line.strip_prefix("data:") {
            data.push(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_their_routing_headers() {
        let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{}}}"#;
        assert_eq!(
            routing_headers(call),
            [
                ("mcp-method", "tools/call".to_owned()),
                ("mcp-name", "exec".to_owned())
            ]
        );
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(
            routing_headers(note),
            [("mcp-method", "notifications/initialized".to_owned())]
        );
        assert!(routing_headers(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).is_empty());
        assert_eq!(header_value("caf\u{e9}"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_value(" x"), "=?base64?IHg=?=");
    }

    #[test]
    fn initialize_carries_the_version_it_asks_for() {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}"#;
        assert_eq!(requested_version(init).as_deref(), Some("2026-07-28"));
        assert_eq!(
            requested_version(&format!("[{init}]")).as_deref(),
            Some("2026-07-28")
        );
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        assert_eq!(requested_version(list), None);
        assert_eq!(requested_version("not json"), None);
        let discover = r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(requested_version(discover).as_deref(), Some("2026-07-28"));
    }

    #[test]
    fn sse_events_give_their_data() {
        let body = "id: 1\ndata: {\"a\":1}\n\n: comment\ndata:{\"b\":\ndata: 2}\n";
        assert_eq!(sse_data(body), ["{\"a\":1}", "{\"b\":\n2}"]);
    }

    #[test]
    fn refusals_carry_the_gateway_message() {
        let body = r#"{"error":{"code":"unauthorized","message":"token is not valid"}}"#;
        let text = refusal(reqwest::StatusCode::UNAUTHORIZED, body);
        assert!(
            text.contains("401") && text.contains("token is not valid"),
            "{text}"
        );
    }
}
