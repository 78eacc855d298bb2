//! Who sets a workspace's guard rails at create, in the fast tier (no root,
//! no image): the real router, core, SQLite and `Manager`, over a jail
//! backend whose start fails at once (there is no image). A create that
//! passes the rule fails later, at start (502 `start_failed`); one the rule
//! refuses is a 403 before anything is made. Both doors (REST and MCP) are
//! asked the same things and must answer the same.
//!
//! The attack: an agent created its own workspace with an egress opening
//! the gateway's port on loopback, the `open` policy, `record: false`, no
//! TTL and more memory than the default.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use cubicle_gateway::app::AppState;
use cubicle_gateway::egress::{EgressDefault, EgressHub};
use cubicle_gateway::wire::guard_rails::Templates;
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::jail::JailBackend;
use cubicle_runtime::manager::{Manager, ManagerConfig};
use cubicle_runtime::state::{Store, WorkspaceState};
use cubicle_runtime::time_limits::{OnExpiry, TimeLimits};
use cubicle_runtime::tokens::{self, Role, Scope};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Uids no process on a test machine has.
const NOBODYS_UID: u32 = 3_999_700;

/// A template an admin configured: a loopback port, `open`, no video.
const TEMPLATE: &str = r#"{
    "egress": {"allow": ["127.0.0.1/32:8443", "*.example.org:443"]},
    "policy": "open",
    "record": false,
    "time_limits": {"ttl_seconds": 600}
}"#;

struct Fixture {
    router: Router,
    agent: String,
    operator: String,
    admin: String,
    store: Store,
    dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
    let secret = |role: Role| {
        let store = store.clone();
        async move {
            let name = role.as_str();
            tokens::create(&store, name, role, Scope::Default)
                .await
                .unwrap()
                .1
        }
    };
    let (agent, operator, admin) = (
        secret(Role::Agent).await,
        secret(Role::Operator).await,
        secret(Role::Admin).await,
    );
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
    manager.set_default_time_limits(TimeLimits {
        ttl: Some(Duration::from_secs(3600)),
        idle: None,
        on_expiry: OnExpiry::Stop,
    });
    let file = dir.path().join("wide.json");
    std::fs::write(&file, TEMPLATE).unwrap();
    let templates = Templates::load(&[format!("wide={}", file.display())]).unwrap();
    let state = AppState::new(
        cubicle_gateway::ops::Core {
            // The server's default: any public address (a wider base than deny,
            // so narrower asks can be shown to pass).
            egress: Arc::new(EgressHub::new(
                store.clone(),
                None,
                EgressDefault::Allow,
                None,
            )),
            templates: Arc::new(templates),
            ..cubicle_gateway::ops::Core::bare(manager, store.clone(), dir.path()).unwrap()
        },
        dir.path().join("web"),
    );
    Fixture {
        router: cubicle_gateway::router::router(state),
        agent,
        operator,
        admin,
        store,
        dir,
    }
}

/// A create through one door: status, error code and message (or the view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    Rest,
    Mcp,
}

async fn create(fx: &Fixture, door: Door, secret: &str, body: &Value) -> (u16, Value) {
    let request = match door {
        Door::Rest => Request::post("/v1/workspaces")
            .header("authorization", format!("Bearer {secret}"))
            .body(Body::from(body.to_string())),
        Door::Mcp => {
            let message = json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": "create_workspace", "arguments": body },
            });
            Request::post("/v1/mcp")
                .header("host", "127.0.0.1:7878")
                .header("authorization", format!("Bearer {secret}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(Body::from(message.to_string()))
        }
    }
    .unwrap();
    let response = fx.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    match door {
        Door::Rest => (status.as_u16(), body),
        Door::Mcp => {
            assert_eq!(status, StatusCode::OK, "{body}");
            let result = &body["result"];
            match result["isError"].as_bool() {
                Some(true) => {
                    let error = &result["structuredContent"]["error"];
                    let status = error["status"].as_u64().unwrap() as u16;
                    (status, json!({ "error": error }))
                }
                _ => (200, result.clone()),
            }
        }
    }
}

/// Each wider rail an agent tried, and the field its refusal must name.
fn wider() -> Vec<(Value, &'static str)> {
    vec![
        // The outside attack: the gateway's own port on loopback.
        (
            json!({"egress": {"allow": ["127.0.0.1/32:7878"]}}),
            "egress.allow[0]",
        ),
        (
            json!({"egress": {"allow": ["example.org:443"], "intercept": false}}),
            "egress.intercept",
        ),
        (
            json!({"egress": {"auto_release": ["application/zip"]}}),
            "egress.auto_release[0]",
        ),
        (json!({"policy": "open"}), "policy"),
        (json!({"record": false}), "record"),
        (
            json!({"time_limits": {"ttl_seconds": 0}}),
            "time_limits.ttl_seconds",
        ),
        (
            json!({"time_limits": {"ttl_seconds": 7200}}),
            "time_limits.ttl_seconds",
        ),
        (
            json!({"time_limits": {"on_expiry": "delete"}}),
            "time_limits.on_expiry",
        ),
        (json!({"limits": {"memory_mb": 8192}}), "limits.memory_mb"),
        (
            json!({"template": "wide", "egress": {"allow": ["127.0.0.1/32:7878"]}}),
            "egress.allow[0]",
        ),
    ]
}

#[tokio::test]
async fn an_agent_asking_wider_guard_rails_is_refused_on_both_doors() {
    let fx = fixture().await;
    for (body, field) in wider() {
        let mut answers = Vec::new();
        for door in [Door::Rest, Door::Mcp] {
            let (status, answer) = create(&fx, door, &fx.agent, &body).await;
            let what = format!("{door:?} {body}: {status} {answer}");
            assert_eq!(status, 403, "{what}");
            assert_eq!(answer["error"]["code"], "forbidden", "{what}");
            let message = answer["error"]["message"].as_str().unwrap().to_owned();
            assert!(message.starts_with(&format!("{field}: ")), "{what}");
            assert!(
                message.contains("operator") && message.contains("template"),
                "says what to do: {what}"
            );
            answers.push(message);
        }
        assert_eq!(answers[0], answers[1], "both doors answer the same");
    }
    // Nothing was made, and every refusal is on record.
    assert!(fx.store.list().await.unwrap().is_empty());
    let events = cubicle_runtime::events::list(&fx.store, None, 0, 1000)
        .await
        .unwrap();
    let refused = events
        .iter()
        .filter(|e| e.kind == "workspace.create" && e.outcome.as_deref() == Some("error:forbidden"))
        .count();
    assert_eq!(refused, 2 * wider().len());
}

/// Creates as `secret` and expects it past the rule: the only failure left
/// is the start (no image here). Returns the failed workspace's id.
async fn passes(fx: &Fixture, door: Door, secret: &str, body: &Value) -> String {
    let before: Vec<String> = fx
        .store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    let (status, answer) = create(fx, door, secret, body).await;
    assert_eq!(status, 502, "{door:?} {body}: {answer}");
    assert_eq!(answer["error"]["code"], "start_failed", "{answer}");
    let made: Vec<_> = fx
        .store
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter(|w| !before.contains(&w.id))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].state, WorkspaceState::Failed);
    made[0].id.clone()
}

/// The rails stored for workspace `id`: what its start read.
async fn stored(
    fx: &Fixture,
    id: &str,
) -> (Option<String>, Option<Vec<String>>, Option<u64>, bool) {
    let policy = cubicle_runtime::workspace_policy::get(&fx.store, id)
        .await
        .unwrap();
    let egress = cubicle_runtime::egress::store::get(&fx.store, id)
        .await
        .unwrap()
        .map(|doc| doc.allow);
    let ttl = cubicle_runtime::time_limits::get(&fx.store, id)
        .await
        .unwrap()
        .ttl
        .map(|d| d.as_secs());
    let off = fx
        .dir
        .path()
        .join("recordings")
        .join(id)
        .join("recording-off")
        .exists();
    (policy, egress, ttl, off)
}

#[tokio::test]
async fn operators_and_admins_may_choose_them_and_they_are_set_before_the_start() {
    let fx = fixture().await;
    for (body, _) in wider() {
        for (door, secret) in [(Door::Rest, &fx.operator), (Door::Mcp, &fx.admin)] {
            passes(&fx, door, secret, &body).await;
        }
    }
    // Every rail at once: all of them were in place although the start
    // failed, so none was patched in after it.
    let body = json!({
        "egress": {"allow": ["127.0.0.1/32:7878"]},
        "policy": "open",
        "record": false,
        "time_limits": {"ttl_seconds": 7200},
    });
    let id = passes(&fx, Door::Rest, &fx.operator, &body).await;
    assert_eq!(
        stored(&fx, &id).await,
        (
            Some("open".into()),
            Some(vec!["127.0.0.1/32:7878".into()]),
            Some(7200),
            true
        )
    );
}

#[tokio::test]
async fn an_agent_may_ask_narrower_rails_or_name_a_template() {
    let fx = fixture().await;
    for door in [Door::Rest, Door::Mcp] {
        // Narrower than the server's default (public addresses).
        let narrower = json!({
            "egress": {"allow": ["example.org:443", "93.184.0.0/16:443"]},
            "policy": "default",
            "record": true,
            "time_limits": {"ttl_seconds": 60},
            "limits": {"memory_mb": 512},
        });
        let id = passes(&fx, door, &fx.agent, &narrower).await;
        let (policy, egress, ttl, off) = stored(&fx, &id).await;
        assert_eq!(policy.as_deref(), Some("default"));
        assert_eq!(egress.unwrap().len(), 2);
        assert_eq!((ttl, off), (Some(60), false));
        // A template the admin configured: its rails, wider than the
        // defaults, are the agent's to have.
        let id = passes(&fx, door, &fx.agent, &json!({"template": "wide"})).await;
        let (policy, egress, ttl, off) = stored(&fx, &id).await;
        assert_eq!(policy.as_deref(), Some("open"));
        assert_eq!(egress.unwrap()[0], "127.0.0.1/32:8443");
        assert_eq!((ttl, off), (Some(600), true));
        // And narrower than the template.
        let id = passes(
            &fx,
            door,
            &fx.agent,
            &json!({"template": "wide", "egress": {"allow": ["a.example.org:443"]}, "record": true}),
        )
        .await;
        let (_, egress, _, off) = stored(&fx, &id).await;
        assert_eq!(egress.unwrap(), ["a.example.org:443"]);
        assert!(!off);
    }
    // A template that does not exist is a 400 naming the ones that do.
    let (status, answer) = create(&fx, Door::Rest, &fx.agent, &json!({"template": "nope"})).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("template:") && message.contains("wide"),
        "{message}"
    );
}
