//! Webhooks on the real `cubicle serve`, received by a real HTTP server
//! that checks every delivery with the official Standard Webhooks library
//! (`tests/e2e/webhook_receiver.py`): an agent subscribes to its own
//! workspaces' lifecycle, gets each event signed and in order, a 500 is
//! retried with the same message id, another agent's workspace is never
//! delivered, an unreachable receiver blocks no operation, and every
//! delivery and failure is an event. A server without
//! `--webhooks-to-private-addresses` refuses inward URLs at create. The
//! page's Webhooks panel, and `/#ws-id`, in headless Chromium.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cubicle_tests::Daemon;
use reqwest::Method;
use serde_json::{Value, json};

/// The test's receiver: its port and the lines it printed.
struct Receiver {
    child: Child,
    port: u16,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(python: &str, secret: &str, fail_first: u32) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/webhook_receiver.py");
        let mut child = Command::new(python)
            .args([script, secret, &fail_first.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the receiver prints its port");
        let port = first["port"].as_u64().unwrap() as u16;
        Self {
            child,
            port,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until a delivery satisfies `want`; every delivery seen so far.
    fn until(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> &[Value] {
        let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
        while !self.seen.iter().any(&want) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no delivery {what}; seen: {:#?}", self.seen),
            }
        }
        &self.seen
    }
}

async fn agent_token(daemon: &Daemon, name: &str) -> String {
    let body = json!({ "name": name, "role": "agent" }).to_string();
    let (status, made) = daemon
        .call(Method::POST, "/v1/tokens", Some(&body))
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    made["secret"].as_str().unwrap().to_owned()
}

async fn create_as(daemon: &Daemon, token: &str) -> String {
    let (status, ws) = daemon
        .call_as(Some(token), Method::POST, "/v1/workspaces", Some("{}"))
        .await
        .unwrap();
    assert_eq!(status, 201, "{ws}");
    ws["id"].as_str().unwrap().to_owned()
}

/// The host chain's `webhook.*` events about subscription `id`.
async fn webhook_events(daemon: &Daemon, id: &str) -> Vec<Value> {
    let (status, events) = daemon
        .call(Method::GET, "/v1/events?limit=1000", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{events}");
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["detail"]["webhook"] == id)
        .cloned()
        .collect()
}

fn python() -> Option<String> {
    let python = std::env::var("CUBICLE_PYTHON")
        .unwrap_or_else(|_| "/var/cache/cubicle/py/bin/python".into());
    std::path::Path::new(&python).exists().then_some(python)
}

#[tokio::test]
async fn an_agent_gets_its_own_workspaces_events_signed_in_order_and_retried() {
    let Some(python) = python() else {
        cubicle_tests::skip(
            "no Python with the standardwebhooks library (scripts/setup installs it)",
        );
        return;
    };
    let secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0dXY=";
    let mut receiver = Receiver::start(&python, secret, 1);
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--webhooks-to-private-addresses"]).unwrap();
    let alice = agent_token(&daemon, "alice").await;
    let bob = agent_token(&daemon, "bob").await;

    // Bad input: each refused with the field named.
    for (body, field) in [
        (json!({"url": "ftp://127.0.0.1/", "kinds": ["*"]}), "url"),
        (
            json!({"url": format!("http://127.0.0.1:{}/", receiver.port), "kinds": ["webhook.*"]}),
            "kinds",
        ),
        (
            json!({"url": format!("http://127.0.0.1:{}/", receiver.port), "kinds": ["workspace.*"], "secret": "hunter2"}),
            "secret",
        ),
    ] {
        let (status, refused) = daemon
            .call_as(
                Some(&alice),
                Method::POST,
                "/v1/webhooks",
                Some(&body.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(status, 400, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{body}: {message}");
    }

    // Alice subscribes to her workspaces' lifecycle with her own secret.
    let body = json!({
        "url": format!("http://127.0.0.1:{}/hooks", receiver.port),
        "kinds": ["workspace.*"],
        "secret": secret,
    });
    let (status, made) = daemon
        .call_as(
            Some(&alice),
            Method::POST,
            "/v1/webhooks",
            Some(&body.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["secret"], secret);
    let hook = made["id"].as_str().unwrap().to_owned();
    // And one to a port nobody listens on: it must block nothing.
    let dead = json!({ "url": "http://127.0.0.1:9/", "kinds": ["*"] });
    let (status, dead) = daemon
        .call_as(
            Some(&alice),
            Method::POST,
            "/v1/webhooks",
            Some(&dead.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{dead}");
    assert!(
        dead["secret"].as_str().unwrap().starts_with("whsec_"),
        "a secret is made when none is given: {dead}"
    );
    let dead = dead["id"].as_str().unwrap().to_owned();

    // Bob's workspace first, then Alice's: only Alice's reaches her hook.
    let bobs = create_as(&daemon, &bob).await;
    let started = Instant::now();
    let alices = create_as(&daemon, &alice).await;
    let create_took = started.elapsed();
    let (status, _) = daemon
        .call_as(
            Some(&alice),
            Method::DELETE,
            &format!("/v1/workspaces/{alices}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 204);
    let seen = receiver
        .until("of Alice's delete", |line| {
            line["payload"]["data"]["kind"] == "workspace.delete"
                && line["payload"]["data"]["outcome"] == "ok"
                && line["status"] == 200
        })
        .to_vec();
    for line in &seen {
        assert_eq!(line["verified"], true, "the library refused it: {line}");
        assert_eq!(
            line["payload"]["data"]["workspace_id"],
            alices.as_str(),
            "{line}"
        );
        assert!(
            !line.to_string().contains(&bobs),
            "Bob's event reached Alice: {line}"
        );
    }
    // The first delivery was answered 500, and came again with its id.
    assert_eq!(seen[0]["status"], 500);
    assert_eq!(seen[1]["id"], seen[0]["id"], "a retry keeps the message id");
    assert_eq!(seen[1]["status"], 200);
    // In the order of the event log, each once after the retry.
    let ids: Vec<i64> = seen[1..]
        .iter()
        .map(|l| l["payload"]["data"]["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let kinds: Vec<&str> = seen[1..]
        .iter()
        .map(|l| l["payload"]["type"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"workspace.create"), "{kinds:?}");
    assert!(kinds.contains(&"workspace.running"), "{kinds:?}");

    // Each attempt is an event; the subscription shows its last delivery.
    let events = webhook_events(&daemon, &hook).await;
    let failed = events
        .iter()
        .find(|e| e["kind"] == "webhook.failed")
        .expect("the 500 is an event");
    assert_eq!(failed["detail"]["status"], 500, "{failed}");
    assert_eq!(failed["detail"]["retry_in_ms"], 1000, "{failed}");
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "webhook.delivered" && e["detail"]["attempt"] == 2),
        "{events:#?}"
    );
    let (status, view) = daemon
        .call_as(
            Some(&alice),
            Method::GET,
            &format!("/v1/webhooks/{hook}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["last"]["ok"], true, "{view}");
    assert!(
        view.get("secret").is_none(),
        "the secret is shown once: {view}"
    );

    // The dead receiver failed, and the operations above did not wait on it.
    let dead_events = webhook_events(&daemon, &dead).await;
    assert!(
        dead_events
            .iter()
            .any(|e| e["kind"] == "webhook.failed" && e["detail"]["error"].is_string()),
        "{dead_events:#?}"
    );
    eprintln!("create with two subscriptions (one dead) took {create_took:?}");

    // Whose subscriptions: Bob sees none of Alice's; the admin sees all.
    let (status, bobs_list) = daemon
        .call_as(Some(&bob), Method::GET, "/v1/webhooks", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(bobs_list["webhooks"], json!([]), "{bobs_list}");
    let (status, _) = daemon
        .call_as(
            Some(&bob),
            Method::DELETE,
            &format!("/v1/webhooks/{hook}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 404, "Bob cannot remove Alice's subscription");
    let (status, all) = daemon
        .call(Method::GET, "/v1/webhooks", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(all["webhooks"].as_array().unwrap().len(), 2, "{all}");
    // Alice cannot subscribe to Bob's workspace: as if it did not exist.
    let body = json!({
        "url": format!("http://127.0.0.1:{}/hooks", receiver.port),
        "kinds": ["*"],
        "workspace": bobs,
    });
    let (status, refused) = daemon
        .call_as(
            Some(&alice),
            Method::POST,
            "/v1/webhooks",
            Some(&body.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 404, "{refused}");
    // One token has at most 20 subscriptions (each polls the log).
    let body = json!({ "url": "http://127.0.0.1:9/", "kinds": ["approval.request"] }).to_string();
    for made in 0..=20 {
        let (status, answer) = daemon
            .call_as(Some(&bob), Method::POST, "/v1/webhooks", Some(&body))
            .await
            .unwrap();
        if made < 20 {
            assert_eq!(status, 201, "{made}: {answer}");
        } else {
            assert_eq!(status, 429, "{answer}");
            assert_eq!(answer["error"]["code"], "too_many_webhooks", "{answer}");
        }
    }
    // Removed: its removal is an event.
    let (status, _) = daemon
        .call_as(
            Some(&alice),
            Method::DELETE,
            &format!("/v1/webhooks/{dead}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 204);
    let removed = webhook_events(&daemon, &dead).await;
    assert!(
        removed
            .iter()
            .any(|e| e["kind"] == "webhook.delete" && e["outcome"] == "ok"),
        "{removed:#?}"
    );
}

#[tokio::test]
async fn a_default_server_refuses_webhooks_into_its_own_network() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    for (url, why) in [
        ("http://127.0.0.1:7878/v1/tokens", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://10.0.0.8/", "private"),
        ("http://[::ffff:192.168.0.1]/", "private"),
        ("http://localhost/", "loopback"),
    ] {
        let body = json!({ "url": url, "kinds": ["*"] }).to_string();
        let (status, refused) = daemon
            .call(Method::POST, "/v1/webhooks", Some(&body))
            .await
            .unwrap();
        assert_eq!(status, 400, "{url}: {refused}");
        assert_eq!(refused["error"]["code"], "webhook_url", "{url}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{url}: {message}");
        assert!(
            message.contains("--webhooks-to-private-addresses"),
            "{message}"
        );
    }
    let (status, list) = daemon
        .call(Method::GET, "/v1/webhooks", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(list["webhooks"], json!([]), "nothing was kept: {list}");
}

/// The Webhooks panel and `/#ws-id` in headless Chromium
/// (tests/browser/webhooks.mjs): the page opens on the workspace it was
/// asked for; an operator adds a webhook there, sees its secret once, sees
/// the outcome of the delivery the receiver got, sees why a bad URL is
/// refused, and removes it. (Signatures are checked by the test above; this
/// receiver cannot know the secret the page shows, so it only answers.)
#[tokio::test]
async fn an_operator_manages_webhooks_in_the_page() {
    let Some(python) = python() else {
        cubicle_tests::skip(
            "no Python with the standardwebhooks library (scripts/setup installs it)",
        );
        return;
    };
    let mut receiver = Receiver::start(
        &python,
        "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0dXY=",
        0,
    );
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--webhooks-to-private-addresses"]).unwrap();
    let body = json!({ "name": "olga", "role": "operator" }).to_string();
    let (_, made) = daemon
        .call(Method::POST, "/v1/tokens", Some(&body))
        .await
        .unwrap();
    let operator = made["secret"].as_str().unwrap().to_owned();
    let id = create_as(&daemon, &operator).await;
    let config = json!({
        "base": daemon.base,
        "operator": operator,
        "workspace": id,
        "receiver": receiver.port,
    });
    let seen = cubicle_tests::browser::run("webhooks.mjs", &config, Duration::from_secs(180)).await;
    assert!(
        seen["viewTitle"].as_str().is_some_and(|t| !t.is_empty()),
        "{seen}"
    );
    assert_eq!(
        seen["viewState"], "live",
        "/#{id} opened its live view: {seen}"
    );
    let secret = seen["secret"].as_str().unwrap_or_default();
    assert!(secret.starts_with("whsec_") && secret.len() > 30, "{seen}");
    assert_eq!(
        seen["url"],
        format!("http://127.0.0.1:{}/page", receiver.port)
    );
    assert!(
        seen["kinds"]
            .as_str()
            .is_some_and(|k| k.contains("workspace.*") && k.contains(&id)),
        "{seen}"
    );
    assert_eq!(seen["lifecycle"], json!([200, 200]), "{seen}");
    assert!(
        seen["last"]
            .as_str()
            .is_some_and(|l| l.contains("delivered (200)")),
        "{seen}"
    );
    assert!(
        seen["refused"].as_str().is_some_and(|r| r.contains("http")),
        "the refusal names what is wrong: {seen}"
    );
    assert_eq!(seen["secretAfterRefusal"], false, "{seen}");
    assert_eq!(seen["left"], 0, "{seen}");
    // What the page showed was delivered there (unverified: see above).
    let delivered = receiver.until("to the page's webhook", |d| d["id"].is_string());
    assert!(
        delivered.iter().all(|d| d["status"] == 200),
        "{delivered:#?}"
    );
}
