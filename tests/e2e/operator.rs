//! The operator's side on a real workspace: the page in headless Chromium
//! (take over, type, hand back, a second viewer following the holder), the
//! control and token APIs with every role, and how many live viewers one
//! workspace carries before the agent notices.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cubicle_tests::desk::{self, Desk, act, desk, terminal};
use cubicle_tests::{Daemon, rfb};
use reqwest::Method;
use serde_json::{Value, json};
use vnc::X11Event;

fn percentile(samples: &mut [f64], p: usize) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_takes_over_and_hands_back_in_the_browser() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        agent,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;
    let region = terminal(&daemon, &id).await;
    let config = json!({
        "base": daemon.base,
        "workspace": id,
        "region": {"x": region.x, "y": region.y, "width": region.width, "height": region.height},
        "operator": operator.secret,
        "auditor": auditor.secret,
        "agent": agent.secret,
        "admin": daemon.token,
    });
    let seen = cubicle_tests::browser::run("operator.mjs", &config, Duration::from_secs(240)).await;

    assert_eq!(seen["landed"], "/", "the token leaves the address bar");
    assert_eq!(seen["me"], "alice (operator)");
    let colours = seen["canvas"]["colours"].as_u64().unwrap_or(0);
    assert!(colours > 50, "the canvas is blank: {}", seen["canvas"]);
    assert_eq!(seen["canvas"]["width"], 1280);
    assert_eq!(seen["holderAtStart"], "agent");
    assert_eq!(seen["auditorTakeDisabled"], true);
    // The agent's call for a person: shown in the view and the list, gone
    // once the operator takes over; a blank reason and an auditor refused.
    assert_eq!(seen["callAnswer"]["status"], 200, "{seen}");
    assert_eq!(
        seen["callAnswer"]["body"]["call"]["reason"], "please solve the captcha",
        "{seen}"
    );
    assert_eq!(
        seen["callShown"], "bot asks for a person: please solve the captcha",
        "{seen}"
    );
    assert_eq!(
        seen["callListed"], "needs a person: please solve the captcha",
        "{seen}"
    );
    assert_eq!(seen["callBadReason"]["status"], 400, "{seen}");
    assert_eq!(seen["callByAuditor"]["status"], 403, "{seen}");
    assert_eq!(seen["callAfterTake"], Value::Null, "{seen}");
    let called = desk::events(&daemon, &format!("workspace={id}"))
        .await
        .into_iter()
        .find(|e| e["kind"] == "control.call")
        .expect("the call is an event");
    assert_eq!(called["detail"]["reason"], "please solve the captcha");
    assert_eq!(called["actor"]["role"], "agent");
    // The clipboard panel, both ways; none for the auditor.
    assert_eq!(seen["auditorClipboardHidden"], true, "{seen}");
    assert_eq!(
        seen["clipboardFromPage"]["body"]["text"], "from the page ✓",
        "{seen}"
    );
    assert_eq!(seen["clipboardSetByApi"]["status"], 204, "{seen}");
    assert_eq!(seen["clipboardInPage"], "from the API ✓", "{seen}");
    assert!(seen["auditorCanvas"]["colours"].as_u64().unwrap_or(0) > 50);
    assert!(
        seen["auditorHolderText"]
            .as_str()
            .unwrap()
            .contains("alice (operator) has control"),
        "{}",
        seen["auditorHolderText"]
    );
    assert_eq!(
        seen["agentWhileHeld"]["status"], 409,
        "{}",
        seen["agentWhileHeld"]
    );
    assert_eq!(
        seen["agentWhileHeld"]["body"]["error"]["code"],
        "control_held"
    );
    assert!(
        seen["agentWhileHeld"]["body"]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("operator alice holds control since "),
        "{}",
        seen["agentWhileHeld"]
    );
    assert_eq!(
        seen["operatorTypingReached"], true,
        "typing in the page did not reach the workspace"
    );
    let files: Vec<&str> = seen["afterHandBack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(files.contains(&"tookover"), "{files:?}");
    assert!(
        !files.contains(&"afterhandback"),
        "typing after hand back reached the workspace"
    );
    assert!(
        !files.contains(&"fromauditor"),
        "the auditor's typing reached the workspace"
    );
    assert_eq!(seen["agentAfter"]["status"], 200, "{}", seen["agentAfter"]);
    assert_eq!(seen["agentTypingReached"], true);
    // A terminal that got a stray line would also have run it: check again.
    assert!(!desk::exists(&daemon, &id, "afterhandback").await);

    let mut latency: Vec<f64> = seen["latencyMs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(latency.len() >= 10, "too few latency samples: {latency:?}");
    println!(
        "measure: second viewer saw take-over after {:.0} ms, hand-back after {:.0} ms",
        seen["auditorSawTakeMs"].as_f64().unwrap_or(f64::NAN),
        seen["auditorSawReleaseMs"].as_f64().unwrap_or(f64::NAN),
    );
    println!(
        "measure: agent action → change on the noVNC canvas through the gateway p50 {:.1} ms, p95 {:.1} ms (n={})",
        percentile(&mut latency, 50),
        percentile(&mut latency, 95),
        latency.len()
    );
}

async fn control(daemon: &Daemon, token: &str, id: &str, verb: &str) -> (u16, Value) {
    let path = format!("/v1/workspaces/{id}/control/{verb}");
    daemon
        .call_as(Some(token), Method::POST, &path, None)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_and_token_apis_check_every_role() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        agent,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;
    let bob = desk::token(&daemon, "bob", "operator").await;
    let click = json!({"action": "left_click", "coordinate": [700, 500]});

    let (status, state) = daemon
        .call_as(
            Some(&auditor.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}/control"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["holder"]["kind"], "agent");
    for who in [&auditor, &agent] {
        let (status, body) = control(&daemon, &who.secret, &id, "take").await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, body) = control(&daemon, &operator.secret, &id, "take").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["holder"]["name"], "alice");
    assert!(body["since"].as_str().unwrap().ends_with('Z'));
    let (status, body) = control(&daemon, &bob.secret, &id, "take").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("control_held"))
    );
    let (status, body) = control(&daemon, &bob.secret, &id, "release").await;
    assert_eq!(status, 409, "{body}");

    // The agent: input refused with the reason, looking still allowed.
    let (status, body) = act(&daemon, &agent.secret, &id, click.clone()).await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("operator alice holds control since 20"),
        "{message}"
    );
    assert!(message.contains("control/release"), "{message}");
    let (status, body) = act(&daemon, &agent.secret, &id, json!({"action": "screenshot"})).await;
    assert_eq!(status, 200, "{body}");
    let batch = json!({"actions": [{"action": "cursor_position"}, click]});
    let (status, body) = act(&daemon, &agent.secret, &id, batch).await;
    assert_eq!(
        (status, body["error"]["index"].as_u64()),
        (409, Some(1)),
        "{body}"
    );
    // The holder itself may drive through the API.
    let (status, body) = act(&daemon, &operator.secret, &id, click.clone()).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = control(&daemon, &operator.secret, &id, "release").await;
    assert_eq!(
        (status, body["holder"]["kind"].as_str()),
        (200, Some("agent"))
    );
    let (status, _) = act(&daemon, &agent.secret, &id, click.clone()).await;
    assert_eq!(status, 200);
    // An admin can hand back for an operator who left.
    let (status, body) = control(&daemon, &bob.secret, &id, "take").await;
    assert_eq!(
        (status, body["holder"]["name"].as_str()),
        (200, Some("bob")),
        "{body}"
    );
    let (status, body) = control(&daemon, &daemon.token, &id, "release").await;
    assert_eq!(
        (status, body["holder"]["kind"].as_str()),
        (200, Some("agent"))
    );
    let (status, _) = control(&daemon, &operator.secret, &id, "take").await;
    assert_eq!(status, 200);
    let (status, _) = control(&daemon, &operator.secret, "ws-nope", "take").await;
    assert_eq!(status, 404);

    // Tokens: admin only; bad bodies are 400; the secret is shown once.
    for who in [&operator, &auditor, &agent] {
        let (status, _) = daemon
            .call_as(Some(&who.secret), Method::GET, "/v1/tokens", None)
            .await
            .unwrap();
        assert_eq!(status, 403);
    }
    for body in [
        r#"{"name":"x","role":"root"}"#,
        r#"{"role":"agent"}"#,
        "nope",
    ] {
        let (status, reply) = daemon
            .call(Method::POST, "/v1/tokens", Some(body))
            .await
            .unwrap();
        assert_eq!(status, 400, "{body}: {reply}");
    }
    let (status, list) = daemon.call(Method::GET, "/v1/tokens", None).await.unwrap();
    assert_eq!(status, 200);
    let listed = list["tokens"].as_array().unwrap();
    assert_eq!(listed.len(), 5, "{list}");
    assert!(
        !list.to_string().contains(&operator.secret[8..]),
        "a secret is listed"
    );
    let (status, _) = daemon
        .call(Method::DELETE, "/v1/tokens/tok-nope", None)
        .await
        .unwrap();
    assert_eq!(status, 404);
    let admin_id = listed[0]["id"].as_str().unwrap();
    let (status, body) = daemon
        .call(Method::DELETE, &format!("/v1/tokens/{admin_id}"), None)
        .await
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("last_admin"))
    );

    // Revoking the holder's token hands control back to the agent.
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/tokens/{}", operator.id), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    let (status, _) = act(&daemon, &operator.secret, &id, click.clone()).await;
    assert_eq!(status, 401);
    let (status, body) = act(&daemon, &agent.secret, &id, click).await;
    assert_eq!(status, 200, "{body}");

    // The CLI lists and revokes too (the daemon sees it on its next request).
    let cli = |args: &[&str]| {
        std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
            .args(["token"])
            .args(args)
            .arg("--data-dir")
            .arg(&daemon.data_dir)
            .output()
            .unwrap()
    };
    let listed = cli(&["list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains(&format!("{} operator alice revoked", operator.id)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} operator bob live", bob.id)),
        "{text}"
    );
    let revoked = cli(&["revoke", &bob.id]);
    assert!(revoked.status.success(), "{revoked:?}");
    let (status, _) = daemon
        .call_as(Some(&bob.secret), Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(status, 401);
}

/// A viewer that keeps asking for updates and decoding them, as noVNC does.
async fn busy_viewer(url: String, stop: Arc<AtomicBool>) -> anyhow::Result<u64> {
    let client = rfb::connect(&url).await?;
    client.input(X11Event::FullRefresh).await?;
    let mut events = 0u64;
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(event) = tokio::time::timeout(
            cubicle_tests::guard(Duration::from_millis(5)),
            client.recv_event(),
        )
        .await
        {
            event?;
            events += 1;
        }
        if last.elapsed() > Duration::from_millis(15) {
            last = Instant::now();
            client.input(X11Event::Refresh).await?;
        }
    }
    // Dropping the client closes its socket (vnc-rs's close waits on the peer).
    drop(client);
    Ok(events)
}

/// Median time from a typing action to the terminal region changing in the
/// agent's own screenshots.
async fn round_trip(daemon: &Daemon, token: &str, id: &str, region: desk::Region) -> f64 {
    let zoom = json!({"action": "zoom", "region": [region.x, region.y, region.x + region.width, region.y + region.height.min(200)]});
    let mut samples = Vec::new();
    for i in 0..12 {
        let (_, before) = act(daemon, token, id, zoom.clone()).await;
        let action = if i % 2 == 0 {
            json!({"action": "type", "text": "x"})
        } else {
            json!({"action": "key", "text": "BackSpace"})
        };
        let started = Instant::now();
        let (status, body) = act(daemon, token, id, action).await;
        assert_eq!(status, 200, "{body}");
        loop {
            let (_, now) = act(daemon, token, id, zoom.clone()).await;
            if now["result"]["data"] != before["result"]["data"]
                || started.elapsed() > Duration::from_secs(3)
            {
                break;
            }
        }
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    percentile(&mut samples, 50)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_viewers_per_workspace() {
    let Desk {
        _data,
        daemon,
        id,
        agent,
        ..
    } = desk().await;
    let region = terminal(&daemon, &id).await;
    let url = daemon.ws_url(&format!("/v1/workspaces/{id}/vnc"));
    // Warm up the agent's session, then the baseline with one viewer.
    round_trip(&daemon, &agent.secret, &id, region).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut viewers = tokio::task::JoinSet::new();
    let mut count = 0usize;
    let mut baseline = None;
    let mut held = 0usize;
    for target in [1usize, 2, 4, 8, 16, 24, 32] {
        while count < target {
            viewers.spawn(busy_viewer(url.clone(), stop.clone()));
            count += 1;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let p50 = round_trip(&daemon, &agent.secret, &id, region).await;
        let base = *baseline.get_or_insert(p50);
        println!(
            "measure: {count} viewers: agent action round trip p50 {p50:.1} ms ({:.2}x one viewer)",
            p50 / base
        );
        if p50 < 2.0 * base {
            held = count;
        } else {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut failed = 0;
    let mut updates = 0;
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(10));
    while let Ok(Some(done)) = tokio::time::timeout_at(deadline, viewers.join_next()).await {
        match done {
            Ok(Ok(events)) => updates += events,
            other => {
                failed += 1;
                println!("a viewer failed: {other:?}");
            }
        }
    }
    // A viewer still running 10 s after it was told to stop is stuck: a
    // failure, not a viewer to forget.
    if !viewers.is_empty() {
        println!("{} viewers did not finish in time", viewers.len());
        failed += viewers.len();
    }
    viewers.abort_all();
    println!(
        "measure: one workspace held {held} simultaneous viewers with the agent's round trip under 2x its one-viewer value (tried up to 32; {updates} RFB events received, {failed} viewers failed)"
    );
    if failed > 0 {
        let log = desk::exec(
            &daemon,
            &id,
            "grep -v 'Client requests security' /tmp/cubicle-logs/xvnc.log | tail -60",
        )
        .await;
        println!("Xvnc says:\n{log}");
    }
    assert_eq!(failed, 0, "viewers failed while the agent worked");
}
