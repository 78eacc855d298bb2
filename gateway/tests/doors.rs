//! The fast tier: the real router, the real operations core, a real SQLite
//! file and the real `Manager`, over a jail backend that is never asked to
//! start anything. No root, no image, no desktop: every door × every role ×
//! own / other's workspace, checked for the status a client would see.
//!
//! Workspaces are rows marked `running` with no processes behind them, so
//! an operation that passes the gate fails later, at the guest (502) — which
//! is how the test tells "passed the gate" from "refused at the gate".

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use cubicle_gateway::app::AppState;
use cubicle_gateway::ops::Permission;
use cubicle_gateway::ops::permission::granted;
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::geometry::Geometry;
use cubicle_runtime::jail::JailBackend;
use cubicle_runtime::manager::{Manager, ManagerConfig};
use cubicle_runtime::state::{Store, WorkspaceRecord, WorkspaceState, now_ms};
use cubicle_runtime::tokens::{self, Role, Scope};
use serde_json::Value;
use tower::ServiceExt;

/// The download of workspace `own` held in quarantine.
const HELD: &str = "dl-00000000000000aa";

/// A uid no process on a test machine has (stop scans for its processes).
const NOBODYS_UID: u32 = 3_999_990;
/// The sealed video segment of workspace `own`.
const SEGMENT: &str = "r1-000001.mp4";

/// Who calls, in the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Who {
    Admin,
    /// Created workspace `own`.
    AgentA,
    /// Created workspace `other`.
    AgentB,
    /// An agent token scoped to `own` (which it did not create).
    AgentScoped,
    Operator,
    Auditor,
    /// An auditor scoped to `other` only.
    AuditorScoped,
}

const EVERYONE: [Who; 7] = [
    Who::Admin,
    Who::AgentA,
    Who::AgentB,
    Who::AgentScoped,
    Who::Operator,
    Who::Auditor,
    Who::AuditorScoped,
];

impl Who {
    fn role(self) -> Role {
        match self {
            Self::Admin => Role::Admin,
            Self::AgentA | Self::AgentB | Self::AgentScoped => Role::Agent,
            Self::Operator => Role::Operator,
            Self::Auditor | Self::AuditorScoped => Role::Auditor,
        }
    }

    /// Whether it may see workspace `own` (created by AgentA).
    fn sees_own(self) -> bool {
        !matches!(self, Self::AgentB | Self::AuditorScoped)
    }
}

struct Fixture {
    router: Router,
    secrets: HashMap<Who, String>,
    own: String,
    store: Store,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
    let mut secrets = HashMap::new();
    let mut ids = HashMap::new();
    let own = "ws-0000000000aa".to_owned();
    let other = "ws-0000000000bb".to_owned();
    for who in EVERYONE {
        let scope = match who {
            Who::AgentScoped => Scope::Only(vec![own.clone()]),
            Who::AuditorScoped => Scope::Only(vec![other.clone()]),
            _ => Scope::Default,
        };
        let (token, secret) = tokens::create(&store, &format!("{who:?}"), who.role(), scope)
            .await
            .unwrap();
        ids.insert(who, token.id);
        secrets.insert(who, secret);
    }
    for (id, owner) in [(&own, Who::AgentA), (&other, Who::AgentB)] {
        let record = WorkspaceRecord {
            id: id.clone(),
            name: id.clone(),
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
    // A download of `own` held in quarantine, for the downloads doors.
    let held = cubicle_runtime::quarantine::DownloadRecord {
        id: HELD.into(),
        workspace_id: own.clone(),
        url: "https://example.org/a.zip".into(),
        name: "a.zip".into(),
        offered_name: "a.zip".into(),
        size: 3,
        sha256: "ab".repeat(32),
        sniffed_type: Some("application/zip".into()),
        claimed_type: None,
        hits: vec![],
        state: cubicle_runtime::quarantine::DownloadState::Held,
        reason: None,
        created_at: now_ms(),
        decided_at: None,
        decided_by: None,
        released_path: None,
    };
    cubicle_runtime::quarantine::records::insert(&store, &held)
        .await
        .unwrap();
    // A sealed video segment of `own`, for the replay doors.
    let recordings = dir.path().join("recordings").join(&own);
    std::fs::create_dir_all(&recordings).unwrap();
    std::fs::write(recordings.join(SEGMENT), b"not really a video").unwrap();
    let digest = cubicle_recorder::bundle::digest_reader(&b"not really a video"[..]).unwrap();
    let sealed = cubicle_runtime::events::NewEvent {
        kind: cubicle_runtime::events::EventKind::RecordingSegment,
        workspace_id: Some(&own),
        detail: serde_json::json!({
            "file": SEGMENT, "sha256": hex::encode(digest.sha256), "bytes": digest.bytes,
            "start_ms": 1_000, "end_ms": 2_000,
        }),
        ..Default::default()
    };
    cubicle_runtime::events::append(&store, &sealed)
        .await
        .unwrap();
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
    let state = AppState::new(
        cubicle_gateway::ops::Core::bare(manager, store.clone(), dir.path()).unwrap(),
        dir.path().join("web"),
    );
    Fixture {
        router: cubicle_gateway::router::router(state),
        secrets,
        own,
        store,
        _dir: dir,
    }
}

/// One door of the API on workspace `{id}`, the permission it needs, and a
/// body that parses.
struct Door {
    method: Method,
    path: &'static str,
    body: &'static str,
    permission: Permission,
    websocket: bool,
}

const fn door(
    method: Method,
    path: &'static str,
    body: &'static str,
    permission: Permission,
) -> Door {
    Door {
        method,
        path,
        body,
        permission,
        websocket: false,
    }
}

const fn socket(path: &'static str, permission: Permission) -> Door {
    Door {
        method: Method::GET,
        path,
        body: "",
        permission,
        websocket: true,
    }
}

fn doors() -> Vec<Door> {
    use Permission as P;
    vec![
        door(Method::GET, "/v1/workspaces/{id}", "", P::WorkspacesView),
        door(
            Method::POST,
            "/v1/workspaces/{id}/stop",
            "",
            P::WorkspacesManage,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/start",
            "",
            P::WorkspacesManage,
        ),
        door(
            Method::DELETE,
            "/v1/workspaces/{id}",
            "",
            P::WorkspacesManage,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/pause",
            "",
            P::WorkspacesManage,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/resume",
            "",
            P::WorkspacesManage,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/actions",
            r#"{"action":"left_click","coordinate":[1,1]}"#,
            P::Input,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/actions",
            r#"{"action":"screenshot"}"#,
            P::ScreenView,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/screenshot",
            "",
            P::ScreenView,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/exec",
            r#"{"argv":["true"]}"#,
            P::Exec,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/files?path=/tmp/a",
            "",
            P::FilesRead,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/files/list?path=/tmp",
            "",
            P::FilesRead,
        ),
        door(
            Method::PUT,
            "/v1/workspaces/{id}/files?path=/tmp/a",
            "x",
            P::FilesWrite,
        ),
        door(
            Method::DELETE,
            "/v1/workspaces/{id}/files?path=/tmp/a",
            "",
            P::FilesWrite,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/cdp/json/version",
            "",
            P::Browser,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/cdp/json/list",
            "",
            P::Browser,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/control",
            "",
            P::WorkspacesView,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/control/take",
            "",
            P::ControlHold,
        ),
        door(
            Method::POST,
            "/v1/workspaces/{id}/control/release",
            "",
            P::ControlHold,
        ),
        door(Method::GET, "/v1/events?workspace={id}", "", P::EventsRead),
        door(
            Method::GET,
            "/v1/approvals?workspace={id}",
            "",
            P::WorkspacesView,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/policy",
            "",
            P::WorkspacesView,
        ),
        door(
            Method::PUT,
            "/v1/workspaces/{id}/policy",
            r#"{"policy":"strict"}"#,
            P::PolicySwitch,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/audit/export",
            "",
            P::AuditExport,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/audit/verify",
            "",
            P::AuditExport,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/recordings",
            "",
            P::AuditExport,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/recordings/r1-000001.mp4",
            "",
            P::AuditExport,
        ),
        door(
            Method::GET,
            "/v1/workspaces/{id}/egress",
            "",
            P::WorkspacesView,
        ),
        door(
            Method::PUT,
            "/v1/workspaces/{id}/egress",
            r#"{"allow":["example.org","*.example.com:443"]}"#,
            P::EgressManage,
        ),
        door(
            Method::GET,
            "/v1/downloads?workspace={id}",
            "",
            P::DownloadsRead,
        ),
        door(
            Method::GET,
            "/v1/downloads/dl-00000000000000aa",
            "",
            P::DownloadsRead,
        ),
        door(
            Method::GET,
            "/v1/downloads/dl-00000000000000aa/content",
            "",
            P::DownloadsContent,
        ),
        door(
            Method::POST,
            "/v1/downloads/dl-00000000000000aa/release",
            r#"{"reason":"checked"}"#,
            P::DownloadsDecide,
        ),
        door(
            Method::POST,
            "/v1/downloads/dl-00000000000000aa/reject",
            "",
            P::DownloadsDecide,
        ),
        socket("/v1/workspaces/{id}/vnc", P::ScreenView),
        socket("/v1/workspaces/{id}/exec/ws?arg=true", P::Exec),
        socket("/v1/workspaces/{id}/cdp", P::Browser),
        socket("/v1/workspaces/{id}/cdp/page/ABCDEF0123", P::Browser),
    ]
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn request(door: &Door, id: &str, secret: Option<&str>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(door.method.clone())
        .uri(door.path.replace("{id}", id));
    if let Some(secret) = secret {
        builder = builder.header("authorization", format!("Bearer {secret}"));
    }
    if door.websocket {
        builder = builder
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    }
    builder.body(Body::from(door.body)).unwrap()
}

#[tokio::test]
async fn every_door_checks_role_and_scope() {
    let mut checked = 0;
    for door in doors() {
        for who in EVERYONE {
            // A fresh fixture each time: stop and delete change the rows.
            let fx = fixture().await;
            let (status, body) =
                send(&fx.router, request(&door, &fx.own, Some(&fx.secrets[&who]))).await;
            let what = format!("{who:?} {} {}: {status} {body}", door.method, door.path);
            if !granted(who.role(), door.permission) {
                assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
                assert_eq!(body["error"]["code"], "forbidden", "{what}");
            } else if !who.sees_own() {
                // Exactly what an unknown id gets: ids cannot be probed.
                assert_eq!(status, StatusCode::NOT_FOUND, "{what}");
                let (_, unknown) = send(
                    &fx.router,
                    request(&door, "ws-ffffffffffff", Some(&fx.secrets[&who])),
                )
                .await;
                let as_unknown = body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .replace(&fx.own, "ws-ffffffffffff");
                assert_eq!(unknown["error"]["message"], as_unknown, "{what}");
            } else {
                assert!(
                    ![
                        StatusCode::UNAUTHORIZED,
                        StatusCode::FORBIDDEN,
                        StatusCode::NOT_FOUND
                    ]
                    .contains(&status),
                    "passed the gate, so it must not be refused there: {what}"
                );
            }
            checked += 1;
        }
        let fx = fixture().await;
        let (status, _) = send(&fx.router, request(&door, &fx.own, None)).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{} {}",
            door.method,
            door.path
        );
    }
    assert_eq!(checked, doors().len() * EVERYONE.len());
}

#[tokio::test]
async fn agents_list_only_their_own_workspaces() {
    let fx = fixture().await;
    let list = |who: Who| {
        Request::get("/v1/workspaces")
            .header("authorization", format!("Bearer {}", fx.secrets[&who]))
            .body(Body::empty())
            .unwrap()
    };
    let ids = |body: Value| -> Vec<String> {
        body["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, a) = send(&fx.router, list(Who::AgentA)).await;
    assert_eq!(ids(a), ["ws-0000000000aa"]);
    let (_, b) = send(&fx.router, list(Who::AgentB)).await;
    assert_eq!(ids(b), ["ws-0000000000bb"]);
    let (_, scoped) = send(&fx.router, list(Who::AgentScoped)).await;
    assert_eq!(ids(scoped), ["ws-0000000000aa"]);
    let (_, operator) = send(&fx.router, list(Who::Operator)).await;
    assert_eq!(ids(operator).len(), 2);
}

#[tokio::test]
async fn a_cookie_from_another_origin_is_refused() {
    let fx = fixture().await;
    let secret = &fx.secrets[&Who::Operator];
    let with = |headers: &[(&str, &str)], cookie: bool| {
        let mut builder = Request::post(format!("/v1/workspaces/{}/exec", fx.own))
            .header("host", "127.0.0.1:7878");
        builder = match cookie {
            true => builder.header("cookie", format!("cubicle_token={secret}")),
            false => builder.header("authorization", format!("Bearer {secret}")),
        };
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::from(r#"{"argv":["true"]}"#)).unwrap()
    };
    // The attack: a page on another port of the same host posts exec.
    let foreign = [
        ("origin", "http://127.0.0.1:9999"),
        ("sec-fetch-site", "same-site"),
    ];
    let (status, body) = send(&fx.router, with(&foreign, true)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gateway\'s own"),
        "{body}"
    );
    // The same request from the gateway's own page passes the gate (then
    // fails at the missing guest).
    let own = [
        ("origin", "http://127.0.0.1:7878"),
        ("sec-fetch-site", "same-origin"),
    ];
    let (status, _) = send(&fx.router, with(&own, true)).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    // A bearer token is no ambient credential: Origin does not matter.
    let (status, _) = send(&fx.router, with(&foreign, false)).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn me_shows_the_permissions_of_the_role() {
    let fx = fixture().await;
    for who in [Who::Auditor, Who::Operator, Who::AgentA] {
        let request = Request::get("/v1/me")
            .header("authorization", format!("Bearer {}", fx.secrets[&who]))
            .body(Body::empty())
            .unwrap();
        let (status, body) = send(&fx.router, request).await;
        assert_eq!(status, StatusCode::OK);
        let shown: Vec<&str> = body["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        let expected: Vec<String> = cubicle_gateway::ops::permission::of_role(who.role())
            .into_iter()
            .map(|p| {
                serde_json::to_value(p)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(shown, expected, "{who:?}");
    }
}

#[tokio::test]
async fn every_operation_is_an_event_with_its_request_id() {
    let fx = fixture().await;
    let secret = &fx.secrets[&Who::AgentA];
    let request = Request::post(format!("/v1/workspaces/{}/exec", fx.own))
        .header("authorization", format!("Bearer {secret}"))
        .header("x-request-id", "req-test-1")
        .body(Body::from(
            r#"{"argv":["echo","hi"],"stdin":"secret stdin"}"#,
        ))
        .unwrap();
    let response = fx.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.headers()["x-request-id"], "req-test-1");
    assert_eq!(
        response.status(),
        StatusCode::BAD_GATEWAY,
        "no guest behind the row"
    );
    let events = cubicle_runtime::events::list(&fx.store, Some(&fx.own), 0, 100)
        .await
        .unwrap();
    let exec: Vec<_> = events.iter().filter(|e| e.kind == "exec").collect();
    assert_eq!(exec.len(), 2, "{events:?}");
    assert_eq!(exec[0].outcome.as_deref(), Some("started"));
    assert_eq!(exec[0].detail["argv"][1], "hi");
    assert!(
        !exec[0].detail.to_string().contains("secret stdin"),
        "stdin is kept as a digest only"
    );
    assert_eq!(exec[1].outcome.as_deref(), Some("error:guest_unreachable"));
    for event in exec {
        assert_eq!(event.request_id.as_deref(), Some("req-test-1"));
        assert_eq!(event.actor.as_ref().unwrap().name, "AgentA");
    }
    // A response without a client-chosen id still gets one.
    let request = Request::get("/v1/me")
        .header("authorization", format!("Bearer {secret}"))
        .body(Body::empty())
        .unwrap();
    let response = fx.router.clone().oneshot(request).await.unwrap();
    assert!(!response.headers()["x-request-id"].is_empty());
    assert!(
        response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert_eq!(response.headers()["referrer-policy"], "no-referrer");
}

#[tokio::test]
async fn an_operation_whose_event_cannot_be_written_does_not_run() {
    let fx = fixture().await;
    // Break the event log: the table is gone.
    sqlx::query("DROP TABLE events")
        .execute(fx.store.pool())
        .await
        .unwrap();
    let request = Request::post(format!("/v1/workspaces/{}/stop", fx.own))
        .header(
            "authorization",
            format!("Bearer {}", fx.secrets[&Who::AgentA]),
        )
        .body(Body::empty())
        .unwrap();
    let (status, body) = send(&fx.router, request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "audit_unavailable");
    let still = fx.store.get(&fx.own).await.unwrap().unwrap();
    assert_eq!(still.state, WorkspaceState::Running, "the stop did not run");
}

#[tokio::test]
async fn the_openapi_document_has_every_door() {
    let fx = fixture().await;
    let request = Request::get("/v1/openapi.json")
        .header(
            "authorization",
            format!("Bearer {}", fx.secrets[&Who::Auditor]),
        )
        .body(Body::empty())
        .unwrap();
    let (status, doc) = send(&fx.router, request).await;
    assert_eq!(status, StatusCode::OK);
    let mut missing = Vec::new();
    for door in doors() {
        let path = door
            .path
            .split('?')
            .next()
            .unwrap()
            .replace("ABCDEF0123", "{target}")
            .replace(SEGMENT, "{file}")
            .replace(HELD, "{id}");
        let method = door.method.as_str().to_lowercase();
        if doc["paths"][&path][&method].is_null() {
            missing.push(format!("{method} {path}"));
        }
    }
    for (method, path) in [
        ("get", "/v1/workspaces"),
        ("post", "/v1/workspaces"),
        ("post", "/v1/mcp"),
        ("get", "/v1/me"),
        ("get", "/v1/tokens"),
        ("post", "/v1/tokens"),
        ("delete", "/v1/tokens/{id}"),
        ("get", "/v1/workspaces/{id}/control/events"),
        ("get", "/v1/recordings"),
        ("get", "/v1/audit/key"),
        ("get", "/v1/pool"),
        ("get", "/v1/egress/ca"),
    ] {
        if doc["paths"][path][method].is_null() {
            missing.push(format!("{method} {path}"));
        }
    }
    assert!(
        missing.is_empty(),
        "routes missing from the OpenAPI document: {missing:?}"
    );
}

#[tokio::test]
async fn a_deleted_workspace_stays_replayable_and_exportable_for_auditors() {
    let fx = fixture().await;
    fx.store
        .set_state(&fx.own, WorkspaceState::Deleted, None, None)
        .await
        .unwrap();
    let get = |path: String, who: Who| {
        Request::get(path)
            .header("authorization", format!("Bearer {}", fx.secrets[&who]))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _) = send(
        &fx.router,
        get(format!("/v1/workspaces/{}", fx.own), Who::Auditor),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "gone for everyday use");
    let (status, list) = send(&fx.router, get("/v1/recordings".into(), Who::Auditor)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        list["recordings"][0]["workspace"],
        fx.own.as_str(),
        "{list}"
    );
    assert_eq!(list["recordings"][0]["state"], "deleted");
    let (status, view) = send(
        &fx.router,
        get(
            format!("/v1/workspaces/{}/recordings", fx.own),
            Who::Auditor,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["segments"][0]["file"], SEGMENT);
    // Sealed when it closed, after its last frame: at the video's end.
    assert_eq!(view["events"][0]["video_ms"], 1_000, "{view}");
    // The bundle verifies offline with the code `cubicle audit verify` runs.
    let response = fx
        .router
        .clone()
        .oneshot(get(
            format!("/v1/workspaces/{}/audit/export", fx.own),
            Who::Auditor,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/x-tar");
    let tar = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    let bundle = cubicle_recorder::bundle::Bundle::from_tar(&tar[..]).unwrap();
    let report =
        cubicle_recorder::verify::verify(&bundle, None, cubicle_recorder::verify::Tail::Signed);
    assert!(report.ok(), "{report:#?}");
    assert_eq!(
        (report.segments, report.checkpointed_seq),
        (1, report.last_seq)
    );
    let events = String::from_utf8(bundle.events.clone()).unwrap();
    assert!(
        events.contains("audit.export"),
        "the export is itself on record"
    );
    let (status, verified) = send(
        &fx.router,
        get(
            format!("/v1/workspaces/{}/audit/verify", fx.own),
            Who::Admin,
        ),
    )
    .await;
    assert_eq!(
        (status, &verified["ok"]),
        (StatusCode::OK, &Value::Bool(true)),
        "{verified}"
    );
    // Operators watch live; they do not export.
    let (status, _) = send(
        &fx.router,
        get(
            format!("/v1/workspaces/{}/audit/export", fx.own),
            Who::Operator,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// Permissions of the doors that reach into the workspace (its desktop,
/// shell, files or browser): a paused workspace refuses all of them.
const REACHES_IN: [Permission; 6] = [
    Permission::Input,
    Permission::ScreenView,
    Permission::Exec,
    Permission::FilesRead,
    Permission::FilesWrite,
    Permission::Browser,
];

#[tokio::test]
async fn a_paused_workspace_refuses_every_door_into_it_with_paused() {
    let fx = fixture().await;
    fx.store
        .set_state(&fx.own, WorkspaceState::Paused, None, None)
        .await
        .unwrap();
    let mut refused = 0;
    for door in doors() {
        if !REACHES_IN.contains(&door.permission) {
            continue;
        }
        for who in [Who::Admin, Who::AgentA, Who::Operator] {
            if !granted(who.role(), door.permission) {
                continue;
            }
            let (status, body) =
                send(&fx.router, request(&door, &fx.own, Some(&fx.secrets[&who]))).await;
            let what = format!("{who:?} {} {}: {status} {body}", door.method, door.path);
            if door.websocket && status != StatusCode::CONFLICT {
                // This door checks the upgrade before the guest; without a
                // real connection it stops there, never at the guest.
                assert!(status.is_client_error(), "{what}");
                continue;
            }
            assert_eq!(status, StatusCode::CONFLICT, "{what}");
            assert_eq!(body["error"]["code"], "paused", "{what}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("/resume"),
                "the refusal says how to go on: {what}"
            );
            refused += 1;
        }
    }
    assert!(refused >= 20, "only {refused} refusals checked");
    // Looking at it, its events and its control still work; a second
    // pause is a plain conflict, and resuming a running workspace too.
    let admin = &fx.secrets[&Who::Admin];
    let get = |path: String| {
        Request::get(path)
            .header("authorization", format!("Bearer {admin}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, view) = send(&fx.router, get(format!("/v1/workspaces/{}", fx.own))).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["state"], "paused");
    let post = |path: String| {
        Request::post(path)
            .header("authorization", format!("Bearer {admin}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, body) = send(&fx.router, post(format!("/v1/workspaces/{}/pause", fx.own))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    let other = "ws-0000000000bb";
    let (status, body) = send(&fx.router, post(format!("/v1/workspaces/{other}/resume"))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // Both attempts are on record.
    let events = cubicle_runtime::events::list(&fx.store, Some(&fx.own), 0, 100)
        .await
        .unwrap();
    let pauses: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "workspace.pause")
        .collect();
    assert_eq!(pauses.len(), 2, "{events:?}");
    assert_eq!(pauses[1].outcome.as_deref(), Some("error:conflict"));
}

/// The lifecycle changes an agent could undo a take-over with.
const LIFECYCLE: [(&str, &str); 5] = [
    ("POST", "/v1/workspaces/{id}/pause"),
    ("POST", "/v1/workspaces/{id}/resume"),
    ("POST", "/v1/workspaces/{id}/stop"),
    ("POST", "/v1/workspaces/{id}/start"),
    ("DELETE", "/v1/workspaces/{id}"),
];

#[tokio::test]
async fn an_agent_cannot_pause_resume_stop_start_or_delete_while_an_operator_holds_control() {
    let call = |fx: &Fixture, who: Who, method: &str, path: &str| {
        Request::builder()
            .method(method)
            .uri(path.replace("{id}", &fx.own))
            .header("authorization", format!("Bearer {}", fx.secrets[&who]))
            .body(Body::empty())
            .unwrap()
    };
    for (method, path) in LIFECYCLE {
        for paused in [false, true] {
            // A fresh fixture each time: stop and delete change the rows.
            let fx = fixture().await;
            if paused {
                fx.store
                    .set_state(&fx.own, WorkspaceState::Paused, None, None)
                    .await
                    .unwrap();
            }
            // Positive control: before the take-over the agent passes the
            // gate (whatever the row behind it then answers).
            let (status, body) = send(&fx.router, call(&fx, Who::AgentA, method, path)).await;
            assert_ne!(
                body["error"]["code"], "control_held",
                "{method} {path}: {status} {body}"
            );
            // The operator takes over, then (in the paused case) pauses.
            let fx = fixture().await;
            let take = "/v1/workspaces/{id}/control/take";
            let (status, body) = send(&fx.router, call(&fx, Who::Operator, "POST", take)).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            if paused {
                fx.store
                    .set_state(&fx.own, WorkspaceState::Paused, None, None)
                    .await
                    .unwrap();
            }
            let what = format!("{method} {path} (paused: {paused})");
            let (status, body) = send(&fx.router, call(&fx, Who::AgentA, method, path)).await;
            assert_eq!(status, StatusCode::CONFLICT, "{what}: {body}");
            assert_eq!(body["error"]["code"], "control_held", "{what}: {body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("/control/release"),
                "{what}: {body}"
            );
            let still = fx.store.get(&fx.own).await.unwrap().unwrap();
            let expected = if paused {
                WorkspaceState::Paused
            } else {
                WorkspaceState::Running
            };
            assert_eq!(still.state, expected, "{what}: nothing changed");
            // The operator (and an admin) still may.
            for who in [Who::Operator, Who::Admin] {
                let (status, body) = send(&fx.router, call(&fx, who, method, path)).await;
                assert_ne!(
                    body["error"]["code"], "control_held",
                    "{who:?} {what}: {status} {body}"
                );
            }
        }
    }
}

/// A caller whose role may not use a door is refused for that, whatever it
/// sends: a malformed body or query gets the same 403, never a 400 that
/// would tell it something about a door it may not use.
#[tokio::test]
async fn the_role_is_refused_before_the_request_is_read() {
    use Permission as P;
    let fx = fixture().await;
    let mut checked = 0;
    let mut wrong = Vec::new();
    // Not the actions door: a screenshot is an action, so a role with
    // ScreenView alone may use it, and which permission applies depends on
    // the body (a malformed one is that role's 400).
    let mut all: Vec<Door> = doors()
        .into_iter()
        .filter(|d| !d.websocket && !d.path.ends_with("/actions"))
        .collect();
    all.extend([
        door(Method::POST, "/v1/tokens", "", P::TokensManage),
        door(
            Method::POST,
            "/v1/approvals/ap-ffffffffffff/approve",
            "",
            P::ApprovalsDecide,
        ),
        door(
            Method::POST,
            "/v1/downloads/dl-ffffffffffff/release",
            "",
            P::DownloadsDecide,
        ),
        door(
            Method::POST,
            "/v1/downloads/dl-ffffffffffff/reject",
            "",
            P::DownloadsDecide,
        ),
    ]);
    for door in &all {
        for who in EVERYONE {
            if granted(who.role(), door.permission) {
                continue;
            }
            let uri = door.path.replace("{id}", &fx.own);
            let uri = match uri.contains('?') {
                true => format!("{uri}&limit=many&after=soon"),
                false => format!("{uri}?limit=many&after=soon"),
            };
            let request = Request::builder()
                .method(door.method.clone())
                .uri(uri)
                .header("authorization", format!("Bearer {}", fx.secrets[&who]))
                .header("content-type", "application/json")
                .body(Body::from("{not json"))
                .unwrap();
            let (status, body) = send(&fx.router, request).await;
            if status != StatusCode::FORBIDDEN || body["error"]["code"] != "forbidden" {
                wrong.push(format!(
                    "{who:?} {} {}: {status} {body}",
                    door.method, door.path
                ));
            }
            checked += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "not refused for the role:\n{}",
        wrong.join("\n")
    );
    assert!(checked > 50, "only {checked} refusals checked");
}
