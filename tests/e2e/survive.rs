//! Workspaces outlive the daemon: each runs under a `cubicle-shim` of its
//! own. A daemon killed with `kill -9`, or stopped with SIGTERM and started
//! again (an upgrade), finds both of its workspaces running: the same
//! desktops (a process started before is still there), the live view
//! connects again, and no event is lost. A killed shim takes its workspace
//! with it, and the daemon says so.

use std::time::{Duration, Instant};

use cubicle_tests::{Daemon, desk, procs, rfb};
use reqwest::Method;
use serde_json::{Value, json};

fn host_uid(ws: &Value) -> u32 {
    ws["host_uid"]
        .as_u64()
        .and_then(|u| u32::try_from(u).ok())
        .expect("the workspace view has its host uid")
}

async fn exec(daemon: &Daemon, id: &str, command: &str) -> String {
    desk::exec(daemon, id, command).await
}

async fn events(daemon: &Daemon) -> Vec<Value> {
    desk::events(daemon, "").await
}

/// One workspace as the test follows it: a process its user started, and
/// the desktop's top process (bubblewrap, the shim's child).
struct Followed {
    id: String,
    uid: u32,
    sleeper: String,
    top: i32,
}

/// The jail's top process: bubblewrap, run as the services uid.
fn top_process(uid: u32) -> i32 {
    let services = procs::workspace_uids(uid)[1];
    procs::of_uid(services)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"bwrap\0"))
        })
        .expect("the workspace's bubblewrap runs")
}

fn parent_of(pid: i32) -> i32 {
    cubicle_runtime::proc_scan::parent_pid(pid).expect("the process has a parent")
}

async fn follow(daemon: &Daemon) -> Followed {
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let uid = host_uid(&ws);
    let sleeper = exec(
        daemon,
        &id,
        "setsid sleep 900 >/dev/null 2>&1 </dev/null & echo $!",
    )
    .await
    .trim()
    .to_owned();
    let top = top_process(uid);
    Followed {
        id,
        uid,
        sleeper,
        top,
    }
}

/// After a restart: running, the same top process, the process started
/// before still there, and the screen and the browser answer.
async fn same_desktop(daemon: &Daemon, ws: &Followed) {
    let (status, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{}", ws.id), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "running", "{view}");
    assert_eq!(top_process(ws.uid), ws.top, "the desktop never restarted");
    let alive = exec(
        daemon,
        &ws.id,
        &format!("kill -0 {} && echo alive", ws.sleeper),
    )
    .await;
    assert_eq!(alive, "alive\n", "the process started before the restart");
    let (status, shot) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{}/actions", ws.id),
            Some(r#"{"action": "cursor_position"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "an agent's action after the restart: {shot}");
}

/// Event ids of the log, and no crash or stop of `ids` among the events
/// after `after`.
fn no_end_of(events: &[Value], ids: &[&str], after: i64) {
    for event in events.iter().filter(|e| e["id"].as_i64() > Some(after)) {
        let kind = event["kind"].as_str().unwrap_or_default();
        let workspace = event["workspace_id"].as_str().unwrap_or_default();
        assert!(
            !(ids.contains(&workspace) && matches!(kind, "workspace.crashed" | "workspace.stop")),
            "the restart ended a workspace: {event}"
        );
    }
}

/// The field names `no_end_of` reads are the log's: a workspace's own
/// create event is found by them.
fn names_hold(events: &[Value], id: &str) {
    assert!(
        events
            .iter()
            .any(|e| e["workspace_id"] == id && e["kind"] == "workspace.create"),
        "no workspace.create event with workspace_id {id}"
    );
}

fn ids_of(events: &[Value]) -> Vec<i64> {
    events.iter().filter_map(|e| e["id"].as_i64()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_outlive_a_killed_and_an_upgraded_daemon() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let token = daemon.token.clone();
    let a = follow(&daemon).await;
    let b = follow(&daemon).await;
    // An operator watching a.
    let view = daemon.ws_url(&format!("/v1/workspaces/{}/vnc", a.id));
    rfb::first_full_frame(&view, Duration::from_secs(60))
        .await
        .expect("the live view shows the desktop");
    let before = events(&daemon).await;
    names_hold(&before, &a.id);
    let last_before = *ids_of(&before).last().unwrap();

    // A crash.
    daemon.kill9();
    for ws in [&a, &b] {
        assert!(
            cubicle_runtime::proc_scan::is_alive(ws.top),
            "{} died with the daemon",
            ws.id
        );
    }
    let restarted = Instant::now();
    let mut daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    eprintln!(
        "kill -9: the next daemon listened with 2 workspaces re-attached after {} ms",
        restarted.elapsed().as_millis()
    );
    for ws in [&a, &b] {
        same_desktop(&daemon, ws).await;
    }
    let view = daemon.ws_url(&format!("/v1/workspaces/{}/vnc", a.id));
    rfb::first_full_frame(&view, Duration::from_secs(60))
        .await
        .expect("the live view connects again");
    let after_kill = events(&daemon).await;
    let ids = ids_of(&after_kill);
    for id in ids_of(&before) {
        assert!(ids.contains(&id), "event {id} was lost in the crash");
    }
    no_end_of(&after_kill, &[&a.id, &b.id], last_before);

    // An upgrade: SIGTERM, then the (new) binary starts on the same data.
    let last_before = *ids.last().unwrap();
    daemon.terminate();
    let restarted = Instant::now();
    let daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    eprintln!(
        "SIGTERM: the next daemon listened with 2 workspaces re-attached after {} ms",
        restarted.elapsed().as_millis()
    );
    for ws in [&a, &b] {
        same_desktop(&daemon, ws).await;
        // The shim is the same one too: no new process holds the desktop.
        assert_eq!(
            std::fs::read_to_string(format!("/proc/{}/comm", parent_of(ws.top)))
                .unwrap()
                .trim(),
            "cubicle-shim"
        );
    }
    let after_upgrade = events(&daemon).await;
    let ids = ids_of(&after_upgrade);
    for id in ids_of(&after_kill) {
        assert!(ids.contains(&id), "event {id} was lost in the upgrade");
    }
    no_end_of(&after_upgrade, &[&a.id, &b.id], last_before);

    // Stop and delete still end everything.
    let (status, _) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{}/stop", a.id), None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let left = procs::wait_workspace_gone(a.uid, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "stopped workspace left {left:?}");
    assert!(
        !cubicle_runtime::proc_scan::is_alive(parent_of_or_none(a.top)),
        "its shim went with it"
    );
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/workspaces/{}", b.id), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    let left = procs::wait_workspace_gone(b.uid, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "deleted workspace left {left:?}");
}

/// The parent of a process that may be gone (then pid 0, never alive).
fn parent_of_or_none(pid: i32) -> i32 {
    cubicle_runtime::proc_scan::parent_pid(pid).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shim_ends_its_workspace_and_the_daemon_says_so() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = follow(&daemon).await;
    let shim = parent_of(ws.top);
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{shim}/comm"))
            .unwrap()
            .trim(),
        "cubicle-shim"
    );
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &shim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(30));
    let mut crashed = None;
    while Instant::now() < deadline && crashed.is_none() {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, log) = daemon
            .call(
                Method::GET,
                &format!("/v1/events?workspace={}", ws.id),
                None,
            )
            .await
            .unwrap();
        crashed = log["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "workspace.crashed")
            .cloned();
    }
    let crashed = crashed.expect("a workspace.crashed event");
    let reason = crashed["detail"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("its shim (pid {shim})")),
        "{reason}"
    );
    assert!(reason.contains("killed"), "{reason}");
    let (_, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{}", ws.id), None)
        .await
        .unwrap();
    assert_eq!(view["state"], "stopped", "{view}");
    assert!(view["error"].as_str().unwrap().contains("shim"), "{view}");
    let left = procs::wait_workspace_gone(ws.uid, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "the workspace outlived its shim: {left:?}");
    // And it starts again, under a new shim.
    let (status, view) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{}/start", ws.id),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    assert_ne!(parent_of(top_process(ws.uid)), shim);
}

/// The workspace's guest agent (`cubicle-guest`, run as its services uid).
fn guest_agent(uid: u32) -> i32 {
    let services = procs::workspace_uids(uid)[1];
    procs::of_uid(services)
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "cubicle-guest")
        })
        .expect("the workspace's guest agent runs")
}

fn signal(pid: i32, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

/// A guest that does not answer when the daemon comes back (a loaded
/// machine) is followed, not ended: once it answers, it is the same desktop.
/// One that stays silent past the ready timeout is ended, and the daemon
/// says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_guest_after_a_restart_is_waited_for_then_ended() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let token = daemon.token.clone();
    let ws = follow(&daemon).await;
    let guest = guest_agent(ws.uid);

    // Silent across the restart, answering again a little later.
    signal(guest, "STOP");
    daemon.kill9();
    drop(daemon);
    let mut daemon = Daemon::start(data.path(), Some(&token), &["--ready-timeout", "120"]).unwrap();
    let (_, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{}", ws.id), None)
        .await
        .unwrap();
    assert_eq!(view["state"], "running", "a silent guest was ended: {view}");
    signal(guest, "CONT");
    same_desktop(&daemon, &ws).await;

    // Silent for good.
    signal(guest, "STOP");
    daemon.kill9();
    drop(daemon);
    let daemon = Daemon::start(data.path(), Some(&token), &["--ready-timeout", "3"]).unwrap();
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    let mut crashed = None;
    while Instant::now() < deadline && crashed.is_none() {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, log) = daemon
            .call(
                Method::GET,
                &format!("/v1/events?workspace={}", ws.id),
                None,
            )
            .await
            .unwrap();
        crashed = log["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "workspace.crashed")
            .cloned();
    }
    let crashed = crashed.expect("a workspace.crashed event");
    let reason = crashed["detail"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("did not answer after the daemon restarted"),
        "{reason}"
    );
    let (_, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{}", ws.id), None)
        .await
        .unwrap();
    assert_eq!(view["state"], "stopped", "{view}");
    let left = procs::wait_workspace_gone(ws.uid, Duration::from_secs(30)).await;
    assert!(
        left.is_empty(),
        "the silent workspace was left running: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_operation_outlives_a_restart_and_runs_once_approved() {
    let desk::UnderPolicy {
        mut daemon,
        id,
        agent,
        operator,
        args,
        data,
        policies: _policies,
    } = desk::under_policy("held", desk::HELD_FILES).await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admin = daemon.token.clone();
    let exec = format!("/v1/workspaces/{id}/exec");
    let touch = json!({ "command": "touch /home/user/held-across" }).to_string();
    let (status, held) = daemon
        .call_as(Some(&agent.secret), Method::POST, &exec, Some(&touch))
        .await
        .unwrap();
    assert_eq!(status, 202, "{held}");
    let approval = held["approval"]["id"].as_str().unwrap().to_owned();
    let record = format!("/v1/approvals/{approval}");
    // Its screenshot is taken in the background: wait for it.
    let mut before = Value::Null;
    for _ in 0..40 {
        let (_, got) = daemon
            .call_as(Some(&operator.secret), Method::GET, &record, None)
            .await
            .unwrap();
        before = got;
        if before["has_screenshot"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(before["has_screenshot"], true, "{before}");

    daemon.terminate();
    let daemon = Daemon::start(data.path(), Some(&admin), &args).unwrap();
    let (status, after) = daemon
        .call_as(Some(&operator.secret), Method::GET, &record, None)
        .await
        .unwrap();
    assert_eq!(status, 200, "the approval outlived the restart: {after}");
    assert_eq!(after["state"], "pending", "{after}");
    assert_eq!(after["sha256"], before["sha256"]);
    assert_eq!(after["params"], before["params"]);
    let shot = reqwest::Client::new()
        .get(daemon.url(&format!("{record}/screenshot")))
        .bearer_auth(&operator.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), 200);
    let png = shot.bytes().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "the screenshot came back too");
    assert!(
        !desk::exists(&daemon, &id, "held-across").await,
        "it ran while held"
    );

    let (status, decided) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("{record}/approve"),
            Some(r#"{"reason": "ok after the restart"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{decided}");
    let (status, ran) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("{exec}?approval={approval}"),
            Some(&touch),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "the approved call runs: {ran}");
    assert!(desk::exists(&daemon, &id, "held-across").await);
    // Once.
    let (status, again) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("{exec}?approval={approval}"),
            Some(&touch),
        )
        .await
        .unwrap();
    assert_eq!(status, 403, "an approval runs its operation once: {again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_take_over_holds_through_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let admin = daemon.token.clone();
    let agent = desk::token(&daemon, "bot", "agent").await;
    let operator = desk::token(&daemon, "alice", "operator").await;
    let ws = desk::create(&daemon, &agent.secret, "{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let click = json!({"action": "mouse_move", "coordinate": [10, 10]});
    let (status, _) = desk::act(&daemon, &agent.secret, &id, click.clone()).await;
    assert_eq!(status, 200, "the agent drives before the take-over");
    let (status, taken) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/take"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{taken}");

    daemon.terminate();
    let daemon = Daemon::start(data.path(), Some(&admin), &[]).unwrap();
    let (status, refused) = desk::act(&daemon, &agent.secret, &id, click.clone()).await;
    assert_eq!(
        status, 409,
        "the restart handed the agent back control: {refused}"
    );
    assert_eq!(refused["error"]["code"], "control_held", "{refused}");
    let (_, control) = daemon
        .call_as(
            Some(&operator.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}/control"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(control["holder"]["name"], "alice", "{control}");
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/release"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, _) = desk::act(&daemon, &agent.secret, &id, click).await;
    assert_eq!(status, 200, "handed back after the restart");
}

/// The daemon's own start and stop are on the record (the host chain), the
/// stop with the signal and what became of the workspaces.
#[tokio::test]
async fn the_daemons_own_start_and_stop_are_events() {
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let token = daemon.token.clone();
    daemon.terminate();
    drop(daemon);
    let daemon = Daemon::start(data.path(), Some(&token), &[]).unwrap();
    let (status, body) = daemon
        .call(Method::GET, "/v1/events?limit=1000", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let events = body["events"].as_array().unwrap();
    let of = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["kind"] == kind).collect() };
    assert_eq!(of("daemon.start").len(), 2, "{body}");
    // Memory sharing is off unless asked, and the record says which.
    assert_eq!(
        of("daemon.start")[0]["detail"]["share_memory"],
        false,
        "{body}"
    );
    let stops = of("daemon.stop");
    assert_eq!(stops.len(), 1, "{body}");
    assert_eq!(stops[0]["detail"]["signal"], "SIGTERM");
    assert_eq!(stops[0]["detail"]["workspaces"], "kept running");
    assert!(stops[0]["workspace_id"].is_null());
}
