//! One connection to the guest channel's CDP port: an HTTP request for a
//! discovery endpoint, answered from the pipe, or a WebSocket client of
//! the multiplexer.
//!
//! | request | answered with |
//! | --- | --- |
//! | `GET /json/version` | `Browser.getVersion`, and the browser endpoint's URL |
//! | `GET /json`, `/json/list` | `Target.getTargets`, each with its page endpoint's URL |
//! | `PUT /json/new?<url>` | `Target.createTarget`, then its entry |
//! | `GET /json/activate/<id>`, `/json/close/<id>` | `Target.activateTarget`, `Target.closeTarget` |
//! | WebSocket `/devtools/browser/<id>` | a session of `Target.attachToBrowserTarget` of its own |
//! | WebSocket `/devtools/page/<id>` | a session of `Target.attachToTarget {flatten}` of its own |
//!
//! A trailing `/` is accepted where Chromium accepts it. The URLs name
//! `127.0.0.1:9222` as Chromium's did; the gateway rewrites them.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::http::{self, Request};
use super::link::{CallError, Link, ToClient};
use super::router::ClientId;

/// Where the URLs in the discovery documents point.
const ORIGIN: &str = "127.0.0.1:9222";
const JSON: &str = "application/json; charset=UTF-8";
const TEXT: &str = "text/plain; charset=UTF-8";

/// Serves one connection until it ends.
pub async fn serve<S>(link: Arc<Link>, mut stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let request = match http::read_request(&mut stream).await {
        Ok(request) => request,
        Err(err) => {
            let _ = http::answer(&mut stream, "400 Bad Request", TEXT, &err.to_string()).await;
            return;
        }
    };
    match request.websocket_key.clone() {
        Some(key) => websocket(link, stream, &request, &key).await,
        None => {
            let (status, content_type, body) = discovery(&link, &request).await;
            let _ = http::answer(&mut stream, status, content_type, &body).await;
        }
    }
}

/// A discovery request's status, type and body.
async fn discovery(link: &Link, request: &Request) -> (&'static str, &'static str, String) {
    let path = request.path.as_str();
    let trimmed = path.strip_suffix('/').unwrap_or(path);
    if let Some((method, done, id)) = target_action(path).filter(|_| request.method == "GET") {
        return match link.call(method, json!({ "targetId": id }), None).await {
            Ok(_) => ("200 OK", TEXT, done.to_owned()),
            Err(CallError::Failed { .. }) => (
                "404 Not Found",
                TEXT,
                format!("No such target id: {id:.64}"),
            ),
            Err(err) => ("500 Internal Server Error", TEXT, err.to_string()),
        };
    }
    let outcome = match (request.method.as_str(), trimmed) {
        ("GET", "/json/version") => version(link).await.map(|v| (JSON, v.to_string())),
        ("GET", "/json" | "/json/list") => list(link).await.map(|v| (JSON, v.to_string())),
        ("PUT", "/json/new") => new_target(link, &request.query)
            .await
            .map(|v| (JSON, v.to_string())),
        ("GET", "/json/new") => {
            return (
                "405 Method Not Allowed",
                TEXT,
                "Using unsafe HTTP verb GET to invoke /json/new. This action supports only PUT verb.".into(),
            );
        }
        _ => {
            return (
                "404 Not Found",
                TEXT,
                format!("Unknown DevTools endpoint {path:.100}"),
            );
        }
    };
    match outcome {
        Ok((content_type, body)) => ("200 OK", content_type, body),
        Err(err) => ("500 Internal Server Error", TEXT, err.to_string()),
    }
}

/// `/json/activate/<id>` and `/json/close/<id>`: the call, its answer, the id.
fn target_action(path: &str) -> Option<(&'static str, &'static str, &str)> {
    if let Some(id) = path.strip_prefix("/json/activate/") {
        return Some(("Target.activateTarget", "Target activated", id));
    }
    path.strip_prefix("/json/close/")
        .map(|id| ("Target.closeTarget", "Target is closing", id))
}

async fn version(link: &Link) -> Result<Value, CallError> {
    let v = link.call("Browser.getVersion", json!({}), None).await?;
    Ok(json!({
        "Browser": v["product"],
        "Protocol-Version": v["protocolVersion"],
        "User-Agent": v["userAgent"],
        "V8-Version": v["jsVersion"],
        "WebKit-Version": format!("537.36 (@{})", v["revision"].as_str().unwrap_or_default()),
        "webSocketDebuggerUrl": format!("ws://{ORIGIN}/devtools/browser/{}", link.browser_id),
    }))
}

async fn list(link: &Link) -> Result<Value, CallError> {
    let targets = link.call("Target.getTargets", json!({}), None).await?;
    let entries = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .map(entry)
        .collect();
    Ok(Value::Array(entries))
}

/// A target's entry in `/json/list`.
fn entry(info: &Value) -> Value {
    let id = info["targetId"].as_str().unwrap_or_default();
    let mut entry = json!({
        "description": "",
        "id": id,
        "title": info["title"],
        "type": info["type"],
        "url": info["url"],
        "webSocketDebuggerUrl": format!("ws://{ORIGIN}/devtools/page/{id}"),
    });
    if let Some(parent) = info.get("openerId") {
        entry["parentId"] = parent.clone();
    }
    entry
}

async fn new_target(link: &Link, query: &str) -> Result<Value, CallError> {
    let url = percent_decode(query);
    let url = if url.is_empty() {
        "about:blank".to_owned()
    } else {
        url
    };
    let created = link
        .call("Target.createTarget", json!({ "url": url }), None)
        .await?;
    let id = created["targetId"].clone();
    let info = link
        .call("Target.getTargetInfo", json!({ "targetId": id }), None)
        .await?;
    Ok(entry(&info["targetInfo"]))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Attaches the client's root session, switches to a WebSocket and relays.
async fn websocket<S>(link: Arc<Link>, mut stream: S, request: &Request, key: &str)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let root = match attach(&link, &request.path).await {
        Ok(root) => root,
        Err((status, why)) => {
            let _ = http::answer(&mut stream, status, TEXT, &why).await;
            return;
        }
    };
    let (client, rx) = match link.add_client(root.clone()) {
        Ok(added) => added,
        Err(err) => {
            let _ = http::answer(
                &mut stream,
                "500 Internal Server Error",
                TEXT,
                &err.to_string(),
            )
            .await;
            return;
        }
    };
    if http::switch(&mut stream, key).await.is_err() {
        link.remove_client(client).await;
        return;
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(super::pipe::MAX_MESSAGE))
        .max_frame_size(Some(super::pipe::MAX_MESSAGE));
    let socket = WebSocketStream::from_raw_socket(stream, Role::Server, Some(config)).await;
    relay(&link, client, socket, rx).await;
}

/// The root session for a WebSocket path, or the answer refusing it.
async fn attach(link: &Link, path: &str) -> Result<String, (&'static str, String)> {
    let (method, params) = if let Some(id) = path.strip_prefix("/devtools/browser/") {
        if id != link.browser_id {
            return Err((
                "404 Not Found",
                format!("No such browser endpoint {id:.64}"),
            ));
        }
        ("Target.attachToBrowserTarget", json!({}))
    } else if let Some(id) = path.strip_prefix("/devtools/page/") {
        (
            "Target.attachToTarget",
            json!({ "targetId": id, "flatten": true }),
        )
    } else {
        return Err((
            "404 Not Found",
            format!("Unknown DevTools endpoint {path:.100}"),
        ));
    };
    match link.call(method, params, None).await {
        Ok(result) => result["sessionId"].as_str().map(str::to_owned).ok_or((
            "500 Internal Server Error",
            format!("{method} gave no sessionId"),
        )),
        Err(CallError::Failed { message, .. }) => Err(("404 Not Found", message)),
        Err(err) => Err(("500 Internal Server Error", err.to_string())),
    }
}

/// Relays between one WebSocket client and its sessions until either ends;
/// then its sessions are detached.
async fn relay<S>(
    link: &Link,
    client: ClientId,
    socket: WebSocketStream<S>,
    mut rx: mpsc::Receiver<ToClient>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (mut sink, mut source) = socket.split();
    let closing = loop {
        tokio::select! {
            incoming = source.next() => {
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                    Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break None,
                };
                if let Err(answer) = link.on_client_text(client, &text).await
                    && sink.send(Message::Text(answer.into())).await.is_err()
                {
                    break None;
                }
            }
            outgoing = rx.recv() => match outgoing {
                Some(ToClient::Message(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        break None;
                    }
                }
                Some(ToClient::Close(reason)) => break Some(reason),
                None => break Some("the browser closed the connection".to_owned()),
            },
        }
    };
    link.remove_client(client).await;
    if let Some(reason) = closing {
        let frame = CloseFrame {
            code: CloseCode::Away,
            reason: reason.into(),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_target_urls_are_percent_decoded() {
        assert_eq!(
            percent_decode("https://a.example/%3Fq%3D1"),
            "https://a.example/?q=1"
        );
        assert_eq!(percent_decode("a%zz%4"), "a%zz%4");
    }
}
