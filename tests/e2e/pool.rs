//! The warm pool on the real `cubicle serve --warm 1`: a ready workspace
//! waits owned by no one; a create asking for nothing special is served
//! from it (the caller owns it, under the name it asked for, with a fresh
//! home) and the pool refills; a create with another geometry is not.

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::desk::token;
use reqwest::Method;
use serde_json::Value;

async fn pool(daemon: &Daemon) -> Value {
    let (status, stats) = daemon.call(Method::GET, "/v1/pool", None).await.unwrap();
    assert_eq!(status, 200, "{stats}");
    stats
}

/// Waits until the pool has `ready` workspaces ready.
async fn ready(daemon: &Daemon, ready: u64) -> Duration {
    let started = Instant::now();
    loop {
        let stats = pool(daemon).await;
        if stats["ready"] == ready {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the pool never had {ready} ready: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_plain_create_is_served_from_the_warm_pool_which_refills() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--warm", "1"]).unwrap();
    ready(&daemon, 1).await;
    let agent = token(&daemon, "bot", "agent").await;
    let (status, listed) = daemon
        .call_as(Some(&agent.secret), Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        listed["workspaces"],
        serde_json::json!([]),
        "pooled ones are no agent's"
    );

    let started = Instant::now();
    let (status, ws) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            "/v1/workspaces",
            Some(r#"{"name":"mine"}"#),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(status, 201, "{ws}");
    assert_eq!(ws["state"], "running");
    assert_eq!(ws["name"], "mine");
    assert_eq!(ws["owner_token"], agent.id.as_str());
    let stats = pool(&daemon).await;
    assert_eq!(stats["hits"], 1, "{stats}");
    let id = ws["id"].as_str().unwrap();
    // Its home is fresh and it works like any other.
    let body = r#"{"command":"ls -A /home/user/Downloads 2>/dev/null | wc -l; echo ok"}"#;
    let (status, out) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(body),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["stdout"], "0\nok\n",
        "the pooled home's Downloads is not empty: {out}"
    );
    // The create event says where it came from.
    let (_, events) = daemon
        .call(Method::GET, &format!("/v1/events?workspace={id}"), None)
        .await
        .unwrap();
    let created = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "workspace.create" && e["outcome"] == "ok")
        .cloned()
        .unwrap_or_default();
    assert_eq!(created["detail"]["from_pool"], true, "{events}");

    // The pool refills; a create it cannot serve makes a workspace as before.
    let refill = ready(&daemon, 1).await;
    let started = Instant::now();
    let cold = daemon.create_workspace(r#"{"geometry":"1024x768"}"#).await;
    let cold_took = started.elapsed();
    assert_ne!(cold["id"], ws["id"]);
    assert_eq!(
        pool(&daemon).await["hits"],
        1,
        "a 1024x768 desktop is not the pool's"
    );
    eprintln!(
        "pool: create from the warm pool {took:?}, cold create {cold_took:?}, refilled in {refill:?}"
    );
}
