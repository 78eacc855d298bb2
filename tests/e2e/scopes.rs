//! Token scopes as README "Whose workspaces" states them, tried on a real
//! daemon's doors: a token made with `"scope": [ids]` through
//! `POST /v1/tokens`, one made with `cubicle token create --scope`, one
//! with `"scope": "all"`, and a plain agent token. Each reaches exactly the
//! workspaces its scope names (list, GET, exec, the control stream, the
//! live view) and gets `404 not_found` everywhere else, as for an id that
//! never existed.

use cubicle_tests::Daemon;
use cubicle_tests::daemon::bin_dir;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A token made through the API; its secret.
async fn api_token(daemon: &Daemon, name: &str, scope: Option<Value>) -> String {
    let mut body = json!({"name": name, "role": "agent"});
    if let Some(scope) = scope {
        body["scope"] = scope;
    }
    let (status, made) = daemon
        .call(Method::POST, "/v1/tokens", Some(&body.to_string()))
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    made["secret"].as_str().unwrap().to_owned()
}

/// A token made with the CLI on the daemon's data dir; its secret.
fn cli_token(daemon: &Daemon, name: &str, scope: &str) -> String {
    let out = std::process::Command::new(bin_dir().join("cubicle"))
        .args(["token", "create", "--role", "agent", "--name", name])
        .args(["--scope", scope, "--data-dir"])
        .arg(&daemon.data_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned()
}

/// The ids `secret` lists.
async fn listed(daemon: &Daemon, secret: &str) -> Vec<String> {
    let (status, list) = daemon
        .call_as(Some(secret), Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{list}");
    let mut ids: Vec<String> = list["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// What `secret` gets on each door of workspace `id`: (door, status,
/// error code).
async fn doors(daemon: &Daemon, secret: &str, id: &str) -> Vec<(&'static str, u16, Value)> {
    let mut seen = Vec::new();
    let (status, body) = daemon
        .call_as(
            Some(secret),
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    seen.push(("get", status, body["error"]["code"].clone()));
    let (status, body) = daemon
        .call_as(
            Some(secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(r#"{"command":"true"}"#),
        )
        .await
        .unwrap();
    seen.push(("exec", status, body["error"]["code"].clone()));
    // The control stream (SSE): the status is enough; the stream is dropped.
    let response = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/control/events")))
        .bearer_auth(secret)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let code = if status == 200 {
        Value::Null
    } else {
        response.json::<Value>().await.unwrap()["error"]["code"].clone()
    };
    seen.push(("control/events", status, code));
    let url = format!(
        "{}/v1/workspaces/{id}/vnc?access_token={secret}",
        daemon.base.replacen("http://", "ws://", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "binary".parse().unwrap());
    let (status, code) = match tokio_tungstenite::connect_async(request).await {
        Ok(_) => (101, Value::Null),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body: Value = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            (response.status().as_u16(), body["error"]["code"].clone())
        }
        Err(other) => panic!("live view: {other}"),
    };
    seen.push(("vnc", status, code));
    seen
}

/// Asserts `secret` reaches every door of `id`.
async fn reaches(daemon: &Daemon, who: &str, secret: &str, id: &str) {
    for (door, status, code) in doors(daemon, secret, id).await {
        let want = if door == "vnc" { 101 } else { 200 };
        assert_eq!(status, want, "{who} on {door} of {id}: {code}");
    }
}

/// Asserts `secret` gets `404 not_found` on every door of `id`.
async fn cannot_see(daemon: &Daemon, who: &str, secret: &str, id: &str) {
    for (door, status, code) in doors(daemon, secret, id).await {
        assert_eq!(
            (status, code),
            (404, json!("not_found")),
            "{who} on {door} of {id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_made_by_api_or_cli_reaches_exactly_the_workspaces_it_names() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    // Two workspaces an admin made: no agent owns them.
    let x = daemon.create_workspace(r#"{"name":"x"}"#).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let y = daemon.create_workspace(r#"{"name":"y"}"#).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut both = vec![x.clone(), y.clone()];
    both.sort();

    let plain = api_token(&daemon, "plain", None).await;
    let only_x = api_token(&daemon, "only-x", Some(json!([x]))).await;
    let all = api_token(&daemon, "all", Some(json!("all"))).await;
    let only_y = cli_token(&daemon, "only-y", &y);

    let (status, me) = daemon
        .call_as(Some(&only_x), Method::GET, "/v1/me", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{me}");
    assert!(me["scope"].to_string().contains(&x), "{me}");

    // An agent without a scope reaches only its own: none of these.
    assert_eq!(listed(&daemon, &plain).await, Vec::<String>::new());
    cannot_see(&daemon, "plain agent", &plain, &x).await;
    // Scoped through the API: x, not y.
    assert_eq!(listed(&daemon, &only_x).await, vec![x.clone()]);
    reaches(&daemon, "scope [x]", &only_x, &x).await;
    cannot_see(&daemon, "scope [x]", &only_x, &y).await;
    // Scoped with the CLI: y, not x.
    assert_eq!(listed(&daemon, &only_y).await, vec![y.clone()]);
    reaches(&daemon, "--scope y", &only_y, &y).await;
    cannot_see(&daemon, "--scope y", &only_y, &x).await;
    // "all": both.
    assert_eq!(listed(&daemon, &all).await, both);
    reaches(&daemon, "scope all", &all, &x).await;
    reaches(&daemon, "scope all", &all, &y).await;
    // A workspace one cannot see answers like one that never existed.
    let (status, never) = daemon
        .call_as(
            Some(&only_x),
            Method::GET,
            "/v1/workspaces/ws-000000000000",
            None,
        )
        .await
        .unwrap();
    let (_, hidden) = daemon
        .call_as(
            Some(&only_x),
            Method::GET,
            &format!("/v1/workspaces/{y}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 404, "{never}");
    assert_eq!(
        never["error"]["message"]
            .as_str()
            .unwrap()
            .replace("ws-000000000000", &y),
        hidden["error"]["message"].as_str().unwrap(),
        "a hidden workspace's 404 differs from an unknown id's"
    );

    // The CLI's token made the same event as the API's, by the host's root:
    // a started row, then the outcome naming the token.
    let (status, events) = daemon
        .call(Method::GET, "/v1/events?limit=1000", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{events}");
    let by_cli: Vec<&serde_json::Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "token.create" && e["actor"]["id"] == "host-cli")
        .collect();
    let outcomes: Vec<&str> = by_cli
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["started", "ok"], "{by_cli:?}");
    assert_eq!(by_cli[0]["detail"]["name"], "only-y", "{by_cli:?}");
}
