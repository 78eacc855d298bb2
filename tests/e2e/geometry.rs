//! A workspace made at a size other than the default (1280x800, which the
//! other tests see) has that size everywhere a user looks: the live view's
//! RFB frame, the screenshot, and X itself inside the workspace.

use std::time::Duration;

use cubicle_tests::{Daemon, rfb};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_made_at_1024x768_is_that_size_everywhere() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon
        .create_workspace(r#"{"geometry":{"width":1024,"height":768}}"#)
        .await;
    let id = ws["id"].as_str().unwrap();
    assert_eq!(
        ws["geometry"],
        json!({"width": 1024, "height": 768}),
        "{ws}"
    );

    // It came up at 1280x800 once in a loaded full run and never since:
    // should it again, the guest's own log says what Xvnc was started with.
    let guest_log = || {
        let log =
            std::fs::read_to_string(daemon.workspace_dir(id).join("guest.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        format!(
            "guest.log (last lines, newest first):\n{}\ndaemon log: {}",
            tail.join("\n"),
            data.path().with_extension("daemon.log").display()
        )
    };
    let url = daemon.ws_url(&format!("/v1/workspaces/{id}/vnc"));
    let frame = rfb::first_full_frame(&url, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        (frame.width, frame.height),
        (1024, 768),
        "RFB frame; {}",
        guest_log()
    );

    let response = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/screenshot")))
        .bearer_auth(&daemon.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let png = image::load_from_memory(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(
        (png.width(), png.height()),
        (1024, 768),
        "screenshot; {}",
        guest_log()
    );

    let body = json!({"command": "xdotool getdisplaygeometry; xdpyinfo | grep dimensions"});
    let (status, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body.to_string()),
        )
        .await
        .unwrap();
    assert_eq!((status, out["exit_code"].as_i64()), (200, Some(0)), "{out}");
    let stdout = out["stdout"].as_str().unwrap();
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("1024 768"),
        "xdotool: {stdout}; {}",
        guest_log()
    );
    let dimensions = lines.next().unwrap_or_default();
    assert!(
        dimensions.contains(" 1024x768 pixels"),
        "xdpyinfo: {dimensions}"
    );
    // Pointer input is bounded by it: the far corner is the last pixel.
    let corner =
        json!({"command": "xdotool mousemove 5000 5000 getmouselocation --shell | head -2"});
    let (_, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&corner.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(out["stdout"], "X=1023\nY=767\n", "{out}");
}
