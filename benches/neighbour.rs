//! A noisy neighbour: workspace B's action round trip while workspace A
//! burns every core it can, against B alone, in the same run. A is made
//! with a CPU quota of one CPU (`"limits": {"cpus": 1.0}`), so its cgroup
//! caps it whatever it runs; B has the defaults. A's CPU use over B's
//! measurement is read from its cgroup: a run where A used less than 0.8 of
//! its CPU measured no neighbour and ends with an error. Prints p50/p95 and
//! the ratio; asserts nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-neighbour [-- RUNS]

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::stats::percentile_ms;
use reqwest::Method;
use serde_json::json;

async fn round_trips(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Duration>> {
    let path = format!("/v1/workspaces/{id}/actions");
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let x = 100 + (i % 400) as u32;
        let body = json!({"action": "mouse_move", "coordinate": [x, 300]}).to_string();
        let started = Instant::now();
        let (status, answer) = daemon.call(Method::POST, &path, Some(&body)).await?;
        anyhow::ensure!(status == 200, "mouse_move: {status} {answer}");
        samples.push(started.elapsed());
    }
    Ok(samples)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, &[])?;
    let a = daemon
        .create_workspace(r#"{"name":"hog","limits":{"cpus":1.0}}"#)
        .await;
    let b = daemon.create_workspace(r#"{"name":"quiet"}"#).await;
    let (a, b) = (
        a["id"].as_str().unwrap_or_default(),
        b["id"].as_str().unwrap_or_default(),
    );

    round_trips(&daemon, b, 10).await?; // warm
    let mut alone = round_trips(&daemon, b, runs).await?;
    let hog = json!({"command": "for i in 1 2 3 4; do (while :; do :; done) & done; sleep 1"})
        .to_string();
    let (status, answer) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{a}/exec"),
            Some(&hog),
        )
        .await?;
    anyhow::ensure!(status == 200, "hog: {status} {answer}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_of_a = async || -> anyhow::Result<f64> {
        let (_, view) = daemon
            .call(Method::GET, &format!("/v1/workspaces/{a}"), None)
            .await?;
        view["usage"]["cpu_usage_usec"]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("no cpu_usage_usec in A's usage: {view}"))
    };
    let (cpu_before, started) = (cpu_of_a().await?, Instant::now());
    let mut noisy = round_trips(&daemon, b, runs).await?;
    let window = started.elapsed();
    let burnt = (cpu_of_a().await? - cpu_before) / 1e6 / window.as_secs_f64();
    // The measurement counts only if A was noisy all through it: its cgroup
    // must have used most of the one CPU it may.
    anyhow::ensure!(
        burnt >= 0.8,
        "A used {burnt:.2} CPUs while B was measured, not the ~1 it may: \
         the neighbour was not noisy, so this run measures nothing"
    );
    let kill = json!({"command": "pkill -f 'while :' || true"}).to_string();
    daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{a}/exec"),
            Some(&kill),
        )
        .await?;

    let (alone50, alone95) = (percentile_ms(&mut alone, 50), percentile_ms(&mut alone, 95));
    let (noisy50, noisy95) = (percentile_ms(&mut noisy, 50), percentile_ms(&mut noisy, 95));
    println!("runs: {runs} each");
    println!("B alone:                 p50 {alone50:.2} ms  p95 {alone95:.2} ms");
    println!(
        "B while A runs 4 spinners (A capped at 1 CPU): p50 {noisy50:.2} ms  p95 {noisy95:.2} ms"
    );
    println!(
        "ratio (noisy / alone): p50 {:.2}x  p95 {:.2}x",
        noisy50 / alone50,
        noisy95 / alone95
    );
    println!(
        "A's CPU use while B was measured: {burnt:.2} CPUs of its 1 ({:.1} s window, its cgroup's cpu.stat)",
        window.as_secs_f64()
    );
    Ok(())
}
