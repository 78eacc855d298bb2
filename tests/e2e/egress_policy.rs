//! One egress decision on a real workspace (issue 17, classes 1, 7 and 8):
//! the workspace's allowlist and the egress rules of its policy asked
//! together for every new destination — a policy `deny` refusing what the
//! allowlist allows, a `confirm` holding the workspace's curl until an
//! operator allows it once, for the workspace, or denies it (or nobody
//! does in time) — and the walls no rule opens: the gateway's own port and
//! (without `--egress-allow-host-services`) the host's services. The
//! origin runs on the host's loopback; names come from a test resolver.

use std::time::{Duration, Instant};

use cubicle_tests::desk::{self, Tok};
use cubicle_tests::{Daemon, origin};
use reqwest::Method;
use serde_json::{Value, json};

/// Egress rules of the test's policy: one name closed, two held.
const POLICY: &str = r#"
description = "e2e: egress rules joined with the allowlist"
default = "allow"
confirm_timeout_secs = 60

[[rule]]
id = "blocked"
subject = "egress"
host = ["blocked.test"]
decision = "deny"
reason = "blocked.test is closed by policy"

[[rule]]
id = "quick"
subject = "egress"
host = ["quick.test"]
decision = "confirm"
reason = "nobody will answer this one"
timeout_secs = 2

[[rule]]
id = "held"
subject = "egress"
host = ["held.test"]
decision = "confirm"
reason = "a new destination, for a person"
"#;

struct World {
    daemon: Daemon,
    id: String,
    operator: Tok,
    agent: Tok,
    http: u16,
    gateway: u16,
    _data: tempfile::TempDir,
}

/// A daemon under [`POLICY`] (with the test flag unless `walled`), one
/// workspace whose allowlist names the origin, `blocked.test`, and — as an
/// agent did in the attack — the gateway's own port on loopback.
async fn world(host_services: bool) -> World {
    let http = origin::serve(None).await;
    let data = tempfile::tempdir().unwrap();
    let hosts = data.path().join("hosts");
    let names = ["origin", "blocked", "held", "quick", "gateway", "unlisted"]
        .map(|n| format!("{n}.test=127.0.0.1\n"))
        .concat();
    std::fs::write(&hosts, names).unwrap();
    let policies = data.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("egress.toml"), POLICY).unwrap();
    let state = data.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let mut args = vec![
        "--egress-test-hosts",
        hosts.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--default-policy",
        "egress",
    ];
    if host_services {
        args.push("--egress-allow-host-services");
    }
    let daemon = Daemon::start(&state, None, &args).unwrap();
    let gateway: u16 = daemon
        .base
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap();
    let body = json!({
        "name": "egress-policy",
        "egress": {"allow": [
            format!("origin.test:{http}"),
            format!("blocked.test:{http}"),
            format!("gateway.test:{gateway}"),
            format!("127.0.0.1/32:{http},{gateway}"),
        ]},
    })
    .to_string();
    let ws = daemon.create_workspace(&body).await;
    World {
        id: ws["id"].as_str().unwrap().to_owned(),
        operator: desk::token(&daemon, "alice", "operator").await,
        agent: desk::token(&daemon, "bot", "agent").await,
        daemon,
        http,
        gateway,
        _data: data,
    }
}

impl World {
    /// curl in the workspace (through its proxy): the status line's code
    /// (0 when none), the egress reason header, and the body.
    async fn curl(&self, url: &str) -> (u16, String, String) {
        curl(&self.daemon, &self.id, url).await
    }

    async fn decisions(&self) -> Vec<Value> {
        desk::events(&self.daemon, &format!("workspace={}", self.id))
            .await
            .into_iter()
            .filter(|e| e["kind"] == "egress.decision")
            .collect()
    }

    /// The pending egress approval of `host`, once there is one.
    async fn pending(&self, host: &str) -> Value {
        let deadline = Instant::now() + cubicle_tests::guard(Duration::from_secs(15));
        while Instant::now() < deadline {
            let (status, body) = self
                .daemon
                .call_as(
                    Some(&self.operator.secret),
                    Method::GET,
                    "/v1/approvals?state=pending",
                    None,
                )
                .await
                .unwrap();
            assert_eq!(status, 200, "{body}");
            let found = body["approvals"].as_array().and_then(|all| {
                all.iter()
                    .find(|a| a["operation"] == "egress" && a["params"]["host"] == host)
                    .cloned()
            });
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no pending egress approval for {host}");
    }

    async fn decide(&self, who: &Tok, id: &str, verb: &str, body: Value) -> (u16, Value) {
        self.daemon
            .call_as(
                Some(&who.secret),
                Method::POST,
                &format!("/v1/approvals/{id}/{verb}"),
                Some(&body.to_string()),
            )
            .await
            .unwrap()
    }
}

async fn curl(daemon: &Daemon, id: &str, url: &str) -> (u16, String, String) {
    // `--noproxy ''`: through the proxy even for loopback addresses (the
    // session's `no_proxy` would send those to the workspace's own loopback).
    // No response at all: the body is curl's own error, for the message.
    let line = format!(
        "rm -f /tmp/h /tmp/b /tmp/e; curl -sS -m 18 --noproxy '' -e http://page.test/asking -D /tmp/h -o /tmp/b '{url}' 2>/tmp/e; \
         head -1 /tmp/h | cut -d' ' -f2; grep -i '^x-cubicle-egress-reason' /tmp/h | cut -d: -f2-; \
         echo ---; cat /tmp/b; [ -s /tmp/h ] || cat /tmp/e"
    );
    let out = desk::exec(daemon, id, &line).await;
    let (head, body) = out.split_once("---\n").unwrap_or((&out, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let reason = lines.next().unwrap_or_default().trim().to_owned();
    (status, reason, body.to_owned())
}

#[tokio::test]
async fn a_policy_deny_refuses_what_the_allowlist_allows() {
    let w = world(true).await;
    let http = w.http;
    // Control: the allowlist alone lets the origin through.
    let (status, _, body) = w.curl(&format!("http://origin.test:{http}/")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hello from origin"), "{body}");
    // The same origin, by a name the allowlist names and the policy denies.
    let (status, reason, _) = w.curl(&format!("http://blocked.test:{http}/")).await;
    assert_eq!(status, 403);
    assert!(
        reason.contains("blocked.test is closed by policy"),
        "{reason}"
    );
    // A name no rule names at all: refused without a lookup.
    let (status, reason, _) = w.curl(&format!("http://unlisted.test:{http}/")).await;
    assert_eq!(status, 403);
    assert!(
        reason.contains(&format!("no rule allows unlisted.test:{http}")),
        "{reason}"
    );
    let decisions = w.decisions().await;
    let rule_of = |host: &str| {
        decisions
            .iter()
            .find(|e| e["detail"]["host"] == host)
            .map(|e| (e["outcome"].clone(), e["detail"]["rule"].clone()))
    };
    assert_eq!(
        rule_of("origin.test"),
        Some((
            json!("allowed"),
            json!(format!("allowlist:origin.test:{http}"))
        )),
        "{decisions:#?}"
    );
    assert_eq!(
        rule_of("blocked.test"),
        Some((json!("denied"), json!("egress#blocked")))
    );
    assert_eq!(
        rule_of("unlisted.test"),
        Some((json!("denied"), json!("none")))
    );
    let unlisted = decisions
        .iter()
        .find(|e| e["detail"]["host"] == "unlisted.test")
        .unwrap();
    assert_eq!(unlisted["detail"]["resolved"], json!([]), "not resolved");
}

#[tokio::test]
async fn a_confirm_holds_curl_until_an_operator_decides() {
    let w = world(true).await;
    let url = format!("http://held.test:{}/", w.http);
    // 1. Allowed once: the curl waits for the operator.
    let (answer, approval) = tokio::join!(w.curl(&url), async {
        let approval = w.pending("held.test").await;
        // The agent cannot decide it; the operator can.
        let (status, _) = w
            .decide(
                &w.agent,
                approval["id"].as_str().unwrap(),
                "approve",
                json!({}),
            )
            .await;
        assert_eq!(status, 403);
        let (status, body) = w
            .decide(
                &w.operator,
                approval["id"].as_str().unwrap(),
                "approve",
                json!({"scope": "once"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        approval
    });
    assert_eq!(answer.0, 200, "{answer:?}");
    assert!(answer.2.contains("hello from origin"), "{answer:?}");
    assert_eq!(approval["params"]["port"], w.http);
    assert_eq!(approval["params"]["page"], "http://page.test/asking");
    assert_eq!(approval["params"]["mode"], "http");
    assert_eq!(approval["rule"], "egress#held");
    assert_eq!(approval["asked_by"]["role"], "workspace");
    // 2. Once means once: asked again, denied → 403 with the reason.
    let (answer, _) = tokio::join!(w.curl(&url), async {
        let approval = w.pending("held.test").await;
        let (status, body) = w
            .decide(
                &w.operator,
                approval["id"].as_str().unwrap(),
                "deny",
                json!({"reason": "not today"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    });
    assert_eq!(answer.0, 403, "{answer:?}");
    assert!(answer.1.contains("not today"), "{answer:?}");
    // 3. For the workspace: allowed, and the allowlist has it.
    let (answer, _) = tokio::join!(w.curl(&url), async {
        let approval = w.pending("held.test").await;
        let id = approval["id"].as_str().unwrap();
        let (status, _) = w
            .decide(&w.operator, id, "deny", json!({"scope": "workspace"}))
            .await;
        assert_eq!(status, 400, "a deny has no scope");
        let (status, body) = w
            .decide(&w.operator, id, "approve", json!({"scope": "workspace"}))
            .await;
        assert_eq!(status, 200, "{body}");
    });
    assert_eq!(answer.0, 200, "{answer:?}");
    let (status, shown) = w
        .daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{}/egress", w.id),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let rule = format!("held.test:{}", w.http);
    assert!(
        shown["policy"]["allow"]
            .as_array()
            .unwrap()
            .contains(&json!(rule)),
        "{shown}"
    );
    // The next connection is not held.
    let answer = w.curl(&url).await;
    assert_eq!(answer.0, 200, "{answer:?}");
    // Nobody decides: denied once the rule's timeout (2 s) passes.
    let started = Instant::now();
    let (status, reason, _) = w.curl(&format!("http://quick.test:{}/", w.http)).await;
    assert_eq!(status, 403);
    assert!(reason.contains("expired"), "{reason}");
    assert!(started.elapsed() >= Duration::from_secs(2));
    // Every step is an event; each decision names what decided.
    let events = desk::events(&w.daemon, &format!("workspace={}", w.id)).await;
    let held: Vec<(&Value, &Value, &Value)> = events
        .iter()
        .filter(|e| e["kind"] == "egress.decision" && e["detail"]["host"] == "held.test")
        .map(|e| {
            (
                &e["outcome"],
                &e["detail"]["rule"],
                &e["detail"]["approval"],
            )
        })
        .collect();
    assert_eq!(held.len(), 4, "{held:#?}");
    let approved = held[0].1.as_str().unwrap();
    assert!(
        approved.starts_with("approval:apr-") && approved.ends_with(" (egress#held)"),
        "{held:?}"
    );
    assert_eq!(*held[0].0, "allowed");
    assert_eq!(*held[1].0, "denied", "{held:?}");
    assert!(
        held[1].2.is_string(),
        "the denial names its approval: {held:?}"
    );
    // Allowed for the workspace: the entry it added decided, for this
    // connection (which names the approval) and the next (which does not).
    assert_eq!(*held[2].1, json!(format!("allowlist:{rule}")), "{held:?}");
    assert!(held[2].2.is_string(), "{held:?}");
    assert_eq!(*held[3].1, json!(format!("allowlist:{rule}")));
    assert!(held[3].2.is_null(), "{held:?}");
    for kind in [
        "approval.request",
        "approval.approve",
        "approval.deny",
        "approval.use",
        "approval.expire",
        "egress.policy",
    ] {
        assert!(events.iter().any(|e| e["kind"] == kind), "no {kind} event");
    }
}

/// Class 1 of issue 17: the allowlist named `127.0.0.1/32:<gateway port>`
/// and the workspace called the gateway's API from inside. Refused now by
/// address and by name, even with the test flag; without it, the host's
/// services are closed too (the origin on loopback among them).
#[tokio::test]
async fn no_rule_reaches_the_gateway_or_without_the_flag_the_hosts_services() {
    let w = world(true).await;
    let (http, gateway) = (w.http, w.gateway);
    // Control: with the flag, the origin on the host's loopback is reached.
    let (status, _, _) = w.curl(&format!("http://127.0.0.1:{http}/")).await;
    assert_eq!(status, 200);
    for url in [
        format!("http://127.0.0.1:{gateway}/v1/me"),
        format!("http://gateway.test:{gateway}/v1/me"),
        format!("https://127.0.0.1:{gateway}/v1/me"),
    ] {
        let (status, reason, body) = w.curl(&url).await;
        assert_ne!(status, 200, "{url}: {body}");
        assert!(
            !body.contains("permissions"),
            "{url} reached the API: {body}"
        );
        if status != 0 {
            assert_eq!(status, 403, "{url}");
            assert!(
                reason.contains("gateway's own listening port"),
                "{url}: {reason}"
            );
        }
    }
    let walls: Vec<Value> = w
        .decisions()
        .await
        .into_iter()
        .filter(|e| e["detail"]["rule"] == "wall:gateway-listener")
        .collect();
    assert_eq!(walls.len(), 3, "{walls:#?}");

    let closed = world(false).await;
    for url in [
        format!("http://127.0.0.1:{}/", closed.http),
        format!("http://origin.test:{}/", closed.http),
    ] {
        let (status, reason, _) = closed.curl(&url).await;
        assert_eq!(status, 403, "{url}");
        assert!(
            reason.contains("the host's services are never reachable"),
            "{url}: {reason}"
        );
    }
}

/// The operator page shows an egress approval as a destination, with the
/// page that asked, and allows it for the workspace in one click.
#[tokio::test]
async fn the_operator_page_allows_a_held_destination_for_the_workspace() {
    let w = world(true).await;
    let url = format!("http://held.test:{}/", w.http);
    let config = json!({
        "base": w.daemon.base,
        "operator": w.operator.secret,
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/browser/egress_approvals.mjs");
    let page = async {
        let run = tokio::process::Command::new("node")
            .arg(script)
            .arg(config.to_string())
            .output();
        tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(120)), run)
            .await
            .expect("egress_approvals.mjs finished in time")
            .expect("node runs")
    };
    let (answer, output) = tokio::join!(w.curl(&url), page);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let seen: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no result from egress_approvals.mjs: {stdout}\n{stderr}"));
    assert!(seen["error"].is_null(), "{}\n{stderr}", seen["error"]);
    assert_eq!(seen["headline"], format!("connect to held.test:{}", w.http));
    assert_eq!(seen["page"], "http://page.test/asking");
    assert_eq!(
        seen["buttons"],
        json!([
            "Allow once",
            format!("Allow held.test:{} for this workspace", w.http),
            "Deny"
        ])
    );
    assert_eq!(seen["gone"], true, "the card leaves once decided");
    assert_eq!(answer.0, 200, "{answer:?}");
    let (_, shown) = w
        .daemon
        .call(
            Method::GET,
            &format!("/v1/workspaces/{}/egress", w.id),
            None,
        )
        .await
        .unwrap();
    assert!(
        shown["policy"]["allow"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("held.test:{}", w.http))),
        "{shown}"
    );
}
