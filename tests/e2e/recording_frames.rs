//! How a recording samples the screen, read back from the video itself
//! (ffprobe on the sealed segments, as an auditor would get them): frames
//! only when the screen changed, never more than `--record-fps` a second
//! however fast it changes, a keyframe at least every 2 s, and every frame
//! the sampler took is either in the video or counted as dropped in
//! `recording.stop`. And `--no-record` records nothing at all.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::desk::exec;
use reqwest::Method;
use serde_json::Value;

/// The cap asked for: well below how fast the screen changes (50 times a
/// second) and below the default (10), so a cap ignored shows.
const FPS: u32 = 4;

/// The keyframe interval the README promises.
const KEYFRAME_MS: f64 = 2000.0;

/// One video frame: when it was on screen (Unix ms) and whether it is a
/// keyframe.
#[derive(Debug, Clone, Copy)]
struct Shot {
    at_ms: f64,
    key: bool,
}

/// The frames of one segment file, placed on the wall clock by the
/// segment's `start_ms` (the video's time 0). The two frames the encoder
/// adds at the very end (the last image held until the segment's end, 1 ms
/// apart) are left out: the sampler did not take them.
fn frames(video: &Path, start_ms: i64) -> Vec<Shot> {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "frame=pts_time,key_frame",
            "-of",
            "json",
        ])
        .arg(video)
        .output()
        .expect("ffprobe runs (scripts/setup installs ffmpeg)");
    assert!(out.status.success(), "ffprobe: {out:?}");
    let probed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut shots: Vec<Shot> = probed["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| Shot {
            at_ms: start_ms as f64
                + 1000.0 * f["pts_time"].as_str().unwrap().parse::<f64>().unwrap(),
            key: f["key_frame"] == 1,
        })
        .collect();
    let n = shots.len();
    if n >= 3 && shots[n - 1].at_ms - shots[n - 2].at_ms < 1.5 {
        shots.truncate(n - 2);
    }
    shots
}

/// The frames with `from <= at < to`.
fn within(shots: &[Shot], from: f64, to: f64) -> Vec<Shot> {
    shots
        .iter()
        .copied()
        .filter(|s| s.at_ms >= from && s.at_ms < to)
        .collect()
}

/// The most frames in any one second.
fn busiest_second(shots: &[Shot]) -> usize {
    shots
        .iter()
        .map(|a| {
            shots
                .iter()
                .filter(|b| b.at_ms >= a.at_ms && b.at_ms < a.at_ms + 1000.0)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The screen's pixels, as the gateway's RFB session has them.
async fn screen(daemon: &Daemon, id: &str) -> Vec<u8> {
    let response = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/screenshot")))
        .bearer_auth(&daemon.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

/// The recording view once `recording.stop` is in it.
async fn stopped_recording(daemon: &Daemon, id: &str) -> Value {
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    loop {
        let (status, view) = daemon
            .call(
                Method::GET,
                &format!("/v1/workspaces/{id}/recordings"),
                None,
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "{view}");
        let stopped = view["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "recording.stop");
        if stopped {
            return view;
        }
        assert!(Instant::now() < deadline, "no recording.stop: {view}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_come_on_change_at_most_record_fps_with_a_keyframe_every_two_seconds() {
    let data = tempfile::tempdir().unwrap();
    let fps = FPS.to_string();
    let daemon = Daemon::start(
        data.path(),
        None,
        &["--record-fps", &fps, "--segment-seconds", "600"],
    )
    .unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();

    // A still stretch: 10 s in which every screenshot (one each 500 ms) is
    // the first one. On a loaded host the desktop may still be drawing
    // seconds after the create, or draw late; a stretch with any change in
    // it is no still stretch, and the next one is tried. It starts a
    // sampling tick after the first screenshot, so a change made just
    // before that shot, which the recorder takes at its next tick, is not
    // counted in it.
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(120));
    let (still_from, still_to) = 'still: loop {
        assert!(
            Instant::now() < deadline,
            "the desktop never stayed still for 10 s"
        );
        let first = screen(&daemon, &id).await;
        let from = now_ms() + f64::from(1000 / FPS);
        while now_ms() < from + 10_000.0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if screen(&daemon, &id).await != first {
                continue 'still;
            }
        }
        break (from, now_ms());
    };

    // Then a terminal prints 50 lines a second for 8 s, and stays.
    exec(
        &daemon,
        &id,
        "setsid -f xfce4-terminal --disable-server --geometry=80x20+60+60 -x sh -c \
         'date +%s%3N > /tmp/busy.from; end=$(($(date +%s) + 8)); \
          while [ $(date +%s) -lt $end ]; do date +%N; sleep 0.02; done; \
          date +%s%3N > /tmp/busy.to; exec sleep 1000' >/dev/null 2>&1 </dev/null",
    )
    .await;
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(40));
    let busy_to = loop {
        let to = exec(&daemon, &id, "cat /tmp/busy.to 2>/dev/null").await;
        if let Ok(to) = to.trim().parse::<f64>() {
            break to;
        }
        assert!(Instant::now() < deadline, "the busy terminal never ended");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let busy_from: f64 = exec(&daemon, &id, "cat /tmp/busy.from")
        .await
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Stopping seals the segment and writes `recording.stop`.
    let (status, stopped) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/stop"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{stopped}");
    let view = stopped_recording(&daemon, &id).await;
    let stop = view["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "recording.stop")
        .unwrap()["detail"]
        .clone();

    let mut shots = Vec::new();
    for segment in view["segments"].as_array().unwrap() {
        let bytes = reqwest::Client::new()
            .get(daemon.url(segment["url"].as_str().unwrap()))
            .bearer_auth(&daemon.token)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let file = data.path().join(segment["file"].as_str().unwrap());
        std::fs::write(&file, bytes).unwrap();
        shots.extend(frames(&file, segment["start_ms"].as_i64().unwrap()));
    }
    assert!(!shots.is_empty(), "no frames recorded: {view}");

    let still = within(&shots, still_from, still_to);
    // The busy stretch, less its first moments (the terminal opening).
    let busy = within(&shots, busy_from + 500.0, busy_to);
    let busy_seconds = (busy_to - busy_from - 500.0) / 1000.0;
    let keys: Vec<f64> = shots.iter().filter(|s| s.key).map(|s| s.at_ms).collect();
    let key_gaps: Vec<f64> = keys.windows(2).map(|w| w[1] - w[0]).collect();
    let still_gaps: Vec<f64> = still.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    eprintln!(
        "recording: {} frames; still {:.0}s: {} frames, gaps {still_gaps:.0?}; \
         busy {busy_seconds:.1}s: {} frames ({:.2}/s, at most {} in a second, {} keyframes); \
         keyframe gaps {key_gaps:.0?}; recording.stop {stop}",
        shots.len(),
        (still_to - still_from) / 1000.0,
        still.len(),
        busy.len(),
        busy.len() as f64 / busy_seconds,
        busiest_second(&busy),
        busy.iter().filter(|s| s.key).count(),
    );

    // Still screen: only the keyframe repeats, about one per 2 s.
    assert!(
        (4..=6).contains(&still.len()),
        "a still screen for 10 s gave {} frames, not the 2-second repeats alone",
        still.len()
    );
    assert!(
        still_gaps.iter().all(|g| *g >= KEYFRAME_MS - 100.0),
        "frames taken while nothing changed: gaps {still_gaps:?}"
    );
    // Changing 50 times a second: frames at the cap, never above it.
    let cap = f64::from(FPS);
    assert!(
        busy.len() as f64 >= cap * busy_seconds * 0.5,
        "the changing screen was hardly recorded: {} frames in {busy_seconds:.1}s",
        busy.len()
    );
    assert!(
        busy.len() as f64 <= cap * busy_seconds * 1.1 + 1.0,
        "{} frames in {busy_seconds:.1}s is above --record-fps {FPS}",
        busy.len()
    );
    assert!(
        busiest_second(&busy) <= FPS as usize + 1,
        "{} frames in one second, above --record-fps {FPS}",
        busiest_second(&busy)
    );
    // A keyframe at least every 2 s (one sampling tick of slack, and some
    // for a loaded host), and not every frame a keyframe.
    assert!(shots[0].key, "the video does not start on a keyframe");
    let longest = 1000.0 / cap + 400.0 + KEYFRAME_MS;
    assert!(
        key_gaps.iter().all(|g| *g <= longest),
        "keyframes further apart than 2 s: {key_gaps:?}"
    );
    let busy_keys = busy.iter().filter(|s| s.key).count();
    assert!(
        busy_keys * 2 < busy.len(),
        "{busy_keys} of {} frames are keyframes",
        busy.len()
    );

    // Every frame taken is in the video or counted as dropped.
    let sampled = stop["sampled"].as_u64().expect("recording.stop: sampled");
    let dropped = stop["dropped_frames"]
        .as_u64()
        .expect("recording.stop counts dropped frames");
    assert_eq!(
        shots.len() as u64 + dropped,
        sampled,
        "frames in the video ({}) + dropped ({dropped}) != sampled ({sampled}): {stop}",
        shots.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_record_keeps_no_video_of_any_workspace() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        data.path(),
        None,
        &["--no-record", "--segment-seconds", "2"],
    )
    .unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    exec(
        &daemon,
        &id,
        "setsid -f xfce4-terminal --disable-server -x sh -c \
         'for i in $(seq 100); do date +%N; sleep 0.05; done; exec sleep 1000' \
         >/dev/null 2>&1 </dev/null",
    )
    .await;
    // Several segments' worth of a changing screen.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (status, stopped) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/stop"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{stopped}");

    let (status, view) = daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{id}/recordings"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["segments"], serde_json::json!([]), "{view}");
    let kinds: Vec<&str> = view["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| k.starts_with("recording."))
        .collect();
    assert!(
        kinds.is_empty(),
        "recording events with --no-record: {kinds:?}"
    );
    let videos: Vec<_> = walk(&data.path().join("recordings"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "mp4"))
        .collect();
    assert!(
        videos.is_empty(),
        "video files with --no-record: {videos:?}"
    );
    eprintln!("--no-record: no segment, no recording event, no file");
}

/// Every file under `dir` (none if it does not exist).
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}
