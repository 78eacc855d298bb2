//! Time limits on real workspaces of the real `cubicle serve`: a TTL set at
//! create stops the workspace on time and keeps its home; an idle timeout
//! is held off by agent operations and by an open live view, and deletes
//! the workspace once nobody uses it; the server's `--ttl-seconds` applies
//! to workspaces that set nothing. Each expiry is an event naming why.

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

async fn state_of(daemon: &Daemon, id: &str) -> (u16, Value) {
    daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap()
}

/// Waits up to `limit` for workspace `id` to answer GET with `status` and
/// (for 200) `state`; how long it took.
async fn until(daemon: &Daemon, id: &str, status: u16, state: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let (now_status, body) = state_of(daemon, id).await;
        if now_status == status && (status != 200 || body["state"] == state) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{id} never reached {status} {state}: {now_status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `workspace.expire` outcome rows of `id`.
///
/// The `ok` record is written once the stop or delete has ended, so a
/// workspace already seen stopped or gone may not have it yet: it is waited
/// for (bounded), and none at all is what the caller's assertion sees.
async fn expiries(daemon: &Daemon, id: &str) -> Vec<Value> {
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(30));
    loop {
        let (status, events) = daemon
            .call(Method::GET, &format!("/v1/events?workspace={id}"), None)
            .await
            .unwrap();
        assert_eq!(status, 200, "{events}");
        let expired: Vec<Value> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "workspace.expire" && e["outcome"] == "ok")
            .cloned()
            .collect();
        if !expired.is_empty() || Instant::now() > deadline {
            return expired;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A live view that has finished its RFB handshake (security None) and then
/// just watches; closed when dropped or closed.
struct LiveView {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl LiveView {
    async fn open(daemon: &Daemon, id: &str) -> Self {
        let url = daemon.ws_url(&format!("/v1/workspaces/{id}/vnc"));
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "binary".parse().unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let mut view = LiveView { ws };
        let mut got = Vec::new();
        // Version, then security types, then the result, then ServerInit.
        view.read_at_least(12, &mut got).await;
        assert_eq!(&got[..12], b"RFB 003.008\n");
        got.drain(..12);
        view.send(b"RFB 003.008\n").await;
        view.read_at_least(1, &mut got).await;
        let types = usize::from(got[0]);
        view.read_at_least(1 + types, &mut got).await;
        assert!(got[1..=types].contains(&1), "None offered: {got:?}");
        got.drain(..=types);
        view.send(&[1]).await;
        view.read_at_least(4, &mut got).await;
        assert_eq!(&got[..4], &[0, 0, 0, 0], "security result");
        got.drain(..4);
        view.send(&[1]).await; // ClientInit, shared
        view.read_at_least(24, &mut got).await;
        view
    }

    async fn read_at_least(&mut self, n: usize, got: &mut Vec<u8>) {
        while got.len() < n {
            match self.ws.next().await {
                Some(Ok(Message::Binary(bytes))) => got.extend_from_slice(&bytes),
                Some(Ok(_)) => {}
                other => panic!("live view closed during the handshake: {other:?}"),
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.ws
            .send(Message::Binary(bytes.to_vec().into()))
            .await
            .unwrap();
    }

    async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

#[tokio::test]
async fn ttl_stops_idle_deletes_and_activity_or_a_live_view_holds_it_off() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--ttl-seconds", "3600"]).unwrap();

    // The server's TTL applies to a workspace that sets nothing, and a
    // create that sets its own wins.
    let ttl = daemon
        .create_workspace(r#"{"time_limits":{"ttl_seconds":6}}"#)
        .await;
    let ttl_id = ttl["id"].as_str().unwrap().to_owned();
    assert_eq!(ttl["time_limits"]["ttl_seconds"], 6, "{ttl}");
    assert_eq!(ttl["time_limits"]["on_expiry"], "stop", "{ttl}");
    let (status, bad) = daemon
        .call(
            Method::POST,
            "/v1/workspaces",
            Some(r#"{"time_limits":{"ttl_seconds":"soon"}}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 400, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("time_limits.ttl_seconds"),
        "{bad}"
    );

    // TTL: stopped on time (the sweeper looks every second), home kept.
    let took = until(&daemon, &ttl_id, 200, "stopped", Duration::from_secs(60)).await;
    eprintln!("time limits: TTL 6 s workspace stopped {took:?} after its create returned");
    let expired = expiries(&daemon, &ttl_id).await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0]["detail"]["reason"], "ttl");
    assert_eq!(expired[0]["detail"]["action"], "stop");
    assert!(daemon.workspace_dir(&ttl_id).exists(), "its home is kept");

    // Idle (made only now, so nothing else holds it up): agent operations
    // keep it alive past its 6 s (an operation counts while it runs)...
    let idle = daemon
        .create_workspace(r#"{"time_limits":{"idle_seconds":6,"on_expiry":"delete"}}"#)
        .await;
    let idle_id = idle["id"].as_str().unwrap().to_owned();
    assert_eq!(
        idle["time_limits"]["ttl_seconds"], 3600,
        "server default: {idle}"
    );
    assert_eq!(idle["time_limits"]["idle_seconds"], 6, "{idle}");
    let keep_busy_until = Instant::now() + cubicle_tests::guard(Duration::from_secs(9));
    while Instant::now() < keep_busy_until {
        let body = json!({ "command": "true" }).to_string();
        let (status, out) = daemon
            .call(
                Method::POST,
                &format!("/v1/workspaces/{idle_id}/exec"),
                Some(&body),
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "still there while used: {out}");
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    // ...and so does an open live view, with nothing else going on.
    let view = LiveView::open(&daemon, &idle_id).await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    let (status, body) = state_of(&daemon, &idle_id).await;
    assert_eq!((status, &body["state"]), (200, &json!("running")), "{body}");
    view.close().await;
    // Once nobody uses it, it is deleted.
    let took = until(&daemon, &idle_id, 404, "", Duration::from_secs(60)).await;
    eprintln!("time limits: idle 6 s workspace deleted {took:?} after its live view closed");
    let expired = expiries(&daemon, &idle_id).await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0]["detail"]["reason"], "idle");
    assert_eq!(expired[0]["detail"]["action"], "delete");
    assert!(!daemon.workspace_dir(&idle_id).exists(), "deleted");
}
