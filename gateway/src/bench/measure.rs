//! Each row of the table: Cubicle's number and its peer's, in one run.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::daemon::Daemon;
use super::peers::{self, PlainDesktop};
use super::{BenchArgs, Row, Stat};

/// How long a workspace sits idle before its memory is read.
const IDLE: Duration = Duration::from_secs(10);
/// How long a create may take before it counts as failed.
const READY: Duration = Duration::from_secs(180);
/// Time for a pointer move to reach the gateway's framebuffer.
const SETTLE: Duration = Duration::from_millis(60);
/// Longest wait for one CDP reply.
const CALL: Duration = Duration::from_secs(10);

fn say(text: &str) {
    eprintln!("bench: {text}");
}

pub async fn all(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let images = cubicle_runtime::image::ImageStore::new(args.image_cache.clone());
    let image = tokio::task::spawn_blocking(move || images.ensure()).await??;
    let scratch = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("cubicle-bench-{}", std::process::id())),
    };
    say(&format!("starting cubicle serve on {}", scratch.display()));
    let mut daemon = Daemon::start(&scratch, args.uid_base, &args.daemon_args)?;
    if args.cheap {
        let result = cheap_rows(args, &daemon).await;
        drop(daemon);
        let _ = std::fs::remove_dir_all(&scratch);
        return result;
    }
    let mut result = rows(args, &daemon, &image.rootfs).await;
    if let Ok(rows) = &mut result {
        say("daemon restarts with workspaces running and with none");
        rows.push(
            restarts(&mut daemon)
                .await
                .unwrap_or_else(|err| Row::skipped("daemon restart", format!("{err:#}"))),
        );
    }
    drop(daemon);
    let _ = std::fs::remove_dir_all(&scratch);
    let mut rows = result?;
    if args.pool_creates > 0 {
        say("creates from the warm pool (a second daemon, --warm 2)");
        let at = rows
            .iter()
            .position(|r| r.name.starts_with("create, cold"))
            .map_or(0, |i| i + 1);
        let cold = at.checked_sub(1).and_then(|i| rows[i].cubicle);
        let scratch = scratch.with_extension("pool");
        let row = match Daemon::start(
            &scratch,
            args.uid_base + 10_000,
            &[&["--warm".into(), "2".into()], &args.daemon_args[..]].concat(),
        ) {
            Ok(daemon) => pool_creates(&daemon, args.pool_creates, cold).await,
            Err(err) => Err(err),
        };
        let _ = std::fs::remove_dir_all(&scratch);
        rows.insert(
            at,
            row.unwrap_or_else(|err| Row::skipped("create from the warm pool", format!("{err:#}"))),
        );
    }
    if args.pool_creates > 0 && args.concurrent > 0 {
        let n = args.concurrent;
        say(&format!("{n} concurrent creates from a warm pool of {n}"));
        let cold = rows
            .iter()
            .find(|r| r.name == format!("{n} concurrent creates"))
            .and_then(|r| r.cubicle);
        let scratch = scratch.with_extension("pool-n");
        let row = match Daemon::start(
            &scratch,
            args.uid_base + 20_000,
            &[&["--warm".into(), n.to_string()], &args.daemon_args[..]].concat(),
        ) {
            Ok(daemon) => pooled_concurrent(&daemon, n, cold).await,
            Err(err) => Err(err),
        };
        let _ = std::fs::remove_dir_all(&scratch);
        rows.push(row.unwrap_or_else(|err| {
            Row::skipped(
                &format!("{n} concurrent creates, warm pool"),
                format!("{err:#}"),
            )
        }));
    }
    Ok(rows)
}

/// Restarts (SIGTERM, then a new daemon on the same data dir) with two
/// workspaces running, which the new daemon re-attaches before it listens,
/// against restarts with none.
async fn restarts(daemon: &mut Daemon) -> anyhow::Result<Row> {
    const RESTARTS: usize = 3;
    let (_, list) = daemon.call(Method::GET, "/v1/workspaces", None).await?;
    let mut running: Vec<Value> = list["workspaces"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w["state"] == "running")
        .collect();
    while running.len() < 2 {
        running.push(create(daemon).await?.1);
    }
    let mut with = Vec::new();
    for _ in 0..RESTARTS {
        with.push(daemon.restart()?);
    }
    for ws in &running {
        let id = ws["id"].as_str().unwrap_or_default();
        let (_, view) = daemon
            .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
            .await?;
        if view["state"] != "running" {
            bail!("workspace {id} did not survive the restarts: {view}");
        }
        delete(daemon, ws).await;
    }
    let mut without = Vec::new();
    for _ in 0..RESTARTS {
        without.push(daemon.restart()?);
    }
    Ok(Row::new(
        &format!("daemon restart, {} workspaces re-attached", running.len()),
        "ms",
        Stat::of_durations(&with),
        "daemon restart with none",
        Stat::of_durations(&without),
    )
    .note("SIGTERM, then a new daemon until it listens; the desktops keep running"))
}

/// `n` concurrent creates once a pool of `n` is ready, against `n` cold.
async fn pooled_concurrent(daemon: &Daemon, n: usize, cold: Option<Stat>) -> anyhow::Result<Row> {
    let deadline = Instant::now() + READY * u32::try_from(n).unwrap_or(u32::MAX).max(1);
    loop {
        let (_, stats) = daemon.call(Method::GET, "/v1/pool", None).await?;
        if stats["ready"].as_u64().unwrap_or(0) >= n as u64 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the warm pool of {n} was not full in time: {stats}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let served = concurrent(daemon, n, None).await?;
    let (_, stats) = daemon.call(Method::GET, "/v1/pool", None).await?;
    Ok(Row::new(
        &format!("{n} concurrent creates, warm pool of {n}"),
        "ms",
        served.cubicle,
        &format!("{n} concurrent creates, cold"),
        cold,
    )
    .note(format!("{}; pool hits {}", served.note, stats["hits"])))
}

/// Waits until the daemon's warm pool has `count` ready workspaces; its
/// stats then.
async fn pool_ready(daemon: &Daemon, count: u64) -> anyhow::Result<Value> {
    let deadline = Instant::now() + READY;
    while Instant::now() < deadline {
        let (_, stats) = daemon.call(Method::GET, "/v1/pool", None).await?;
        if stats["ready"].as_u64().unwrap_or(0) >= count {
            return Ok(stats);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("the warm pool had not {count} ready within {READY:?}")
}

/// `count` creates from a pool of two, each while the pool refills what the
/// one before took: the pool is full once, then every create starts as soon
/// as one workspace is ready, with a refill (a desktop starting) running
/// beside it. Creates that found a refill running are counted.
async fn pool_creates(daemon: &Daemon, count: usize, cold: Option<Stat>) -> anyhow::Result<Row> {
    let mut times = Vec::new();
    let mut overlapped = 0;
    pool_ready(daemon, 2).await?;
    for _ in 0..count {
        let stats = pool_ready(daemon, 1).await?;
        if stats["filling"].as_u64().unwrap_or(0) > 0 {
            overlapped += 1;
        }
        let (took, ws) = create(daemon).await?;
        times.push(took);
        delete(daemon, &ws).await;
    }
    let (_, stats) = daemon.call(Method::GET, "/v1/pool", None).await?;
    Ok(Row::new(
        "create from the warm pool, refills overlapping",
        "ms",
        Stat::of_durations(&times),
        "create, cold (until ready)",
        cold,
    )
    .note(format!(
        "pool of 2; hits {} of {count}; {overlapped} began with a refill running",
        stats["hits"]
    )))
}

/// `--cheap`: one create, then the rows of one workspace, the screenshots
/// only against their in-process floor (the `xwd | convert` peer spawns a
/// process per shot, too noisy to check against).
async fn cheap_rows(args: &BenchArgs, daemon: &Daemon) -> anyhow::Result<Vec<Row>> {
    say("one create");
    let (_, ws) = create(daemon).await?;
    let id = ws["id"].as_str().context("the workspace's id")?.to_owned();
    let rows = one_workspace(daemon, &id, args.runs).await;
    delete(daemon, &ws).await;
    Ok(rows?
        .into_iter()
        .filter(|r| !r.name.starts_with("screenshot") || r.peer.starts_with("encoding"))
        .collect())
}

/// The rows one running workspace gives: screenshots, actions and the
/// core, CDP, exec.
async fn one_workspace(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    say("screenshots");
    rows.extend(screenshots(daemon, id, runs).await?);
    say("actions and the core");
    rows.extend(actions(daemon, id, runs).await?);
    say("CDP");
    let limit = Duration::from_secs(60) + CALL * runs as u32 * 2;
    match tokio::time::timeout(limit, cdp(daemon, id, runs)).await {
        Ok(Ok(cdp)) => rows.extend(cdp),
        Ok(Err(err)) => rows.push(Row::skipped("CDP round trips", format!("{err:#}"))),
        Err(_) => rows.push(Row::skipped("CDP round trips", "timed out")),
    }
    say("live view");
    match super::live_view::rows(daemon, id, runs).await {
        Ok(live) => rows.extend(live),
        Err(err) => rows.push(Row::skipped("live view", format!("{err:#}"))),
    }
    say("exec");
    rows.push(exec(daemon, id, runs).await?);
    Ok(rows)
}

async fn rows(args: &BenchArgs, daemon: &Daemon, rootfs: &Path) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    say("cold creates");
    let (create, ws) = cold_creates(daemon, args.creates).await?;
    say("plain bubblewrap desktops");
    let (plain, plain_pss) = match plain_starts(rootfs, args.creates).await {
        Ok(found) => found,
        Err(err) => {
            rows.push(Row::skipped("plain bubblewrap desktop", &err));
            (Vec::new(), None)
        }
    };
    rows.push(Row::new(
        "create, cold (until ready)",
        "ms",
        Stat::of_durations(&create),
        "plain bwrap desktop start, window maximized",
        Stat::of_durations(&plain),
    ));
    let id = ws["id"].as_str().context("the workspace's id")?.to_owned();
    let host_uid = ws["host_uid"].as_u64().unwrap_or(0) as u32;
    rows.extend(one_workspace(daemon, &id, args.runs).await?);
    say("idle memory");
    rows.push(idle_memory(daemon, &id, host_uid, plain_pss).await?);
    if args.concurrent > 0 {
        say(&format!("{} concurrent creates", args.concurrent));
        rows.push(concurrent(daemon, args.concurrent, Stat::of_durations(&create)).await?);
    }
    if !args.no_vmm {
        say("cubicle-vmm bench");
        rows.extend(vmm());
        say("cubicle-vmm bench-snapshot");
        rows.extend(vmm_snapshots());
    }
    Ok(rows)
}

/// Lets the workspaces sit idle before their memory is read: [`IDLE`], and
/// with `serve --share-memory` until the kernel's merging thread has made
/// two more full passes (at most five minutes), so what it merges counts.
async fn settle(daemon: &Daemon) {
    tokio::time::sleep(IDLE).await;
    if !daemon.shares_memory() {
        return;
    }
    use cubicle_runtime::limits::shared_memory::full_scans;
    let Some(from) = full_scans() else { return };
    let give_up = Instant::now() + Duration::from_secs(300);
    while full_scans().is_some_and(|n| n < from + 2) && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Idle memory per workspace, all of it: the workspace's processes (its two
/// uids), its shim, and what the daemon grows by per idle workspace (its
/// RFB session and framebuffer, screenshot cache, recorder and encoder,
/// proxies), read as the daemon's PSS with one workspace, then with two
/// more that do not record, then with two more that do (the recorder's
/// part is the difference).
async fn idle_memory(
    daemon: &Daemon,
    id: &str,
    host_uid: u32,
    plain: Option<f64>,
) -> anyhow::Result<Row> {
    const MORE: usize = 2;
    settle(daemon).await;
    let desktop = peers::pss_mib(&peers::of_uids(&[host_uid, host_uid + 1]));
    let shim_dir = daemon.workspace_dir(id).join("shim");
    let shim = peers::pss_mib(&peers::with_argument(&shim_dir.to_string_lossy()));
    let mut readings = vec![peers::pss_mib(&[daemon.pid()])];
    let mut more = Vec::new();
    for body in [r#"{"record": false}"#, "{}"] {
        for _ in 0..MORE {
            more.push(create_with(daemon, body).await?.1);
        }
        settle(daemon).await;
        readings.push(peers::pss_mib(&[daemon.pid()]));
    }
    for ws in &more {
        delete(daemon, ws).await;
    }
    let per = |from: f64, to: f64| ((to - from) / MORE as f64).max(0.0);
    let (unrecorded, recorded) = (per(readings[0], readings[1]), per(readings[1], readings[2]));
    let total = desktop + shim + recorded;
    Ok(Row::new(
        "idle memory per workspace (PSS, all counted)",
        "MiB",
        Stat::of(vec![total]),
        "plain bwrap desktop, idle",
        plain.and_then(|p| Stat::of(vec![p])),
    )
    .note(format!(
        "desktop {desktop:.0} + shim {shim:.1} + the daemon's share {recorded:.1}, of which \
         recording {:.1} (its PSS {:.0} MiB with one workspace, {:.0} with two more not \
         recording, {:.0} with two more recording)",
        (recorded - unrecorded).max(0.0),
        readings[0],
        readings[1],
        readings[2],
    )))
}

async fn create(daemon: &Daemon) -> anyhow::Result<(Duration, Value)> {
    create_with(daemon, "{}").await
}

async fn create_with(daemon: &Daemon, body: &str) -> anyhow::Result<(Duration, Value)> {
    let started = Instant::now();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some(body))
        .await?;
    if status != 201 {
        bail!("create answered {status}: {ws}");
    }
    Ok((started.elapsed(), ws))
}

async fn delete(daemon: &Daemon, ws: &Value) {
    if let Some(id) = ws["id"].as_str() {
        let _ = daemon
            .call(Method::DELETE, &format!("/v1/workspaces/{id}"), None)
            .await;
    }
}

/// `count` creates one after another; all but the last are deleted again.
async fn cold_creates(daemon: &Daemon, count: usize) -> anyhow::Result<(Vec<Duration>, Value)> {
    let mut times = Vec::new();
    let mut last = Value::Null;
    for i in 0..count.max(1) {
        let (took, ws) = create(daemon).await?;
        times.push(took);
        if i + 1 < count.max(1) {
            delete(daemon, &ws).await;
        }
        last = ws;
    }
    Ok((times, last))
}

/// `count` plain desktops one after another; the PSS of the last, idle.
async fn plain_starts(rootfs: &Path, count: usize) -> anyhow::Result<(Vec<Duration>, Option<f64>)> {
    let mut times = Vec::new();
    let mut pss = None;
    for i in 0..count.max(1) {
        let started = Instant::now();
        let mut desktop = PlainDesktop::start(rootfs, 90 + i as u32, 19_222)?;
        let ready = desktop.ready(READY).await;
        times.push(started.elapsed());
        if let Err(err) = ready {
            desktop.stop();
            return Err(err);
        }
        if i + 1 == count.max(1) {
            tokio::time::sleep(IDLE).await;
            pss = Some(peers::pss_mib(&desktop.pids()));
        }
        desktop.stop();
    }
    Ok((times, pss))
}

async fn screenshots(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Row>> {
    let shot_url = daemon.url(&format!("/v1/workspaces/{id}/screenshot"));
    let actions = format!("/v1/workspaces/{id}/actions");
    let exec_path = format!("/v1/workspaces/{id}/exec");
    let peer = json!({"command": "xwd -root -silent | convert xwd:- png:- | wc -c"}).to_string();
    let shot = async |query: &str| -> anyhow::Result<(Duration, Vec<u8>)> {
        let started = Instant::now();
        let bytes = daemon
            .http
            .get(format!("{shot_url}{query}"))
            .bearer_auth(&daemon.token)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        Ok((started.elapsed(), bytes.to_vec()))
    };
    shot("").await?;
    daemon.call(Method::POST, &exec_path, Some(&peer)).await?;
    let formats = [("PNG", ""), ("JPEG q80", "?format=jpeg&quality=80")];
    let mut changed = vec![Vec::new(); formats.len()];
    let mut same = vec![Vec::new(); formats.len()];
    let mut sizes = vec![0; formats.len()];
    let mut floors = vec![Vec::new(); formats.len()];
    let mut pixels = None;
    let mut inside = Vec::new();
    for run in 0..runs {
        for (i, (_, query)) in formats.iter().enumerate() {
            let x = 200 + ((run * 2 + i) % 40) * 10;
            let body = json!({"action": "mouse_move", "coordinate": [x, 400]}).to_string();
            daemon.call(Method::POST, &actions, Some(&body)).await?;
            tokio::time::sleep(SETTLE).await;
            let (took, image) = shot(query).await?;
            changed[i].push(took);
            sizes[i] = image.len();
            if i == 0 {
                pixels = Some(
                    cubicle_screen_encode::decode(&image)
                        .context("decoding the gateway's PNG screenshot")?,
                );
            }
            // The floor right after, under the same load (the recorder
            // encoding the change, say): one run's floor measured apart
            // once strayed 60% with what else the machine was doing.
            if let Some((frame, width, height)) = &pixels {
                floors[i].push(encode_floor(frame, *width, *height, i)?);
            }
            same[i].push(shot(query).await?.0);
        }
        let (status, out) = daemon.call(Method::POST, &exec_path, Some(&peer)).await?;
        if status == 200 && out["exit_code"] == 0 {
            let ms = out["duration_ms"].as_f64().unwrap_or(0.0);
            inside.push(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let peer = Stat::of_durations(&inside);
    let mut rows = Vec::new();
    for (i, (name, _)) in formats.iter().enumerate() {
        let changed = Stat::of_durations(&changed[i]);
        rows.push(
            Row::new(
                &format!("screenshot {name}, screen changed"),
                "ms",
                changed,
                "encoding the same frame in process",
                Stat::of_durations(&floors[i]),
            )
            .note(format!(
                "{} bytes, over HTTP; the floor: the same encoder and settings",
                sizes[i]
            )),
        );
        rows.push(Row::new(
            &format!("screenshot {name}, screen changed"),
            "ms",
            changed,
            "xwd|convert PNG inside the guest",
            peer,
        ));
        rows.push(
            Row::new(
                &format!("screenshot {name}, same screen"),
                "ms",
                Stat::of_durations(&same[i]),
                "xwd|convert PNG inside the guest",
                peer,
            )
            .note("served from the cache of the last encoding"),
        );
    }
    Ok(rows)
}

/// The floor of a changed-screen screenshot: the frame the gateway just
/// served as PNG (lossless, so these are its pixels) encoded once in this
/// process with the gateway's encoder and settings of format `i` (PNG,
/// then JPEG q80).
fn encode_floor(frame: &[u8], width: u32, height: u32, i: usize) -> anyhow::Result<Duration> {
    use cubicle_screen_encode::{Format, encode};
    let format = [Format::Png, Format::Jpeg(80)][i];
    let started = Instant::now();
    encode(frame, width, height, format, None)?;
    Ok(started.elapsed())
}

async fn actions(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Row>> {
    let path = format!("/v1/workspaces/{id}/actions");
    let mut rfb = peers::RawRfb::connect(&daemon.channel_socket(id))
        .await
        .context("a raw RFB session with the workspace's Xvnc")?;
    let (mut moves, mut clicks, mut cursor, mut me) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut raw_moves, mut raw_clicks) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // A blank spot of the page Chromium shows: a click there changes nothing.
        let (x, y) = (300 + (run % 50) as u16, 300);
        let body = json!({"action": "mouse_move", "coordinate": [x, y]}).to_string();
        let started = Instant::now();
        daemon.call(Method::POST, &path, Some(&body)).await?;
        moves.push(started.elapsed());
        let started = Instant::now();
        rfb.send_with_receipt(&peers::pointer(x, y + 10, 0)).await?;
        raw_moves.push(started.elapsed());
        let body = json!({"action": "left_click", "coordinate": [x, y]}).to_string();
        let started = Instant::now();
        daemon.call(Method::POST, &path, Some(&body)).await?;
        clicks.push(started.elapsed());
        // The action's three events: move there, press, release.
        let click = [
            peers::pointer(x, y + 10, 0),
            peers::pointer(x, y + 10, 1),
            peers::pointer(x, y + 10, 0),
        ]
        .concat();
        let started = Instant::now();
        rfb.send_with_receipt(&click).await?;
        raw_clicks.push(started.elapsed());
        let body = json!({"action": "cursor_position"}).to_string();
        let started = Instant::now();
        daemon.call(Method::POST, &path, Some(&body)).await?;
        cursor.push(started.elapsed());
        let started = Instant::now();
        daemon.call(Method::GET, "/v1/me", None).await?;
        me.push(started.elapsed());
    }
    let receipt = "ours answers once the events are handed to its RFB session; \
                   the floor waits for Xvnc's receipt (a one-pixel update asked after them)";
    Ok(vec![
        Row::new(
            "action round trip (mouse_move)",
            "ms",
            Stat::of_durations(&moves),
            "the same PointerEvent straight to Xvnc",
            Stat::of_durations(&raw_moves),
        )
        .note(receipt),
        Row::new(
            "action round trip (left_click)",
            "ms",
            Stat::of_durations(&clicks),
            "the same three PointerEvents straight to Xvnc",
            Stat::of_durations(&raw_clicks),
        )
        .note(receipt),
        Row::new(
            "core cost (cursor_position action)",
            "ms",
            Stat::of_durations(&cursor),
            "GET /v1/me (HTTP + token only)",
            Stat::of_durations(&me),
        )
        .note("permission, scope, lock, two event rows"),
    ])
}

/// One CDP call on an open WebSocket (on a flat session if given): its
/// result, or an error naming the method.
pub async fn cdp_call<S>(
    ws: &mut tokio_tungstenite::WebSocketStream<S>,
    id: u64,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> anyhow::Result<Value>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut call = json!({"id": id, "method": method, "params": params});
    if let Some(session) = session {
        call["sessionId"] = session.into();
    }
    ws.send(Message::text(call.to_string())).await?;
    let reply = async {
        loop {
            let message = ws.next().await.context("the CDP socket closed")??;
            if let Message::Text(text) = message {
                let reply: Value = serde_json::from_str(&text)?;
                if reply["id"] == id {
                    return Ok::<_, anyhow::Error>(reply);
                }
            }
        }
    };
    let mut reply = tokio::time::timeout(CALL, reply)
        .await
        .map_err(|_| anyhow::anyhow!("no reply to {method} within {CALL:?}"))??;
    if let Some(error) = reply.get("error") {
        bail!("{method} failed: {error}");
    }
    Ok(reply["result"].take())
}

/// Attaches to the first page target (flat sessions); its session id.
/// Uses call ids `first` and `first + 1`.
pub async fn page_session<S>(
    ws: &mut tokio_tungstenite::WebSocketStream<S>,
    first: u64,
) -> anyhow::Result<String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let targets = cdp_call(ws, first, None, "Target.getTargets", json!({})).await?;
    let page = targets["targetInfos"]
        .as_array()
        .and_then(|all| all.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["targetId"].as_str())
        .context("the browser has no page open")?
        .to_owned();
    let attached = cdp_call(
        ws,
        first + 1,
        None,
        "Target.attachToTarget",
        json!({"targetId": page, "flatten": true}),
    )
    .await?;
    attached["sessionId"]
        .as_str()
        .map(str::to_owned)
        .context("Target.attachToTarget gave no session")
}

/// What a CDP row calls: a browser-level method, or one on a page's session.
#[derive(Clone, Copy)]
enum CdpCall {
    BrowserVersion,
    Evaluate,
}

/// One timed CDP round trip of `call` (on `session` when it is a page's).
async fn cdp_round_trip<S>(
    ws: &mut tokio_tungstenite::WebSocketStream<S>,
    call: CdpCall,
    session: &str,
    id: u64,
) -> anyhow::Result<Duration>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let started = Instant::now();
    match call {
        CdpCall::BrowserVersion => {
            cdp_call(ws, id, None, "Browser.getVersion", json!({})).await?;
        }
        CdpCall::Evaluate => {
            let result = cdp_call(
                ws,
                id,
                Some(session),
                "Runtime.evaluate",
                json!({"expression": "1+1", "returnByValue": true}),
            )
            .await?;
            if result["result"]["value"] != 2 {
                bail!("Runtime.evaluate 1+1 gave {result}");
            }
        }
    }
    Ok(started.elapsed())
}

/// CDP round trips through the proxy and straight through the guest
/// channel: `Browser.getVersion` (browser level) and `Runtime.evaluate 1+1`
/// on the first page (a flat session, as Playwright and Puppeteer drive it).
async fn cdp(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Row>> {
    let url = format!("ws://{}/v1/workspaces/{id}/cdp", daemon.authority());
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", daemon.token).parse()?);
    let (mut proxied, _) =
        tokio_tungstenite::connect_async_with_config(request, None, true).await?;
    let socket = daemon.channel_socket(id);
    let mut direct = peers::devtools(&socket).await?;
    let ours_session = page_session(&mut proxied, 1).await?;
    let their_session = page_session(&mut direct, 1).await?;
    let mut rows = Vec::new();
    let mut next = 10;
    for (call, name) in [
        (
            CdpCall::BrowserVersion,
            "CDP round trip (Browser.getVersion)",
        ),
        (CdpCall::Evaluate, "CDP round trip (Runtime.evaluate 1+1)"),
    ] {
        say(&format!("{name}: through the proxy and straight, in turn"));
        // In turn, call by call, so that whatever else the machine does
        // falls on both alike; the first three of each are not timed.
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..3 + runs {
            let id = next + run as u64;
            let took = cdp_round_trip(&mut proxied, call, &ours_session, id).await?;
            let took_straight = cdp_round_trip(&mut direct, call, &their_session, id).await?;
            if run >= 3 {
                ours.push(took);
                theirs.push(took_straight);
            }
        }
        next += 3 + runs as u64;
        rows.push(
            Row::new(
                name,
                "ms",
                Stat::of_durations(&ours),
                "straight through the guest channel",
                Stat::of_durations(&theirs),
            )
            .note("through the gateway's CDP proxy and policy"),
        );
    }
    Ok(rows)
}

async fn exec(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Row> {
    let path = format!("/v1/workspaces/{id}/exec");
    let body = json!({"argv": ["true"]}).to_string();
    let socket = daemon.channel_socket(id);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let (status, out) = daemon.call(Method::POST, &path, Some(&body)).await?;
        if status != 200 {
            bail!("exec answered {status}: {out}");
        }
        ours.push(started.elapsed());
        let started = Instant::now();
        if peers::guest_exec(&socket, &["true"]).await? {
            theirs.push(started.elapsed());
        }
    }
    Ok(Row::new(
        "exec round trip (true)",
        "ms",
        Stat::of_durations(&ours),
        "straight through the guest channel",
        Stat::of_durations(&theirs),
    ))
}

async fn concurrent(daemon: &Daemon, count: usize, alone: Option<Stat>) -> anyhow::Result<Row> {
    let started = Instant::now();
    let results = futures_util::future::join_all((0..count).map(|_| create(daemon))).await;
    let wall = started.elapsed();
    let mut times = Vec::new();
    let mut failures = Vec::new();
    let mut made = Vec::new();
    for result in results {
        match result {
            Ok((took, ws)) => {
                times.push(took);
                made.push(ws);
            }
            Err(err) => failures.push(err.to_string()),
        }
    }
    // All of them idle at once: what one desktop costs at this density.
    settle(daemon).await;
    let uids: Vec<u32> = made
        .iter()
        .filter_map(|ws| ws["host_uid"].as_u64())
        .filter_map(|uid| u32::try_from(uid).ok())
        .flat_map(|uid| [uid, uid + 1])
        .collect();
    let pss = peers::pss_mib(&peers::of_uids(&uids)) / made.len().max(1) as f64;
    for ws in &made {
        delete(daemon, ws).await;
    }
    let mut note = format!(
        "{} failed, wall {:.1} s, idle PSS {pss:.0} MiB per workspace with {} running",
        failures.len(),
        wall.as_secs_f64(),
        made.len()
    );
    if daemon.shares_memory()
        && let Some(pages) = cubicle_runtime::limits::shared_memory::pages_saved()
    {
        note.push_str(&format!(
            " (same-page merging saves {:.0} MiB on the host)",
            pages as f64 * 4096.0 / 1048576.0
        ));
    }
    if let Some(first) = failures.first() {
        note.push_str(&format!(
            " (first: {})",
            first.chars().take(120).collect::<String>()
        ));
    }
    Ok(Row::new(
        &format!("{count} concurrent creates"),
        "ms",
        Stat::of_durations(&times),
        "one create alone",
        alone,
    )
    .note(note))
}

/// The `cubicle-vmm` beside this binary.
fn vmm_beside() -> Option<std::path::PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("cubicle-vmm")))
        .filter(|p| p.exists())
}

/// `cubicle-vmm bench-snapshot --json`, run beside this binary: a VM
/// restored from a snapshot against a cold boot of the same test guest,
/// one and ten at once, and their memory.
fn vmm_snapshots() -> Vec<Row> {
    let name = "VM restore from a snapshot to guest running";
    let Some(vmm) = vmm_beside() else {
        return vec![Row::skipped(name, "no cubicle-vmm beside this binary")];
    };
    let out = match std::process::Command::new(&vmm)
        .args(["bench-snapshot", "--runs", "10", "--forks", "10", "--json"])
        .output()
    {
        Ok(out) => out,
        Err(err) => return vec![Row::skipped(name, err)],
    };
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return vec![Row::skipped(name, why.lines().last().unwrap_or("failed"))];
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(v) = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    else {
        return vec![Row::skipped(name, "no JSON summary from bench-snapshot")];
    };
    let stat = |key: &str| {
        Some(Stat {
            p50: v[key]["p50"].as_f64()?,
            p95: v[key]["p95"].as_f64()?,
            n: v["runs"].as_u64()? as usize,
        })
    };
    let mib = |key: &str| v[key].as_f64().and_then(|b| Stat::of(vec![b / 1048576.0]));
    vec![
        Row::new(
            name,
            "ms",
            stat("restore_ms"),
            "cold boot of the same guest",
            stat("cold_boot_ms"),
        )
        .note("the VMM's snap test guest, 256 MiB (cubicle-vmm bench-snapshot)"),
        Row::new(
            "10 VM restores at once",
            "ms",
            stat("restores_at_once_ms"),
            "10 cold boots at once",
            stat("cold_boots_at_once_ms"),
        ),
        Row::new(
            "PSS of 10 restored VMs",
            "MiB",
            mib("restored_pss_bytes"),
            "10 cold-booted VMs",
            mib("cold_pss_bytes"),
        ),
    ]
}

/// `cubicle-vmm bench`, run beside this binary; its medians.
fn vmm() -> Vec<Row> {
    let name = "VMM start to first serial byte";
    let Some(vmm) = vmm_beside() else {
        return vec![Row::skipped(name, "no cubicle-vmm beside this binary")];
    };
    let out = match std::process::Command::new(&vmm)
        .args(["bench", "--runs", "10"])
        .output()
    {
        Ok(out) => out,
        Err(err) => return vec![Row::skipped(name, err)],
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return vec![Row::skipped(name, why.lines().last().unwrap_or("failed"))];
    }
    // `<who>: first serial byte min X ms  median Y ms | exit min X ms  median Y ms`
    let medians = |who: &str| -> Option<(f64, f64)> {
        let line = text.lines().find(|l| l.trim_start().starts_with(who))?;
        let numbers: Vec<f64> = line
            .split("median")
            .skip(1)
            .filter_map(|part| part.split_whitespace().next()?.parse().ok())
            .collect();
        Some((*numbers.first()?, *numbers.get(1)?))
    };
    let ours = medians("cubicle-vmm:");
    let qemu = medians("qemu microvm:");
    let stat = |v: Option<f64>| v.and_then(|v| Stat::of(vec![v]));
    vec![
        Row::new(
            name,
            "ms",
            stat(ours.map(|m| m.0)),
            "qemu -M microvm, same guest",
            stat(qemu.map(|m| m.0)),
        )
        .note("medians of 10 (cubicle-vmm bench)"),
        Row::new(
            "VMM start to guest exit",
            "ms",
            stat(ours.map(|m| m.1)),
            "qemu -M microvm, same guest",
            stat(qemu.map(|m| m.1)),
        ),
    ]
}
