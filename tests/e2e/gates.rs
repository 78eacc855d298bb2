//! Confirmation gates on a real workspace with real clients: a command that
//! matches a confirm pattern held and then approved over the API; typing
//! into a password field held, approved by the operator in the page
//! (headless Chromium) and typed, the next one denied there and not typed;
//! Playwright's `page.goto` to a confirm-listed URL waiting for an approval
//! over the API and failing when denied. Measures what the gate costs an
//! action that needs the browser context, against the same action under a
//! policy that does not.

use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use cubicle_tests::desk::{self, Tok};
use reqwest::Method;
use serde_json::{Value, json};

/// The policy these tests run under (the server's default for them).
const GATED: &str = r#"
description = "e2e: a password field, one command pattern and one page held"
default = "allow"

[[rule]]
id = "password"
subject = "action"
action = ["type", "key"]
focus = ["password"]
decision = "confirm"
reason = "typing into a password field"

[[rule]]
id = "held-files"
subject = "exec"
command = ["touch /home/user/held-*"]
decision = "confirm"
reason = "making a held file"

[[rule]]
id = "held-pages"
subject = "navigate"
url = ["data:text/html,held*"]
decision = "confirm"
reason = "opening a held page"
"#;

fn percentile(samples: &mut [f64], p: usize) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}

struct Gated {
    daemon: Daemon,
    id: String,
    agent: Tok,
    operator: Tok,
    _data: tempfile::TempDir,
    _policies: tempfile::TempDir,
}

async fn gated() -> Gated {
    let data = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("gated.toml"), GATED).unwrap();
    let open = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/open.toml");
    std::fs::copy(open, policies.path().join("open.toml")).unwrap();
    let dir = policies.path().to_str().unwrap().to_owned();
    let daemon = Daemon::start(
        data.path(),
        None,
        &["--policy-dir", &dir, "--default-policy", "gated"],
    )
    .unwrap();
    let agent = desk::token(&daemon, "bot", "agent").await;
    let operator = desk::token(&daemon, "alice", "operator").await;
    let ws = desk::create(&daemon, &agent.secret, r#"{"name":"gated"}"#).await;
    assert_eq!(ws["policy"], "gated", "{ws}");
    Gated {
        id: ws["id"].as_str().unwrap().to_owned(),
        daemon,
        agent,
        operator,
        _data: data,
        _policies: policies,
    }
}

async fn call(g: &Gated, token: &str, method: Method, path: &str, body: Value) -> (u16, Value) {
    let body = (!body.is_null()).then(|| body.to_string());
    g.daemon
        .call_as(Some(token), method, path, body.as_deref())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_command_runs_once_approved() {
    let g = gated().await;
    let exec = format!("/v1/workspaces/{}/exec", g.id);
    let touch = json!({ "command": "touch /home/user/held-one" });
    let (status, held) = call(&g, &g.agent.secret, Method::POST, &exec, touch.clone()).await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval"]["id"].as_str().unwrap().to_owned();
    assert!(
        !desk::exists(&g.daemon, &g.id, "held-one").await,
        "it ran while held"
    );
    let decide = format!("/v1/approvals/{approval}/approve");
    let (status, _) = call(&g, &g.agent.secret, Method::POST, &decide, json!({})).await;
    assert_eq!(status, 403, "an agent token cannot approve");
    let (status, record) = call(
        &g,
        &g.operator.secret,
        Method::POST,
        &decide,
        json!({"reason": "ok"}),
    )
    .await;
    assert_eq!(status, 200, "{record}");
    // The agent waits on the URL it was given, then sends the same call.
    let wait = format!("/v1/approvals/{approval}?wait=5");
    let (_, record) = call(&g, &g.agent.secret, Method::GET, &wait, Value::Null).await;
    assert_eq!(record["state"], "approved", "{record}");
    let (status, ran) = call(&g, &g.agent.secret, Method::POST, &exec, touch.clone()).await;
    assert_eq!(status, 200, "{ran}");
    assert!(desk::exists(&g.daemon, &g.id, "held-one").await);
    // Another command is not covered by that approval.
    let other = json!({ "command": "touch /home/user/held-two" });
    let path = format!("{exec}?approval={approval}");
    let (status, refused) = call(&g, &g.agent.secret, Method::POST, &path, other).await;
    assert_eq!(status, 403, "{refused}");
    assert!(!desk::exists(&g.daemon, &g.id, "held-two").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_typing_and_navigation_wait_for_a_person() {
    let g = gated().await;
    let config = json!({
        "base": g.daemon.base,
        "workspace": g.id,
        "operator": g.operator.secret,
        "agent": g.agent.secret,
        "admin": g.daemon.token,
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/browser/approvals.mjs");
    let run = tokio::process::Command::new("node")
        .arg(script)
        .arg(config.to_string())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("approvals.mjs finished in time")
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no result from approvals.mjs: {stdout}\n{stderr}"));
    println!("approvals.mjs saw ({}): {seen}", g.id);
    assert_eq!(seen["focused"]["id"], "pw", "{seen}");
    // Held: the page shows it with its context and a screenshot, the title counts it.
    assert_eq!(seen["valueWhileHeld"], "", "typed while held: {seen}");
    assert!(
        seen["titleHeld"].as_str().unwrap().starts_with("(1) "),
        "{seen}"
    );
    assert_eq!(seen["cardFocus"], "password", "{seen}");
    assert!(
        seen["card"].as_str().unwrap().contains("s3cret-pw"),
        "{seen}"
    );
    assert!(
        seen["shot"]["width"].as_u64().unwrap_or(0) > 0,
        "no screenshot: {seen}"
    );
    // Approved in the page: typed.
    assert_eq!(seen["approvedStatus"], 200, "{seen}");
    assert_eq!(seen["valueAfterApprove"], "s3cret-pw", "{seen}");
    assert_eq!(seen["titleAfter"], seen["titleBefore"], "{seen}");
    // Denied in the page: 403 with the reason, nothing typed.
    assert_eq!(seen["deniedStatus"], 403, "{seen}");
    let message = seen["deniedBody"]["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("not this password"), "{seen}");
    assert_eq!(seen["valueAfterDeny"], "", "{seen}");
    // Navigation held until approved over the API, then refused when denied.
    assert_eq!(seen["navigationHeld"]["rule"], "gated#held-pages", "{seen}");
    assert_eq!(seen["stillWaiting"], true, "{seen}");
    assert_eq!(seen["navigationApproved"], "loaded", "{seen}");
    assert_eq!(seen["heldPageText"], "held-page-one", "{seen}");
    let denied = seen["navigationDenied"].as_str().unwrap();
    assert!(
        denied.starts_with("error:") && denied.contains("no second page"),
        "{seen}"
    );

    // The events tell the story in order.
    let (status, events) = call(
        &g,
        &g.daemon.token,
        Method::GET,
        &format!("/v1/events?workspace={}&limit=1000", g.id),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{events}");
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| k.starts_with("approval."))
        .collect();
    for kind in [
        "approval.request",
        "approval.approve",
        "approval.use",
        "approval.deny",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
}

/// What the gate costs a screen action: a key press (shift alone, which
/// changes nothing) under the gated policy, whose password rule makes it
/// read the browser context, and under the open one, which reads nothing;
/// same workspace, same run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_browser_context_cost_per_action() {
    let g = gated().await;
    let actions = format!("/v1/workspaces/{}/actions", g.id);
    let policy = format!("/v1/workspaces/{}/policy", g.id);
    let run = async |samples: &mut Vec<f64>| {
        for _ in 0..30 {
            let body = json!({ "action": "key", "text": "shift" });
            let started = Instant::now();
            let (status, out) = call(&g, &g.agent.secret, Method::POST, &actions, body).await;
            assert_eq!(status, 200, "{out}");
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    };
    // The first lookup opens the gateway's CDP session: measured apart.
    let mut first = Vec::new();
    run(&mut first).await;
    let (mut gated_ms, mut open_ms) = (Vec::new(), Vec::new());
    // Alternated, so both see the same machine.
    for _ in 0..3 {
        let (status, _) = call(
            &g,
            &g.operator.secret,
            Method::PUT,
            &policy,
            json!({"policy": "open"}),
        )
        .await;
        assert_eq!(status, 200);
        run(&mut open_ms).await;
        let (status, _) = call(
            &g,
            &g.operator.secret,
            Method::PUT,
            &policy,
            json!({"policy": "gated"}),
        )
        .await;
        assert_eq!(status, 200);
        run(&mut gated_ms).await;
    }
    let (gated_p50, open_p50) = (percentile(&mut gated_ms, 50), percentile(&mut open_ms, 50));
    println!(
        "measure: key round trip p50 {gated_p50:.2} ms reading the browser context, {open_p50:.2} ms without (open policy); the lookup adds {:.2} ms (ratio {:.2}); first 30 with the session opening: p50 {:.2} ms, max {:.2} ms",
        gated_p50 - open_p50,
        gated_p50 / open_p50,
        percentile(&mut first.clone(), 50),
        first.iter().cloned().fold(0.0, f64::max),
    );
}
