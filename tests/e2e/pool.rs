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

/// `serve --warm 1 --warm-snapshot ID`: the pool's workspace has the
/// snapshot in place before anyone asks; a create from that snapshot by its
/// owner is served from the pool with the snapshot's file, a plain create
/// is not, and another token cannot use the snapshot at all. An unknown
/// snapshot stops `serve` with a message naming it.
#[tokio::test]
async fn the_warm_pool_fills_from_a_snapshot() {
    let data = tempfile::tempdir().unwrap();
    let mut first = Daemon::start(data.path(), None, &[]).unwrap();
    let admin = first.token.clone();
    let agent = token(&first, "bot", "agent").await;
    let other = token(&first, "eve", "agent").await;
    let ws = cubicle_tests::desk::create(&first, &agent.secret, "{}").await;
    let source = ws["id"].as_str().unwrap().to_owned();
    cubicle_tests::desk::exec(&first, &source, "echo pooled > ~/ready.txt").await;
    let (status, snap) = first
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("/v1/workspaces/{source}/snapshot"),
            Some(r#"{"name":"base"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{snap}");
    let snap_id = snap["id"].as_str().unwrap().to_owned();
    let (status, _) = first
        .call(Method::DELETE, &format!("/v1/workspaces/{source}"), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    first.terminate();
    drop(first);

    // A snapshot that is not there: serve says which and stops.
    let refused = std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .args(["--warm", "1", "--warm-snapshot", "snap-000000000000"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--warm-snapshot") && said.contains("snap-000000000000"),
        "{said}"
    );

    let daemon = Daemon::start(
        data.path(),
        Some(&admin),
        &["--warm", "1", "--warm-snapshot", &snap_id],
    )
    .unwrap();
    ready(&daemon, 1).await;
    assert_eq!(pool(&daemon).await["snapshot"], snap_id.as_str());

    // A plain create starts cold: the pool is the snapshot's.
    let cold = daemon.create_workspace("{}").await;
    assert_eq!(pool(&daemon).await["hits"], 0, "a plain create took a fork");
    let cold_id = cold["id"].as_str().unwrap();
    assert!(!cubicle_tests::desk::exists(&daemon, cold_id, "ready.txt").await);

    // Another token cannot start from the agent's snapshot, pool or not.
    let body = serde_json::json!({ "from_snapshot": snap_id }).to_string();
    let (status, refused) = daemon
        .call_as(
            Some(&other.secret),
            Method::POST,
            "/v1/workspaces",
            Some(&body),
        )
        .await
        .unwrap();
    assert_eq!(status, 404, "{refused}");
    assert_eq!(pool(&daemon).await["hits"], 0);

    let started = Instant::now();
    let (status, fork) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            "/v1/workspaces",
            Some(&body),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(status, 201, "{fork}");
    assert_eq!(fork["owner_token"], agent.id.as_str(), "{fork}");
    assert_eq!(
        pool(&daemon).await["hits"],
        1,
        "the fork was not the pool's"
    );
    let id = fork["id"].as_str().unwrap();
    assert_eq!(
        cubicle_tests::desk::exec(&daemon, id, "cat ~/ready.txt").await,
        "pooled\n"
    );
    let restored =
        cubicle_tests::desk::event_of(&daemon, id, "snapshot.restore", Duration::from_secs(5))
            .await
            .expect("the pooled fork's chain records the snapshot");
    assert_eq!(
        restored["detail"]["snapshot"],
        snap_id.as_str(),
        "{restored}"
    );
    eprintln!("pool: a fork from the snapshot's warm pool {took:?}");
}
