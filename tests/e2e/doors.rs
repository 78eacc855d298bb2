//! The operations core on a real workspace through the real `cubicle
//! serve`: ownership and scope on every door (REST, WebSockets, MCP), the
//! control lock on every door that changes the workspace, every operation in
//! the event log with its request id, crashes recorded, slow clients
//! dropped, and the official MCP Python SDK as a client.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::daemon::bin_dir;
use cubicle_tests::desk::{Tok, token};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use cubicle_tests::repo;

/// A daemon with an agent token that created one running workspace.
struct Owned {
    daemon: Daemon,
    agent: Tok,
    id: String,
    _data: tempfile::TempDir,
}

async fn owned() -> Owned {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let agent = token(&daemon, "agent-a", "agent").await;
    let ws = cubicle_tests::desk::create(&daemon, &agent.secret, "{}").await;
    assert_eq!(ws["owner_token"], agent.id.as_str());
    Owned {
        id: ws["id"].as_str().unwrap().to_owned(),
        daemon,
        agent,
        _data: data,
    }
}

/// A JSON-RPC message to `/v1/mcp` with `token`.
async fn mcp(daemon: &Daemon, token: &str, message: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(daemon.url("/v1/mcp"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Calls MCP tool `name`; returns the tool result.
async fn tool(daemon: &Daemon, token: &str, name: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": name, "arguments": arguments },
    });
    let (status, body) = mcp(daemon, token, message).await;
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

fn tool_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Opens a WebSocket on `path` with `token`; `Err(status)` if refused.
async fn open_socket(
    daemon: &Daemon,
    token: &str,
    path: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    u16,
> {
    let separator = if path.contains('?') { '&' } else { '?' };
    let url = format!(
        "{}{path}{separator}access_token={token}",
        daemon.base.replacen("http://", "ws://", 1)
    );
    let mut request = url.into_client_request().unwrap();
    if path.ends_with("/vnc") {
        // The live view speaks noVNC's subprotocol; CDP and exec none.
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "binary".parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(other) => panic!("{path}: {other}"),
    }
}

/// Sends one CDP call on an open CDP socket; returns the reply.
async fn cdp_call(
    socket: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let call = json!({ "id": id, "method": method, "params": params });
    socket
        .send(Message::Text(call.to_string().into()))
        .await
        .unwrap();
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(20));
    while Instant::now() < deadline {
        let next =
            tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(20)), socket.next())
                .await
                .expect("a CDP reply in time")
                .expect("the socket stays open")
                .unwrap();
        if let Message::Text(text) = next {
            let reply: Value = serde_json::from_str(&text).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    }
    panic!("no reply to {method}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_agents_workspace_is_not_found_on_any_door() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let intruder = token(&daemon, "agent-b", "agent").await;
    let paths = [
        (Method::GET, format!("/v1/workspaces/{id}"), None),
        (Method::GET, format!("/v1/workspaces/{id}/screenshot"), None),
        (
            Method::POST,
            format!("/v1/workspaces/{id}/exec"),
            Some(r#"{"command":"cat /etc/hostname"}"#),
        ),
        (
            Method::GET,
            format!("/v1/workspaces/{id}/files?path=/etc/hostname"),
            None,
        ),
        (
            Method::PUT,
            format!("/v1/workspaces/{id}/files?path=/tmp/x"),
            Some("x"),
        ),
        (
            Method::POST,
            format!("/v1/workspaces/{id}/actions"),
            Some(r#"{"action":"screenshot"}"#),
        ),
        (
            Method::GET,
            format!("/v1/workspaces/{id}/cdp/json/version"),
            None,
        ),
        (Method::GET, format!("/v1/workspaces/{id}/control"), None),
        (Method::POST, format!("/v1/workspaces/{id}/stop"), None),
        (Method::DELETE, format!("/v1/workspaces/{id}"), None),
    ];
    for (method, path, body) in &paths {
        let (status, answer) = daemon
            .call_as(Some(&intruder.secret), method.clone(), path, *body)
            .await
            .unwrap();
        assert_eq!(status, 404, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "not_found", "{method} {path}");
    }
    for path in [
        format!("/v1/workspaces/{id}/vnc"),
        format!("/v1/workspaces/{id}/cdp"),
        format!("/v1/workspaces/{id}/exec/ws?arg=true"),
    ] {
        let refused = open_socket(&daemon, &intruder.secret, &path).await;
        assert_eq!(refused.err(), Some(404), "{path}");
    }
    let (_, listed) = daemon
        .call_as(Some(&intruder.secret), Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(
        listed["workspaces"].as_array().unwrap().len(),
        0,
        "{listed}"
    );
    for (name, arguments) in [
        ("exec", json!({"workspace": id, "command": "true"})),
        (
            "read_file",
            json!({"workspace": id, "path": "/etc/hostname"}),
        ),
        ("computer", json!({"workspace": id, "action": "screenshot"})),
    ] {
        let result = tool(&daemon, &intruder.secret, name, arguments).await;
        assert_eq!(result["isError"], true, "{name}: {result}");
        assert!(
            tool_text(&result).contains("no workspace"),
            "{name}: {result}"
        );
    }
    let result = tool(&daemon, &intruder.secret, "list_workspaces", json!({})).await;
    assert_eq!(
        result["structuredContent"]["workspaces"],
        json!([]),
        "{result}"
    );

    // The positive control: the owner reaches every one of those doors.
    let (status, _) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(r#"{"command":"true"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    for path in [
        format!("/v1/workspaces/{id}/vnc"),
        format!("/v1/workspaces/{id}/cdp"),
    ] {
        assert!(
            open_socket(&daemon, &agent.secret, &path).await.is_ok(),
            "{path}"
        );
    }
    let result = tool(
        &daemon,
        &agent.secret,
        "exec",
        json!({"workspace": id, "command": "echo mine"}),
    )
    .await;
    assert!(tool_text(&result).contains("mine"), "{result}");
    // And the workspace is still there, running.
    let (_, ws) = daemon
        .call_as(
            Some(&agent.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(ws["state"], "running");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_door_that_changes_the_workspace_waits_for_the_operator() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let operator = token(&daemon, "olivia", "operator").await;
    let mut cdp = open_socket(&daemon, &agent.secret, &format!("/v1/workspaces/{id}/cdp"))
        .await
        .unwrap();
    let (status, taken) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/take"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{taken}");

    let held = |status: u16, body: &Value, what: &str| {
        assert_eq!(status, 409, "{what}: {body}");
        assert_eq!(body["error"]["code"], "control_held", "{what}: {body}");
    };
    let call = |method: Method, path: String, body: Option<&'static str>| {
        let daemon = &daemon;
        let secret = agent.secret.clone();
        async move {
            daemon
                .call_as(Some(&secret), method, &path, body)
                .await
                .unwrap()
        }
    };
    let (s, b) = call(
        Method::POST,
        format!("/v1/workspaces/{id}/exec"),
        Some(r#"{"command":"touch /home/user/ran-during-takeover"}"#),
    )
    .await;
    held(s, &b, "exec");
    let (s, b) = call(
        Method::PUT,
        format!("/v1/workspaces/{id}/files?path=/home/user/written-during-takeover"),
        Some("x"),
    )
    .await;
    held(s, &b, "file write");
    let (s, b) = call(
        Method::DELETE,
        format!("/v1/workspaces/{id}/files?path=/home/user/.bashrc"),
        None,
    )
    .await;
    held(s, &b, "file delete");
    let (s, b) = call(
        Method::POST,
        format!("/v1/workspaces/{id}/actions"),
        Some(r#"{"action":"mouse_move","coordinate":[10,10]}"#),
    )
    .await;
    held(s, &b, "action");
    assert_eq!(
        open_socket(
            &daemon,
            &agent.secret,
            &format!("/v1/workspaces/{id}/exec/ws?arg=true")
        )
        .await
        .err(),
        Some(409)
    );
    let result = tool(
        &daemon,
        &agent.secret,
        "exec",
        json!({"workspace": id, "command": "touch /home/user/mcp-during-takeover"}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(tool_text(&result).contains("holds control"), "{result}");
    for (n, method, params) in [
        (
            1,
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": 5, "y": 5}),
        ),
        (2, "Runtime.evaluate", json!({"expression": "1+1"})),
        (5, "Target.createTarget", json!({"url": "about:blank"})),
    ] {
        let reply = cdp_call(&mut cdp, n, method, params).await;
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("holds control"), "{method}: {reply}");
    }
    // Reads go on.
    let reply = cdp_call(&mut cdp, 3, "Browser.getVersion", json!({})).await;
    assert!(reply["result"]["product"].is_string(), "{reply}");
    let read = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/files?path=/etc/hostname")))
        .bearer_auth(&agent.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let screenshot = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/screenshot")))
        .bearer_auth(&agent.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(screenshot.status(), 200);

    // Handed back: the same calls work, and nothing ran while it was held.
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/release"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (s, out) = call(
        Method::POST,
        format!("/v1/workspaces/{id}/exec"),
        Some(r#"{"command":"ls /home/user"}"#),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let listing = out["stdout"].as_str().unwrap();
    assert!(!listing.contains("during-takeover"), "{listing}");
    let blank = json!({"url": "about:blank"});
    let reply = cdp_call(&mut cdp, 4, "Target.createTarget", blank).await;
    assert!(reply["result"]["targetId"].is_string(), "{reply}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_take_over_during_a_waiting_mcp_call_is_honoured() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let operator = token(&daemon, "olivia", "operator").await;
    // A batch holds the workspace's action lock for two seconds...
    let busy = {
        let daemon_url = daemon.url(&format!("/v1/workspaces/{id}/actions"));
        let secret = agent.secret.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(daemon_url)
                .bearer_auth(secret)
                .body(r#"{"actions":[{"action":"wait","duration":2}]}"#)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    // Its event is sealed just before it takes the lock, with no wait
    // between: once it is there, the batch holds the lock (or is about to,
    // before anything sent later).
    actions_started(&daemon, &id, 1).await;
    // ...an MCP click waits for its turn...
    let waiting = {
        let daemon_base = daemon.base.clone();
        let secret = agent.secret.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let message = json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": "computer", "arguments": {
                    "workspace": id, "action": "left_click", "coordinate": [20, 20] } },
            });
            let response = reqwest::Client::new()
                .post(format!("{daemon_base}/v1/mcp"))
                .bearer_auth(secret)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(message.to_string())
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    // The click's own event: it is past its checks and waits for the lock
    // the batch holds (the tokio mutex serves in order of arrival).
    actions_started(&daemon, &id, 2).await;
    // ...and an operator takes over before it gets it.
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/take"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(busy.await.unwrap(), 200);
    let answer = waiting.await.unwrap();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        tool_text(&answer["result"]).contains("holds control"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_operation_is_in_the_event_log_with_its_request_id() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let auditor = token(&daemon, "audrey", "auditor").await;
    let operator = token(&daemon, "olivia", "operator").await;
    let client = reqwest::Client::new();
    let send =
        |method: Method, path: String, secret: String, body: &'static str, rid: &'static str| {
            let request = client
                .request(method, daemon.url(&path))
                .bearer_auth(secret)
                .header("x-request-id", rid)
                .body(body);
            async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.headers()["x-request-id"], rid);
                let status = response.status().as_u16();
                assert!(
                    status < 300,
                    "{path}: {status} {}",
                    response.text().await.unwrap()
                );
            }
        };
    let a = agent.secret.clone();
    let o = operator.secret.clone();
    let calls = [
        (
            Method::POST,
            format!("/v1/workspaces/{id}/actions"),
            &a,
            r#"{"actions":[{"action":"mouse_move","coordinate":[30,40]},{"action":"type","text":"hunter2"}]}"#,
            "rid-action",
        ),
        (
            Method::GET,
            format!("/v1/workspaces/{id}/screenshot"),
            &a,
            "",
            "rid-shot",
        ),
        (
            Method::POST,
            format!("/v1/workspaces/{id}/exec"),
            &a,
            r#"{"argv":["echo","logged"]}"#,
            "rid-exec",
        ),
        (
            Method::PUT,
            format!("/v1/workspaces/{id}/files?path=/tmp/f"),
            &a,
            "file body",
            "rid-put",
        ),
        (
            Method::DELETE,
            format!("/v1/workspaces/{id}/files?path=/tmp/f"),
            &a,
            "",
            "rid-del",
        ),
        (
            Method::POST,
            format!("/v1/workspaces/{id}/control/take"),
            &o,
            "",
            "rid-take",
        ),
        (
            Method::POST,
            format!("/v1/workspaces/{id}/control/release"),
            &o,
            "",
            "rid-release",
        ),
    ];
    for (method, path, secret, body, rid) in calls {
        send(method, path, secret.clone(), body, rid).await;
    }
    let mut cdp = open_socket(&daemon, &a, &format!("/v1/workspaces/{id}/cdp"))
        .await
        .unwrap();
    cdp_call(&mut cdp, 1, "Browser.getVersion", json!({})).await;
    drop(cdp);
    // MCP create writes the same event as REST create.
    let made = tool(&daemon, &a, "create_workspace", json!({"name": "by-mcp"})).await;
    let second = made["structuredContent"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, log) = daemon
        .call_as(
            Some(&auditor.secret),
            Method::GET,
            "/v1/events?limit=1000",
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{log}");
    let events = log["events"].as_array().unwrap();
    let find = |kind: &str, rid: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["request_id"] == rid)
            .cloned()
            .collect::<Vec<_>>()
    };
    for (kind, rid) in [
        ("action", "rid-action"),
        ("screenshot", "rid-shot"),
        ("exec", "rid-exec"),
        ("file.write", "rid-put"),
        ("file.delete", "rid-del"),
    ] {
        let rows = find(kind, rid);
        assert_eq!(rows.len(), 2, "{kind} started + outcome: {rows:?}");
        assert_eq!(rows[0]["outcome"], "started");
        assert_eq!(rows[1]["outcome"], "ok", "{rows:?}");
        assert_eq!(rows[0]["actor"]["name"], "agent-a");
        assert_eq!(rows[0]["workspace_id"], id.as_str());
        assert!(
            rows[0]["client"]
                .as_str()
                .unwrap()
                .starts_with("127.0.0.1:")
        );
    }
    let action = &find("action", "rid-action")[0];
    assert_eq!(
        action["detail"]["actions"][0]["coordinate"],
        json!([30, 40])
    );
    assert_eq!(action["detail"]["actions"][1]["text"]["len"], 7);
    assert!(
        !log.to_string().contains("hunter2"),
        "typed text is never in clear"
    );
    assert!(
        !log.to_string().contains("file body"),
        "file contents are never in clear"
    );
    let exec = &find("exec", "rid-exec")[1];
    assert_eq!(exec["detail"]["exit_code"], 0);
    assert_eq!(exec["detail"]["stdout"]["len"], 7);
    let write = &find("file.write", "rid-put")[0];
    assert_eq!(write["detail"]["content"]["len"], 9);
    assert_eq!(find("control.take", "rid-take").len(), 1);
    assert_eq!(find("control.release", "rid-release").len(), 1);
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["workspace_id"] == id.as_str())
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    // (A create has no workspace id until it exists: checked below.)
    for kind in [
        "workspace.running",
        "control.take",
        "control.release",
        "cdp.open",
        "cdp.method",
        "cdp.close",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let creates: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "workspace.create" && e["outcome"] == "ok")
        .collect();
    assert_eq!(creates.len(), 2, "REST and MCP create: {creates:?}");
    assert_eq!(creates[1]["workspace_id"], second.as_str());
    assert_eq!(creates[0]["actor"], creates[1]["actor"]);
    let method = events
        .iter()
        .find(|e| e["kind"] == "cdp.method" && e["workspace_id"] == id.as_str())
        .unwrap();
    assert_eq!(method["detail"]["method"], "Browser.getVersion");
    // Agents do not read the log.
    let (status, _) = daemon
        .call_as(Some(&a), Method::GET, "/v1/events", None)
        .await
        .unwrap();
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_desktop_that_dies_is_recorded_as_crashed() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let (_, ws) = daemon
        .call_as(
            Some(&agent.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    let [user, services] = cubicle_tests::procs::workspace_uids(
        u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap(),
    );
    // Everything of the workspace (its user's and its services' uids) dies
    // at once, as an OOM kill or a bug would do it.
    let killed = Command::new("pkill")
        .args(["-KILL", "-U", &format!("{user},{services}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let crashed =
        cubicle_tests::desk::event_of(&daemon, &id, "workspace.crashed", Duration::from_secs(20))
            .await
            .expect("a workspace.crashed event");
    assert!(
        crashed["actor"].is_null(),
        "the daemon saw it, nobody did it: {crashed}"
    );
    assert!(
        crashed["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("ended unexpectedly"),
        "{crashed}"
    );
    let (_, ws) = daemon
        .call_as(
            Some(&agent.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(ws["state"], "stopped", "{ws}");
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_header_clients_are_dropped_and_the_gateway_keeps_answering() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let address = daemon.base.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    // The gateway answers others while they dawdle.
    let started = Instant::now();
    let (status, _) = daemon.call(Method::GET, "/v1/me", None).await.unwrap();
    assert_eq!(status, 200);
    assert!(started.elapsed() < Duration::from_secs(5));
    // Every slow client is cut off after the header timeout (10 s).
    let mut closed = 0;
    for stream in &mut slow {
        let mut buf = [0u8; 512];
        let read = tokio::time::timeout(
            cubicle_tests::guard(Duration::from_secs(30)),
            stream.read(&mut buf),
        )
        .await;
        match read {
            Ok(Ok(_)) | Ok(Err(_)) => closed += 1,
            Err(_) => {}
        }
    }
    assert_eq!(closed, slow.len(), "every slow client is dropped");
    let (status, _) = daemon.call(Method::GET, "/v1/me", None).await.unwrap();
    assert_eq!(status, 200);
}

/// The Python interpreter with the `mcp` SDK that `scripts/setup` installs.
fn python() -> String {
    std::env::var("CUBICLE_PYTHON").unwrap_or_else(|_| "/var/cache/cubicle/py/bin/python".into())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_python_sdk_speaks_the_newest_protocol_over_stdio_and_http() {
    let Owned {
        _data,
        daemon,
        agent,
        id,
    } = owned().await;
    let script = repo().join("tests/browser/mcp_client.py");
    for mode in ["stdio", "http"] {
        let mut args = vec![
            script.display().to_string(),
            mode.to_owned(),
            daemon.base.clone(),
            agent.secret.clone(),
            id.clone(),
        ];
        if mode == "stdio" {
            args.push(bin_dir().join("cubicle").display().to_string());
        }
        let output = tokio::task::spawn_blocking(move || {
            Command::new(python())
                .args(args)
                .stdin(Stdio::null())
                .output()
        })
        .await
        .unwrap()
        .expect("the Python interpreter with the mcp SDK (scripts/setup installs it)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}: {stdout}\n{stderr}");
        assert!(
            !stderr.contains("400 Bad Request"),
            "{mode}: the bridge was refused: {stderr}"
        );
        let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(result["version"], "2026-07-28", "{mode}: {result}");
        // Every tool the server has (tests/e2e/mcp.rs names them).
        assert_eq!(
            result["tools"].as_array().unwrap().len(),
            crate::mcp::TOOLS.len(),
            "{mode}: {result}"
        );
        assert_eq!(result["exec_error"], false, "{mode}: {result}");
        assert!(
            result["exec_text"].as_str().unwrap().contains("py-ok"),
            "{mode}: {result}"
        );
        if mode == "http" {
            let refused = result["refused"].as_str().unwrap();
            assert!(
                refused.contains("token is not valid"),
                "a readable refusal: {refused}"
            );
        }
    }
}

/// Waits until `count` action calls on `id` have begun (their `action`
/// events with outcome `started`, sealed before each takes the session's
/// action lock).
async fn actions_started(daemon: &Daemon, id: &str, count: usize) {
    let deadline = std::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(30));
    loop {
        let (status, events) = daemon
            .call(
                Method::GET,
                &format!("/v1/events?workspace={id}&limit=1000"),
                None,
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "{events}");
        let started = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "action" && e["outcome"] == "started")
            .count();
        if started >= count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{count} action calls did not begin: {events}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
