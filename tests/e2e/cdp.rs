//! CDP for agents: a real workspace's Chromium through the gateway's CDP
//! proxy, with real clients (Playwright's `connectOverCDP`, a raw WebSocket
//! client), and the proxy's inspection, refusals and errors.

use std::process::Command;
use std::time::{Duration, Instant};

use cubicle_tests::daemon::bin_dir;
use cubicle_tests::{Daemon, guest};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A CDP client connected to the gateway.
type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long one CDP reply may take in a test.
const REPLY: Duration = Duration::from_secs(30);

use cubicle_tests::repo;

/// Starts a daemon and one running workspace; returns both and its id.
async fn workspace() -> (tempfile::TempDir, Daemon, String) {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some(r#"{"name":"cdp"}"#))
        .await
        .unwrap();
    assert_eq!(status, 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    (data, daemon, id)
}

/// Opens the gateway WebSocket at `path` with `token` as a Bearer header.
async fn open(daemon: &Daemon, path: &str, token: Option<&str>) -> Result<Client, WsError> {
    let url = daemon.url(path).replacen("http://", "ws://", 1);
    let mut request = url.into_client_request()?;
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        request.headers_mut().insert("Authorization", value);
    }
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    Ok(socket)
}

/// Sends a CDP call and returns the reply with its id (events are skipped).
async fn call<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut WebSocketStream<S>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let text = json!({ "id": id, "method": method, "params": params }).to_string();
    socket.send(Message::text(text)).await.unwrap();
    reply(socket, id).await
}

async fn reply<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut WebSocketStream<S>,
    id: u64,
) -> Value {
    let wait = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(&text).unwrap();
                    if value["id"] == id {
                        return value;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("CDP connection ended waiting for reply {id}: {other:?}"),
            }
        }
    };
    tokio::time::timeout(cubicle_tests::guard(REPLY), wait)
        .await
        .expect("CDP reply in time")
}

fn p50_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playwright_connects_over_cdp_through_the_gateway() {
    let (_data, daemon, id) = workspace().await;
    let endpoint = daemon.url(&format!("/v1/workspaces/{id}/cdp"));
    let gateway_ws = format!(
        "{}/v1/workspaces/{id}/cdp",
        daemon.base.replacen("http://", "ws://", 1)
    );

    // Discovery answers with URLs on the gateway, with or without the slash
    // Playwright adds.
    for path in ["/json/version", "/json/version/"] {
        let (status, version) = daemon
            .call(Method::GET, &format!("/v1/workspaces/{id}/cdp{path}"), None)
            .await
            .unwrap();
        assert_eq!(status, 200, "{version}");
        assert_eq!(
            version["webSocketDebuggerUrl"],
            gateway_ws.as_str(),
            "{version}"
        );
        assert!(
            version["Browser"].as_str().unwrap().contains("Chrome"),
            "{version}"
        );
    }

    let node_modules = repo().join("web/node_modules/playwright-core");
    assert!(
        node_modules.exists(),
        "{} is missing: run `npm ci` in web/",
        node_modules.display()
    );
    let script = repo().join("tests/browser/cdp_connect.mjs");
    let daemon_token = daemon.token.clone();
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(&endpoint)
            .arg(&daemon_token)
            .output()
    })
    .await
    .unwrap()
    .expect("node runs (apt install nodejs)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "Playwright failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    println!(
        "measure: Playwright connectOverCDP + page + title + close through the gateway {:.2}s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(seen["title"], "Cubicle CDP test", "{seen}");
    assert_eq!(seen["answer"], 42);
    assert_eq!(seen["heading"], "hello from the workspace");
    let page = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Cubicle CDP test")
        .unwrap_or_else(|| panic!("/json/list lacks the page: {seen}"));
    assert_eq!(page["type"], "page");
    let page_url = page["webSocketDebuggerUrl"].as_str().unwrap();
    assert!(
        page_url.starts_with(&format!("{gateway_ws}/page/")),
        "{page_url}"
    );

    // A page target's own endpoint through the gateway.
    let (status, list) = daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{id}/cdp/json/list"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{list}");
    let target = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "page")
        .unwrap_or_else(|| panic!("no page in {list}"));
    assert!(target.get("devtoolsFrontendUrl").is_none(), "{target}");
    let url = target["webSocketDebuggerUrl"].as_str().unwrap();
    let path = url
        .strip_prefix(&daemon.base.replacen("http://", "ws://", 1))
        .unwrap();
    let mut page = open(&daemon, path, Some(&daemon.token)).await.unwrap();
    let evaluated = call(
        &mut page,
        1,
        "Runtime.evaluate",
        json!({"expression": "1 + 2"}),
    )
    .await;
    assert_eq!(evaluated["result"]["result"]["value"], 3, "{evaluated}");

    let target_id = target["id"].as_str().unwrap();
    measure_screenshots(&daemon, &id, target_id, &mut page).await;
}

/// `Page.captureScreenshot` (a message of megabytes) p50 over 10 calls
/// through the gateway and directly over the guest channel.
async fn measure_screenshots<S: AsyncRead + AsyncWrite + Unpin>(
    daemon: &Daemon,
    id: &str,
    target: &str,
    through: &mut WebSocketStream<S>,
) {
    let stream = guest::connect(&daemon.channel_socket(id), 9222)
        .await
        .unwrap();
    let url = format!("ws://127.0.0.1:9222/devtools/page/{target}");
    let (mut direct, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    // Random pixels: a PNG that does not compress, megabytes per message.
    let noise = "const c = document.createElement('canvas'); c.width = 1280; c.height = 800; \
        const g = c.getContext('2d'); const d = g.createImageData(1280, 800); \
        for (let i = 0; i < d.data.length; i++) d.data[i] = i % 4 == 3 ? 255 : Math.random() * 256; \
        g.putImageData(d, 0, 0); document.body.style.margin = 0; document.body.replaceChildren(c); 1";
    let drawn = call(through, 9, "Runtime.evaluate", json!({"expression": noise})).await;
    assert_eq!(drawn["result"]["result"]["value"], 1, "{drawn}");
    let (mut gateway, mut channel, mut size) = (Vec::new(), Vec::new(), 0);
    for n in 0..10 {
        let params = json!({"format": "png"});
        let started = Instant::now();
        let shot = call(through, 10 + n, "Page.captureScreenshot", params.clone()).await;
        gateway.push(started.elapsed());
        size = shot["result"]["data"].as_str().map_or(0, str::len);
        let started = Instant::now();
        call(&mut direct, 10 + n, "Page.captureScreenshot", params).await;
        channel.push(started.elapsed());
    }
    assert!(size > 1_000_000, "screenshot of {size} bytes of base64");
    let (gateway, channel) = (p50_ms(gateway), p50_ms(channel));
    println!(
        "measure: Page.captureScreenshot ({} KiB base64) p50 through the gateway {gateway:.1} ms, direct over the guest channel {channel:.1} ms (ratio {:.2})",
        size / 1024,
        gateway / channel
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdp_calls_are_inspected_and_bad_clients_are_closed() {
    let (_data, daemon, id) = workspace().await;
    let path = format!("/v1/workspaces/{id}/cdp");
    let token = daemon.token.clone();
    let mut first = open(&daemon, &path, Some(&token)).await.unwrap();
    let mut second = open(&daemon, &path, Some(&token)).await.unwrap();

    let version = call(&mut first, 1, "Browser.getVersion", json!({})).await;
    assert!(
        version["result"]["product"]
            .as_str()
            .unwrap()
            .contains("Chrome"),
        "{version}"
    );

    // Download behaviour belongs to the gateway: acknowledged, not
    // forwarded. A browser context Chromium does not have shows who
    // answered: Chromium, asked directly over the guest channel, says there
    // is no such context; through the gateway the call is acknowledged.
    let params = json!({"behavior": "allow", "browserContextId": "cubicle-no-such-context"});
    let mut direct = direct_browser(&daemon, &id).await;
    let rejected = call(
        &mut direct,
        2,
        "Browser.setDownloadBehavior",
        params.clone(),
    )
    .await;
    assert!(
        rejected["error"]["message"].is_string(),
        "control: Chromium took an unknown context: {rejected}"
    );
    let absorbed = call(&mut first, 2, "Browser.setDownloadBehavior", params).await;
    assert_eq!(absorbed, json!({"id": 2, "result": {}}));
    // A denied call gets a CDP error, and the connection keeps working.
    let denied = call(
        &mut first,
        3,
        "Target.exposeDevToolsProtocol",
        json!({"targetId": "x"}),
    )
    .await;
    assert_eq!(denied["error"]["code"], -32000, "{denied}");
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Cubicle: "),
        "{denied}"
    );
    // The same call tunnelled to a target is refused by the gateway, in its
    // own words (Chromium would answer about the unknown target "x").
    let tunnel = json!({"targetId": "x", "message": r#"{"id":1,"method":"Page.setDownloadBehavior","params":{"behavior":"allow"}}"#});
    let denied = call(&mut first, 4, "Target.sendMessageToTarget", tunnel).await;
    assert_eq!(denied["error"]["code"], -32000, "{denied}");
    assert_eq!(
        denied["error"]["message"],
        "Cubicle: downloads are owned by the gateway (quarantine); the call was acknowledged and not applied",
        "{denied}"
    );
    let again = call(&mut first, 5, "Browser.getVersion", json!({})).await;
    assert!(again["result"]["product"].is_string(), "{again}");

    // Garbage closes only that client, with the reason.
    first.send(Message::text("this is not CDP")).await.unwrap();
    let close = tokio::time::timeout(cubicle_tests::guard(REPLY), first.next())
        .await
        .unwrap();
    match close {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(u16::from(frame.code), 1008);
            assert!(
                frame.reason.contains("not a CDP JSON object"),
                "{}",
                frame.reason
            );
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    let still = call(&mut second, 1, "Browser.getVersion", json!({})).await;
    assert!(still["result"]["product"].is_string(), "{still}");
    let mut third = open(&daemon, &path, Some(&token)).await.unwrap();
    let fresh = call(&mut third, 1, "Target.getTargets", json!({})).await;
    assert!(fresh["result"]["targetInfos"].is_array(), "{fresh}");

    measure_round_trips(&daemon, &id, &mut third).await;
}

/// A CDP client on the browser endpoint over the guest channel: Chromium
/// itself, no gateway in between.
async fn direct_browser(daemon: &Daemon, id: &str) -> WebSocketStream<tokio::net::UnixStream> {
    let socket = daemon.channel_socket(id);
    let version = guest::http_get(&socket, 9222, "/json/version")
        .await
        .unwrap();
    let version: Value = serde_json::from_str(&version).unwrap();
    let url = version["webSocketDebuggerUrl"].as_str().unwrap().to_owned();
    let stream = guest::connect(&socket, 9222).await.unwrap();
    tokio_tungstenite::client_async(url, stream)
        .await
        .unwrap()
        .0
}

/// `Browser.getVersion` p50 over 100 calls: through the gateway, and
/// directly over the guest channel (no gateway), in the same run.
async fn measure_round_trips<S: AsyncRead + AsyncWrite + Unpin>(
    daemon: &Daemon,
    id: &str,
    through: &mut WebSocketStream<S>,
) {
    let socket = daemon.channel_socket(id);
    let version = guest::http_get(&socket, 9222, "/json/version")
        .await
        .unwrap();
    let version: Value = serde_json::from_str(&version).unwrap();
    let url = version["webSocketDebuggerUrl"].as_str().unwrap().to_owned();
    let stream = guest::connect(&socket, 9222).await.unwrap();
    let (mut direct, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    let mut gateway = Vec::new();
    let mut channel = Vec::new();
    for n in 0..100 {
        let started = Instant::now();
        call(through, 100 + n, "Browser.getVersion", json!({})).await;
        gateway.push(started.elapsed());
        let started = Instant::now();
        call(&mut direct, 100 + n, "Browser.getVersion", json!({})).await;
        channel.push(started.elapsed());
    }
    let (gateway, channel) = (p50_ms(gateway), p50_ms(channel));
    println!(
        "measure: Browser.getVersion p50 through the gateway {gateway:.3} ms, direct over the guest channel {channel:.3} ms (ratio {:.2})",
        gateway / channel
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdp_refuses_wrong_callers_and_targets() {
    let (data, daemon, id) = workspace().await;
    let version_path = format!("/v1/workspaces/{id}/cdp/json/version");
    let version = &version_path;

    let (status, body) = daemon
        .call_as(None, Method::GET, version, None)
        .await
        .unwrap();
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    let err = open(&daemon, &format!("/v1/workspaces/{id}/cdp"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WsError::Http(r) if r.status() == 401),
        "{err}"
    );

    let (status, body) = daemon
        .call(Method::GET, "/v1/workspaces/ws-nope/cdp/json/version", None)
        .await
        .unwrap();
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ws-nope"),
        "{body}"
    );
    let err = open(&daemon, "/v1/workspaces/ws-nope/cdp", Some(&daemon.token))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WsError::Http(r) if r.status() == 404),
        "{err}"
    );

    let created = Command::new(bin_dir().join("cubicle"))
        .args([
            "token",
            "create",
            "--role",
            "auditor",
            "--name",
            "a",
            "--data-dir",
        ])
        .arg(data.path())
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let line = String::from_utf8_lossy(&created.stdout).into_owned();
    let auditor = line
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let (status, body) = daemon
        .call_as(Some(&auditor), Method::GET, version, None)
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("use a workspace's browser"),
        "{body}"
    );
    let err = open(&daemon, &format!("/v1/workspaces/{id}/cdp"), Some(&auditor))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WsError::Http(r) if r.status() == 403),
        "{err}"
    );

    // Targets: a malformed id is a 400, an unknown one a 404.
    let (status, body) = daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{id}/cdp/page/a.b"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 400, "{body}");
    let err = open(
        &daemon,
        &format!("/v1/workspaces/{id}/cdp/page/NOSUCHTARGET"),
        Some(&daemon.token),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, WsError::Http(r) if r.status() == 404),
        "{err}"
    );
    // A plain GET of the WebSocket endpoint says what it is.
    let (status, body) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}/cdp"), None)
        .await
        .unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WebSocket"),
        "{body}"
    );

    // The workspace's browser is unharmed by all of it.
    let mut socket = open(
        &daemon,
        &format!("/v1/workspaces/{id}/cdp"),
        Some(&daemon.token),
    )
    .await
    .unwrap();
    let version = call(&mut socket, 1, "Browser.getVersion", json!({})).await;
    assert!(version["result"]["product"].is_string(), "{version}");

    // Stopping the workspace ends its CDP connections; then it is a 409.
    let (status, body) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/stop"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let ended = tokio::time::timeout(cubicle_tests::guard(REPLY), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "CDP connection outlived its workspace");
    let (status, body) = daemon.call(Method::GET, &version_path, None).await.unwrap();
    assert_eq!(status, 409, "{body}");
}
