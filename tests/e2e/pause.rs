//! Pause and resume on a real workspace of the real `cubicle serve`: while
//! paused, the workspace's cgroup uses no CPU at all (its `cpuacct.usage`,
//! or `cpu.stat` on cgroup v2, does not move), input and exec get 409
//! `paused`; after resume the same desktop continues: a process started
//! before the pause still runs and makes progress, and the screen answers.

use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::cgroup::{cpu_file, cpu_usec};
use reqwest::Method;
use serde_json::{Value, json};

async fn exec(daemon: &Daemon, id: &str, command: &str) -> (u16, Value) {
    cubicle_tests::desk::exec_status(daemon, id, command).await
}

/// CPU ticks (user + system) process `pid` of the workspace has used.
async fn ticks(daemon: &Daemon, id: &str, pid: &str) -> u64 {
    let (status, out) = exec(daemon, id, &format!("cut -d' ' -f14,15 /proc/{pid}/stat")).await;
    assert_eq!(status, 200, "{out}");
    out["stdout"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(|t| t.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test]
async fn paused_workspace_uses_no_cpu_refuses_input_and_resumes_where_it_was() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap();
    let Some(cpu) = cpu_file(id) else {
        return cubicle_tests::skip("no cpuacct (v1) or cpu.stat (v2) for the workspace's cgroup");
    };
    // A busy process started before the pause: it counts as fast as it can.
    let (status, out) = exec(
        &daemon,
        id,
        "setsid -f sh -c 'echo $$ > /tmp/busy.pid; i=0; while :; do i=$((i+1)); done' \
         >/dev/null 2>&1 </dev/null; sleep 0.3; cat /tmp/busy.pid",
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let busy_pid = out["stdout"].as_str().unwrap().trim().to_owned();
    assert!(!busy_pid.is_empty(), "the busy loop did not start: {out}");

    let window = Duration::from_secs(2);
    let before = cpu_usec(&cpu);
    tokio::time::sleep(window).await;
    let running_use = cpu_usec(&cpu) - before;
    assert!(
        running_use > 100_000,
        "the busy loop used CPU: {running_use} µs"
    );

    let path = |verb: &str| format!("/v1/workspaces/{id}/{verb}");
    let (status, paused) = daemon
        .call(Method::POST, &path("pause"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["state"], "paused");
    let before = cpu_usec(&cpu);
    tokio::time::sleep(window).await;
    let paused_use = cpu_usec(&cpu) - before;
    eprintln!(
        "pause: workspace CPU over {window:?}: {running_use} µs running, {paused_use} µs paused"
    );
    assert_eq!(paused_use, 0, "a paused workspace used CPU");

    // Input, exec and files are refused with `paused`; looking at it is not.
    let click = json!({"action": "left_click", "coordinate": [10, 10]}).to_string();
    let (status, body) = daemon
        .call(Method::POST, &path("actions"), Some(&click))
        .await
        .unwrap();
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("paused")),
        "{body}"
    );
    let (status, body) = exec(&daemon, id, "true").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("paused")),
        "{body}"
    );
    let (status, body) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!((status, &body["state"]), (200, &json!("paused")), "{body}");
    let (status, body) = daemon
        .call(Method::POST, &path("start"), None)
        .await
        .unwrap();
    assert_eq!(status, 409, "{body}");

    let (status, resumed) = daemon
        .call(Method::POST, &path("resume"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["state"], "running");
    // The same process continues counting.
    let first = ticks(&daemon, id, &busy_pid).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = ticks(&daemon, id, &busy_pid).await;
    assert!(
        second > first,
        "the busy loop did not continue: {first} then {second}"
    );
    let (status, out) = exec(&daemon, id, &format!("kill -0 {busy_pid} && echo alive")).await;
    assert_eq!(
        (status, out["stdout"].as_str()),
        (200, Some("alive\n")),
        "{out}"
    );
    let (status, body) = daemon
        .call(Method::POST, &path("actions"), Some(&click))
        .await
        .unwrap();
    assert_eq!(status, 200, "input after resume: {body}");
    let shot = json!({"action": "screenshot"}).to_string();
    let (status, body) = daemon
        .call(Method::POST, &path("actions"), Some(&shot))
        .await
        .unwrap();
    assert_eq!(status, 200, "screenshot after resume: {body}");

    // Both are on record; pausing and stopping ends it cleanly too.
    let (_, events) = daemon
        .call(Method::GET, &format!("/v1/events?workspace={id}"), None)
        .await
        .unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == "ok")
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"workspace.pause"), "{kinds:?}");
    assert!(kinds.contains(&"workspace.resume"), "{kinds:?}");
    let (status, body) = daemon
        .call(Method::POST, &path("pause"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = daemon
        .call(Method::POST, &path("stop"), None)
        .await
        .unwrap();
    assert_eq!((status, &body["state"]), (200, &json!("stopped")), "{body}");
    // The daemon's log went to a file, not a terminal: no colour codes.
    let log = std::fs::read(data.path().with_extension("daemon.log")).unwrap();
    assert!(!log.is_empty(), "the daemon logged something");
    assert!(
        !log.contains(&0x1b),
        "escape codes in a log that is not a terminal"
    );
}
