//! Policy gates in the fast tier (no root, no image, no desktop): the real
//! router, core, SQLite and `Manager`, over workspaces that are rows marked
//! running with nothing behind them. An operation that passes the gate
//! fails later at the guest (502): that is how these tests tell "ran" from
//! "held" (202), "denied" (403) and "refused at the gate".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use cubicle_gateway::app::AppState;
use cubicle_gateway::gates::Gates;
use cubicle_policy::{Policy, PolicySet};
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::geometry::Geometry;
use cubicle_runtime::jail::JailBackend;
use cubicle_runtime::manager::{Manager, ManagerConfig};
use cubicle_runtime::state::{Store, WorkspaceRecord, WorkspaceState, now_ms};
use cubicle_runtime::tokens::{self, Role, Scope};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// A uid no process on a test machine has.
const NOBODYS_UID: u32 = 3_999_980;
const OWN: &str = "ws-00000000aaaa";
const OTHER: &str = "ws-00000000bbbb";

/// A policy with a short timeout and a deny, for the expiry and deny tests.
const QUICK: &str = r#"
default = "allow"
[[rule]]
subject = "exec"
command = ["rm *"]
decision = "deny"
reason = "no removing here"
[[rule]]
subject = "exec"
command = ["sudo *"]
decision = "confirm"
reason = "sudo, quickly"
timeout_secs = 1
[[rule]]
subject = "exec"
command = ["touch *"]
decision = "confirm"
reason = "touching, for a while"
timeout_secs = 60
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Who {
    Admin,
    Agent,
    OtherAgent,
    Operator,
    Operator2,
    Auditor,
}

struct Fixture {
    router: Router,
    secrets: HashMap<Who, String>,
    tokens: HashMap<Who, tokens::Token>,
    state: AppState,
    store: Store,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
    let mut secrets = HashMap::new();
    let mut ids = HashMap::new();
    let mut all = HashMap::new();
    for (who, role) in [
        (Who::Admin, Role::Admin),
        (Who::Agent, Role::Agent),
        (Who::OtherAgent, Role::Agent),
        (Who::Operator, Role::Operator),
        (Who::Operator2, Role::Operator),
        (Who::Auditor, Role::Auditor),
    ] {
        let (token, secret) = tokens::create(&store, &format!("{who:?}"), role, Scope::Default)
            .await
            .unwrap();
        ids.insert(who, token.id.clone());
        all.insert(who, token);
        secrets.insert(who, secret);
    }
    for (id, owner) in [(OWN, Who::Agent), (OTHER, Who::OtherAgent)] {
        let record = WorkspaceRecord {
            id: id.into(),
            name: id.into(),
            backend: "jail".into(),
            state: WorkspaceState::Running,
            geometry: Geometry::default(),
            host_uid: NOBODYS_UID,
            pid: None,
            error: None,
            created_at: now_ms(),
            updated_at: now_ms(),
            owner_token: Some(ids[&owner].clone()),
            limits: Default::default(),
        };
        store.insert(&record).await.unwrap();
    }
    let jail = JailBackend::new(
        dir.path().join("rootfs"),
        dir.path().join("cubicle-guest"),
        dir.path().join("cubicle-shim"),
        "/usr/bin/Xvnc".into(),
    )
    .unwrap();
    let config = ManagerConfig {
        data_dir: dir.path().to_owned(),
        ready_timeout: Duration::from_secs(1),
        uid_base: NOBODYS_UID,
    };
    let manager = Manager::new(store.clone(), AnyBackend::Jail(jail), config);
    let mut policies = PolicySet::shipped().unwrap();
    policies.insert(Policy::parse("quick.toml", "quick", QUICK).unwrap());
    let state = AppState::new(
        cubicle_gateway::ops::Core {
            gates: Arc::new(Gates::new(policies, "default", Default::default()).unwrap()),
            ..cubicle_gateway::ops::Core::bare(manager, store.clone(), dir.path()).unwrap()
        },
        dir.path().join("web"),
    );
    Fixture {
        router: cubicle_gateway::router::router(state.clone()),
        secrets,
        tokens: all,
        state,
        store,
        _dir: dir,
    }
}

impl Fixture {
    fn request(&self, who: Who, method: Method, uri: &str, body: Value) -> Request<Body> {
        let body = match body {
            Value::Null => Body::empty(),
            body => Body::from(body.to_string()),
        };
        Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {}", self.secrets[&who]))
            .body(body)
            .unwrap()
    }

    async fn call(&self, who: Who, method: Method, uri: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .router
            .clone()
            .oneshot(self.request(who, method, uri, body))
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn exec(&self, who: Who, query: &str, command: &str) -> (StatusCode, Value) {
        let uri = format!("/v1/workspaces/{OWN}/exec{query}");
        self.call(who, Method::POST, &uri, json!({ "command": command }))
            .await
    }

    async fn decide(&self, who: Who, id: &str, verb: &str, reason: &str) -> (StatusCode, Value) {
        let uri = format!("/v1/approvals/{id}/{verb}");
        self.call(who, Method::POST, &uri, json!({ "reason": reason }))
            .await
    }

    /// The kinds and outcomes of workspace `OWN`'s events, in order.
    async fn events(&self) -> Vec<(String, Option<String>)> {
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT kind, outcome FROM events WHERE workspace_id = ? ORDER BY id")
                .bind(OWN)
                .fetch_all(self.store.pool())
                .await
                .unwrap();
        rows
    }
}

/// Passed the gate: it reached the guest, which is not there.
fn ran(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::BAD_GATEWAY, "expected to run: {body}");
}

fn held_id(status: StatusCode, body: &Value) -> String {
    assert_eq!(status, StatusCode::ACCEPTED, "expected held: {body}");
    assert_eq!(body["error"]["code"], "held", "{body}");
    let id = body["approval"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["approval"]["url"], format!("/v1/approvals/{id}"));
    id
}

#[tokio::test]
async fn held_then_approved_runs_once() {
    let fx = fixture().await;
    let (status, body) = fx.exec(Who::Agent, "", "ls -l").await;
    ran(status, &body);
    let (status, body) = fx.exec(Who::Agent, "", "sudo apt-get install x").await;
    let id = held_id(status, &body);
    // Asking again with the same parameters waits on the same approval.
    let (status, again) = fx.exec(Who::Agent, "", "sudo apt-get install x").await;
    assert_eq!(held_id(status, &again), id);
    // Operators see it, with what will run and why.
    let (status, list) = fx
        .call(
            Who::Operator,
            Method::GET,
            "/v1/approvals?state=pending",
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let listed = &list["approvals"][0];
    assert_eq!(listed["id"], id);
    assert_eq!(listed["workspace"], OWN);
    assert_eq!(listed["operation"], "exec");
    assert_eq!(listed["params"]["command"], "sudo apt-get install x");
    assert_eq!(listed["rule"], "default#exec-privilege");
    assert_eq!(listed["state"], "pending");
    // Another agent does not.
    let (_, theirs) = fx
        .call(Who::OtherAgent, Method::GET, "/v1/approvals", Value::Null)
        .await;
    assert_eq!(theirs["approvals"], json!([]));
    let (status, _) = fx
        .call(
            Who::OtherAgent,
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Agents and auditors cannot decide; the operator can.
    let (status, body) = fx.decide(Who::Agent, &id, "approve", "me").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = fx.decide(Who::Auditor, &id, "approve", "me").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = fx.decide(Who::Operator, &id, "approve", "looks fine").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "approved");
    assert_eq!(body["decided_by"]["name"], "Operator");
    let (status, _) = fx.decide(Who::Admin, &id, "deny", "late").await;
    assert_eq!(status, StatusCode::CONFLICT);
    // The same call now runs, once; the next one is held again.
    let (status, body) = fx.exec(Who::Agent, "", "sudo apt-get install x").await;
    ran(status, &body);
    let (status, body) = fx.exec(Who::Agent, "", "sudo apt-get install x").await;
    assert_ne!(held_id(status, &body), id);
    let (_, record) = fx
        .call(
            Who::Agent,
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Value::Null,
        )
        .await;
    assert_eq!(record["used"], true);
    let kinds: Vec<String> = fx.events().await.into_iter().map(|(k, _)| k).collect();
    for kind in [
        "approval.request",
        "approval.approve",
        "approval.use",
        "exec",
    ] {
        assert!(
            kinds.contains(&kind.to_owned()),
            "{kind} missing from {kinds:?}"
        );
    }
}

#[tokio::test]
async fn an_approval_never_runs_other_parameters() {
    let fx = fixture().await;
    let (status, body) = fx.exec(Who::Agent, "", "sudo true").await;
    let id = held_id(status, &body);
    fx.decide(Who::Operator, &id, "approve", "ok").await;
    let (status, body) = fx
        .exec(
            Who::Agent,
            &format!("?approval={id}"),
            "sudo rm -rf /home/user",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "approval_mismatch");
    // Another token cannot use it either, even for the same parameters.
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::POST,
            &format!("/v1/workspaces/{OWN}/exec?approval={id}"),
            json!({ "command": "sudo true" }),
        )
        .await;
    assert!(
        status == StatusCode::NOT_FOUND || status == StatusCode::FORBIDDEN,
        "{status} {body}"
    );
    // The asker, with the right parameters, runs it once.
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo true")
        .await;
    ran(status, &body);
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo true")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "approval_refused");
    let outcomes = fx.events().await;
    assert!(
        outcomes.contains(&("approval.refuse".into(), Some("denied".into()))),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn the_asker_cannot_approve_its_own() {
    let fx = fixture().await;
    // Operators may run commands too; their own request needs someone else.
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::POST,
            &format!("/v1/workspaces/{OWN}/exec"),
            json!({ "command": "sudo true" }),
        )
        .await;
    let id = held_id(status, &body);
    let (status, body) = fx.decide(Who::Operator, &id, "approve", "mine").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("asked"));
    let (status, _) = fx.decide(Who::Operator2, &id, "approve", "theirs").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn denied_while_waiting_is_a_403_with_the_reason() {
    let fx = Arc::new(fixture().await);
    // The operator's stream, open before the request.
    let response = fx
        .router
        .clone()
        .oneshot(fx.request(
            Who::Operator,
            Method::GET,
            "/v1/approvals/events",
            Value::Null,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.into_body().into_data_stream();
    let asked = Instant::now();
    let waiting = {
        let fx = fx.clone();
        tokio::spawn(async move { fx.exec(Who::Agent, "?wait=20", "sudo reboot").await })
    };
    // The first event is the new approval.
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let seen = asked.elapsed();
    println!(
        "held request → operator's SSE event: {:.2} ms",
        seen.as_secs_f64() * 1000.0
    );
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let approval: Value = serde_json::from_str(data).unwrap();
    assert!(text.starts_with("event: approval"), "{text}");
    assert_eq!(approval["params"]["command"], "sudo reboot");
    let id = approval["id"].as_str().unwrap();
    let (status, _) = fx
        .decide(Who::Operator, id, "deny", "not on a weekday")
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "denied");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not on a weekday"),
        "{body}"
    );
    let events = fx.events().await;
    assert!(
        !events.iter().any(|(k, _)| k == "exec"),
        "a denied command never ran: {events:?}"
    );
    assert!(
        events.contains(&("approval.deny".into(), Some("ok".into()))),
        "{events:?}"
    );
}

#[tokio::test]
async fn expiry_is_a_denial_and_policies_switch_by_operators_only() {
    let fx = fixture().await;
    let policy = format!("/v1/workspaces/{OWN}/policy");
    let (status, body) = fx.call(Who::Agent, Method::GET, &policy, Value::Null).await;
    assert_eq!(
        (status, body["policy"].clone()),
        (StatusCode::OK, json!("default"))
    );
    let (status, _) = fx
        .call(Who::Agent, Method::PUT, &policy, json!({"policy": "open"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::PUT,
            &policy,
            json!({"policy": "nope"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = fx
        .call(
            Who::Operator,
            Method::PUT,
            &policy,
            json!({"policy": "quick"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, shown) = fx
        .call(
            Who::Agent,
            Method::GET,
            &format!("/v1/workspaces/{OWN}"),
            Value::Null,
        )
        .await;
    assert_eq!(shown["policy"], "quick");
    // Denied by the policy, without asking anyone.
    let (status, body) = fx.exec(Who::Agent, "", "rm -rf /tmp/x").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::FORBIDDEN, json!("policy_denied"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no removing here")
    );
    // Held for one second, then expired while the caller waited.
    let (status, body) = fx.exec(Who::Agent, "?wait=10", "sudo true").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "expired");
    let id = body["approval"]["id"].as_str().unwrap();
    let (status, _) = fx.decide(Who::Operator, id, "approve", "too late").await;
    assert_eq!(status, StatusCode::CONFLICT);
    let events = fx.events().await;
    for event in [
        ("policy.switch", "ok"),
        ("policy.deny", "denied"),
        ("approval.expire", "denied"),
    ] {
        assert!(
            events.contains(&(event.0.into(), Some(event.1.into()))),
            "{event:?} missing from {events:?}"
        );
    }
}

#[tokio::test]
async fn files_are_gated_and_many_wait_at_once() {
    let fx = Arc::new(fixture().await);
    let put = |path: &str| format!("/v1/workspaces/{OWN}/files?path={path}");
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::PUT,
            &put("/home/user/.bashrc"),
            json!("x"),
        )
        .await;
    let id = held_id(status, &body);
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::PUT,
            &put("/home/user/notes"),
            json!("x"),
        )
        .await;
    ran(status, &body);
    // Several pending at once, on two workspaces, each with its own decision.
    let mut waiting = Vec::new();
    for i in 0..6 {
        let fx = fx.clone();
        waiting.push(tokio::spawn(async move {
            let (who, ws) = if i % 2 == 0 {
                (Who::Agent, OWN)
            } else {
                (Who::OtherAgent, OTHER)
            };
            let uri = format!("/v1/workspaces/{ws}/exec?wait=20");
            fx.call(
                who,
                Method::POST,
                &uri,
                json!({ "command": format!("sudo job {i}") }),
            )
            .await
        }));
    }
    let mut pending = Vec::new();
    for _ in 0..100 {
        let (_, list) = fx
            .call(
                Who::Admin,
                Method::GET,
                "/v1/approvals?state=pending",
                Value::Null,
            )
            .await;
        pending = list["approvals"].as_array().unwrap().clone();
        if pending.len() == 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pending.len(), 7, "{pending:?}");
    for approval in &pending {
        let command = approval["params"]["command"].as_str().unwrap_or("");
        let wanted =
            approval["operation"] == "file.write" || command.ends_with(['0', '1', '2', '4']);
        let verb = if wanted { "approve" } else { "deny" };
        fx.decide(Who::Admin, approval["id"].as_str().unwrap(), verb, "sorted")
            .await;
    }
    for (i, task) in waiting.into_iter().enumerate() {
        let (status, body) = task.await.unwrap();
        let expected = if [0, 1, 2, 4].contains(&i) {
            StatusCode::BAD_GATEWAY
        } else {
            StatusCode::FORBIDDEN
        };
        assert_eq!(status, expected, "job {i}: {body}");
    }
    let (_, record) = fx
        .call(
            Who::Admin,
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Value::Null,
        )
        .await;
    assert_eq!(record["state"], "approved");
    assert_eq!(record["params"]["path"], "/home/user/.bashrc");
}

#[tokio::test]
async fn create_names_a_known_policy() {
    let fx = fixture().await;
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::POST,
            "/v1/workspaces",
            json!({ "policy": "lenient" }),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("policy:"),
        "{body}"
    );
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::POST,
            "/v1/workspaces",
            json!({ "policy": 7 }),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

impl Fixture {
    /// Waits until the agent's `count`-th approval is pending (told by the
    /// store, not polled), and returns its id.
    async fn pending(
        &self,
        changes: &mut tokio::sync::broadcast::Receiver<cubicle_gateway::approvals::Approval>,
    ) -> String {
        loop {
            let change = tokio::time::timeout(Duration::from_secs(20), changes.recv())
                .await
                .expect("an approval in time")
                .unwrap();
            if change.state == cubicle_gateway::approvals::ApprovalState::Pending {
                return change.id;
            }
        }
    }

    fn ctx(&self, who: Who, approval: Option<&str>) -> cubicle_gateway::ops::OpContext {
        cubicle_gateway::ops::OpContext {
            token: self.tokens[&who].clone(),
            request_id: "test".into(),
            client: None,
            hold: cubicle_gateway::ops::context::Hold {
                approval: approval.map(str::to_owned),
                ..Default::default()
            },
        }
    }
}

/// Class 4 of issue 17: an approval that lands after an operator took
/// control does not run; once control is back, the same call runs.
#[tokio::test]
async fn an_approval_landing_after_a_take_over_does_not_run() {
    let fx = Arc::new(fixture().await);
    let mut changes = fx.state.gates.approvals.subscribe();
    let waiting = {
        let fx = fx.clone();
        tokio::spawn(async move { fx.exec(Who::Agent, "?wait=20", "sudo reboot").await })
    };
    let id = fx.pending(&mut changes).await;
    let control = format!("/v1/workspaces/{OWN}/control");
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::POST,
            &format!("{control}/take"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = fx.decide(Who::Operator2, &id, "approve", "fine").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "it must not run: {body}");
    assert_eq!(body["error"]["code"], "control_held", "{body}");
    let events = fx.events().await;
    assert!(
        events.contains(&("approval.refuse".into(), Some("denied".into()))),
        "{events:?}"
    );
    assert!(!events.iter().any(|(k, _)| k == "exec"), "{events:?}");
    // Control back with the agent: the same call runs, once.
    let (status, _) = fx
        .call(
            Who::Operator,
            Method::POST,
            &format!("{control}/release"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo reboot")
        .await;
    ran(status, &body);
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo reboot")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

/// An approval is good until its expiry, not after: approved in time, used
/// late, it is refused (and an approval used in time runs).
#[tokio::test]
async fn an_approval_is_refused_after_its_expiry() {
    let fx = fixture().await;
    let policy = format!("/v1/workspaces/{OWN}/policy");
    fx.call(
        Who::Operator,
        Method::PUT,
        &policy,
        json!({"policy": "quick"}),
    )
    .await;
    let (status, body) = fx.exec(Who::Agent, "", "sudo true").await;
    let id = held_id(status, &body);
    let (status, approved) = fx.decide(Who::Operator, &id, "approve", "ok").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    // The expiry is a point in time: wait until it has passed.
    let expires_at = approved["expires_at"].as_i64().unwrap();
    let left = u64::try_from(expires_at - now_ms() + 5).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(left)).await;
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo true")
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "used after its expiry: {body}"
    );
    assert_eq!(body["error"]["code"], "expired", "{body}");
    // Without naming it, the same call makes a new approval.
    let (status, body) = fx.exec(Who::Agent, "", "sudo true").await;
    assert_ne!(held_id(status, &body), id);
    // In time, it runs.
    let (status, body) = fx.exec(Who::Agent, "", "touch /tmp/x").await;
    let id = held_id(status, &body);
    fx.decide(Who::Operator, &id, "approve", "ok").await;
    let (status, body) = fx.exec(Who::Agent, "", "touch /tmp/x").await;
    ran(status, &body);
}

/// The door is part of what is approved: a buffered exec's approval (its
/// stdin shown as a digest) never opens a streamed exec, whose stdin the
/// operator never sees.
#[tokio::test]
async fn a_buffered_exec_approval_never_opens_a_stream() {
    let fx = fixture().await;
    let (status, body) = fx.exec(Who::Agent, "", "sudo true").await;
    let id = held_id(status, &body);
    fx.decide(Who::Operator, &id, "approve", "ok").await;
    let request = cubicle_image::control::ExecRequest {
        command: Some("sudo true".into()),
        ..Default::default()
    };
    let ctx = fx.ctx(Who::Agent, Some(&id));
    let refused = cubicle_gateway::ops::exec::open_stream(&fx.state, &ctx, OWN, &request).await;
    let err = refused
        .err()
        .expect("a stream must not run on a buffered exec's approval");
    assert_eq!(err.code, "approval_mismatch", "{}", err.message);
    // The streamed form asks for its own, shown with its live stdin.
    let ctx = fx.ctx(Who::Agent, None);
    let held = cubicle_gateway::ops::exec::open_stream(&fx.state, &ctx, OWN, &request).await;
    let err = held.err().expect("held");
    assert_eq!(err.code, "held", "{}", err.message);
    let (_, list) = fx
        .call(
            Who::Operator,
            Method::GET,
            "/v1/approvals?state=pending",
            Value::Null,
        )
        .await;
    let stream = &list["approvals"][0];
    assert_eq!(stream["operation"], "exec.stream", "{stream}");
    assert!(
        stream["params"]["stdin"]
            .as_str()
            .unwrap()
            .contains("not shown"),
        "{stream}"
    );
    // The buffered one still runs where it was approved.
    let (status, body) = fx
        .exec(Who::Agent, &format!("?approval={id}"), "sudo true")
        .await;
    ran(status, &body);
}

/// Path rules judge the path in its one spelling, which is also the one
/// sent to the guest; `..` is refused outright.
#[tokio::test]
async fn paths_are_judged_in_the_spelling_the_guest_opens() {
    let fx = fixture().await;
    let put = |path: &str| format!("/v1/workspaces/{OWN}/files?path={path}");
    for path in [
        "//home/user/.bashrc",
        "/home/user/./.ssh/x",
        "/home/user//.profile",
    ] {
        let (status, body) = fx
            .call(Who::Agent, Method::PUT, &put(path), json!("x"))
            .await;
        let id = held_id(status, &body);
        let (_, record) = fx
            .call(
                Who::Agent,
                Method::GET,
                &format!("/v1/approvals/{id}"),
                Value::Null,
            )
            .await;
        assert!(
            !record["params"]["path"].as_str().unwrap().contains("//")
                && !record["params"]["path"].as_str().unwrap().contains("/./"),
            "{record}"
        );
    }
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::PUT,
            &put("/home/user/x/../.bashrc"),
            json!("x"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let delete = format!("/v1/workspaces/{OWN}/files?path=/home/user/.ssh//./id_rsa");
    let (status, body) = fx
        .call(Who::Agent, Method::DELETE, &delete, Value::Null)
        .await;
    held_id(status, &body);
    let (status, body) = fx
        .call(
            Who::Agent,
            Method::PUT,
            &put("/home/user/notes"),
            json!("x"),
        )
        .await;
    ran(status, &body);
}

/// `download.release` rules are asked, with the type sniffed from the
/// bytes: an executable claimed as text is held for a person.
#[tokio::test]
async fn a_release_is_judged_by_the_sniffed_type() {
    use cubicle_runtime::quarantine::records::{self, DownloadRecord, DownloadState};
    let fx = fixture().await;
    let record = |id: &str, sniffed: &str| DownloadRecord {
        id: id.into(),
        workspace_id: OWN.into(),
        url: "https://x.example/readme.txt".into(),
        name: "readme.txt".into(),
        offered_name: "readme.txt".into(),
        size: 4,
        sha256: "00".repeat(32),
        sniffed_type: Some(sniffed.into()),
        claimed_type: Some("text/plain".into()),
        hits: Vec::new(),
        state: DownloadState::Held,
        reason: None,
        created_at: now_ms(),
        decided_at: None,
        decided_by: None,
        released_path: None,
    };
    records::insert(
        &fx.store,
        &record("dl-00000000000000e1", "application/x-executable"),
    )
    .await
    .unwrap();
    records::insert(&fx.store, &record("dl-00000000000000e2", "image/png"))
        .await
        .unwrap();
    let release = |id: &str| format!("/v1/downloads/{id}/release");
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::POST,
            &release("dl-00000000000000e1"),
            json!({}),
        )
        .await;
    let id = held_id(status, &body);
    let (_, approval) = fx
        .call(
            Who::Operator2,
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Value::Null,
        )
        .await;
    assert_eq!(
        approval["rule"], "default#release-executables",
        "{approval}"
    );
    assert_eq!(approval["params"]["media_type"], "application/x-executable");
    // A picture passes the gate (and fails later: no quarantine store here).
    let (status, body) = fx
        .call(
            Who::Operator,
            Method::POST,
            &release("dl-00000000000000e2"),
            json!({}),
        )
        .await;
    assert_ne!(status, StatusCode::ACCEPTED, "{body}");
    assert_ne!(status, StatusCode::FORBIDDEN, "{body}");
}
