//! Replay benchmark, each number against a peer measured in the same run;
//! asserts nothing about time.
//!
//! 1. Sealing one event: `events::append` (chained, in one transaction with
//!    the chain's head) against the same row inserted unchained, alternated
//!    on one SQLite file; p50 and p99 of each.
//! 2. `audit verify` speed: records per second over a 100 000-record bundle
//!    (with checkpoints), the same code `cubicle audit verify` runs, against
//!    its floor: the cryptography alone (each record's SHA-256 link and each
//!    checkpoint's Ed25519 signature, in a loop over the same bytes).
//! 3. Recording cost at 10 fps, 1280x800: CPU of a daemon recording one
//!    workspace against a daemon with `--no-record` holding the same screen
//!    session, idle and while a terminal scrolls; bytes of video per minute.
//!
//!     cargo run -p cubicle-tests --bin bench-replay [-- SECONDS]

use std::time::{Duration, Instant};

use cubicle_recorder::audit_chain::{self, Record, export_line};
use cubicle_recorder::bundle::{Bundle, FORMAT, Manifest};
use cubicle_recorder::checkpoint::AuditKey;
use cubicle_runtime::events::{self, NewEvent};
use cubicle_runtime::state::{Store, now_ms};
use cubicle_tests::Daemon;
use cubicle_tests::stats::percentile_ms;
use reqwest::Method;
use serde_json::{Value, json};

async fn sealing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("cubicle.db")).await?;
    let detail = json!({"action": "left_click", "coordinate": [100, 200]});
    let (mut chained, mut plain) = (Vec::new(), Vec::new());
    for i in 0..3000 {
        let event = NewEvent {
            kind: cubicle_runtime::events::EventKind::Action,
            workspace_id: Some("ws-0123456789ab"),
            detail: detail.clone(),
            request_id: Some("req"),
            outcome: Some("ok"),
            ..NewEvent::default()
        };
        let started = Instant::now();
        events::append(&store, &event).await?;
        let sealed = started.elapsed();
        // The peer: the same row as the event log wrote it before the chain.
        let started = Instant::now();
        sqlx::query(
            "INSERT INTO events (at, kind, workspace_id, actor_id, actor_name, actor_role, \
             detail, request_id, client, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(now_ms())
        .bind("action")
        .bind("ws-0123456789ab")
        .bind(None::<&str>)
        .bind(None::<&str>)
        .bind(None::<&str>)
        .bind(detail.to_string())
        .bind("req")
        .bind(None::<&str>)
        .bind("ok")
        .execute(store.pool())
        .await?;
        let unsealed = started.elapsed();
        if i >= 100 {
            chained.push(sealed);
            plain.push(unsealed);
        }
    }
    let (c50, p50) = (
        percentile_ms(&mut chained, 50),
        percentile_ms(&mut plain, 50),
    );
    println!(
        "seal one event: p50 {c50:.3} ms chained vs {p50:.3} ms unchained (+{:.3} ms, x{:.2}); p99 {:.3} vs {:.3} ms",
        c50 - p50,
        c50 / p50,
        percentile_ms(&mut chained, 99),
        percentile_ms(&mut plain, 99)
    );
    Ok(())
}

fn verifying() {
    const RECORDS: u64 = 100_000;
    let chain = "ws-0123456789ab";
    let key = AuditKey::ephemeral();
    let mut prev = audit_chain::genesis(chain);
    let mut lines = String::new();
    let mut sealed_bytes = Vec::new();
    let mut checkpoints = Vec::new();
    for seq in 1..=RECORDS {
        let record = Record {
            v: 0,
            chain: chain.into(),
            seq: 0,
            prev: String::new(),
            at: 1_700_000_000_000 + seq as i64,
            kind: "action".into(),
            workspace: Some(chain.into()),
            actor: None,
            detail: json!({"action": "type", "text": {"len": 12, "sha256": "ab".repeat(32)}}),
            request_id: Some(format!("req-{seq}")),
            client: Some("127.0.0.1:4000".into()),
            outcome: Some("ok".into()),
        };
        let sealed = record.seal(seq, &prev).expect("a record encodes");
        prev = sealed.hash;
        lines.push_str(&export_line(&sealed.hash, &sealed.bytes));
        sealed_bytes.push(sealed.bytes);
        if seq % 100 == 0 {
            checkpoints.push(key.sign(chain, seq, &sealed.hash, 0));
        }
    }
    let mut checkpoint_lines = Vec::new();
    for c in &checkpoints {
        checkpoint_lines.extend(serde_json::to_vec(c).expect("a checkpoint encodes"));
        checkpoint_lines.push(b'\n');
    }
    let bundle = Bundle {
        manifest: Manifest {
            format: FORMAT.into(),
            chain: chain.into(),
            workspace: Some(chain.into()),
            exported_at: 0,
        },
        public_key: key.public_hex(),
        events: lines.into_bytes(),
        checkpoints: checkpoint_lines,
        segments: Default::default(),
        har: None,
    };
    let started = Instant::now();
    let report = cubicle_recorder::verify::verify(
        &bundle,
        Some(&key.public_hex()),
        cubicle_recorder::verify::Tail::Signed,
    );
    let took = started.elapsed();
    assert!(report.ok(), "{report:?}");
    // The floor: the same links and signatures, nothing parsed.
    let public = key.public();
    let started = Instant::now();
    let mut head = audit_chain::genesis(chain);
    for bytes in &sealed_bytes {
        head = audit_chain::link(&head, bytes.as_bytes());
    }
    for checkpoint in &checkpoints {
        checkpoint.verify(&public).expect("a checkpoint it signed");
    }
    let floor = started.elapsed();
    assert_eq!(head, prev, "the floor walked the same chain");
    println!(
        "audit verify: {RECORDS} records and {} checkpoints in {:.2} s = {:.0} records/s ({:.1} MB of events); \
         the cryptography alone {:.2} s = {:.0} records/s: {:.2}x of the floor",
        checkpoints.len(),
        took.as_secs_f64(),
        RECORDS as f64 / took.as_secs_f64(),
        bundle.events.len() as f64 / 1e6,
        floor.as_secs_f64(),
        RECORDS as f64 / floor.as_secs_f64(),
        floor.as_secs_f64() / took.as_secs_f64()
    );
}

/// utime + stime of process `pid` (all threads), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 (utime, stime), counted from after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn daemon_pid(daemon: &Daemon) -> u32 {
    let out = std::process::Command::new("pgrep")
        .args([
            "-f",
            &format!("serve --data-dir {}", daemon.data_dir.display()),
        ])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("the daemon's pid")
}

struct Desk {
    daemon: Daemon,
    id: String,
    pid: u32,
    _data: tempfile::TempDir,
}

async fn desk(extra: &[&str]) -> anyhow::Result<Desk> {
    let data = tempfile::tempdir()?;
    let daemon = Daemon::start(data.path(), None, extra)?;
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await?;
    anyhow::ensure!(status == 201, "create failed: {ws}");
    let id = ws["id"].as_str().unwrap_or_default().to_owned();
    // The screen session both daemons hold (the recorder's, or the one a
    // screenshot opens): the peer differs only in not recording.
    let shot = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/screenshot")))
        .bearer_auth(&daemon.token)
        .send()
        .await?;
    anyhow::ensure!(shot.status() == 200, "screenshot failed");
    let pid = daemon_pid(&daemon);
    Ok(Desk {
        daemon,
        id,
        pid,
        _data: data,
    })
}

async fn exec(desk: &Desk, command: &str) -> anyhow::Result<()> {
    let body = json!({"command": command, "timeout_ms": 20000}).to_string();
    let (status, out) = desk
        .daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{}/exec", desk.id),
            Some(&body),
        )
        .await?;
    anyhow::ensure!(status == 200, "{command}: {out}");
    Ok(())
}

/// CPU share of one core each daemon used over `seconds`.
async fn measure(desks: &[&Desk], seconds: u64) -> Vec<f64> {
    let before: Vec<f64> = desks.iter().map(|d| cpu_seconds(d.pid)).collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let wall = started.elapsed().as_secs_f64();
    desks
        .iter()
        .zip(before)
        .map(|(d, b)| (cpu_seconds(d.pid) - b) / wall)
        .collect()
}

/// Video bytes per minute over the segments sealed after wall time `from`.
async fn bytes_per_minute(desk: &Desk, from: i64) -> anyhow::Result<(f64, usize)> {
    let (_, view): (u16, Value) = desk
        .daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{}/recordings", desk.id),
            None,
        )
        .await?;
    let (mut bytes, mut ms, mut n) = (0.0, 0.0, 0);
    for s in view["segments"].as_array().into_iter().flatten() {
        if s["start_ms"].as_i64().unwrap_or(0) >= from {
            bytes += s["bytes"].as_f64().unwrap_or(0.0);
            ms += (s["end_ms"].as_f64().unwrap_or(0.0) - s["start_ms"].as_f64().unwrap_or(0.0))
                .max(1.0);
            n += 1;
        }
    }
    Ok((bytes / ms * 60_000.0, n))
}

async fn recording(seconds: u64) -> anyhow::Result<()> {
    let segment = (seconds / 2).max(2).to_string();
    let recorded = desk(&["--segment-seconds", &segment, "--record-fps", "10"]).await?;
    let peer = desk(&["--no-record"]).await?;
    // Let both desktops settle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_from = now_ms();
    let idle = measure(&[&recorded, &peer], seconds).await;
    let (idle_bpm, idle_segments) = bytes_per_minute(&recorded, idle_from).await?;
    let scroll = "setsid -f xfce4-terminal --disable-server --maximize -x sh -c \
                  'while :; do seq 1 5; ls -l /usr/bin | head -20; sleep 0.05; done' \
                  >/dev/null 2>&1 </dev/null";
    exec(&recorded, scroll).await?;
    exec(&peer, scroll).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let busy_from = now_ms();
    let busy = measure(&[&recorded, &peer], seconds).await;
    // Let the segments of the busy phase close.
    tokio::time::sleep(Duration::from_secs(seconds / 2 + 2)).await;
    let (busy_bpm, busy_segments) = bytes_per_minute(&recorded, busy_from).await?;
    for (what, cpu, bpm, segments) in [
        ("idle desktop", &idle, idle_bpm, idle_segments),
        ("scrolling terminal", &busy, busy_bpm, busy_segments),
    ] {
        println!(
            "recording 1280x800 at 10 fps, {what}: daemon {:.1}% of a core vs {:.1}% without recording \
             (recording's share {:.1}%); {:.2} MB of video per minute ({segments} segments)",
            cpu[0] * 100.0,
            cpu[1] * 100.0,
            (cpu[0] - cpu[1]) * 100.0,
            bpm / 1e6
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    sealing().await?;
    verifying();
    recording(seconds).await?;
    Ok(())
}
