//! Create → desktop usable, microVM against jail, in the same run on the
//! same host: one daemon per backend, the same create body, timed from the
//! request to its 201 (the gateway answers once Xvnc, XFCE and Chromium
//! are up), then one screenshot and one exec on each. Prints both and the
//! ratio; asserts nothing about time. Needs hardware virtualization for
//! the microVM (`scripts/nested cargo run ...` runs it on any host, where
//! emulation makes the numbers comparisons only, never product numbers).
//!
//!     cargo run -p cubicle-tests --bin bench-microvm [-- RUNS]

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::json;

struct Sample {
    create: Duration,
    screenshot: Duration,
    exec: Duration,
}

async fn one(daemon: &Daemon) -> anyhow::Result<Sample> {
    let started = Instant::now();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some(r#"{"record":false}"#))
        .await?;
    anyhow::ensure!(status == 201, "create: {status} {ws}");
    let create = started.elapsed();
    let id = ws["id"].as_str().unwrap_or_default().to_owned();
    let started = Instant::now();
    let shot = json!({"action": "screenshot"}).to_string();
    let (status, answer) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/actions"),
            Some(&shot),
        )
        .await?;
    anyhow::ensure!(status == 200, "screenshot: {status} {answer}");
    let screenshot = started.elapsed();
    let started = Instant::now();
    let true_ = json!({"command": "true"}).to_string();
    let (status, answer) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&true_),
        )
        .await?;
    anyhow::ensure!(status == 200, "exec: {status} {answer}");
    let exec = started.elapsed();
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/workspaces/{id}"), None)
        .await?;
    anyhow::ensure!(status == 204, "delete: {status}");
    Ok(Sample {
        create,
        screenshot,
        exec,
    })
}

async fn series(backend: &str, runs: usize) -> anyhow::Result<Vec<Sample>> {
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, &["--backend", backend])?;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        samples.push(one(&daemon).await?);
    }
    Ok(samples)
}

fn median(samples: &[Sample], of: fn(&Sample) -> Duration) -> f64 {
    let mut v: Vec<f64> = samples
        .iter()
        .map(|s| of(s).as_secs_f64() * 1000.0)
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let jail = series("jail", runs).await?;
    let microvm = series("microvm", runs).await?;
    println!("runs: {runs} each, medians (ms)");
    for (name, of) in [
        (
            "create → desktop usable",
            (|s: &Sample| s.create) as fn(&Sample) -> Duration,
        ),
        ("screenshot", |s: &Sample| s.screenshot),
        ("exec `true`", |s: &Sample| s.exec),
    ] {
        let (j, m) = (median(&jail, of), median(&microvm, of));
        println!(
            "{name:>24}: jail {j:9.1}  microvm {m:9.1}  microvm/jail {:.2}x",
            m / j
        );
    }
    if cubicle_tests::nested() {
        println!("(inside the nested test host: emulated CPU; compare, do not quote)");
    }
    Ok(())
}
