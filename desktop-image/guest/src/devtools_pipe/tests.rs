//! The multiplexer against a fake Chromium on the other end of real pipes,
//! with real HTTP and WebSocket clients.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::DuplexStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::pipe::{self, ChildEnds};
use super::*;

type Calls = Arc<Mutex<Vec<Value>>>;
type Ws = WebSocketStream<DuplexStream>;

/// Answers like Chromium would, enough for routing: sessions numbered per
/// attach, one page `PAGE1`, `Target.setAutoAttach` attaching a child to
/// the caller's session, `Echo.session` answering with the session it came
/// on. Every call is logged.
async fn fake_browser(ends: ChildEnds, calls: Calls) {
    let (from_mux, mut to_mux) = ends.into_fake_browser();
    let mut reader = pipe::Reader::new(from_mux);
    let mut sessions = 0;
    while let Ok(text) = reader.next().await {
        let call: Value = serde_json::from_str(&text).unwrap();
        calls.lock().unwrap().push(call.clone());
        let session = call.get("sessionId").cloned();
        let mut event = None;
        let outcome = match call["method"].as_str().unwrap() {
            "Target.attachToBrowserTarget" => {
                sessions += 1;
                Ok(json!({ "sessionId": format!("B{sessions}") }))
            }
            "Target.attachToTarget" if call["params"]["targetId"] == "PAGE1" => {
                sessions += 1;
                Ok(json!({ "sessionId": format!("P{sessions}") }))
            }
            "Target.attachToTarget" => Err("No target with given id found"),
            "Browser.getVersion" => Ok(
                json!({"product": "Chrome/999.0", "protocolVersion": "1.3", "userAgent": "UA", "jsVersion": "9.9", "revision": "@abc"}),
            ),
            "Target.getTargets" => Ok(
                json!({"targetInfos": [{"targetId": "PAGE1", "type": "page", "title": "T", "url": "about:blank", "attached": false}]}),
            ),
            "Target.setAutoAttach" => {
                let parent = session.clone().unwrap_or(Value::Null);
                let child = format!("C-{}", parent.as_str().unwrap_or("root"));
                event = Some(
                    json!({"method": "Target.attachedToTarget", "sessionId": parent,
                    "params": {"sessionId": child, "targetInfo": {"targetId": "PAGE1"}, "waitingForDebugger": false}}),
                );
                Ok(json!({}))
            }
            "Echo.session" => Ok(json!({ "session": session })),
            _ => Ok(json!({})),
        };
        let mut reply = match outcome {
            Ok(result) => json!({ "id": call["id"], "result": result }),
            Err(message) => {
                json!({ "id": call["id"], "error": {"code": -32602, "message": message} })
            }
        };
        if let Some(session) = session {
            reply["sessionId"] = session;
        }
        pipe::write(&mut to_mux, &reply.to_string()).await.unwrap();
        if let Some(event) = event {
            pipe::write(&mut to_mux, &event.to_string()).await.unwrap();
        }
    }
}

struct Fixture {
    devtools: Arc<DevTools>,
    calls: Calls,
    browser: tokio::task::JoinHandle<()>,
}

impl Fixture {
    fn start() -> Self {
        let devtools = Arc::new(DevTools::default());
        let calls = Calls::default();
        let ends = devtools.pipe_for_start().unwrap();
        let browser = tokio::spawn(fake_browser(ends, calls.clone()));
        Self {
            devtools,
            calls,
            browser,
        }
    }

    fn connection(&self) -> DuplexStream {
        let (near, far) = tokio::io::duplex(1 << 20);
        tokio::spawn(self.devtools.endpoint().unwrap().serve(far));
        near
    }

    async fn get(&self, path: &str) -> Result<String, cubicle_image::http_get::HttpGetError> {
        cubicle_image::http_get::get(&mut self.connection(), 9222, path, 1 << 20).await
    }

    async fn websocket(&self, path: &str) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let url = format!("ws://127.0.0.1:9222{path}");
        Ok(tokio_tungstenite::client_async(url, self.connection())
            .await?
            .0)
    }

    async fn browser_client(&self) -> Ws {
        let version: Value =
            serde_json::from_str(&self.get("/json/version").await.unwrap()).unwrap();
        let url = version["webSocketDebuggerUrl"].as_str().unwrap();
        self.websocket(url.strip_prefix("ws://127.0.0.1:9222").unwrap())
            .await
            .unwrap()
    }

    fn detached(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c["method"] == "Target.detachFromTarget")
            .map(|c| c["params"]["sessionId"].clone())
            .collect()
    }
}

async fn send(ws: &mut Ws, call: Value) {
    ws.send(Message::Text(call.to_string().into()))
        .await
        .unwrap();
}

async fn receive(ws: &mut Ws) -> Value {
    let next = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .unwrap();
    match next {
        Some(Ok(Message::Text(text))) => serde_json::from_str(text.as_str()).unwrap(),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// Waits (on the condition, not a clock) until `check` holds.
async fn until(mut check: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the condition never held");
}

#[tokio::test]
async fn discovery_is_answered_from_the_pipe() {
    let fixture = Fixture::start();
    let version: Value =
        serde_json::from_str(&fixture.get("/json/version").await.unwrap()).unwrap();
    assert_eq!(version["Browser"], "Chrome/999.0");
    assert_eq!(version["Protocol-Version"], "1.3");
    let url = version["webSocketDebuggerUrl"].as_str().unwrap();
    assert!(
        url.starts_with("ws://127.0.0.1:9222/devtools/browser/"),
        "{url}"
    );
    for path in ["/json", "/json/", "/json/list", "/json/list/"] {
        let list: Value = serde_json::from_str(&fixture.get(path).await.unwrap()).unwrap();
        assert_eq!(list[0]["id"], "PAGE1", "{path}: {list}");
        assert_eq!(list[0]["type"], "page");
        assert_eq!(
            list[0]["webSocketDebuggerUrl"],
            "ws://127.0.0.1:9222/devtools/page/PAGE1"
        );
    }
    let closed = fixture.get("/json/close/PAGE1").await.unwrap();
    assert_eq!(closed, "Target is closing");
    assert!(fixture.get("/json/nothing").await.is_err());
    assert!(
        fixture.get("/json/new?about:blank").await.is_err(),
        "GET /json/new must be refused as Chromium does"
    );
}

#[tokio::test]
async fn browser_clients_each_get_a_session_of_their_own() {
    let fixture = Fixture::start();
    let mut a = fixture.browser_client().await;
    let mut b = fixture.browser_client().await;
    // The same ids from both: each gets its own answer, on its own session,
    // with neither the pipe's id nor the session showing.
    send(&mut a, json!({"id": 1, "method": "Echo.session"})).await;
    send(&mut b, json!({"id": 1, "method": "Echo.session"})).await;
    let (from_a, from_b) = (receive(&mut a).await, receive(&mut b).await);
    assert_eq!(from_a, json!({"id": 1, "result": {"session": "B1"}}));
    assert_eq!(from_b, json!({"id": 1, "result": {"session": "B2"}}));
    // A's auto-attached child is A's alone.
    send(&mut a, json!({"id": 2, "method": "Target.setAutoAttach", "params": {"autoAttach": true, "flatten": true}})).await;
    assert_eq!(receive(&mut a).await["id"], 2);
    let attached = receive(&mut a).await;
    assert_eq!(attached["method"], "Target.attachedToTarget", "{attached}");
    assert_eq!(attached["params"]["sessionId"], "C-B1");
    send(
        &mut a,
        json!({"id": 3, "method": "Echo.session", "sessionId": "C-B1"}),
    )
    .await;
    assert_eq!(
        receive(&mut a).await,
        json!({"id": 3, "sessionId": "C-B1", "result": {"session": "C-B1"}})
    );
    send(
        &mut b,
        json!({"id": 3, "method": "Echo.session", "sessionId": "C-B1"}),
    )
    .await;
    let refused = receive(&mut b).await;
    assert_eq!(
        refused["error"]["message"], "Session with given id not found.",
        "{refused}"
    );
    // A leaves: its root session is detached; B goes on.
    drop(a);
    until(|| fixture.detached() == [json!("B1")]).await;
    send(&mut b, json!({"id": 4, "method": "Echo.session"})).await;
    assert_eq!(receive(&mut b).await["result"]["session"], "B2");
    // A stale browser id is refused, as Chromium refuses it.
    assert!(fixture.websocket("/devtools/browser/0000").await.is_err());
}

#[tokio::test]
async fn a_page_client_gets_a_flat_session_on_its_target() {
    let fixture = Fixture::start();
    let mut page = fixture.websocket("/devtools/page/PAGE1").await.unwrap();
    send(&mut page, json!({"id": 5, "method": "Echo.session"})).await;
    assert_eq!(
        receive(&mut page).await,
        json!({"id": 5, "result": {"session": "P1"}})
    );
    let attach = fixture.calls.lock().unwrap()[0].clone();
    assert_eq!(
        attach["params"],
        json!({"targetId": "PAGE1", "flatten": true})
    );
    let missing = fixture.websocket("/devtools/page/NOPE").await;
    assert!(missing.is_err(), "an unknown target was accepted");
}

#[tokio::test]
async fn a_new_start_gets_a_new_pipe_and_the_old_clients_are_closed() {
    let fixture = Fixture::start();
    let mut old = fixture.browser_client().await;
    // Chromium exits: its end of the pipe closes.
    fixture.browser.abort();
    let end = tokio::time::timeout(Duration::from_secs(10), old.next())
        .await
        .unwrap();
    assert!(matches!(end, Some(Ok(Message::Close(_))) | None), "{end:?}");
    until(|| fixture.devtools.link().is_none()).await;
    assert!(
        fixture.devtools.endpoint().is_err(),
        "served with no browser"
    );
    assert!(!fixture.devtools.answers().await);
    // The supervisor starts it again.
    let ends = fixture.devtools.pipe_for_start().unwrap();
    let calls = Calls::default();
    tokio::spawn(fake_browser(ends, calls));
    assert!(fixture.devtools.answers().await);
    let mut new = fixture.browser_client().await;
    send(&mut new, json!({"id": 1, "method": "Echo.session"})).await;
    assert_eq!(receive(&mut new).await["result"]["session"], "B1");
}
