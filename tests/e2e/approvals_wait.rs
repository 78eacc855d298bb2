//! Waiting for a person (README "Confirmation gates"): an MCP tool call a
//! policy holds waits with progress notifications (the official Python
//! SDK's progress callback hears them) and runs once an operator approves;
//! the operator follows `GET /v1/approvals/events` (SSE): every pending
//! approval at once, then each one as it is asked and decided.

use std::process::Stdio;
use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::desk::{self, Tok};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A Server-Sent Events stream read event by event.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(daemon: &Daemon, token: &str, path: &str) -> Self {
        let response = reqwest::Client::new()
            .get(daemon.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let kind = response.headers()["content-type"].to_str().unwrap();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next `approval` event's data, within `limit`.
    async fn approval(&mut self, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + cubicle_tests::guard(limit);
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let named = event.lines().any(|l| l == "event: approval");
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if named {
                    return serde_json::from_str(&data).unwrap();
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .expect("an approval event in time")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Approval events until one for `id` in `state`.
    async fn until(&mut self, id: &str, state: &str) -> Value {
        loop {
            let event = self.approval(Duration::from_secs(30)).await;
            if event["id"] == id && event["state"] == state {
                return event;
            }
        }
    }
}

async fn decide(daemon: &Daemon, who: &Tok, id: &str, verb: &str) {
    let (status, body) = daemon
        .call_as(
            Some(&who.secret),
            Method::POST,
            &format!("/v1/approvals/{id}/{verb}"),
            Some(r#"{"reason":"seen by the e2e operator"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{verb}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_waits_with_progress_while_the_operator_follows_approvals_over_sse() {
    let python = std::env::var("CUBICLE_PYTHON")
        .unwrap_or_else(|_| "/var/cache/cubicle/py/bin/python".into());
    if !std::path::Path::new(&python).exists() {
        cubicle_tests::skip("no Python with the MCP SDK (scripts/setup installs it)");
        return;
    }
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("held", desk::HELD_FILES).await;

    // One held before the operator looks: the stream starts with it.
    let (status, early) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(r#"{"command":"touch /home/user/held-early"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 202, "{early}");
    let early = early["approval"]["id"].as_str().unwrap().to_owned();
    let mut events = Sse::open(&daemon, &operator.secret, "/v1/approvals/events").await;
    let first = events.approval(Duration::from_secs(10)).await;
    assert_eq!(
        (&first["id"], &first["state"]),
        (&json!(early), &json!("pending")),
        "{first}"
    );

    // The MCP call: held, it waits, hearing progress.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/browser/mcp_progress.py");
    let mut client = tokio::process::Command::new(&python)
        .args([
            script,
            &daemon.base,
            &agent.secret,
            &id,
            "touch /home/user/held-mcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let asked = events.approval(Duration::from_secs(60)).await;
    assert_eq!(asked["state"], "pending", "{asked}");
    assert_eq!(
        asked["params"]["command"], "touch /home/user/held-mcp",
        "{asked}"
    );
    let held = asked["id"].as_str().unwrap().to_owned();
    assert_ne!(held, early);
    // Two progress intervals (5 s each), then the operator approves.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(
        !desk::exists(&daemon, &id, "held-mcp").await,
        "it ran while held"
    );
    decide(&daemon, &operator, &held, "approve").await;
    let approved = events.until(&held, "approved").await;
    assert_eq!(approved["decided_by"]["name"], "alice", "{approved}");
    decide(&daemon, &operator, &early, "deny").await;
    let denied = events.until(&early, "denied").await;
    assert_eq!(
        denied["decision_reason"], "seen by the e2e operator",
        "{denied}"
    );

    let result = tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(60)), async {
        let mut last = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            last = Some(line);
        }
        last
    })
    .await
    .expect("the MCP client finished")
    .expect("the MCP client printed its result");
    let status = client.wait().await.unwrap();
    let mut stderr = String::new();
    if let Some(mut err) = client.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut stderr).await;
    }
    assert!(status.success(), "{result}\n{stderr}");
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["error"], false, "{result}");
    let notes = result["progress"].as_array().unwrap();
    assert!(
        notes.len() >= 2,
        "progress while held 11 s (every 5 s): {result}"
    );
    for note in notes {
        assert!(
            note["message"].as_str().is_some_and(|m| m.contains(&held)),
            "each progress note names the approval: {note}"
        );
    }
    let values: Vec<f64> = notes
        .iter()
        .map(|n| n["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[1] > w[0]),
        "progress grows: {values:?}"
    );
    assert!(
        desk::exists(&daemon, &id, "held-mcp").await,
        "approved, it ran"
    );
    assert!(
        !desk::exists(&daemon, &id, "held-early").await,
        "denied, it did not"
    );
    eprintln!(
        "approvals: {} progress notes while held ({values:?}), the call took {:.1}s; SSE: pending, asked, approved, denied",
        notes.len(),
        result["took"].as_f64().unwrap_or_default()
    );

    // How soon an operator hears of a held call: from the request's start
    // until its pending event is read (an upper bound: the 202 is awaited
    // first, and an approval may have more than one pending event).
    let mut heard = Vec::new();
    for i in 0..10 {
        let started = std::time::Instant::now();
        let body = format!(r#"{{"command":"touch /home/user/held-measure-{i}"}}"#);
        let path = format!("/v1/workspaces/{id}/exec");
        let (status, answer) = daemon
            .call_as(Some(&agent.secret), Method::POST, &path, Some(&body))
            .await
            .unwrap();
        assert_eq!(status, 202, "{answer}");
        let held = answer["approval"]["id"].as_str().unwrap().to_owned();
        events.until(&held, "pending").await;
        heard.push(started.elapsed());
    }
    println!(
        "measure: held exec → its pending event on the operator's SSE stream p50 {:.1} ms, p95 {:.1} ms (n=10)",
        cubicle_tests::stats::percentile_ms(&mut heard, 50),
        cubicle_tests::stats::percentile_ms(&mut heard, 95),
    );
}

/// A policy holding one append to a file, so a second run would show.
const COUNTED: &str = r#"
description = "e2e: one append held for a person"
default = "allow"

[[rule]]
id = "count"
subject = "exec"
command = ["tee -a /home/user/count"]
decision = "confirm"
reason = "appending to the count"
"#;

/// Issue 17, class 9 (and 4): "used once" is in the database before the
/// approved operation runs, so a daemon killed with `kill -9` right after
/// the run, and started again on the same data, refuses a second use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_approval_stays_used_across_a_kill_9() {
    let desk::UnderPolicy {
        mut daemon,
        id,
        agent,
        operator,
        args,
        data,
        policies: _policies,
    } = desk::under_policy("counted", COUNTED).await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admin = daemon.token.clone();
    let exec = format!("/v1/workspaces/{id}/exec");
    let append =
        json!({ "argv": ["tee", "-a", "/home/user/count"], "stdin": "once\n" }).to_string();
    let (status, body) = daemon
        .call_as(Some(&agent.secret), Method::POST, &exec, Some(&append))
        .await
        .unwrap();
    assert_eq!(status, 202, "{body}");
    let approval = body["approval"]["id"].as_str().unwrap().to_owned();
    decide(&daemon, &operator, &approval, "approve").await;
    let named = format!("{exec}?approval={approval}");
    let (status, body) = daemon
        .call_as(Some(&agent.secret), Method::POST, &named, Some(&append))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    daemon.kill9();

    let daemon = Daemon::start(data.path(), Some(&admin), &args).unwrap();
    let (status, body) = daemon
        .call_as(Some(&agent.secret), Method::POST, &named, Some(&append))
        .await
        .unwrap();
    assert_eq!(status, 403, "used once before the kill -9: {body}");
    assert_eq!(body["error"]["code"], "approval_refused", "{body}");
    let count = desk::exec(&daemon, &id, "cat /home/user/count").await;
    assert_eq!(count, "once\n", "it ran exactly once");
}
