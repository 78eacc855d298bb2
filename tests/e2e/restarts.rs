//! What README "Restarts and upgrades" and the pause row promise beyond
//! `survive.rs`: a paused workspace stays paused through a daemon crash (no
//! CPU while there is no daemon, nor after the next one re-attaches, until
//! someone resumes it, then the same process goes on); while paused, the
//! WebSocket doors (live view, CDP) answer 409 `paused` like the others;
//! and Ctrl-C (SIGINT) at the daemon's terminal stops every workspace,
//! keeping its home.

use std::time::Duration;

use cubicle_tests::cgroup::{cpu_file, cpu_usec};
use cubicle_tests::{Daemon, procs};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

async fn exec(daemon: &Daemon, id: &str, command: &str) -> (u16, Value) {
    cubicle_tests::desk::exec_status(daemon, id, command).await
}

/// stdout of a command that must succeed.
async fn sh(daemon: &Daemon, id: &str, command: &str) -> String {
    let (status, out) = exec(daemon, id, command).await;
    assert_eq!(status, 200, "{command}: {out}");
    out["stdout"].as_str().unwrap_or_default().to_owned()
}

async fn state(daemon: &Daemon, id: &str) -> Value {
    let (status, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    view["state"].clone()
}

async fn post(daemon: &Daemon, id: &str, verb: &str) -> (u16, Value) {
    daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/{verb}"), None)
        .await
        .unwrap()
}

/// The HTTP status and error code a WebSocket upgrade at `path` gets
/// (101 and no code when it is accepted); the live view is asked for with
/// the subprotocol noVNC sends.
async fn upgrade(daemon: &Daemon, path: &str) -> (u16, Value) {
    let mut request = daemon.ws_url(path).into_client_request().unwrap();
    if path.ends_with("/vnc") {
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "binary".parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => (101, Value::Null),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body: Value = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            (response.status().as_u16(), body["error"]["code"].clone())
        }
        Err(other) => panic!("{path}: {other}"),
    }
}

/// Events about `id` after event `after` that say it ended.
async fn ends_of(daemon: &Daemon, id: &str, after: i64) -> Vec<Value> {
    let (status, log) = daemon
        .call(
            Method::GET,
            &format!("/v1/events?workspace={id}&after={after}&limit=1000"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{log}");
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["workspace_id"] == id
                && matches!(
                    e["kind"].as_str(),
                    Some("workspace.crashed" | "workspace.stop" | "workspace.expire")
                )
        })
        .cloned()
        .collect()
}

/// The id of the newest event.
async fn last_event(daemon: &Daemon) -> i64 {
    let mut after = 0;
    loop {
        let (_, log) = daemon
            .call(
                Method::GET,
                &format!("/v1/events?after={after}&limit=1000"),
                None,
            )
            .await
            .unwrap();
        match log["events"].as_array().and_then(|e| e.last()) {
            Some(last) => after = last["id"].as_i64().unwrap(),
            None => return after,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_workspace_stays_paused_through_a_crash_and_ctrl_c_stops_all_keeping_homes() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let token = daemon.token.clone();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let Some(cpu) = cpu_file(&id) else {
        return cubicle_tests::skip("no CPU accounting for the workspace's cgroup on this host");
    };
    // A file in the home, and a process that counts (a step every 0.1 s).
    let kept = format!("kept {}\n", std::process::id());
    let put = reqwest::Client::new()
        .put(daemon.url(&format!(
            "/v1/workspaces/{id}/files?path=/home/user/kept.txt"
        )))
        .bearer_auth(&token)
        .body(kept.clone())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let counter = sh(
        &daemon,
        &id,
        "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done' \
         >/dev/null 2>&1 </dev/null & echo $!",
    )
    .await
    .trim()
    .to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (status, paused) = post(&daemon, &id, "pause").await;
    assert_eq!(
        (status, &paused["state"]),
        (200, &json!("paused")),
        "{paused}"
    );
    // The WebSocket doors refuse it like the rest; the positive control
    // (the same upgrades accepted while running) comes after resume.
    for door in ["vnc", "cdp"] {
        let (status, code) = upgrade(&daemon, &format!("/v1/workspaces/{id}/{door}")).await;
        assert_eq!(
            (status, code),
            (409, json!("paused")),
            "{door} on a paused workspace"
        );
    }
    let last = last_event(&daemon).await;

    // A crash, a while without a daemon, and the next one.
    let frozen_at = cpu_usec(&cpu);
    daemon.kill9();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        cpu_usec(&cpu),
        frozen_at,
        "the workspace used CPU while there was no daemon"
    );
    let daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    assert_eq!(state(&daemon, &id).await, "paused", "re-attached as paused");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        cpu_usec(&cpu),
        frozen_at,
        "the re-attached workspace used CPU while paused"
    );
    let (status, body) = exec(&daemon, &id, "true").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("paused")),
        "{body}"
    );
    let ended = ends_of(&daemon, &id, last).await;
    assert!(ended.is_empty(), "the restart ended it: {ended:?}");

    // Resumed: the same process counts on, and the doors open again.
    let (status, resumed) = post(&daemon, &id, "resume").await;
    assert_eq!(
        (status, &resumed["state"]),
        (200, &json!("running")),
        "{resumed}"
    );
    let first: u64 = sh(&daemon, &id, "cat /tmp/count")
        .await
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second: u64 = sh(&daemon, &id, "cat /tmp/count")
        .await
        .trim()
        .parse()
        .unwrap();
    assert!(
        second > first,
        "the counter did not go on: {first} then {second}"
    );
    assert_eq!(
        sh(&daemon, &id, &format!("kill -0 {counter} && echo alive")).await,
        "alive\n"
    );
    for door in ["vnc", "cdp"] {
        let (status, code) = upgrade(&daemon, &format!("/v1/workspaces/{id}/{door}")).await;
        assert_eq!(status, 101, "{door} after resume: {code}");
    }

    // Ctrl-C: every workspace is stopped, nothing of it is left running...
    let uid = u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap();
    let mut daemon = daemon;
    daemon.interrupt();
    let left = procs::wait_workspace_gone(uid, Duration::from_secs(30)).await;
    assert!(
        left.is_empty(),
        "Ctrl-C left the workspace's processes {left:?}"
    );

    // ...and the next daemon finds it stopped, its home kept.
    let daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    assert_eq!(state(&daemon, &id).await, "stopped");
    let (status, started) = post(&daemon, &id, "start").await;
    assert_eq!(
        (status, &started["state"]),
        (200, &json!("running")),
        "{started}"
    );
    let read = reqwest::Client::new()
        .get(daemon.url(&format!(
            "/v1/workspaces/{id}/files?path=/home/user/kept.txt"
        )))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status().as_u16(), 200);
    assert_eq!(read.text().await.unwrap(), kept, "the home was not kept");
}
