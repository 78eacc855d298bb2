//! Disk snapshots against their peer, a cold create, in the same run on one
//! daemon: a source desktop with a file and a browser cookie; taking a
//! snapshot of it; one workspace started from it against one cold create
//! (both timed from the request to the 201: the desktop answers); `N` at
//! once from it in one create against `N` cold creates at once, and the
//! memory the `N` hold together (PSS: forks of a memory snapshot share the
//! pages of its memory file none of them wrote); a rollback. On a microVM
//! host the snapshots are of kind `memory` (the whole machine), on a jail
//! host of kind `disk`. Prints p50 and p95 of each and the ratios; asserts
//! nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-snapshot [-- RUNS [N]]

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::{Value, json};

async fn call(daemon: &Daemon, method: Method, path: &str, body: Value) -> anyhow::Result<Value> {
    let body = (!body.is_null()).then(|| body.to_string());
    let (status, answer) = daemon.call(method, path, body.as_deref()).await?;
    anyhow::ensure!((200..300).contains(&status), "{path}: {status} {answer}");
    Ok(answer)
}

async fn timed(daemon: &Daemon, path: &str, body: Value) -> anyhow::Result<(Duration, Value)> {
    let started = Instant::now();
    let answer = call(daemon, Method::POST, path, body).await?;
    Ok((started.elapsed(), answer))
}

/// The ids a create answered: one workspace, or `{workspaces}`.
fn ids(answer: &Value) -> Vec<String> {
    match answer["workspaces"].as_array() {
        Some(all) => all
            .iter()
            .filter_map(|w| w["id"].as_str())
            .map(str::to_owned)
            .collect(),
        None => answer["id"]
            .as_str()
            .map(str::to_owned)
            .into_iter()
            .collect(),
    }
}

async fn delete(daemon: &Daemon, ids: &[String]) -> anyhow::Result<()> {
    for id in ids {
        call(
            daemon,
            Method::DELETE,
            &format!("/v1/workspaces/{id}"),
            Value::Null,
        )
        .await?;
    }
    Ok(())
}

/// The workspaces a create answered: one, or `{workspaces}`.
fn workspaces(answer: &Value) -> Vec<Value> {
    match answer["workspaces"].as_array() {
        Some(all) => all.clone(),
        None => vec![answer.clone()],
    }
}

/// What `made` hold together, in MiB: the PSS of every process of theirs
/// (a microVM's VMM, a jail's desktop).
fn pss_mib(made: &[Value]) -> f64 {
    let pids: Vec<i32> = made
        .iter()
        .filter_map(|ws| u32::try_from(ws["host_uid"].as_u64()?).ok())
        .flat_map(cubicle_tests::procs::of_workspace)
        .collect();
    cubicle_tests::procs::pss_kib(&pids) as f64 / 1024.0
}

/// `n` cold creates at once: the time until the last answered.
async fn cold_many(daemon: &Daemon, n: usize) -> anyhow::Result<(Duration, Vec<Value>)> {
    let started = Instant::now();
    let creates = (0..n).map(|_| call(daemon, Method::POST, "/v1/workspaces", json!({})));
    let mut made = Vec::new();
    for answer in futures_util::future::join_all(creates).await {
        made.extend(workspaces(&answer?));
    }
    Ok((started.elapsed(), made))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// p50 and p95 of `samples` in ms.
fn spread(samples: &[Duration]) -> (f64, f64) {
    let mut v: Vec<f64> = samples.iter().copied().map(ms).collect();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(3).max(1);
    let many: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4)
        .clamp(1, 10);
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, &[])?;

    let source = ids(&call(&daemon, Method::POST, "/v1/workspaces", json!({})).await?).remove(0);
    let setup = "head -c 4194304 /dev/urandom > ~/data.bin && echo ready > ~/notes.txt";
    call(
        &daemon,
        Method::POST,
        &format!("/v1/workspaces/{source}/exec"),
        json!({"command": setup}),
    )
    .await?;

    let (mut take, mut fork, mut cold, mut rollback) = (vec![], vec![], vec![], vec![]);
    let mut snapshot = String::new();
    let mut kind = String::new();
    let mut sizes = (0, 0);
    for run in 0..runs {
        let (took, snap) = timed(
            &daemon,
            &format!("/v1/workspaces/{source}/snapshot"),
            json!({"name": format!("bench-{run}")}),
        )
        .await?;
        take.push(took);
        snapshot = snap["id"].as_str().unwrap_or_default().to_owned();
        kind = snap["kind"].as_str().unwrap_or_default().to_owned();
        sizes = match kind.as_str() {
            "memory" => (
                snap["machine"]["memory_bytes"].as_u64().unwrap_or(0),
                snap["machine"]["disk_bytes"].as_u64().unwrap_or(0),
            ),
            _ => (
                snap["home_size"].as_u64().unwrap_or(0),
                snap["profile_size"].as_u64().unwrap_or(0),
            ),
        };
        let (took, made) = timed(
            &daemon,
            "/v1/workspaces",
            json!({"from_snapshot": snapshot}),
        )
        .await?;
        fork.push(took);
        delete(&daemon, &ids(&made)).await?;
        let (took, made) = timed(&daemon, "/v1/workspaces", json!({})).await?;
        cold.push(took);
        delete(&daemon, &ids(&made)).await?;
        let (took, _) = timed(
            &daemon,
            &format!("/v1/workspaces/{source}/rollback"),
            json!({"snapshot": snapshot}),
        )
        .await?;
        rollback.push(took);
    }
    let (forks_took, made) = timed(
        &daemon,
        "/v1/workspaces",
        json!({"from_snapshot": snapshot, "count": many}),
    )
    .await?;
    let forks = workspaces(&made);
    anyhow::ensure!(
        forks.len() == many,
        "{many} forks asked, {} made: {made}",
        forks.len()
    );
    let forks_pss = pss_mib(&forks);
    delete(&daemon, &ids(&made)).await?;
    let (colds_took, colds) = cold_many(&daemon, many).await?;
    let colds_pss = pss_mib(&colds);
    let cold_ids: Vec<String> = colds.iter().flat_map(ids).collect();
    delete(&daemon, &cold_ids).await?;

    match kind.as_str() {
        "memory" => println!(
            "runs: {runs}; kind memory: the snapshot wrote {} MiB of guest memory and {} MiB of disk",
            sizes.0 >> 20,
            sizes.1 >> 20
        ),
        _ => println!(
            "runs: {runs}; kind {kind}: the snapshot holds {} bytes of files and {} of browser profile (gzip'd)",
            sizes.0, sizes.1
        ),
    }
    let (cold50, _) = spread(&cold);
    for (name, samples) in [
        ("snapshot (paused browser, files, profile)", &take),
        ("one workspace from the snapshot → 201", &fork),
        ("one cold create → 201 (the peer)", &cold),
        ("rollback", &rollback),
    ] {
        let (p50, p95) = spread(samples);
        println!(
            "{name:>44}: p50 {p50:8.1} ms  p95 {p95:8.1} ms  p50/cold {:.2}x",
            p50 / cold50
        );
    }
    println!(
        "{:>44}: {:8.1} ms for {many} from the snapshot, {:8.1} ms for {many} cold ({:.2}x)",
        format!("{many} at once"),
        ms(forks_took),
        ms(colds_took),
        ms(forks_took) / ms(colds_took)
    );
    println!(
        "{:>44}: {forks_pss:8.1} MiB PSS for {many} from the snapshot, {colds_pss:8.1} MiB for {many} cold ({:.2}x)",
        format!("{many} at once, memory"),
        colds_pss / forks_pss.max(0.1)
    );
    if kind == "disk" {
        println!(
            "(kind `disk`: a fork boots the image and unpacks the files; no memory is restored)"
        );
    }
    Ok(())
}
