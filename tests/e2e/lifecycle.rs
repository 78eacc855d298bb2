//! Stopping and starting a workspace as its user sees it: the home is
//! kept byte for byte, nothing runs and nothing answers while it is
//! stopped; and the event log as an auditor reads it through
//! `GET /v1/events`: who stopped and started it, took and handed back
//! control, made and revoked a token, and when.
//!
//! Elsewhere: every operation's started/outcome rows with request ids, and
//! an agent refused the log, in `doors.rs`
//! (`every_operation_is_in_the_event_log_with_its_request_id`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cubicle_tests::desk::{Desk, desk, token};
use cubicle_tests::{Daemon, procs};
use reqwest::Method;
use serde_json::{Value, json};

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A raw request with `token`: status and body bytes.
async fn raw(
    daemon: &Daemon,
    token: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let response = reqwest::Client::new()
        .request(method, daemon.url(path))
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

async fn call(daemon: &Daemon, token: &str, method: Method, path: &str) -> (u16, Value) {
    daemon
        .call_as(Some(token), method, path, None)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_keeps_the_home_and_start_brings_it_back_with_who_and_when_in_the_log() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        agent,
    } = desk().await;
    let began = now_ms();
    let ws_path = format!("/v1/workspaces/{id}");
    let file = format!("{ws_path}/files?path=/home/user/keep.bin");
    // Every byte value, in an order no text or line-ending conversion keeps.
    let content: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (status, body) = raw(&daemon, &agent.secret, Method::PUT, &file, content.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let exec = json!({"command": "setsid -f sleep 1000; echo started"}).to_string();
    let exec_path = format!("{ws_path}/exec");
    let (status, out) = daemon
        .call_as(Some(&agent.secret), Method::POST, &exec_path, Some(&exec))
        .await
        .unwrap();
    assert_eq!((status, out["stdout"].as_str()), (200, Some("started\n")));
    let (_, ws) = call(&daemon, &agent.secret, Method::GET, &ws_path).await;
    let uid = u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap();
    assert!(!procs::of_workspace(uid).is_empty(), "control: it runs");

    // The agent stops it: nothing of it runs, nothing answers.
    let (status, stopped) = call(
        &daemon,
        &agent.secret,
        Method::POST,
        &format!("{ws_path}/stop"),
    )
    .await;
    assert_eq!(
        (status, stopped["state"].as_str()),
        (200, Some("stopped")),
        "{stopped}"
    );
    let left = procs::wait_workspace_gone(uid, Duration::from_secs(10)).await;
    assert!(
        left.is_empty(),
        "processes of a stopped workspace: {left:?}"
    );
    let (status, out) = daemon
        .call_as(Some(&agent.secret), Method::POST, &exec_path, Some(&exec))
        .await
        .unwrap();
    assert_eq!(status, 409, "exec on a stopped workspace: {out}");
    let (status, _) = raw(&daemon, &agent.secret, Method::GET, &file, Vec::new()).await;
    assert_eq!(status, 409, "files on a stopped workspace");
    // The home is still on the host, as written.
    let (_, ws) = call(&daemon, &agent.secret, Method::GET, &ws_path).await;
    assert_eq!(ws["state"], "stopped", "{ws}");

    // The operator starts it again: the file is back byte for byte, the
    // old processes are not.
    let (status, started) = call(
        &daemon,
        &operator.secret,
        Method::POST,
        &format!("{ws_path}/start"),
    )
    .await;
    assert_eq!(
        (status, started["state"].as_str()),
        (200, Some("running")),
        "{started}"
    );
    let (status, back) = raw(&daemon, &agent.secret, Method::GET, &file, Vec::new()).await;
    assert_eq!(status, 200);
    assert!(
        back == content,
        "the home file changed across stop/start ({} bytes back)",
        back.len()
    );
    let check = json!({"command": "stat -c %s /home/user/keep.bin; pgrep -x sleep || echo none"})
        .to_string();
    let (status, out) = daemon
        .call_as(Some(&agent.secret), Method::POST, &exec_path, Some(&check))
        .await
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["stdout"], format!("{}\nnone\n", content.len()), "{out}");

    // Control taken and handed back; a token made and revoked.
    for verb in ["take", "release"] {
        let (status, body) = call(
            &daemon,
            &operator.secret,
            Method::POST,
            &format!("{ws_path}/control/{verb}"),
        )
        .await;
        assert_eq!(status, 200, "{verb}: {body}");
    }
    let temp = token(&daemon, "temp", "agent").await;
    let (status, _) = call(
        &daemon,
        &daemon.token,
        Method::DELETE,
        &format!("/v1/tokens/{}", temp.id),
    )
    .await;
    assert_eq!(status, 204);
    let ended = now_ms();

    // The auditor reads it all, each with who and when.
    let (status, log) = call(
        &daemon,
        &auditor.secret,
        Method::GET,
        "/v1/events?limit=1000",
    )
    .await;
    assert_eq!(status, 200, "{log}");
    let events = log["events"].as_array().unwrap();
    // Each operation's row that says how it ended ("ok"), or its only row;
    // for tokens, a row of the test's own token (the desk made others).
    let find = |kind: &str, workspace: Option<&str>| -> &Value {
        events
            .iter()
            .find(|e| {
                e["kind"] == kind
                    && e["workspace_id"].as_str() == workspace
                    && match workspace {
                        Some(_) => e["outcome"] == "ok" || e["outcome"].is_null(),
                        None => e["detail"].to_string().contains(&temp.id),
                    }
            })
            .unwrap_or_else(|| panic!("no {kind} for {workspace:?} in {log}"))
    };
    let mut last_id = 0;
    for (kind, workspace, name, role) in [
        ("workspace.stop", Some(id.as_str()), "bot", "agent"),
        ("workspace.start", Some(id.as_str()), "alice", "operator"),
        ("control.take", Some(id.as_str()), "alice", "operator"),
        ("control.release", Some(id.as_str()), "alice", "operator"),
        ("token.create", None, "", "admin"),
        ("token.revoke", None, "", "admin"),
    ] {
        let event = find(kind, workspace);
        assert_eq!(event["actor"]["role"], role, "{kind}: {event}");
        if !name.is_empty() {
            assert_eq!(event["actor"]["name"], name, "{kind}: {event}");
        }
        let at = event["at"]
            .as_i64()
            .unwrap_or_else(|| panic!("{kind} has no time: {event}"));
        assert!(
            (began..=ended).contains(&at),
            "{kind} at {at} ms, outside this test's {began}..={ended}"
        );
        let event_id = event["id"].as_i64().unwrap();
        assert!(event_id > last_id, "{kind} is out of order: {log}");
        last_id = event_id;
    }
    // The workspace filter gives its own events only.
    let (status, own) = call(
        &daemon,
        &auditor.secret,
        Method::GET,
        &format!("/v1/events?workspace={id}&limit=1000"),
    )
    .await;
    assert_eq!(status, 200);
    let own = own["events"].as_array().unwrap();
    assert!(own.iter().all(|e| e["workspace_id"] == id.as_str()));
    assert!(own.iter().any(|e| e["kind"] == "workspace.stop"));
    // The agent may not read the log.
    let (status, body) = call(&daemon, &agent.secret, Method::GET, "/v1/events").await;
    assert_eq!(status, 403, "{body}");
}

/// The outside attack: DELETE answered 204 while a process of the
/// workspace's uid ran on. The process here ends its first thread and runs
/// on in a second one, so it looks like a zombie to a scan of process
/// states; the answer must come only once nothing of the workspace runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_only_when_no_thread_of_the_workspace_runs() {
    // `_data` keeps the data directory (and the workspace's home) alive.
    let Desk {
        _data,
        daemon,
        id,
        agent,
        ..
    } = desk().await;
    let (status, ws) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{ws}");
    let uid = u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap();
    // It ignores SIGTERM too, so only SIGKILL ends it.
    let script = "import threading, time, ctypes, signal\n\
                  signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
                  threading.Thread(target=time.sleep, args=(600,)).start()\n\
                  open('/home/user/survivor', 'w').close()\n\
                  ctypes.CDLL(None).syscall(60, 0)\n";
    // Plain commands only: the default policy holds a line it cannot read
    // before it runs (`$(...)`, variables as programs) for a person.
    let command = format!(
        "cd /home/user && setsid python3 -c {} >/dev/null 2>&1 </dev/null &",
        shell_quote(script)
    );
    let run = |command: String| {
        let body = json!({ "command": command }).to_string();
        let path = format!("/v1/workspaces/{id}/exec");
        let daemon = &daemon;
        let secret = agent.secret.clone();
        async move {
            daemon
                .call_as(Some(&secret), Method::POST, &path, Some(&body))
                .await
                .unwrap()
        }
    };
    let (status, out) = run(command).await;
    assert_eq!(status, 200, "{out}");
    // A bounded wait for the survivor to be up (it makes its file first).
    let mut started = false;
    for _ in 0..100 {
        let (status, out) = run("test -e /home/user/survivor && echo started".into()).await;
        assert_eq!(status, 200, "{out}");
        if out["stdout"] == "started\n" {
            started = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(started, "the survivor never started");
    let (status, body) = daemon
        .call_as(
            Some(&agent.secret),
            Method::DELETE,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 204, "{body}");
    let running = procs::running_threads_of_workspace(uid);
    assert!(
        running.is_empty(),
        "DELETE answered with threads of the workspace running: {running:?}"
    );
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
