//! Issue 17, class 6: a tab reaching Chromium's own DevTools.
//!
//! The attack: through the gateway's CDP, open a tab on
//! `http://127.0.0.1:9222/json/version` (in the browser's network namespace
//! that was DevTools itself); the page's script, same origin, read the
//! browser endpoint and opened `ws://127.0.0.1:9222/devtools/browser/…`:
//! full CDP past the gateway. Now DevTools is on a pipe (no port exists),
//! every request goes through the egress proxy, and the gateway refuses
//! calls naming the endpoint. The test tries the attack both ways (asking
//! the gateway, and by a page's own script, which the gateway cannot see),
//! and looks for a listener in the browser's namespace; the gateway's own
//! CDP is the control.

use std::collections::BTreeSet;
use std::time::Duration;

use cubicle_tests::Daemon;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a reply, or a page's load, may take.
const WAIT: Duration = Duration::from_secs(30);

/// The gateway's browser endpoint for workspace `id`.
async fn gateway_cdp(daemon: &Daemon, id: &str) -> Client {
    let url = daemon
        .url(&format!("/v1/workspaces/{id}/cdp"))
        .replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().unwrap();
    let bearer = format!("Bearer {}", daemon.token).parse().unwrap();
    request.headers_mut().insert("Authorization", bearer);
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// A CDP call (on `session`, if any); the whole reply.
async fn call(
    cdp: &mut Client,
    id: u64,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut message = json!({ "id": id, "method": method, "params": params });
    if let Some(session) = session {
        message["sessionId"] = json!(session);
    }
    cdp.send(Message::text(message.to_string())).await.unwrap();
    let wait = async {
        loop {
            match cdp.next().await {
                Some(Ok(Message::Text(text))) => {
                    let reply: Value = serde_json::from_str(&text).unwrap();
                    if reply["id"] == id {
                        return reply;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the gateway's CDP ended waiting for {method}: {other:?}"),
            }
        }
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .expect("a CDP reply in time")
}

/// What a page's script can get of DevTools from where it is: the page's
/// own text, a same-origin read of `/json`, and a WebSocket to the browser
/// endpoint (its URL read from `/json/version` if that answers).
const PAGE_ATTACK: &str = r#"(async () => {
  const r = { text: document.body ? document.body.innerText.slice(0, 300) : '' };
  let url = 'ws://127.0.0.1:9222/devtools/browser';
  try {
    const v = await (await fetch('http://127.0.0.1:9222/json/version')).json();
    r.version = 'read'; url = v.webSocketDebuggerUrl || url;
  } catch (e) { r.version = 'failed: ' + e; }
  try { r.json = (await (await fetch('http://127.0.0.1:9222/json')).text()).slice(0, 300); }
  catch (e) { r.json = 'failed: ' + e; }
  r.ws = await new Promise(done => {
    try {
      const w = new WebSocket(url);
      w.onopen = () => { w.send('{"id":1,"method":"Browser.getVersion"}'); };
      w.onmessage = (m) => done('answered: ' + m.data.slice(0, 100));
      w.onerror = () => done('error');
      w.onclose = () => done('closed');
    } catch (e) { done('refused: ' + e); }
  });
  return r;
})()"#;

/// The host pid of the workspace's Chromium (its browser process: the
/// first of the services' processes started as it).
fn chromium_pid(ws: &Value) -> Option<i32> {
    let uid = u32::try_from(ws["host_uid"].as_u64()?).ok()?;
    let services = cubicle_tests::procs::workspace_uids(uid)[1];
    let mut pids = cubicle_tests::procs::of_uid(services);
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.starts_with(b"/usr/lib/chromium/chromium\0"))
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !c.windows(7).any(|w| w == b"--type="))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_cannot_reach_the_browsers_own_devtools() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon
        .create_workspace(r#"{"name":"devtools-reach"}"#)
        .await;
    let id = ws["id"].as_str().unwrap();
    let mut cdp = gateway_cdp(&daemon, id).await;

    // Control: the gateway's own CDP works.
    let version = call(&mut cdp, 1, None, "Browser.getVersion", json!({})).await;
    assert!(
        version["result"]["product"]
            .as_str()
            .unwrap()
            .contains("Chrome"),
        "{version}"
    );

    // Asking the gateway: a tab on DevTools, in a few spellings, is refused.
    for (n, url) in [
        "http://127.0.0.1:9222/json/version",
        "HTTP://0x7f.1:9222/json",
        "view-source:http://localhost:9222/json/version",
        "ws://[::1]:9222/devtools/browser",
    ]
    .into_iter()
    .enumerate()
    {
        let refused = call(
            &mut cdp,
            10 + n as u64,
            None,
            "Target.createTarget",
            json!({ "url": url }),
        )
        .await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Cubicle: ") && message.contains("DevTools"),
            "{url}: {refused}"
        );
    }
    let direct = call(
        &mut cdp,
        20,
        None,
        "Target.createBrowserContext",
        json!({"proxyServer": "direct://"}),
    )
    .await;
    assert!(
        direct["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("proxyServer"),
        "{direct}"
    );

    // A page's own script, which the gateway does not see: it sends its tab
    // to DevTools and tries to use it from there.
    let created = call(
        &mut cdp,
        30,
        None,
        "Target.createTarget",
        json!({"url": "about:blank"}),
    )
    .await;
    let target = created["result"]["targetId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"));
    let attached = call(
        &mut cdp,
        31,
        None,
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
    )
    .await;
    let session = attached["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{attached}"))
        .to_owned();
    let session = Some(session.as_str());
    let go = json!({"expression": "location.href = 'http://127.0.0.1:9222/json/version'; 1"});
    let sent = call(&mut cdp, 32, session, "Runtime.evaluate", go).await;
    assert_eq!(sent["result"]["result"]["value"], 1, "{sent}");
    // Wait for the tab to leave about:blank and finish loading (whatever
    // it shows: the proxy's refusal, or Chromium's error page).
    let mut ids = 100..;
    let landed = tokio::time::timeout(WAIT, async {
        loop {
            let probe = json!({"expression": "[location.href, document.readyState]", "returnByValue": true});
            let state = call(&mut cdp, ids.next().unwrap(), session, "Runtime.evaluate", probe).await;
            let value = &state["result"]["result"]["value"];
            if value[0] != "about:blank" && value[1] == "complete" {
                return value[0].clone();
            }
        }
    })
    .await
    .expect("the tab finished its navigation");
    let attack = json!({"expression": PAGE_ATTACK, "awaitPromise": true, "returnByValue": true});
    let seen = call(&mut cdp, 40, session, "Runtime.evaluate", attack).await;
    let seen = &seen["result"]["result"]["value"];
    println!("measure: a tab sent to DevTools landed on {landed}; its script saw {seen}");
    assert!(seen.is_object(), "the page script did not run: {seen}");
    for part in ["text", "json"] {
        let text = seen[part].as_str().unwrap_or_default();
        assert!(
            !text.contains("webSocketDebuggerUrl") && !text.contains("devtools/"),
            "{part} shows DevTools: {seen}"
        );
    }
    assert!(
        seen["version"]
            .as_str()
            .unwrap_or_default()
            .starts_with("failed"),
        "{seen}"
    );
    assert!(
        !seen["ws"]
            .as_str()
            .unwrap_or_default()
            .starts_with("answered"),
        "a page got CDP: {seen}"
    );

    // Nothing listens on the CDP port in the browser's network namespace;
    // the egress relay there does (control: this is the right table).
    let chromium = chromium_pid(&ws).expect("Chromium runs as the services' id");
    let mut listening = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{chromium}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) == Some(&"0A") {
                let port = fields[1].rsplit(':').next().unwrap();
                listening.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    assert!(
        !listening.contains(&9222),
        "DevTools listens in the browser's namespace: {listening:?}"
    );
    assert!(
        listening.contains(&3128),
        "control: the egress relay is not in {listening:?}"
    );

    // Control: the gateway's CDP still drives that very page.
    let two = json!({"expression": "1 + 1", "returnByValue": true});
    let two = call(&mut cdp, 50, session, "Runtime.evaluate", two).await;
    assert_eq!(two["result"]["result"]["value"], 2, "{two}");
}

/// The supervisor restarts a Chromium that died, on a new pipe: the
/// gateway's CDP works again, and the old connection was closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devtools_comes_back_on_a_new_pipe_when_chromium_restarts() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon
        .create_workspace(r#"{"name":"devtools-restart"}"#)
        .await;
    let id = ws["id"].as_str().unwrap();
    let mut before = gateway_cdp(&daemon, id).await;
    let version = call(&mut before, 1, None, "Browser.getVersion", json!({})).await;
    assert!(version["result"]["product"].is_string(), "{version}");
    let first = chromium_pid(&ws).expect("Chromium runs");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &first.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The old connection ends with the browser.
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match before.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the CDP connection outlived its browser");
    // Wait (on the condition) until the workspace is ready again, then the
    // gateway's CDP reaches the new browser.
    tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(120)), async {
        loop {
            let (status, health) = daemon
                .call(reqwest::Method::GET, &format!("/v1/workspaces/{id}"), None)
                .await
                .unwrap();
            let again = chromium_pid(&ws).is_some_and(|pid| pid != first);
            if status == 200 && again && health["ready"] != false {
                let (status, version) = daemon
                    .call(
                        reqwest::Method::GET,
                        &format!("/v1/workspaces/{id}/cdp/json/version"),
                        None,
                    )
                    .await
                    .unwrap();
                if status == 200 && version["Browser"].is_string() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("DevTools came back after the restart");
    let mut after = gateway_cdp(&daemon, id).await;
    let version = call(&mut after, 1, None, "Browser.getVersion", json!({})).await;
    assert!(
        version["result"]["product"]
            .as_str()
            .unwrap()
            .contains("Chrome"),
        "{version}"
    );
    let targets = call(&mut after, 2, None, "Target.getTargets", json!({})).await;
    assert!(targets["result"]["targetInfos"].is_array(), "{targets}");
}
