//! The outside attack on the guard rails, against a real `cubicle serve`:
//! an agent created its own workspace with an egress rule opening the
//! gateway's own port on loopback (`127.0.0.1/32:<port>`), then reached the
//! gateway's API from inside it. Now the create is refused (403 naming the
//! field) on both doors, even under `--egress-default allow` (public
//! addresses, which loopback is not), and nothing is made. Positive
//! control: the same agent's narrower egress is taken, the workspace runs
//! with it, and from inside the gateway's port is not reached.

use reqwest::Method;
use serde_json::{Value, json};

use cubicle_tests::Daemon;
use cubicle_tests::desk;

/// A JSON-RPC `tools/call` of `create_workspace` on `/v1/mcp`: the tool
/// error's `{code, message, status}`, or the created view.
async fn mcp_create(daemon: &Daemon, token: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "create_workspace", "arguments": arguments },
    });
    let response = reqwest::Client::new()
        .post(daemon.url("/v1/mcp"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["result"].clone()
}

#[tokio::test]
async fn an_agent_cannot_open_the_gateways_port_to_its_own_workspace() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--egress-default", "allow"]).unwrap();
    let port = daemon
        .base
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok())
        .expect("the daemon's base URL ends in its port");
    let agent = desk::token(&daemon, "bot", "agent").await;
    let attacks = [
        json!({"egress": {"allow": [format!("127.0.0.1/32:{port}")]}}),
        json!({"egress": {"allow": ["127.0.0.0/8:*"]}}),
        json!({"egress": {"allow": [format!("[::1]:{port}")]}}),
        json!({"egress": {"allow": ["example.org:443"], "intercept": false}}),
        json!({"policy": "open"}),
        json!({"record": false}),
    ];
    for attack in &attacks {
        let (status, body) = daemon
            .call_as(
                Some(&agent.secret),
                Method::POST,
                "/v1/workspaces",
                Some(&attack.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(status, 403, "REST {attack}: {body}");
        let rest = body["error"]["message"].as_str().unwrap().to_owned();
        let field = attack.as_object().unwrap().keys().next().unwrap().clone();
        assert!(rest.starts_with(&field), "names the field: {rest}");
        assert!(rest.contains("operator"), "says what to do: {rest}");
        let result = mcp_create(&daemon, &agent.secret, attack.clone()).await;
        assert_eq!(result["isError"], true, "MCP {attack}: {result}");
        let error = &result["structuredContent"]["error"];
        assert_eq!(error["status"], 403, "MCP {attack}: {result}");
        assert_eq!(
            error["message"],
            rest.as_str(),
            "both doors answer the same"
        );
    }
    let (_, listed) = daemon
        .call(Method::GET, "/v1/workspaces", None)
        .await
        .unwrap();
    assert_eq!(listed["workspaces"], json!([]), "nothing was made");

    // Positive control: a narrower egress is the agent's to ask, and the
    // workspace runs with exactly it.
    let narrower = json!({"name": "narrow", "egress": {"allow": ["example.org:443"]}});
    let ws = desk::create(&daemon, &agent.secret, &narrower.to_string()).await;
    assert_eq!(ws["egress"]["allow"], json!(["example.org:443"]), "{ws}");
    let id = ws["id"].as_str().unwrap();
    // From inside, the gateway's port is not reached: the proxy refuses
    // it (the gateway would answer 401 to a request without a token).
    let out = desk::exec(
        &daemon,
        id,
        &format!(
            "curl -s -m 10 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/v1/me; echo \" rc=$?\""
        ),
    )
    .await;
    assert!(
        !out.starts_with("401") && !out.starts_with("200"),
        "the workspace reached the gateway: {out}"
    );
    let events = desk::events(&daemon, "").await;
    let refused = events
        .iter()
        .filter(|e| e["kind"] == "workspace.create" && e["outcome"] == "error:forbidden")
        .count();
    assert_eq!(refused, 2 * attacks.len(), "every refusal is on record");
}
