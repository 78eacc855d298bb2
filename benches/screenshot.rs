//! Screenshot benchmark: Cubicle's screenshot path (the gateway's persistent
//! RFB session → PNG) against `xwd -root | convert xwd:- png:-` run inside the
//! same workspace, in the same run. Prints percentiles and the ratio; asserts
//! nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-screenshot [-- RUNS]

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::stats::percentile_ms;
use reqwest::Method;
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, &[])?;
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await?;
    anyhow::ensure!(status == 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap_or_default().to_owned();
    let http = reqwest::Client::new();
    let shot_url = daemon.url(&format!("/v1/workspaces/{id}/screenshot"));
    let exec_path = format!("/v1/workspaces/{id}/exec");
    let peer = json!({"command": "xwd -root -silent | convert xwd:- png:- | wc -c"}).to_string();

    // Warm both paths once.
    http.get(&shot_url)
        .bearer_auth(&daemon.token)
        .send()
        .await?
        .bytes()
        .await?;
    daemon.call(Method::POST, &exec_path, Some(&peer)).await?;

    let (mut ours, mut ours_jpeg, mut peer_inside, mut peer_total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut sizes = (0, 0);
    for _ in 0..runs {
        let started = Instant::now();
        let png = http
            .get(&shot_url)
            .bearer_auth(&daemon.token)
            .send()
            .await?
            .bytes()
            .await?;
        ours.push(started.elapsed());
        sizes.0 = png.len();

        let started = Instant::now();
        http.get(format!("{shot_url}?format=jpeg&quality=80"))
            .bearer_auth(&daemon.token)
            .send()
            .await?
            .bytes()
            .await?;
        ours_jpeg.push(started.elapsed());

        let started = Instant::now();
        let (status, out) = daemon.call(Method::POST, &exec_path, Some(&peer)).await?;
        peer_total.push(started.elapsed());
        anyhow::ensure!(status == 200 && out["exit_code"] == 0, "peer failed: {out}");
        let inside = out["duration_ms"].as_f64().unwrap_or(0.0);
        peer_inside.push(Duration::from_secs_f64(inside / 1000.0));
        sizes.1 = out["stdout"]
            .as_str()
            .unwrap_or("0")
            .trim()
            .parse()
            .unwrap_or(0);
    }
    let ours_p50 = percentile_ms(&mut ours, 50);
    let peer_p50 = percentile_ms(&mut peer_inside, 50);
    println!("screenshot 1280x800, {runs} runs each (p50 / p95 ms):");
    println!(
        "  cubicle  PNG over HTTP         {:8.1} / {:8.1}   ({} bytes)",
        ours_p50,
        percentile_ms(&mut ours, 95),
        sizes.0
    );
    println!(
        "  cubicle  JPEG q80 over HTTP    {:8.1} / {:8.1}",
        percentile_ms(&mut ours_jpeg, 50),
        percentile_ms(&mut ours_jpeg, 95)
    );
    println!(
        "  xwd|convert PNG, inside guest  {:8.1} / {:8.1}   ({} bytes)",
        peer_p50,
        percentile_ms(&mut peer_inside, 95),
        sizes.1
    );
    println!(
        "  xwd|convert via exec API       {:8.1} / {:8.1}",
        percentile_ms(&mut peer_total, 50),
        percentile_ms(&mut peer_total, 95)
    );
    println!(
        "ratio (xwd|convert inside guest p50 / cubicle PNG p50): {:.1}x",
        peer_p50 / ours_p50
    );
    Ok(())
}
