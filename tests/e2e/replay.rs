//! The auditor's side on a real workspace: the session is recorded from the
//! gateway's framebuffer, exported as one bundle that `cubicle audit verify`
//! accepts offline (and refuses once a byte of video is flipped), every
//! segment plays (ffprobe), and the replay page in headless Chromium plays
//! it — also after the workspace is deleted — and seeks to a clicked event
//! whose frame matches a screenshot taken at that moment. And a `kill -9`
//! mid-recording leaves fragments that play and a chain that verifies.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::daemon::bin_dir;
use cubicle_tests::desk::{act, exec, terminal, token};
use reqwest::Method;
use serde_json::{Value, json};

/// Mean per-channel difference (0..1) below which the replayed frame
/// "resembles" the screenshot: H.264 at preset fast on a desktop is well
/// under 1%; a wrong frame (another moment, a blank) is far above 5%.
const FRAME_THRESHOLD: f64 = 0.05;

async fn create(daemon: &Daemon, agent: &str) -> String {
    let ws = cubicle_tests::desk::create(daemon, agent, r#"{"name":"replayed"}"#).await;
    ws["id"].as_str().unwrap().to_owned()
}

async fn recording(daemon: &Daemon, token: &str, id: &str) -> Value {
    let (status, view) = daemon
        .call_as(
            Some(token),
            Method::GET,
            &format!("/v1/workspaces/{id}/recordings"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    view
}

/// Waits until a sealed segment reaches past wall time `at`.
async fn sealed_past(daemon: &Daemon, token: &str, id: &str, at: i64) -> Value {
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    loop {
        let view = recording(daemon, token, id).await;
        let covered = view["segments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["end_ms"].as_i64().unwrap() > at);
        if covered {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "no segment sealed past {at}: {view}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn export(daemon: &Daemon, token: &str, id: &str, to: &Path) {
    let response = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/audit/export")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    std::fs::write(to, response.bytes().await.unwrap()).unwrap();
}

async fn public_key(daemon: &Daemon) -> String {
    let (status, key) = daemon
        .call(Method::GET, "/v1/audit/key", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{key}");
    key["public_key"].as_str().unwrap().to_owned()
}

/// `cubicle audit verify`: its exit success and what it printed.
fn verify(bundle: &Path, key: &str) -> (bool, String) {
    let out = Command::new(bin_dir().join("cubicle"))
        .args(["audit", "verify"])
        .arg(bundle)
        .args(["--key", key])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// ffprobe's duration of a video file, in seconds.
fn duration(video: &Path) -> f64 {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
        ])
        .arg(video)
        .output()
        .expect("ffprobe runs (scripts/setup installs ffmpeg)");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0.0)
}

/// Unpacks `bundle` and returns its segment files.
fn unpack_segments(bundle: &Path, into: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(into).unwrap();
    let status = Command::new("tar")
        .arg("xf")
        .arg(bundle)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success());
    let mut files: Vec<PathBuf> = std::fs::read_dir(into.join("segments"))
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_recorded_exported_verified_and_replayed_in_the_browser() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        data.path(),
        None,
        &["--segment-seconds", "8", "--checkpoint-seconds", "2"],
    )
    .unwrap();
    let agent = token(&daemon, "bot", "agent").await;
    let auditor = token(&daemon, "carol", "auditor").await;
    let id = create(&daemon, &agent.secret).await;
    let region = terminal(&daemon, &id).await;
    let (status, typed) = act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "type", "text": "echo the auditor will see this\n"}),
    )
    .await;
    assert_eq!(status, 200, "{typed}");
    // A still moment, then the screenshot the replay is compared with.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let shot = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/screenshot")))
        .bearer_auth(&agent.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), 200);
    let screenshot = data.path().join("screenshot.png");
    std::fs::write(&screenshot, shot.bytes().await.unwrap()).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Then the screen moves: the terminal scrolls.
    let (status, _) = act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "scroll", "coordinate": [region.x + 50, region.y + 50],
               "scroll_direction": "up", "scroll_amount": 5}),
    )
    .await;
    assert_eq!(status, 200);
    exec(
        &daemon,
        &id,
        "for i in $(seq 30); do echo line $i; sleep 0.05; done > /dev/null",
    )
    .await;

    let view = recording(&daemon, &auditor.secret, &id).await;
    let shot_event = view["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["kind"] == "screenshot" && e["outcome"] == "ok")
        .cloned()
        .expect("the screenshot is on the timeline");
    sealed_past(
        &daemon,
        &auditor.secret,
        &id,
        shot_event["at"].as_i64().unwrap(),
    )
    .await;
    // Deleted, the session stays replayable; its last segment is sealed.
    let (status, _) = daemon
        .call_as(
            Some(&agent.secret),
            Method::DELETE,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 204);

    let bundle = data.path().join("bundle.tar");
    export(&daemon, &auditor.secret, &id, &bundle).await;
    let key = public_key(&daemon).await;
    let (ok, said) = verify(&bundle, &key);
    assert!(ok, "{said}");
    assert!(said.contains("OK: the chain is intact"), "{said}");
    let segments = unpack_segments(&bundle, &data.path().join("unpacked"));
    assert!(segments.len() >= 2, "{segments:?}");
    for segment in &segments {
        let seconds = duration(segment);
        assert!(seconds > 0.0, "{} does not play", segment.display());
    }
    // A flipped byte of video: refused, naming the record that sealed it.
    let mut tar = std::fs::read(&bundle).unwrap();
    let at = tar.windows(4).position(|w| w == b"moof").unwrap() + 64;
    tar[at] ^= 0x01;
    let tampered = data.path().join("tampered.tar");
    std::fs::write(&tampered, tar).unwrap();
    let (ok, said) = verify(&tampered, &key);
    assert!(!ok, "a flipped byte went unnoticed: {said}");
    assert!(
        said.contains("does not match the SHA-256 sealed in record seq"),
        "{said}"
    );

    let config = json!({
        "base": daemon.base,
        "token": auditor.secret,
        "workspace": id,
        "event": shot_event["id"],
        "screenshot": screenshot,
    });
    let seen = cubicle_tests::browser::run("replay.mjs", &config, Duration::from_secs(120)).await;
    // `/replay?token=` signs in like `/?token=` and drops the token.
    let landed_on = seen["urlAfterLogin"].as_str().unwrap_or_default();
    assert!(
        landed_on.ends_with("/replay") && !landed_on.contains("token"),
        "{seen}"
    );
    assert_eq!(seen["listedState"], "deleted", "{seen}");
    // Every row of an operation names its target, its outcome row too.
    let rows = seen["rows"].as_array().unwrap();
    let says = |kind: &str, outcome: &str, needle: &str| {
        rows.iter().any(|r| {
            r["kind"] == kind
                && r["outcome"] == outcome
                && r["detail"].as_str().unwrap_or_default().contains(needle)
        })
    };
    for outcome in ["started", "ok"] {
        assert!(
            says("action", outcome, "scroll at ("),
            "no {outcome} action row names the scroll and where: {rows:?}"
        );
        assert!(
            says("exec", outcome, "for i in $(seq 30)"),
            "no {outcome} exec row names the command: {rows:?}"
        );
    }
    assert!(seen["duration"].as_f64().unwrap() > 0.0, "{seen}");
    assert_eq!(seen["badge"]["state"], "ok", "{seen}");
    // The page's HAR link answers the auditor with a HAR 1.2 document.
    assert_eq!(seen["har"]["status"], 200, "{seen}");
    assert_eq!(seen["har"]["version"], "1.2", "{seen}");
    let wanted = seen["eventVideoMs"].as_f64().unwrap() / 1000.0;
    let landed = seen["currentTime"].as_f64().unwrap();
    assert!(
        (landed - wanted).abs() < 1.0,
        "clicking the event seeked to {landed}s, not {wanted}s"
    );
    assert_eq!(seen["highlighted"], shot_event["id"].to_string(), "{seen}");
    let diff = seen["frameDiff"]["mean"].as_f64().unwrap();
    let blank = seen["frameDiff"]["blankMean"].as_f64().unwrap();
    assert!(
        diff < FRAME_THRESHOLD,
        "the replayed frame differs from the screenshot by {diff:.3} (threshold {FRAME_THRESHOLD})"
    );
    assert!(
        blank > FRAME_THRESHOLD,
        "the control: a blank frame must not pass ({blank:.3})"
    );
    eprintln!(
        "replay: frame difference {diff:.4} (a blank frame: {blank:.3}), seek error {:.3}s",
        (landed - wanted).abs()
    );
    let kinds = seen["visibleAfterFilter"].as_array().unwrap();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| k == "screenshot"),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_leaves_playable_fragments_and_a_chain_that_verifies() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &["--checkpoint-seconds", "2"]).unwrap();
    let admin = daemon.token.clone();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 201, "{ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    terminal(&daemon, &id).await;
    exec(
        &daemon,
        &id,
        "setsid -f sh -c 'for i in $(seq 100); do xdotool type --delay 20 \"line $i \"; done' \
         >/dev/null 2>&1 </dev/null",
    )
    .await;
    // Several keyframe intervals (2 s) of a one-minute segment, then kill -9.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let dir = data.path().join("recordings").join(&id);
    let open: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(open.len(), 1, "one open segment: {open:?}");
    daemon.kill9();
    let seconds = duration(&open[0]);
    assert!(
        seconds > 0.0,
        "the finished fragments of a killed recording must play"
    );
    eprintln!("kill -9: {:.1}s of the open segment play", seconds);

    // The next start seals what the dead daemon left open, as partial.
    let daemon = Daemon::start(data.path(), Some(&admin), &[]).unwrap();
    let view = recording(&daemon, &admin, &id).await;
    let first = &view["segments"][0];
    assert_eq!(first["partial"], true, "{view}");
    assert_eq!(
        first["file"],
        open[0].file_name().unwrap().to_str().unwrap(),
        "{view}"
    );
    let bundle = data.path().join("after-kill.tar");
    export(&daemon, &admin, &id, &bundle).await;
    let (ok, said) = verify(&bundle, &public_key(&daemon).await);
    assert!(ok, "the chain must verify after a kill -9: {said}");
    let segments = unpack_segments(&bundle, &data.path().join("after-kill"));
    assert!(duration(&segments[0]) > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_created_with_record_false_keeps_no_video() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--segment-seconds", "2"]).unwrap();
    let (status, ws) = daemon
        .call(Method::POST, "/v1/workspaces", Some(r#"{"record": false}"#))
        .await
        .unwrap();
    assert_eq!(status, 201, "{ws}");
    let id = ws["id"].as_str().unwrap().to_owned();
    exec(
        &daemon,
        &id,
        "setsid -f xfce4-terminal >/dev/null 2>&1 </dev/null",
    )
    .await;
    // Longer than a segment: one would have been sealed by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let view = recording(&daemon, &daemon.token, &id).await;
    assert_eq!(view["segments"], json!([]), "{view}");
    let videos: Vec<_> = std::fs::read_dir(data.path().join("recordings").join(&id))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "mp4"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    assert!(videos.is_empty(), "{videos:?}");
    // Its events are sealed all the same.
    let stop = view["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "recording.stop");
    if let Some(stop) = stop {
        assert_eq!(stop["detail"]["discarded"], true, "{view}");
    }
    let bundle = data.path().join("bundle.tar");
    export(&daemon, &daemon.token, &id, &bundle).await;
    let (ok, said) = verify(&bundle, &public_key(&daemon).await);
    assert!(ok, "{said}");
}
