//! First light: a real desktop workspace end to end on the jail backend,
//! through the real `cubicle serve`, with a real RFB client.

use std::time::{Duration, Instant};

use cubicle_tests::{Daemon, guest, procs, rfb};
use reqwest::Method;
use serde_json::Value;

fn artifacts() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts")
}

fn host_uid(ws: &Value) -> u32 {
    ws["host_uid"].as_u64().expect("workspace has host_uid") as u32
}

/// Waits until no process of the workspace of `uid` (its user's and its
/// services' uids) is left, up to `limit`.
async fn no_processes_of(uid: u32, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + cubicle_tests::guard(limit);
    loop {
        let left = procs::of_workspace(uid);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_reaches_an_rfb_client_and_deletes_cleanly() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();

    let started = Instant::now();
    let (status, ws) = daemon
        .call(
            Method::POST,
            "/v1/workspaces",
            Some(r#"{"name":"first-light"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "create failed: {ws}");
    assert_eq!(ws["state"], "running");
    assert_eq!(ws["backend"], "jail");
    assert_eq!(ws["geometry"]["width"], 1280);
    let id = ws["id"].as_str().unwrap().to_owned();
    let created = started.elapsed();

    // The desktop, through the gateway's VNC WebSocket, with a real RFB client.
    let url = daemon.ws_url(&format!("/v1/workspaces/{id}/vnc"));
    let mut frame = rfb::first_full_frame(&url, Duration::from_secs(30))
        .await
        .unwrap();
    let first_frame = started.elapsed();
    assert_eq!((frame.width, frame.height), (1280, 800));
    // XFCE's panel strip (top rows) has many colours (icons, text, clock) and
    // differs from the desktop below; a blank or single-colour screen fails.
    // The panel paints a moment after the session starts: look again until
    // it is there.
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(30));
    while frame.colours_in_rows(0, 28) < 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        frame = rfb::first_full_frame(&url, Duration::from_secs(30))
            .await
            .unwrap();
    }
    frame
        .save_png(&artifacts().join("first_light_desktop.png"))
        .unwrap();
    let panel = frame.colours_in_rows(0, 28);
    let whole = frame.colours_in_rows(0, frame.height);
    assert!(
        panel >= 20,
        "panel strip has only {panel} colours: not an XFCE desktop"
    );
    assert!(whole >= 50, "screen has only {whole} colours");
    assert_ne!(
        frame.pixel(640, 10),
        frame.pixel(640, 400),
        "panel and desktop have the same colour"
    );
    println!(
        "measure: POST→running {:.2}s, POST→first full framebuffer {:.2}s",
        created.as_secs_f64(),
        first_frame.as_secs_f64()
    );

    // Chromium's DevTools endpoint through the guest channel.
    let socket = daemon.channel_socket(&id);
    let version = guest::http_get(&socket, 9222, "/json/version")
        .await
        .unwrap();
    let version: Value = serde_json::from_str(&version).unwrap();
    assert!(
        version["Browser"].as_str().unwrap().contains("Chrome"),
        "{version}"
    );
    assert!(
        version["webSocketDebuggerUrl"]
            .as_str()
            .unwrap()
            .starts_with("ws://127.0.0.1:9222/")
    );

    // A port not on the list is refused by the guest, which stays up.
    let err = guest::connect(&socket, 22).await.unwrap_err();
    assert!(err.to_string().contains("port 22"), "{err}");
    let err = guest::connect(&socket, 6000).await.unwrap_err();
    assert!(err.to_string().contains("not a guest service"), "{err}");
    assert!(guest::connect(&socket, 9222).await.is_ok());

    // Idle memory of the workspace: PSS of every process of its two uids.
    let uid = host_uid(&ws);
    let pids = procs::of_workspace(uid);
    println!(
        "measure: idle workspace PSS {:.0} MiB over {} processes",
        procs::pss_kib(&pids) as f64 / 1024.0,
        pids.len()
    );
    assert!(
        pids.len() > 5,
        "expected Xvnc, XFCE and Chromium processes, got {pids:?}"
    );

    // Delete: no process left, directory gone, 404 afterwards.
    let (status, body) = daemon
        .call(Method::DELETE, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 204, "{body}");
    let left = no_processes_of(uid, Duration::from_secs(5)).await;
    assert!(
        left.is_empty(),
        "processes of the workspace remain: {left:?}"
    );
    assert!(!daemon.workspace_dir(&id).exists(), "workspace dir remains");
    let (status, _) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 404);

    // The auditor reads what happened: created and deleted, by the admin.
    let auditor = token(&daemon, "auditor");
    let (status, log) = daemon
        .call_as(
            Some(&auditor),
            Method::GET,
            &format!("/v1/events?workspace={id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{log}");
    let rows: Vec<(String, String)> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["outcome"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let created = rows
        .iter()
        .position(|(kind, outcome)| kind == "workspace.create" && outcome == "ok");
    assert!(created.is_some(), "{rows:?}");
    let last = rows.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1.as_str()),
        ("workspace.delete", "ok"),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|(kind, _)| kind == "workspace.running"),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|(kind, _)| kind == "live_view.open"),
        "{rows:?}"
    );
    let create = &log["events"][created.unwrap_or_default()];
    assert_eq!(create["actor"]["role"], "admin");
    let (status, _) = daemon
        .call(Method::GET, "/v1/events?limit=0", None)
        .await
        .unwrap();
    assert_eq!(status, 400);
}

/// A new token of `role`, made with the CLI against the daemon's data dir.
fn token(daemon: &Daemon, role: &str) -> String {
    let out = std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
        .args([
            "token",
            "create",
            "--role",
            role,
            "--name",
            role,
            "--data-dir",
        ])
        .arg(&daemon.data_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.split_whitespace().last().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_4xx() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();

    let (status, body) = daemon
        .call(Method::GET, "/v1/workspaces/ws-nope", None)
        .await
        .unwrap();
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ws-nope")
    );

    for token in [None, Some("cubicle_0000"), Some("garbage")] {
        let (status, body) = daemon
            .call_as(token, Method::GET, "/v1/workspaces", None)
            .await
            .unwrap();
        assert_eq!(status, 401, "token {token:?}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let (status, _) = daemon
        .call_as(None, Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 401);

    for (body, field) in [
        (r#"{"geometry":{"width":0,"height":0}}"#, "geometry.width"),
        (
            r#"{"geometry":{"width":100000,"height":100000}}"#,
            "geometry.width",
        ),
        (
            r#"{"geometry":{"width":1280,"height":100000}}"#,
            "geometry.height",
        ),
        (
            r#"{"geometry":{"width":"wide","height":800}}"#,
            "geometry.width",
        ),
        (r#"{"geometry":"text"}"#, "geometry"),
        ("not json", "JSON"),
    ] {
        let (status, reply) = daemon
            .call(Method::POST, "/v1/workspaces", Some(body))
            .await
            .unwrap();
        assert_eq!(status, 400, "{body} → {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field),
            "{body}: {message:?} does not name {field}"
        );
    }
    // Nothing was created by any of it.
    let (_, list) = daemon
        .call(Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(list["workspaces"].as_array().unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xvnc_that_cannot_start_fails_create_and_leaves_nothing() {
    let data = tempfile::tempdir().unwrap();
    // /bin/false exists in the image and exits 1 at once: Xvnc "cannot start".
    let daemon = Daemon::start(data.path(), None, &["--xvnc", "/bin/false"]).unwrap();
    let (status, body) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "start_failed");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("xvnc"),
        "reason does not name Xvnc: {message}"
    );
    assert!(
        message.contains("exit status: 1"),
        "reason lacks the exit: {message}"
    );
    let (_, log) = daemon.call(Method::GET, "/v1/events", None).await.unwrap();
    // The create's outcome row names the workspace it made and removed.
    let failed = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "workspace.create" && e["outcome"] != "started")
        .unwrap_or_else(|| panic!("no create outcome: {log}"));
    assert_eq!(failed["kind"], "workspace.create", "{log}");
    assert_eq!(failed["outcome"], "error:start_failed", "{log}");
    assert!(failed["workspace_id"].as_str().unwrap().starts_with("ws-"));
    assert!(
        failed["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("xvnc")
    );

    let (_, list) = daemon
        .call(Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    let items = list["workspaces"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["state"], "failed");
    let id = items[0]["id"].as_str().unwrap();
    assert!(
        !daemon.workspace_dir(id).exists(),
        "failed workspace left files"
    );
    let left = no_processes_of(host_uid(&items[0]), Duration::from_secs(5)).await;
    assert!(left.is_empty(), "failed workspace left processes {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_leaves_the_workspace_running_and_the_next_one_re_attaches() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let token = daemon.token.clone();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 201, "{ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    let uid = host_uid(&ws);
    assert!(!procs::of_workspace(uid).is_empty());

    // A process of the workspace's user, started before the crash.
    let (status, before) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(r#"{"command": "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $!"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{before}");
    let sleeper = before["stdout"].as_str().unwrap().trim().to_owned();

    daemon.kill9();
    // The workspace runs on under its shim while there is no daemon.
    assert!(
        !procs::of_workspace(uid).is_empty(),
        "the workspace died with the daemon"
    );
    let daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    let (status, ws) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{ws}");
    assert_eq!(ws["state"], "running", "re-attached: {ws}");
    // It really answers, and it is the same desktop: the process started
    // before the kill is still there.
    let version = guest::http_get(&daemon.channel_socket(&id), 9222, "/json/version")
        .await
        .unwrap();
    assert!(version.contains("webSocketDebuggerUrl"));
    let (status, after) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&format!(
                r#"{{"command": "kill -0 {sleeper} && echo alive"}}"#
            )),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["stdout"], "alive\n", "{after}");

    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    assert!(
        no_processes_of(uid, Duration::from_secs(5))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_matches_the_routes() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let (status, doc) = daemon
        .call(Method::GET, "/v1/openapi.json", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{doc}");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    // Every route of the router is in it (checked door by door against the
    // router itself in the fast tier: `gateway/tests/doors.rs`,
    // `the_openapi_document_has_every_door`; the committed copy against the
    // handlers in `gateway/src/openapi.rs`). Here, on the real daemon: the
    // WebSocket doors are there and described as WebSockets (a 101
    // answer), and so is MCP.
    for path in [
        "/v1/workspaces/{id}/vnc",
        "/v1/workspaces/{id}/exec/ws",
        "/v1/workspaces/{id}/cdp",
        "/v1/workspaces/{id}/cdp/page/{target}",
    ] {
        let upgrade = &doc["paths"][path]["get"]["responses"]["101"]["description"];
        assert!(
            upgrade.as_str().is_some_and(|d| d.contains("WebSocket")),
            "{path} is not documented as a WebSocket: {}",
            doc["paths"][path]
        );
    }
    assert!(
        doc["paths"]["/v1/mcp"]["post"].is_object(),
        "POST /v1/mcp is not documented"
    );
    // Every documented operation is a real route: without a token it is
    // refused as unauthorized, never "no route".
    for (path, operations) in paths {
        for method in operations.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let concrete = path.replace("{id}", "ws-nope");
            let (status, body) = daemon
                .call_as(None, method.clone(), &concrete, None)
                .await
                .unwrap();
            assert_eq!(status, 401, "{method} {path} → {status} {body}");
        }
    }
    let (status, _) = daemon
        .call_as(None, Method::GET, "/v1/openapi.json", None)
        .await
        .unwrap();
    assert_eq!(status, 401);
}
