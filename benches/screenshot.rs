//! Screenshot benchmark: Cubicle's screenshot path (the gateway's persistent
//! RFB session → PNG or JPEG, encoded once per screen change) against
//! `xwd -root | convert xwd:- png:-` run inside the same workspace, in the
//! same run. Each format is timed twice: right after the screen changed (the
//! pointer moved, so the frame is encoded) and again on the same screen (a
//! cached encoding is served). Prints percentiles and ratios; asserts
//! nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-screenshot [-- RUNS]

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::stats::percentile_ms;
use reqwest::Method;
use serde_json::json;

/// Time for the pointer's new position to reach the gateway's framebuffer.
const SETTLE: Duration = Duration::from_millis(60);

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
    let actions_path = format!("/v1/workspaces/{id}/actions");
    let exec_path = format!("/v1/workspaces/{id}/exec");
    let peer = json!({"command": "xwd -root -silent | convert xwd:- png:- | wc -c"}).to_string();
    let shot = async |query: &str| -> anyhow::Result<(Duration, usize)> {
        let started = Instant::now();
        let bytes = http
            .get(format!("{shot_url}{query}"))
            .bearer_auth(&daemon.token)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        Ok((started.elapsed(), bytes.len()))
    };
    let mut moves = 0u32;
    let mut change_screen = async || -> anyhow::Result<()> {
        moves += 1;
        let x = 200 + (moves % 40) * 10;
        let body = json!({"action": "mouse_move", "coordinate": [x, 400]}).to_string();
        let (status, out) = daemon
            .call(Method::POST, &actions_path, Some(&body))
            .await?;
        anyhow::ensure!(status == 200, "mouse_move failed: {out}");
        tokio::time::sleep(SETTLE).await;
        Ok(())
    };

    // Warm every path once.
    shot("").await?;
    shot("?format=jpeg&quality=80").await?;
    daemon.call(Method::POST, &exec_path, Some(&peer)).await?;

    let formats = [("PNG", ""), ("JPEG q80", "?format=jpeg&quality=80")];
    let mut changed: Vec<Vec<Duration>> = vec![Vec::new(); formats.len()];
    let mut cached: Vec<Vec<Duration>> = vec![Vec::new(); formats.len()];
    let mut sizes = vec![0; formats.len()];
    let (mut peer_inside, mut peer_total) = (Vec::new(), Vec::new());
    let mut peer_size = 0;
    for _ in 0..runs {
        for (i, (_, query)) in formats.iter().enumerate() {
            change_screen().await?;
            let (took, size) = shot(query).await?;
            changed[i].push(took);
            sizes[i] = size;
            let (took, _) = shot(query).await?;
            cached[i].push(took);
        }
        let started = Instant::now();
        let (status, out) = daemon.call(Method::POST, &exec_path, Some(&peer)).await?;
        peer_total.push(started.elapsed());
        anyhow::ensure!(status == 200 && out["exit_code"] == 0, "peer failed: {out}");
        let inside = out["duration_ms"].as_f64().unwrap_or(0.0);
        peer_inside.push(Duration::from_secs_f64(inside / 1000.0));
        peer_size = out["stdout"]
            .as_str()
            .unwrap_or("0")
            .trim()
            .parse()
            .unwrap_or(0);
    }
    let peer_p50 = percentile_ms(&mut peer_inside, 50);
    println!("screenshot 1280x800 over HTTP, {runs} runs each (p50 / p95 ms):");
    for (i, (name, _)) in formats.iter().enumerate() {
        println!(
            "  cubicle {name:9} screen changed {:8.1} / {:8.1}   ({} bytes)",
            percentile_ms(&mut changed[i], 50),
            percentile_ms(&mut changed[i], 95),
            sizes[i]
        );
        println!(
            "  cubicle {name:9} same screen    {:8.1} / {:8.1}",
            percentile_ms(&mut cached[i], 50),
            percentile_ms(&mut cached[i], 95),
        );
    }
    println!(
        "  xwd|convert PNG, inside guest    {:8.1} / {:8.1}   ({peer_size} bytes)",
        peer_p50,
        percentile_ms(&mut peer_inside, 95),
    );
    println!(
        "  xwd|convert via exec API         {:8.1} / {:8.1}",
        percentile_ms(&mut peer_total, 50),
        percentile_ms(&mut peer_total, 95)
    );
    println!(
        "ratio (xwd|convert inside guest p50 / cubicle PNG p50): {:.1}x changed, {:.1}x same screen",
        peer_p50 / percentile_ms(&mut changed[0], 50),
        peer_p50 / percentile_ms(&mut cached[0], 50),
    );
    Ok(())
}
