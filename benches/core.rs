//! What the operations core costs an action: each action goes through the
//! permission table, the owner/scope check, the control lock and two event
//! rows (`started`, outcome) in SQLite before and after it runs. In one run,
//! interleaved, against the same daemon and workspace:
//!
//! - `POST /actions {"action":"cursor_position"}`: the whole core path with
//!   an action that needs no round trip to the desktop;
//! - `GET /v1/me`: the same HTTP, token check and JSON, no operation and no
//!   event (the peer);
//! - `POST /actions {"action":"mouse_move"}`: a real input round trip, for
//!   scale;
//! - the event write alone: one `started` + one outcome row appended to a
//!   SQLite file of the same settings, in this process.
//!
//! Then appends per second, on a fresh SQLite file of the same settings:
//! one chain written by one task (the peer), against two and eight chains
//! written at once by a task each (each workspace has its own chain).
//!
//! Prints p50/p95 and the ratios; asserts nothing about time.
//!
//!     cargo run --release -p cubicle-tests --bin bench-core [-- RUNS]

use std::time::{Duration, Instant};

use cubicle_runtime::events::{self, NewEvent};
use cubicle_runtime::state::Store;
use cubicle_tests::Daemon;
use cubicle_tests::stats::percentile_ms;
use reqwest::Method;
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, &[])?;
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await?;
    anyhow::ensure!(status == 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap_or_default().to_owned();
    let actions = format!("/v1/workspaces/{id}/actions");
    let cursor = json!({"action": "cursor_position"}).to_string();
    let store = Store::open(&data.path().join("bench-events.db")).await?;

    let (mut core, mut me, mut moved, mut written) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let started = Instant::now();
        let (status, _) = daemon.call(Method::POST, &actions, Some(&cursor)).await?;
        anyhow::ensure!(status == 200, "cursor_position: {status}");
        core.push(started.elapsed());

        let started = Instant::now();
        let (status, _) = daemon.call(Method::GET, "/v1/me", None).await?;
        anyhow::ensure!(status == 200, "me: {status}");
        me.push(started.elapsed());

        let x = 100 + (i % 400) as u32;
        let body = json!({"action": "mouse_move", "coordinate": [x, 300]}).to_string();
        let started = Instant::now();
        let (status, _) = daemon.call(Method::POST, &actions, Some(&body)).await?;
        anyhow::ensure!(status == 200, "mouse_move: {status}");
        moved.push(started.elapsed());

        let started = Instant::now();
        for outcome in ["started", "ok"] {
            let event = NewEvent {
                kind: cubicle_runtime::events::EventKind::Action,
                workspace_id: Some(&id),
                detail: json!({"actions": [{"action": "cursor_position"}]}),
                request_id: Some("bench"),
                outcome: Some(outcome),
                ..NewEvent::default()
            };
            events::append(&store, &event).await?;
        }
        written.push(started.elapsed());
    }
    let (core50, core95) = (percentile_ms(&mut core, 50), percentile_ms(&mut core, 95));
    let (me50, me95) = (percentile_ms(&mut me, 50), percentile_ms(&mut me, 95));
    let (move50, move95) = (percentile_ms(&mut moved, 50), percentile_ms(&mut moved, 95));
    let (write50, write95) = (
        percentile_ms(&mut written, 50),
        percentile_ms(&mut written, 95),
    );
    println!("runs: {runs} each, interleaved");
    println!(
        "POST /actions cursor_position (core + 2 events): p50 {core50:.2} ms  p95 {core95:.2} ms"
    );
    println!("GET /v1/me (same HTTP and auth, no core):        p50 {me50:.2} ms  p95 {me95:.2} ms");
    println!(
        "POST /actions mouse_move (input round trip):     p50 {move50:.2} ms  p95 {move95:.2} ms"
    );
    println!(
        "two event rows appended, in process:             p50 {write50:.3} ms  p95 {write95:.3} ms"
    );
    println!(
        "core overhead on an action ≈ {:.2} ms ({:.2}x the peer request); {:.1}% of a mouse_move round trip",
        core50 - me50,
        core50 / me50,
        100.0 * (core50 - me50) / move50
    );
    drop(daemon);
    appends_per_second(data.path()).await
}

/// Appends per second: `chains` tasks at once, each appending `each`
/// events to its own chain; the time from the first start to the last end.
async fn appends(store: &Store, chains: usize, each: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for chain in 0..chains {
        let store = store.clone();
        tasks.spawn(async move {
            let workspace = format!("ws-bench{chain:04}");
            for _ in 0..each {
                let event = NewEvent {
                    kind: cubicle_runtime::events::EventKind::Action,
                    workspace_id: Some(&workspace),
                    detail: json!({"actions": [{"action": "cursor_position"}]}),
                    request_id: Some("bench"),
                    outcome: Some("ok"),
                    ..NewEvent::default()
                };
                events::append(&store, &event).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok((chains * each) as f64
        / started
            .elapsed()
            .max(Duration::from_micros(1))
            .as_secs_f64())
}

async fn appends_per_second(dir: &std::path::Path) -> anyhow::Result<()> {
    let store = Store::open(&dir.join("bench-appends.db")).await?;
    let each = 400;
    // Alternated, three rounds each, best kept: the machine's noise is in
    // one direction.
    let (mut one, mut two, mut eight) = (0.0_f64, 0.0_f64, 0.0_f64);
    for _ in 0..3 {
        one = one.max(appends(&store, 1, each).await?);
        two = two.max(appends(&store, 2, each).await?);
        eight = eight.max(appends(&store, 8, each / 4).await?);
    }
    println!("appends/s, one chain, one writer (peer):        {one:.0}");
    println!(
        "appends/s, two chains at once:                  {two:.0} ({:.2}x the peer)",
        two / one
    );
    println!(
        "appends/s, eight chains at once:                {eight:.0} ({:.2}x the peer)",
        eight / one
    );
    Ok(())
}
