//! A TTL counts from each start (README "Time limits"): a workspace stopped
//! and started again just before its TTL ran out keeps running past the
//! moment it would have expired, and expires one TTL after the new start.
//! And `0` lifts the server's TTL for the workspace that asks.

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::Value;

const TTL: Duration = Duration::from_secs(14);

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn state(daemon: &Daemon, id: &str) -> Value {
    let (status, body) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    body["state"].clone()
}

async fn post(daemon: &Daemon, id: &str, verb: &str) {
    let (status, body) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/{verb}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{verb}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_and_start_gives_the_workspace_its_whole_ttl_again() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let created = Instant::now();
    let ws = daemon
        .create_workspace(&format!(
            r#"{{"time_limits":{{"ttl_seconds":{},"on_expiry":"stop"}}}}"#,
            TTL.as_secs()
        ))
        .await;
    let id = ws["id"].as_str().unwrap().to_owned();

    // Most of the TTL gone, then a stop and a start.
    let near_end = created + TTL - Duration::from_secs(5);
    tokio::time::sleep(near_end.saturating_duration_since(Instant::now())).await;
    post(&daemon, &id, "stop").await;
    let restarted = Instant::now();
    let restarted_ms = wall_ms();
    post(&daemon, &id, "start").await;
    let running_ms = wall_ms();
    assert_eq!(state(&daemon, &id).await, "running");

    // Well past the first start's TTL: still running.
    let first_due = created + TTL + Duration::from_secs(4);
    tokio::time::sleep(first_due.saturating_duration_since(Instant::now())).await;
    assert!(
        restarted.elapsed() + Duration::from_secs(2) < TTL,
        "the check must come before the second TTL could run out"
    );
    assert_eq!(
        state(&daemon, &id).await,
        "running",
        "expired {:?} after its create, counting the TTL from the first start",
        created.elapsed()
    );

    // One TTL after the new start, it expires (the sweeper looks every second).
    let deadline = restarted + TTL + Duration::from_secs(30);
    while state(&daemon, &id).await != "stopped" {
        assert!(Instant::now() < deadline, "never expired after the restart");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The expiry's `ok` row is written once the stop it made is done,
    // just after the state says stopped: wait for it.
    let events = loop {
        let (status, events) = daemon
            .call(Method::GET, &format!("/v1/events?workspace={id}"), None)
            .await
            .unwrap();
        assert_eq!(status, 200, "{events}");
        let ended = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "workspace.expire" && e["outcome"] != "started");
        if ended || Instant::now() >= deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let expiries: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "workspace.expire" && e["outcome"] == "ok")
        .collect();
    assert_eq!(expiries.len(), 1, "{expiries:?}");
    assert_eq!(expiries[0]["detail"]["reason"], "ttl", "{expiries:?}");
    // Expired one TTL after the start (the sweeper looks every second): the
    // decision is the `started` row (the `ok` row follows the stop).
    let expired_ms = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "workspace.expire" && e["outcome"] == "started")
        .and_then(|e| e["at"].as_i64())
        .expect("the expiry's started row");
    let ttl_ms = TTL.as_millis() as i64;
    eprintln!(
        "ttl: restarted {:?} after create (the start took {} ms); expired {} ms after the \
         start was asked, {} ms after it returned",
        restarted.duration_since(created),
        running_ms - restarted_ms,
        expired_ms - restarted_ms,
        expired_ms - running_ms,
    );
    assert!(
        expired_ms - restarted_ms >= ttl_ms - 1000,
        "expired {} ms after the restart, before its TTL of {TTL:?}",
        expired_ms - restarted_ms
    );
    assert!(
        expired_ms - running_ms <= ttl_ms + 2000,
        "expired {} ms after the restart, well after its TTL of {TTL:?}",
        expired_ms - running_ms
    );
}

/// `0` lifts a server-wide limit for one workspace (README "Time limits"):
/// under `--ttl-seconds 5`, the workspace that set nothing expires and the
/// one that asked for `ttl_seconds: 0` keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_lifts_the_servers_ttl_for_one_workspace() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--ttl-seconds", "5"]).unwrap();
    let lifted = daemon
        .create_workspace(r#"{"time_limits":{"ttl_seconds":0}}"#)
        .await;
    let lifted = lifted["id"].as_str().unwrap().to_owned();
    let bound = daemon.create_workspace("{}").await;
    let bound = bound["id"].as_str().unwrap().to_owned();
    let (_, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{lifted}"), None)
        .await
        .unwrap();
    assert!(view["time_limits"]["ttl_seconds"].is_null(), "{view}");

    // The control: the server's TTL ends the one that set nothing.
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    while state(&daemon, &bound).await != "stopped" {
        assert!(Instant::now() < deadline, "the server's TTL never applied");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Well past 5 s of its own, the lifted one runs.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(state(&daemon, &lifted).await, "running");
}
