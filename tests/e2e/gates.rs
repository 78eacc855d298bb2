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
    let seen =
        cubicle_tests::browser::run("approvals.mjs", &config, Duration::from_secs(300)).await;
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

/// The policy of the issue-17 class 4 and 7 attack tests: held commands
/// (one with a short expiry), startup files held, `file:` pages denied, a
/// screen region held, programs held at release.
const LANDS: &str = r#"
description = "e2e: what an approval binds, and what rules judge"
default = "allow"

[[rule]]
id = "held-files"
subject = "exec"
command = ["touch /home/user/held-*"]
decision = "confirm"
reason = "making a held file"

[[rule]]
id = "quick-files"
subject = "exec"
command = ["touch /home/user/quick-*"]
decision = "confirm"
reason = "making a quick file"
timeout_secs = 3

[[rule]]
id = "startup-files"
subject = "file.write"
path = ["/home/user/.bashrc", "/home/user/.ssh/*"]
decision = "confirm"
reason = "changing what runs at login, or SSH keys"

[[rule]]
id = "local-pages"
subject = "navigate"
url = ["file:*"]
decision = "deny"
reason = "file:// pages are not for agents"

[[rule]]
id = "corner"
subject = "action"
action = ["left_click"]
region = [600, 380, 700, 480]
decision = "confirm"
reason = "a click in the held region"
"#;

async fn as_(daemon: &Daemon, who: &str, method: Method, path: &str, body: Value) -> (u16, Value) {
    let body = (!body.is_null()).then(|| body.to_string());
    daemon
        .call_as(Some(who), method, path, body.as_deref())
        .await
        .unwrap()
}

fn held(status: u16, body: &Value) -> String {
    assert_eq!(status, 202, "expected held: {body}");
    body["approval"]["id"].as_str().unwrap().to_owned()
}

/// Issue 17, class 4: an approval lands only while what was approved still
/// holds. Approved while the agent waited but after an operator took
/// control, the command does not run (409), and runs once control is back;
/// used after its expiry, it is refused; approved for the buffered exec
/// door, it does not open a streamed exec (whose stdin the operator never
/// sees).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_lands_only_while_what_was_approved_still_holds() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("lands", LANDS).await;
    let admin = daemon.token.clone();
    let exec = format!("/v1/workspaces/{id}/exec");

    // Take-over while the agent waits.
    let touch = json!({ "command": "touch /home/user/held-takeover" });
    let waiting = {
        let (url, secret, body) = (
            daemon.url(&format!("{exec}?wait=120")),
            agent.secret.clone(),
            touch.to_string(),
        );
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(url)
                .bearer_auth(secret)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        })
    };
    let mut approval = None;
    for _ in 0..300 {
        let (_, list) = as_(
            &daemon,
            &operator.secret,
            Method::GET,
            "/v1/approvals?state=pending",
            Value::Null,
        )
        .await;
        approval = list["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["params"]["command"] == "touch /home/user/held-takeover")
            .and_then(|a| a["id"].as_str().map(str::to_owned));
        if approval.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let approval = approval.expect("the waiting call's approval is pending");
    let control = format!("/v1/workspaces/{id}/control");
    let (status, body) = as_(
        &daemon,
        &operator.secret,
        Method::POST,
        &format!("{control}/take"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = as_(
        &daemon,
        &admin,
        Method::POST,
        &format!("/v1/approvals/{approval}/approve"),
        json!({"reason": "ok"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(
        status, 409,
        "approved during a take-over, it must not run: {body}"
    );
    assert_eq!(body["error"]["code"], "control_held", "{body}");
    assert!(
        !desk::exists(&daemon, &id, "held-takeover").await,
        "it ran during the take-over"
    );
    let (status, _) = as_(
        &daemon,
        &operator.secret,
        Method::POST,
        &format!("{control}/release"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    let named = format!("{exec}?approval={approval}");
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &named, touch.clone()).await;
    assert_eq!(status, 200, "control back, the approved call runs: {body}");
    assert!(desk::exists(&daemon, &id, "held-takeover").await);

    // Used after its expiry.
    let late = json!({ "command": "touch /home/user/quick-late" });
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &exec, late.clone()).await;
    let quick = held(status, &body);
    let (status, record) = as_(
        &daemon,
        &admin,
        Method::POST,
        &format!("/v1/approvals/{quick}/approve"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{record}");
    let expires_at = record["expires_at"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    tokio::time::sleep(Duration::from_millis(
        u64::try_from(expires_at - now + 50).unwrap_or(0),
    ))
    .await;
    let (status, body) = as_(
        &daemon,
        &agent.secret,
        Method::POST,
        &format!("{exec}?approval={quick}"),
        late,
    )
    .await;
    assert_eq!(status, 403, "used after its expiry: {body}");
    assert_eq!(body["error"]["code"], "expired", "{body}");
    assert!(!desk::exists(&daemon, &id, "quick-late").await);

    // A buffered exec's approval does not open the streamed door.
    let touch = json!({ "command": "touch /home/user/held-stream" });
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &exec, touch.clone()).await;
    let buffered = held(status, &body);
    as_(
        &daemon,
        &admin,
        Method::POST,
        &format!("/v1/approvals/{buffered}/approve"),
        json!({}),
    )
    .await;
    let url = daemon
        .url(&format!(
            "/v1/workspaces/{id}/exec/ws?command=touch%20/home/user/held-stream&approval={buffered}"
        ))
        .replacen("http://", "ws://", 1);
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    let bearer = format!("Bearer {}", agent.secret).parse().unwrap();
    request.headers_mut().insert("Authorization", bearer);
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 403, "{response:?}");
        }
        other => panic!(
            "the stream must not open on a buffered exec's approval: {:?}",
            other.map(|_| ())
        ),
    }
    assert!(!desk::exists(&daemon, &id, "held-stream").await);
    let (status, body) = as_(
        &daemon,
        &agent.secret,
        Method::POST,
        &format!("{exec}?approval={buffered}"),
        touch,
    )
    .await;
    assert_eq!(status, 200, "its own door runs it: {body}");
    assert!(desk::exists(&daemon, &id, "held-stream").await);
}

/// Issue 17, class 4: a click in a held region is judged in screen
/// coordinates, after the agent's scaling is undone: at half scale,
/// (325, 215) is (650, 430) on the screen, inside [600, 380, 700, 480].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaled_click_in_a_held_region_is_held() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("lands", LANDS).await;
    let actions = format!("/v1/workspaces/{id}/actions");
    let shot = json!({ "action": "screenshot", "width": 640, "height": 400 });
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &actions, shot).await;
    assert_eq!(status, 200, "{body}");
    let click = json!({ "action": "left_click", "coordinate": [325, 215] });
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &actions, click).await;
    let approval = held(status, &body);
    let (_, record) = as_(
        &daemon,
        &operator.secret,
        Method::GET,
        &format!("/v1/approvals/{approval}"),
        Value::Null,
    )
    .await;
    assert_eq!(record["rule"], "lands#corner", "{record}");
    assert_eq!(
        record["params"]["screen_at"],
        json!([[650, 430]]),
        "{record}"
    );
    // Outside the region on the screen: it runs.
    let click = json!({ "action": "left_click", "coordinate": [100, 100] });
    let (status, body) = as_(&daemon, &agent.secret, Method::POST, &actions, click).await;
    assert_eq!(status, 200, "{body}");
}

/// Issue 17, class 7: path rules judge the path the guest will touch, and
/// URL rules the URL the browser will load. `//home/user/.bashrc` and
/// `/home/user/./.ssh/x` are held; a link to `.bashrc` (or through a link
/// to `.ssh`) is refused by the guest, which names the real path, and the
/// file is unchanged; `FILE:///etc/passwd`, ` file:///etc/passwd` and
/// `view-source:file:///etc/passwd` are denied as `file:` pages, while
/// `about:blank` opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_links_and_urls_are_judged_as_they_will_be_touched() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("lands", LANDS).await;
    let put = |path: &str| format!("/v1/workspaces/{id}/files?path={path}");
    for path in [
        "//home/user/.bashrc",
        "/home/user/./.ssh/x",
        "/home/user/.ssh//y",
    ] {
        let (status, body) = as_(
            &daemon,
            &agent.secret,
            Method::PUT,
            &put(path),
            json!("echo pwned"),
        )
        .await;
        let approval = held(status, &body);
        assert!(!approval.is_empty());
    }
    let before = desk::exec(&daemon, &id, "cat /home/user/.bashrc").await;
    let linked = "mkdir -p /home/user/.ssh && ln -s /home/user/.bashrc /home/user/notes && ln -s /home/user/.ssh /home/user/keys";
    desk::exec(&daemon, &id, linked).await;
    let (status, body) = as_(
        &daemon,
        &agent.secret,
        Method::PUT,
        &put("/home/user/notes"),
        json!("echo pwned"),
    )
    .await;
    assert_eq!(status, 403, "a write through a link to .bashrc: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("symbolic link") && message.contains("/home/user/.bashrc"),
        "{body}"
    );
    let (status, body) = as_(
        &daemon,
        &agent.secret,
        Method::PUT,
        &put("/home/user/keys/authorized_keys"),
        json!("ssh-ed25519 x"),
    )
    .await;
    assert_eq!(status, 403, "a write through a link to .ssh: {body}");
    assert_eq!(
        desk::exec(&daemon, &id, "cat /home/user/.bashrc").await,
        before
    );
    assert!(!desk::exists(&daemon, &id, ".ssh/authorized_keys").await);
    let (status, body) = as_(
        &daemon,
        &agent.secret,
        Method::PUT,
        &put("/home/user/plain.txt"),
        json!("fine"),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let url = daemon
        .url(&format!("/v1/workspaces/{id}/cdp"))
        .replacen("http://", "ws://", 1);
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    let bearer = format!("Bearer {}", agent.secret).parse().unwrap();
    request.headers_mut().insert("Authorization", bearer);
    let (mut cdp, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut call = async |n: u64, url: &str| -> Value {
        use futures_util::{SinkExt, StreamExt};
        let text =
            json!({"id": n, "method": "Target.createTarget", "params": {"url": url}}).to_string();
        cdp.send(tokio_tungstenite::tungstenite::Message::text(text))
            .await
            .unwrap();
        loop {
            let next =
                tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(30)), cdp.next())
                    .await
                    .expect("a CDP reply in time")
                    .expect("the CDP connection stays open")
                    .unwrap();
            if let tokio_tungstenite::tungstenite::Message::Text(text) = next {
                let reply: Value = serde_json::from_str(&text).unwrap();
                if reply["id"] == n {
                    return reply;
                }
            }
        }
    };
    for (n, url) in [
        "FILE:///etc/passwd",
        " file:///etc/passwd",
        "view-source:file:///etc/passwd",
    ]
    .into_iter()
    .enumerate()
    {
        let reply = call(n as u64 + 1, url).await;
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("lands#local-pages"),
            "{url:?} must be denied as file: {reply}"
        );
    }
    let opened = call(9, "about:blank").await;
    assert!(opened["result"]["targetId"].is_string(), "{opened}");
}

/// An agent asks a person (OpenAI's `pending_safety_checks`, say): the
/// question is an approval like any other, with the screen as it was;
/// asking again answers the same one; the asking token cannot decide it;
/// an operator's decision reaches the agent; nothing runs because of it;
/// and a question the door cannot take, or a role that may not ask, is
/// refused with what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_a_person_and_reads_the_answer() {
    let g = gated().await;
    let ask = format!("/v1/workspaces/{}/approvals", g.id);
    let question = json!({
        "question": "The page asks to confirm a payment of 20 EUR.",
        "details": { "source": "openai", "code": "malicious_instructions", "id": "sc_1" },
    });
    let (status, asked) = call(&g, &g.agent.secret, Method::POST, &ask, question.clone()).await;
    assert_eq!(status, 202, "{asked}");
    assert_eq!(asked["operation"], "ask", "{asked}");
    assert_eq!(asked["state"], "pending", "{asked}");
    assert_eq!(asked["params"]["details"]["id"], "sc_1", "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    // The screen as it was when asked: in the answer, or (a loaded host)
    // added to the record soon after.
    let mut shown = asked["has_screenshot"] == true;
    let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    while !shown && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, record) = call(
            &g,
            &g.operator.secret,
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Value::Null,
        )
        .await;
        shown = record["has_screenshot"] == true;
    }
    assert!(shown, "approval {id} never got its screenshot");
    assert_eq!(asked["url"], format!("/v1/approvals/{id}"), "{asked}");
    let (status, again) = call(&g, &g.agent.secret, Method::POST, &ask, question.clone()).await;
    assert_eq!((status, &again["id"]), (202, &asked["id"]), "{again}");

    let decide = format!("/v1/approvals/{id}/approve");
    let (status, refused) = call(&g, &g.agent.secret, Method::POST, &decide, json!({})).await;
    assert_eq!(
        status, 403,
        "the asking token decided its own question: {refused}"
    );
    let (status, decided) = call(
        &g,
        &g.operator.secret,
        Method::POST,
        &decide,
        json!({ "reason": "expected: it is the test shop" }),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    let wait = format!("/v1/approvals/{id}?wait=5");
    let (_, answer) = call(&g, &g.agent.secret, Method::GET, &wait, Value::Null).await;
    assert_eq!(answer["state"], "approved", "{answer}");
    assert_eq!(answer["decision_reason"], "expected: it is the test shop");

    // A denied one, waited on in the same request that asks it.
    let other = json!({ "question": "Download an unknown installer?" });
    let (_, pending) = call(&g, &g.agent.secret, Method::POST, &ask, other.clone()).await;
    let deny = format!("/v1/approvals/{}/deny", pending["id"].as_str().unwrap());
    let operator = g.operator.secret.clone();
    let daemon_base = g.daemon.base.clone();
    let denier = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{daemon_base}{deny}"))
            .bearer_auth(operator)
            .body(r#"{"reason":"no installers"}"#)
            .send()
            .await
            .unwrap()
            .status()
    });
    let waited = format!("{ask}?wait=30");
    let (status, denied) = call(&g, &g.agent.secret, Method::POST, &waited, other).await;
    assert_eq!(denier.await.unwrap(), 200);
    assert_eq!(
        (status, &denied["state"]),
        (200, &json!("denied")),
        "{denied}"
    );

    for (body, says) in [
        (json!({ "question": "" }), "question"),
        (json!({ "question": "x\u{1b}[2J" }), "question"),
        (json!({ "question": "ok?", "details": [1, 2] }), "details"),
        (
            json!({ "question": "ok?", "details": { "big": "x".repeat(17_000) } }),
            "details",
        ),
        (
            json!({ "question": "ok?", "expires_in_seconds": 0 }),
            "expires_in_seconds",
        ),
        (
            json!({ "question": "ok?", "expires_in_seconds": 3601 }),
            "expires_in_seconds",
        ),
        (json!({ "question": "ok?", "run": "rm -rf /" }), "run"),
    ] {
        let (status, refused) = call(&g, &g.agent.secret, Method::POST, &ask, body.clone()).await;
        assert_eq!(status, 400, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}: {refused}");
    }
    let auditor = desk::token(&g.daemon, "eve", "auditor").await;
    let (status, refused) = call(&g, &auditor.secret, Method::POST, &ask, question).await;
    assert_eq!(status, 403, "an auditor asked: {refused}");

    let (_, events) = g
        .daemon
        .call(Method::GET, &format!("/v1/events?workspace={}", g.id), None)
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["detail"]["operation"] == "ask" || e["detail"]["approval"] == json!(id))
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("approval.request", "pending")),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|(k, _)| *k == "approval.approve"),
        "{kinds:?}"
    );
}
