//! The Unix-socket API end to end: configure, start, pause, resume,
//! metrics, stop; bad requests get 4xx with a JSON error.

mod common;

use std::process::Stdio;

use common::*;

#[test]
fn configure_start_pause_resume_metrics_stop() {
    require_kvm!();
    let dir = Scratch::new("api");
    let socket = dir.path("api.sock");
    let log = dir.path("serial.log");
    let child = vmm()
        .args(["api", "--socket"])
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let child = KillOnDrop(Some(child));
    wait_for_path(&socket);

    let (status, body) = request(&socket, "PUT", "/vm/start", "");
    assert_eq!(status, 409, "{body}");
    let (status, body) = request(
        &socket,
        "PUT",
        "/vm/config",
        r#"{"kernel":"/nonexistent","memory_mib":64}"#,
    );
    assert_eq!(status, 400);
    assert!(
        body.contains(r#""code":"bad_config""#) && body.contains("kernel /nonexistent"),
        "{body}"
    );
    let (status, _) = request(&socket, "GET", "/nowhere", "");
    assert_eq!(status, 404);

    let config = serde_json::json!({
        "kernel": guest("hello"),
        "memory_mib": 128,
        "cmdline": "console=ttyS0 cubicle.idle",
        "serial_log": log,
    });
    assert_eq!(
        request(&socket, "PUT", "/vm/config", &config.to_string()).0,
        204
    );
    assert_eq!(request(&socket, "PUT", "/vm/start", "").0, 204);
    wait_for_text(&log, "hello guest: ready");
    assert_eq!(request(&socket, "PUT", "/vm/pause", "").0, 204);
    assert_eq!(
        request(&socket, "GET", "/vm", "").1,
        r#"{"state":"paused"}"#
    );
    assert_eq!(
        request(&socket, "PUT", "/vm/pause", "").0,
        409,
        "pausing twice is a conflict"
    );
    assert_eq!(request(&socket, "PUT", "/vm/resume", "").0, 204);

    let (status, body) = request(&socket, "GET", "/vm/metrics", "");
    assert_eq!(status, 200, "{body}");
    let metrics: serde_json::Value = serde_json::from_str(&body).expect("metrics JSON");
    assert!(
        metrics["exits"]["io_out"].as_u64().expect("io_out count") > 0,
        "{body}"
    );
    assert_eq!(metrics["memory"]["guest_bytes"], 128u64 << 20);
    assert!(
        metrics["memory"]["overhead_rss_bytes"]
            .as_u64()
            .expect("overhead")
            > 0
    );

    assert_eq!(request(&socket, "PUT", "/vm/stop", "").0, 204);
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!socket.exists(), "API socket removed at exit");
}

#[test]
fn stop_while_paused_and_the_run_flag_api_socket() {
    require_kvm!();
    let dir = Scratch::new("api-paused");
    let socket = dir.path("vmm.sock");
    let child = vmm()
        .args([
            "run",
            "--cmdline",
            "console=ttyS0 cubicle.idle",
            "--vcpus",
            "2",
            "--kernel",
        ])
        .arg(guest("hello"))
        .arg("--api-socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let child = KillOnDrop(Some(child));
    wait_for_path(&socket);
    assert_eq!(
        request(&socket, "GET", "/vm", "").1,
        r#"{"state":"running"}"#
    );
    assert_eq!(
        request(&socket, "PUT", "/vm/config", "{}").0,
        409,
        "configuration is fixed once running"
    );
    assert_eq!(request(&socket, "PUT", "/vm/pause", "").0, 204);
    assert_eq!(request(&socket, "DELETE", "/vm/pause", "").0, 405);
    assert_eq!(request(&socket, "PUT", "/vm/stop", "").0, 204);
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!socket.exists());
}
