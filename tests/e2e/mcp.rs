//! MCP on a real workspace through the real `cubicle serve`: the official
//! MCP TypeScript SDK as the client, over Streamable HTTP (`/v1/mcp`) and
//! over stdio (`cubicle mcp`); raw JSON-RPC for the refusals and bad
//! arguments; and the MCP screenshot call's latency against the plain
//! `POST /actions` screenshot in the same run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::daemon::bin_dir;
use reqwest::Method;
use serde_json::{Value, json};

pub(crate) const TOOLS: [&str; 14] = [
    "list_workspaces",
    "create_workspace",
    "computer",
    "exec",
    "read_file",
    "write_file",
    "list_files",
    "ask_person",
    "call_person",
    "clipboard",
    "fill_secret",
    "snapshot",
    "rollback",
    "list_snapshots",
];

use cubicle_tests::repo;

/// Starts a daemon with its own uid range and one running workspace.
async fn workspace(data: &Path) -> (Daemon, String) {
    let daemon = Daemon::start(data, None, &[]).unwrap();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    (daemon, id)
}

/// Runs tests/browser/mcp_client.mjs; returns what it printed.
async fn node_client(args: Vec<String>) -> Value {
    let sdk = repo().join("web/node_modules/@modelcontextprotocol/sdk");
    assert!(
        sdk.exists(),
        "{} is missing: run `npm ci` in web/",
        sdk.display()
    );
    let script = repo().join("tests/browser/mcp_client.mjs");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .expect("node runs (apt install nodejs)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "MCP client failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// What every client run must have seen, whatever the transport.
fn assert_round_trip(seen: &Value) {
    assert_eq!(seen["server"]["name"], "cubicle", "{seen}");
    let names: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS, "{seen}");
    assert!(
        seen["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["schemaType"] == "object")
    );

    let shot = &seen["screenshot"];
    assert_eq!(shot["isError"], false, "{shot}");
    let image = &shot["content"][0];
    assert_eq!(image["type"], "image", "{shot}");
    assert_eq!(image["mimeType"], "image/png", "{shot}");
    assert_eq!(
        (
            image["png"]["width"].as_u64(),
            image["png"]["height"].as_u64()
        ),
        (Some(1280), Some(800)),
        "the screenshot decodes as a 1280x800 PNG: {shot}"
    );

    let exec = &seen["exec"];
    assert_eq!(exec["isError"], false, "{exec}");
    assert!(
        exec["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("mcp-ok"),
        "{exec}"
    );
    assert_eq!(exec["structured"]["exit_code"], 0, "{exec}");
    assert_eq!(exec["structured"]["stdout"], "mcp-ok\n", "{exec}");

    let bad = &seen["bad"];
    assert_eq!(bad["isError"], true, "{bad}");
    let message = bad["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with("coordinate:") && message.contains("outside the screen"),
        "{bad}"
    );
    assert_eq!(seen["unknownTool"]["thrown"], true, "{seen}");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// p50 and p95 of a list of milliseconds.
fn p50_p95(values: &Value) -> (f64, f64) {
    let mut ms: Vec<f64> = values
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.95))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_over_http_lists_tools_screenshots_and_execs() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;
    let seen = node_client(vec![
        "http".into(),
        daemon.base.clone(),
        daemon.token.clone(),
        id.clone(),
        "30".into(),
    ])
    .await;
    assert_round_trip(&seen);

    let measured = &seen["measure"];
    assert_eq!(measured["mcp_ms"].as_array().unwrap().len(), 30);
    let (mcp50, mcp95) = p50_p95(&measured["mcp_ms"]);
    let (http50, http95) = p50_p95(&measured["http_ms"]);
    println!(
        "measure: MCP computer screenshot (TS SDK, 1280x800 PNG, 30 calls): p50 {mcp50:.1} ms, p95 {mcp95:.1} ms"
    );
    println!(
        "measure: HTTP POST /actions screenshot (same client process, interleaved): p50 {http50:.1} ms, p95 {http95:.1} ms"
    );
    println!(
        "measure: MCP / HTTP screenshot latency ratio: p50 {:.2}x, p95 {:.2}x",
        mcp50 / http50,
        mcp95 / http95
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_over_stdio_bridge_gets_the_same_tools() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;
    let cubicle = bin_dir().join("cubicle");
    let seen = node_client(vec![
        "stdio".into(),
        daemon.base.clone(),
        daemon.token.clone(),
        id,
        cubicle.display().to_string(),
    ])
    .await;
    assert_round_trip(&seen);

    // A refused token comes back as a JSON-RPC error on stdout, not silence.
    let answer = stdio_once(&daemon.base, "cubicle_not_a_token").await;
    assert_eq!(answer["id"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("401") && message.contains("token"),
        "{answer}"
    );
}

/// Sends one `initialize` through `cubicle mcp`; returns its one reply line.
async fn stdio_once(base: &str, token: &str) -> Value {
    let mut child = tokio::process::Command::new(bin_dir().join("cubicle"))
        .args(["mcp", "--url", base, "--token", token])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "0" }
        }
    });
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{initialize}\n").as_bytes())
            .await
            .unwrap();
        // Dropping stdin ends the input: the bridge answers and exits.
    }
    let output = tokio::time::timeout(
        cubicle_tests::guard(Duration::from_secs(30)),
        child.wait_with_output(),
    )
    .await
    .expect("cubicle mcp exits when stdin ends")
    .unwrap();
    assert!(output.status.success(), "{:?}", output.status);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout carries only protocol lines: {stdout}"
    );
    serde_json::from_str(lines[0]).unwrap()
}

/// One JSON-RPC message to `/v1/mcp` with `token`; status and JSON body.
pub(crate) async fn rpc(daemon: &Daemon, token: Option<&str>, message: Value) -> (u16, Value) {
    rpc_text(daemon, token, &message.to_string()).await
}

async fn rpc_text(daemon: &Daemon, token: Option<&str>, message: &str) -> (u16, Value) {
    let client = reqwest::Client::builder()
        .timeout(cubicle_tests::guard(Duration::from_secs(120)))
        .build()
        .unwrap();
    let mut request = client
        .post(daemon.url("/v1/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

async fn tool(daemon: &Daemon, name: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": name, "arguments": arguments }
    });
    let (status, body) = rpc(daemon, Some(&daemon.token), message).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The text of a tool result that must have failed.
fn tool_error(body: &Value) -> &str {
    assert_eq!(body["result"]["isError"], true, "{body}");
    body["result"]["content"][0]["text"].as_str().unwrap()
}

fn create_token(data: &Path, role: &str) -> String {
    let output = Command::new(bin_dir().join("cubicle"))
        .args(["token", "create", "--data-dir"])
        .arg(data)
        .args(["--role", role, "--name", "mcp-test"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.split_whitespace().last().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_bad_arguments_are_clear() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});

    let (status, body) = rpc(&daemon, None, list.clone()).await;
    assert_eq!(status, 401, "{body}");
    // A JSON-RPC error an MCP client can show, saying what to send.
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["error"]["data"]["code"], "unauthorized", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );
    let auditor = create_token(data.path(), "auditor");
    let (status, body) = rpc(&daemon, Some(&auditor), list.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("auditor")
    );
    let agent = create_token(data.path(), "agent");
    let (status, body) = rpc(&daemon, Some(&agent), list).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["tools"].as_array().unwrap().len(),
        TOOLS.len()
    );

    // Bad arguments: a tool result flagged isError, naming the field.
    let cases = [
        ("computer", json!({"action": "screenshot"}), "workspace:"),
        (
            "computer",
            json!({"workspace": id, "action": "fly"}),
            "action:",
        ),
        (
            "computer",
            json!({"workspace": id, "action": "type", "text": 5}),
            "text:",
        ),
        (
            "exec",
            json!({"workspace": id, "command": "true", "timeout_ms": -1}),
            "timeout_ms",
        ),
        ("exec", json!({"workspace": id}), "argv"),
        (
            "read_file",
            json!({"workspace": id, "path": "relative.txt"}),
            "path:",
        ),
        (
            "write_file",
            json!({"workspace": id, "path": "/tmp/x"}),
            "content:",
        ),
        ("list_files", json!({"workspace": id}), "path:"),
        ("create_workspace", json!({"geometry": "huge"}), "geometry"),
        (
            "ask_person",
            json!({"workspace": id, "question": ""}),
            "question:",
        ),
        (
            "ask_person",
            json!({"workspace": id, "question": "ok?", "wait_seconds": 301}),
            "wait_seconds:",
        ),
        ("clipboard", json!({"workspace": id, "text": 7}), "text:"),
        (
            "fill_secret",
            json!({"workspace": id, "secret": "x"}),
            "secret:",
        ),
        (
            "fill_secret",
            json!({"workspace": id, "secret": "sec-0123456789ab", "selector": ""}),
            "selector:",
        ),
    ];
    for (name, arguments, prefix) in cases {
        let body = tool(&daemon, name, arguments.clone()).await;
        let message = tool_error(&body);
        assert!(
            message.starts_with(prefix),
            "{name} {arguments} → {message}"
        );
    }
    let body = tool(
        &daemon,
        "read_file",
        json!({"workspace": id, "path": "/tmp/none"}),
    )
    .await;
    assert_eq!(body["result"]["structuredContent"]["error"]["status"], 404);
    let body = tool(
        &daemon,
        "exec",
        json!({"workspace": "ws-nope", "argv": ["true"]}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["error"]["code"], "not_found",
        "{body}"
    );

    // Protocol errors are JSON-RPC errors.
    let (status, body) = rpc_text(&daemon, Some(&daemon.token), "{nope").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32700)),
        "{body}"
    );
    let (status, body) = rpc(&daemon, Some(&daemon.token), json!({"jsonrpc": "2.0"})).await;
    assert!((400..500).contains(&status), "{status} {body}");
    let bad_call =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": {}}});
    let (status, body) = rpc(&daemon, Some(&daemon.token), bad_call).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32602)),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("name is missing")
    );
    let body = tool(&daemon, "no_such_tool", json!({})).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );

    // The files tools work end to end, and the workspace keeps working.
    let text = "written through MCP\n";
    let body = tool(
        &daemon,
        "write_file",
        json!({"workspace": id, "path": "/home/user/mcp.txt", "content": text}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["size"],
        text.len(),
        "{body}"
    );
    let body = tool(
        &daemon,
        "read_file",
        json!({"workspace": id, "path": "/home/user/mcp.txt"}),
    )
    .await;
    assert_eq!(body["result"]["content"][0]["text"], text, "{body}");
    let body = tool(
        &daemon,
        "list_files",
        json!({"workspace": id, "path": "/home/user"}),
    )
    .await;
    let entries = body["result"]["structuredContent"]["entries"]
        .as_array()
        .unwrap();
    assert!(entries.iter().any(|e| e["name"] == "mcp.txt"), "{body}");
    let body = tool(
        &daemon,
        "exec",
        json!({"workspace": id, "argv": ["cat", "/home/user/mcp.txt"]}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["stdout"], text,
        "{body}"
    );
    let body = tool(&daemon, "list_workspaces", json!({})).await;
    let listed = &body["result"]["structuredContent"]["workspaces"];
    assert_eq!(listed[0]["id"], id.as_str(), "{body}");
    assert_eq!(listed[0]["state"], "running", "{body}");

    // A person is asked; another token answers; asking again reads it.
    let ask =
        json!({"workspace": id, "question": "Send the report to the client?", "wait_seconds": 0});
    let body = tool(&daemon, "ask_person", ask.clone()).await;
    let asked = &body["result"]["structuredContent"];
    assert_eq!(asked["state"], "pending", "{body}");
    let approval = asked["approval"].as_str().unwrap().to_owned();
    let operator = create_token(data.path(), "operator");
    let (status, decided) = daemon
        .call_as(
            Some(&operator),
            Method::POST,
            &format!("/v1/approvals/{approval}/deny"),
            Some(r#"{"reason":"not yet"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{decided}");
    let body = tool(&daemon, "ask_person", ask).await;
    let answered = &body["result"]["structuredContent"];
    assert_eq!(answered["state"], "denied", "{body}");
    assert_eq!(answered["reason"], "not yet", "{body}");
}
