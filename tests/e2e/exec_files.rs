//! Exec and files on a real workspace through the real `cubicle serve`:
//! what an agent sees from `POST .../exec`, the exec WebSocket and
//! `.../files`, including every bad input getting its 4xx while the
//! workspace keeps working.

use std::time::{Duration, Instant};

use cubicle_tests::{Daemon, desk};
use futures_util::SinkExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Starts a daemon with its own uid range and one running workspace.
async fn workspace(data: &std::path::Path) -> (Daemon, String) {
    let daemon = Daemon::start(data, None, &[]).unwrap();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    (daemon, id)
}

async fn exec(daemon: &Daemon, id: &str, body: Value) -> (u16, Value) {
    daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body.to_string()),
        )
        .await
        .unwrap()
}

/// Runs a shell line that must succeed; returns its stdout.
async fn sh(daemon: &Daemon, id: &str, command: &str) -> String {
    let (status, out) = exec(daemon, id, json!({ "command": command })).await;
    assert_eq!(status, 200, "{command}: {out}");
    assert_eq!(out["exit_code"], 0, "{command}: {out}");
    out["stdout"].as_str().unwrap().to_owned()
}

/// A raw request with the admin token (or `token`), for byte bodies.
async fn raw(
    daemon: &Daemon,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let client = reqwest::Client::builder()
        .timeout(cubicle_tests::guard(Duration::from_secs(120)))
        .build()
        .unwrap();
    let mut request = client.request(method, daemon.url(path)).body(body);
    request = request.bearer_auth(token.unwrap_or(&daemon.token));
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// Asserts the workspace still answers: running, and a command runs.
async fn still_works(daemon: &Daemon, id: &str) {
    let (status, ws) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(
        (status, ws["state"].as_str()),
        (200, Some("running")),
        "{ws}"
    );
    let socket = daemon.channel_socket(id);
    let health = guest_health(&socket).await;
    assert!(health["ready"].as_bool().unwrap(), "{health}");
    assert_eq!(sh(daemon, id, "echo alive").await, "alive\n");
}

/// The guest's health report, straight from its control port.
async fn guest_health(socket: &std::path::Path) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = cubicle_tests::guest::connect(socket, 1024).await.unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(b"{\"op\":\"health\"}\n").await.unwrap();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await.unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_commands_as_the_workspace_user() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;

    let (status, out) = exec(
        &daemon,
        &id,
        json!({"command": "echo hi; echo err >&2; exit 3"}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["stdout"], "hi\n");
    assert_eq!(out["stderr"], "err\n");
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["signal"], Value::Null);

    let (_, out) = exec(&daemon, &id, json!({"argv": ["id", "-u"]})).await;
    assert_eq!(out["stdout"], "1000\n", "{out}");
    assert_eq!(sh(&daemon, &id, "hostname").await.trim(), id);
    assert_eq!(
        sh(&daemon, &id, "echo $HOME $DISPLAY; pwd").await,
        "/home/user :0\n/home/user\n"
    );

    // env, cwd and stdin are honoured.
    let (_, out) = exec(
        &daemon,
        &id,
        json!({"argv": ["sh", "-c", "echo $GREETING; pwd; cat"], "env": {"GREETING": "hello"},
               "cwd": "/tmp", "stdin": "from stdin"}),
    )
    .await;
    assert_eq!(out["stdout"], "hello\n/tmp\nfrom stdin", "{out}");

    // Non-UTF-8 output comes as lossy text plus exact base64.
    let (_, out) = exec(&daemon, &id, json!({"command": "printf 'a\\377b'"})).await;
    assert_eq!(out["stdout_base64"], "Yf9i", "{out}");
    assert_eq!(out["stdout"], "a\u{fffd}b");

    // A timeout kills the whole process group and says so.
    let started = Instant::now();
    let (status, out) = exec(
        &daemon,
        &id,
        json!({"command": "sleep 60 & sleep 60; echo never", "timeout_ms": 500}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["signal"], 9);
    assert_eq!(out["exit_code"], Value::Null);
    assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    assert_eq!(
        sh(&daemon, &id, "pgrep -c -x sleep || true").await.trim(),
        "0"
    );
    still_works(&daemon, &id).await;

    // Output over 1 MiB is cut and flagged; the rest is still read.
    let (_, out) = exec(
        &daemon,
        &id,
        json!({"command": "head -c 3000000 /dev/zero | tr '\\0' x; echo done >&2"}),
    )
    .await;
    assert_eq!(out["stdout_truncated"], true);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(out["stderr"], "done\n");
    assert_eq!(out["stderr_truncated"], false);
    assert_eq!(out["exit_code"], 0);

    // Round trip of the smallest command, 50 times.
    let mut times = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        let (status, _) = exec(&daemon, &id, json!({"argv": ["true"]})).await;
        times.push(started.elapsed());
        assert_eq!(status, 200);
    }
    times.sort();
    println!(
        "measure: exec `true` round trip p50 {:.1} ms, p95 {:.1} ms over 50",
        times[25].as_secs_f64() * 1000.0,
        times[47].as_secs_f64() * 1000.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_round_trip_byte_exact() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;
    let files = format!("/v1/workspaces/{id}/files");

    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let (status, body) = raw(
        &daemon,
        None,
        Method::PUT,
        &format!("{files}?path=/home/user/dir/../bin.dat"),
        bytes.clone(),
    )
    .await;
    assert_eq!(status, 400, "`..` is refused");
    assert_eq!(json_of(&body)["error"]["code"], "bad_path");
    sh(&daemon, &id, "mkdir -p /home/user/dir").await;
    let path = "/home/user/dir/bin.dat";
    let (status, body) = raw(
        &daemon,
        None,
        Method::PUT,
        &format!("{files}?path={path}&mode=0600"),
        bytes.clone(),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let info = json_of(&body);
    assert_eq!(
        (info["size"].as_u64(), info["mode"].as_u64()),
        (Some(300_000), Some(0o600))
    );

    let (status, back) = raw(
        &daemon,
        None,
        Method::GET,
        &format!("{files}?path={path}"),
        vec![],
    )
    .await;
    assert_eq!(status, 200);
    assert!(back == bytes, "read back differs from what was written");
    // The guest agrees on the bytes.
    let (_, out) = exec(
        &daemon,
        &id,
        json!({"argv": ["od", "-An", "-tu1", "-j", "299999", path]}),
    )
    .await;
    assert_eq!(
        out["stdout"].as_str().unwrap().trim(),
        bytes[299_999].to_string(),
        "{out}"
    );
    let (status, part) = raw(
        &daemon,
        None,
        Method::GET,
        &format!("{files}?path={path}&offset=1000&length=10"),
        vec![],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(part, &bytes[1000..1010]);

    // A file the workspace wrote is readable through the API.
    sh(&daemon, &id, "printf 'from inside' > /tmp/inside.txt").await;
    let (_, inside) = raw(
        &daemon,
        None,
        Method::GET,
        &format!("{files}?path=/tmp/inside.txt"),
        vec![],
    )
    .await;
    assert_eq!(inside, b"from inside");

    // list and stat.
    let (status, listing) = daemon
        .call(
            Method::GET,
            &format!("{files}/list?path=/home/user/dir"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{listing}");
    let entries = listing["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["name"], "bin.dat");
    assert_eq!(entries[0]["type"], "file");
    assert_eq!(entries[0]["size"], 300_000);
    let (_, same) = daemon
        .call(
            Method::GET,
            &format!("{files}?path=/home/user/dir&list=true"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(same["entries"], listing["entries"]);
    let (status, stat) = daemon
        .call(
            Method::GET,
            &format!("{files}?path=/home/user/dir&stat=true"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(stat["type"], "dir");
    assert!(stat["mtime_ms"].as_i64().unwrap() > 1_600_000_000_000);

    // delete: a non-empty directory needs recursive.
    let (status, body) = daemon
        .call(
            Method::DELETE,
            &format!("{files}?path=/home/user/dir"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not_empty")),
        "{body}"
    );
    let (status, body) = daemon
        .call(Method::DELETE, &format!("{files}?path={path}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deleted"]["name"], path);
    let (status, _) = daemon
        .call(Method::GET, &format!("{files}?path={path}&stat=true"), None)
        .await
        .unwrap();
    assert_eq!(status, 404);
    sh(
        &daemon,
        &id,
        "mkdir -p /tmp/tree/a/b && touch /tmp/tree/a/b/c",
    )
    .await;
    let (status, _) = daemon
        .call(
            Method::DELETE,
            &format!("{files}?path=/tmp/tree&recursive=true"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        sh(&daemon, &id, "test -e /tmp/tree || echo gone").await,
        "gone\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_websocket_streams_stdin_and_output() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;

    let url = format!(
        "{}&arg=cat",
        daemon.ws_url(&format!("/v1/workspaces/{id}/exec/ws"))
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(Message::Text(r#"{"stdin": "hello "}"#.into()))
        .await
        .unwrap();
    ws.send(Message::Binary(b"bytes\n".to_vec().into()))
        .await
        .unwrap();
    let mut echoed = String::new();
    while echoed != "hello bytes\n" {
        let frame = desk::next_json(&mut ws).await;
        echoed.push_str(
            frame["stdout"]
                .as_str()
                .unwrap_or_else(|| panic!("{frame}")),
        );
    }
    ws.send(Message::Text(r#"{"stdin_eof": true}"#.into()))
        .await
        .unwrap();
    let exit = desk::next_json(&mut ws).await;
    assert_eq!(exit["exit_code"], 0, "{exit}");
    assert_eq!(exit["timed_out"], false);

    // A shell line with both streams, and a bad client message.
    let command = "echo out; echo err >&2; exit 4";
    let url = format!(
        "{}&command={}",
        daemon.ws_url(&format!("/v1/workspaces/{id}/exec/ws")),
        command
            .replace(' ', "%20")
            .replace(';', "%3B")
            .replace('>', "%3E")
            .replace('&', "%26")
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    let exit = loop {
        let frame = desk::next_json(&mut ws).await;
        if let Some(text) = frame["stdout"].as_str() {
            out.push_str(text);
        } else if let Some(text) = frame["stderr"].as_str() {
            err.push_str(text);
        } else {
            break frame;
        }
    };
    assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
    assert_eq!(exit["exit_code"], 4, "{exit}");

    // Closing the socket kills a command that is still running.
    let url = format!(
        "{}&command=sleep%20300",
        daemon.ws_url(&format!("/v1/workspaces/{id}/exec/ws"))
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(Message::Text("not json".into())).await.unwrap();
    let error = desk::next_json(&mut ws).await;
    assert_eq!(error["error"]["code"], "bad_request", "{error}");
    drop(ws);
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(5));
    while sh(&daemon, &id, "pgrep -c -x sleep || true").await.trim() != "0" {
        assert!(
            Instant::now() < deadline,
            "sleep survived the closed socket"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A program that does not exist is refused before the upgrade.
    let url = format!(
        "{}&arg=/no/such/program",
        daemon.ws_url(&format!("/v1/workspaces/{id}/exec/ws"))
    );
    let err = tokio_tungstenite::connect_async(url).await.unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");
    still_works(&daemon, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_4xx_and_the_workspace_keeps_working() {
    let data = tempfile::tempdir().unwrap();
    let (daemon, id) = workspace(data.path()).await;
    let exec_path = format!("/v1/workspaces/{id}/exec");
    let files = format!("/v1/workspaces/{id}/files");

    for (body, status, field) in [
        ("not json", 400, "JSON"),
        (r#"{"argv": []}"#, 400, "argv"),
        (r#"{}"#, 400, "argv"),
        (r#"{"argv": ["true"], "timeout_ms": -5}"#, 400, "timeout_ms"),
        (
            r#"{"argv": ["true"], "timeout_ms": 99999999999}"#,
            400,
            "timeout_ms",
        ),
        (r#"{"argv": ["true"], "cwd": "tmp"}"#, 400, "cwd"),
        (r#"{"argv": ["true"], "cwd": "/nowhere"}"#, 404, "cwd"),
        (r#"{"argv": ["/no/such/program"]}"#, 400, "/no/such/program"),
        (r#"{"argv": ["true"], "colour": 1}"#, 400, "colour"),
    ] {
        let (got, reply) = daemon
            .call(Method::POST, &exec_path, Some(body))
            .await
            .unwrap();
        assert_eq!(got, status, "{body} → {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field),
            "{body}: {message:?} does not name {field}"
        );
    }

    for (method, query, status, code) in [
        (Method::GET, "?path=home/user/x", 400, "not_absolute"),
        (Method::GET, "", 400, "not_absolute"),
        (
            Method::GET,
            "?path=/home/user/../../etc/passwd",
            400,
            "bad_path",
        ),
        (Method::GET, "?path=/home/user/missing", 404, "not_found"),
        (Method::GET, "?path=/home/user", 400, "is_a_directory"),
        (Method::GET, "?path=/dev/zero", 400, "special_file"),
        (Method::GET, "?path=/etc&list=maybe", 400, "bad_request"),
        (
            Method::GET,
            "?path=/etc/passwd&length=99999999999",
            413,
            "too_large",
        ),
        (Method::PUT, "?path=/usr/evil", 403, "permission_denied"),
        (
            Method::PUT,
            "?path=/home/user/x&mode=999",
            400,
            "bad_request",
        ),
        (Method::DELETE, "?path=/", 400, "bad_request"),
        (Method::DELETE, "?path=/home/user/missing", 404, "not_found"),
    ] {
        let (got, body) = raw(
            &daemon,
            None,
            method.clone(),
            &format!("{files}{query}"),
            b"x".to_vec(),
        )
        .await;
        let reply = json_of(&body);
        assert_eq!(got, status, "{method} {query} → {reply}");
        assert_eq!(reply["error"]["code"], code, "{method} {query} → {reply}");
    }
    let (_, body) = raw(
        &daemon,
        None,
        Method::PUT,
        &format!("{files}?path=/usr/evil"),
        vec![],
    )
    .await;
    let message = json_of(&body)["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("only /home/user and /tmp are writable"),
        "{message}"
    );

    // Over 16 MiB: 413, nothing written.
    let big = vec![7u8; 16 * 1024 * 1024 + 1];
    let (status, body) = raw(
        &daemon,
        None,
        Method::PUT,
        &format!("{files}?path=/tmp/big"),
        big,
    )
    .await;
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert_eq!(json_of(&body)["error"]["code"], "too_large");
    assert_eq!(
        sh(&daemon, &id, "test -e /tmp/big || echo absent").await,
        "absent\n"
    );
    // Exactly 16 MiB fits.
    let full = vec![1u8; 16 * 1024 * 1024];
    let (status, _) = raw(
        &daemon,
        None,
        Method::PUT,
        &format!("{files}?path=/tmp/full"),
        full,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(sh(&daemon, &id, "stat -c %s /tmp/full").await, "16777216\n");

    // An exec body over the request limit, and the WebSocket form without
    // an upgrade: JSON 4xx, not axum's plain text.
    let huge = format!(r#"{{"argv":["true"],"stdin":"{}"}}"#, "x".repeat(3 << 20));
    let (status, body) = raw(&daemon, None, Method::POST, &exec_path, huge.into_bytes()).await;
    assert_eq!(status, 413);
    assert_eq!(json_of(&body)["error"]["code"], "too_large");
    let (status, body) = raw(
        &daemon,
        None,
        Method::GET,
        &format!("{exec_path}/ws?arg=true"),
        vec![],
    )
    .await;
    assert!((400..500).contains(&status), "{status}");
    assert!(
        json_of(&body)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WebSocket")
    );

    // Unknown workspace, no token, auditor token.
    let (status, reply) = daemon
        .call(
            Method::POST,
            "/v1/workspaces/ws-nope/exec",
            Some(r#"{"argv":["true"]}"#),
        )
        .await
        .unwrap();
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, _) = raw(
        &daemon,
        None,
        Method::GET,
        "/v1/workspaces/ws-nope/files?path=/tmp",
        vec![],
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = daemon
        .call_as(None, Method::POST, &exec_path, Some(r#"{"argv":["true"]}"#))
        .await
        .unwrap();
    assert_eq!(status, 401);
    let auditor = auditor_token(&daemon);
    let (status, reply) = daemon
        .call_as(
            Some(&auditor),
            Method::POST,
            &exec_path,
            Some(r#"{"argv":["true"]}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 403, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("auditor")
    );
    let (status, _) = raw(
        &daemon,
        Some(&auditor),
        Method::PUT,
        &format!("{files}?path=/tmp/a"),
        b"x".to_vec(),
    )
    .await;
    assert_eq!(status, 403);

    still_works(&daemon, &id).await;
}

/// A new auditor token made with the CLI on the daemon's data dir.
fn auditor_token(daemon: &Daemon) -> String {
    let output = std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
        .args(["token", "create", "--role", "auditor", "--data-dir"])
        .arg(&daemon.data_dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    text.split_whitespace().last().unwrap().to_owned()
}
