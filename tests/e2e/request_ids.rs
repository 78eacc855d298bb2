//! A request's `x-request-id` (README "Every operation is an event"): the
//! client's own id comes back on the response, on the request's events and
//! on the daemon's log lines written while it ran; a request without one
//! gets one made up, on all three alike.

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::Value;

/// Creates a workspace sending `id` as `x-request-id` (or none); the id the
/// response carries and the workspace's id.
async fn create(daemon: &Daemon, id: Option<&str>) -> (String, String) {
    let mut request = reqwest::Client::new()
        .post(daemon.url("/v1/workspaces"))
        .bearer_auth(&daemon.token)
        .header("content-type", "application/json")
        .body("{}");
    if let Some(id) = id {
        request = request.header("x-request-id", id);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 201);
    let echoed = response
        .headers()
        .get("x-request-id")
        .expect("the response carries x-request-id")
        .to_str()
        .unwrap()
        .to_owned();
    let ws: Value = response.json().await.unwrap();
    (echoed, ws["id"].as_str().unwrap().to_owned())
}

/// The daemon's log lines that carry request id `id`.
fn log_lines(daemon: &Daemon, id: &str) -> Vec<String> {
    let log = std::fs::read_to_string(daemon.data_dir.with_extension("daemon.log")).unwrap();
    log.lines()
        .filter(|l| l.contains(&format!("request{{id=\"{id}\"")))
        .map(str::to_owned)
        .collect()
}

/// The request ids on workspace `ws`'s `workspace.create` rows.
async fn event_ids(daemon: &Daemon, ws: &str) -> Vec<String> {
    let (status, events) = daemon
        .call(Method::GET, &format!("/v1/events?workspace={ws}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{events}");
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "workspace.create")
        .filter_map(|e| e["request_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_is_on_the_response_the_events_and_the_log_lines() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();

    let mine = format!("e2e-log-{}", std::process::id());
    let (echoed, ws) = create(&daemon, Some(&mine)).await;
    assert_eq!(echoed, mine, "the client's id comes back");
    let ids = event_ids(&daemon, &ws).await;
    assert!(
        !ids.is_empty() && ids.iter().all(|i| *i == mine),
        "its events carry {mine}: {ids:?}"
    );
    let lines = log_lines(&daemon, &mine);
    assert!(
        !lines.is_empty(),
        "no log line carries request id {mine}; see {}",
        daemon.data_dir.with_extension("daemon.log").display()
    );

    let (made_up, other) = create(&daemon, None).await;
    assert_ne!(made_up, mine);
    assert!(!made_up.is_empty());
    let ids = event_ids(&daemon, &other).await;
    assert!(
        !ids.is_empty() && ids.iter().all(|i| *i == made_up),
        "its events carry the made-up {made_up}: {ids:?}"
    );
    let made_up_lines = log_lines(&daemon, &made_up);
    assert!(
        !made_up_lines.is_empty(),
        "no log line carries the made-up request id {made_up}"
    );
    eprintln!(
        "request ids: {} log lines carry {mine}, e.g. {:?}; {} the made-up {made_up}",
        lines.len(),
        lines[0],
        made_up_lines.len()
    );
}
