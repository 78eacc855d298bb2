//! Host-bound secrets on a real workspace: an operator stores one for an
//! HTTPS origin on the host's loopback (its CA given as
//! `--egress-extra-ca`, its names from a test resolver) and gives it to the
//! workspace, which sees only the placeholder (in its commands' environment
//! and in a file). The workspace's curl sends the placeholder; the origin
//! gets the value, in headers, and in a posted body for a secret stored
//! with `"body": true` only; a second origin name gets a refusal instead,
//! and the value is nowhere the workspace, the event log or the audit
//! bundle can show. A login form on the origin gets the value through `fill_secret`
//! (confirmed by a person, masked on screen) and is posted; the same form
//! on the second name is refused.

use cubicle_tests::desk;
use cubicle_tests::origin::{self, TestPki};
use cubicle_tests::{Daemon, guard};
use reqwest::Method;
use serde_json::{Value, json};

const VALUE: &str = "tok-the-real-value-8c1f27";
/// The value of the secret that goes into request bodies too.
const BODY_VALUE: &str = "body-value-3e9a51";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_its_host_only_and_never_the_workspace() {
    let pki = TestPki::new(&["origin.test", "other.test"]);
    let https = origin::serve(Some(pki.server.clone())).await;
    let data = tempfile::tempdir().unwrap();
    let ca = data.path().join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let hosts = data.path().join("hosts");
    std::fs::write(&hosts, "origin.test=127.0.0.1\nother.test=127.0.0.1\n").unwrap();
    let state = data.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let daemon = Daemon::start(
        &state,
        None,
        &[
            "--egress-extra-ca",
            ca.to_str().unwrap(),
            "--egress-allow-host-services",
            "--egress-test-hosts",
            hosts.to_str().unwrap(),
        ],
    )
    .unwrap();
    let operator = desk::token(&daemon, "alice", "operator").await;
    let agent = desk::token(&daemon, "bot", "agent").await;
    let as_op = |method: Method, path: String, body: Option<Value>| {
        let daemon = &daemon;
        let secret = operator.secret.clone();
        async move {
            let body = body.map(|b| b.to_string());
            daemon
                .call_as(Some(&secret), method, &path, body.as_deref())
                .await
                .unwrap()
        }
    };
    let body = json!({
        "policy": "open",
        "egress": {"allow": [
            format!("origin.test:{https}"),
            format!("other.test:{https}"),
            format!("127.0.0.1/32:{https}"),
        ]},
    });
    let ws = desk::create(&daemon, &operator.secret, &body.to_string()).await;
    let id = ws["id"].as_str().unwrap().to_owned();

    // Agents may not store secrets; an operator may, and the answer never
    // holds the value.
    let new = json!({"name": "origin api", "value": VALUE, "hosts": ["Origin.Test"]});
    let (status, reply) = daemon
        .call_as(
            Some(&agent.secret),
            Method::POST,
            "/v1/secrets",
            Some(&new.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 403, "{reply}");
    let (status, secret) = as_op(Method::POST, "/v1/secrets".into(), Some(new)).await;
    assert_eq!(status, 201, "{secret}");
    assert_eq!(secret["hosts"], json!(["origin.test"]));
    assert_eq!(secret["body"], false, "headers only unless asked");
    assert!(!secret.to_string().contains(VALUE), "{secret}");
    let sec = secret["id"].as_str().unwrap().to_owned();
    let (_, listed) = as_op(Method::GET, "/v1/secrets".into(), None).await;
    assert_eq!(listed["secrets"][0]["id"], sec.as_str(), "{listed}");
    assert!(!listed.to_string().contains(VALUE));

    // A secret for a host the workspace may not reach is refused.
    let elsewhere = json!({"name": "x", "value": "v", "hosts": ["api.example.com"]});
    let (_, other) = as_op(Method::POST, "/v1/secrets".into(), Some(elsewhere)).await;
    let (status, reply) = as_op(
        Method::POST,
        format!("/v1/workspaces/{id}/secrets"),
        Some(json!({"secret": other["id"]})),
    )
    .await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("secret_host_not_allowed")),
        "{reply}"
    );

    // Given to the workspace: a placeholder in its commands' environment
    // and in a file; the value in neither.
    let (status, given) = as_op(
        Method::POST,
        format!("/v1/workspaces/{id}/secrets"),
        Some(json!({"secret": sec, "env": "ORIGIN_TOKEN", "path": "/home/user/.origin-token"})),
    )
    .await;
    assert_eq!(status, 201, "{given}");
    let placeholder = given["placeholder"].as_str().unwrap().to_owned();
    assert!(placeholder.starts_with("cubicle_secret_"), "{given}");
    let shown = desk::exec(
        &daemon,
        &id,
        "echo \"$ORIGIN_TOKEN\"; cat ~/.origin-token; echo; stat -c %a ~/.origin-token",
    )
    .await;
    assert_eq!(shown, format!("{placeholder}\n{placeholder}\n600\n"));
    let (status, again) = as_op(
        Method::POST,
        format!("/v1/workspaces/{id}/secrets"),
        Some(json!({"secret": sec})),
    )
    .await;
    assert_eq!(status, 409, "{again}");

    // The workspace's curl sends the placeholder; the origin gets the
    // value, in a bearer header and in basic auth alike.
    let curl = |host: &str, flags: &str| {
        format!(
            "curl -sS -m {} {flags} https://{host}:{https}/headers 2>&1",
            guard(std::time::Duration::from_secs(60)).as_secs()
        )
    };
    let bearer = desk::exec(
        &daemon,
        &id,
        &curl(
            "origin.test",
            "-H \"Authorization: Bearer $ORIGIN_TOKEN\" -H \"X-Api-Key: $(cat ~/.origin-token)\"",
        ),
    )
    .await;
    assert!(
        bearer.contains(&format!("authorization: Bearer {VALUE}")),
        "{bearer}"
    );
    assert!(bearer.contains(&format!("x-api-key: {VALUE}")), "{bearer}");
    assert!(!bearer.contains(&placeholder), "{bearer}");
    let basic = desk::exec(
        &daemon,
        &id,
        &curl("origin.test", "-u \"me:$ORIGIN_TOKEN\""),
    )
    .await;
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("me:{VALUE}"))
    };
    assert!(
        basic.contains(&format!("authorization: Basic {encoded}")),
        "{basic}"
    );

    // In a request body: a secret stored with `"body": true` goes in (the
    // length is the new one, chunked or not as curl sent it); a
    // headers-only secret's placeholder arrives as it was sent.
    let in_body = json!({
        "name": "origin body", "value": BODY_VALUE, "hosts": ["origin.test"], "body": true,
    });
    let (status, body_secret) = as_op(Method::POST, "/v1/secrets".into(), Some(in_body)).await;
    assert_eq!(
        (status, &body_secret["body"]),
        (201, &json!(true)),
        "{body_secret}"
    );
    let body_sec = body_secret["id"].as_str().unwrap().to_owned();
    let (status, given) = as_op(
        Method::POST,
        format!("/v1/workspaces/{id}/secrets"),
        Some(json!({"secret": body_sec, "env": "ORIGIN_BODY_TOKEN"})),
    )
    .await;
    assert_eq!((status, &given["body"]), (201, &json!(true)), "{given}");
    let body_placeholder = given["placeholder"].as_str().unwrap().to_owned();
    let want = format!(r#"{{"key": "{BODY_VALUE}", "header_only": "{placeholder}"}}"#);
    for flags in ["", "-H 'Transfer-Encoding: chunked'"] {
        let echoed = desk::exec(
            &daemon,
            &id,
            &format!(
                "printf '{{\"key\": \"%s\", \"header_only\": \"%s\"}}' \"$ORIGIN_BODY_TOKEN\" \"$ORIGIN_TOKEN\" | \
                 curl -sS -m {} {flags} -H 'Content-Type: application/json' --data-binary @- \
                 https://origin.test:{https}/echo-body 2>&1",
                guard(std::time::Duration::from_secs(60)).as_secs()
            ),
        )
        .await;
        assert_eq!(
            echoed,
            format!(
                "content-length: {}\ntransfer-encoding: -\n\n{want}",
                want.len()
            ),
            "{flags}"
        );
        assert!(!echoed.contains(&body_placeholder), "{echoed}");
    }

    // Toward another name (the same address): refused, nothing sent.
    let before = origin::seen("/headers").len();
    let refused = desk::exec(
        &daemon,
        &id,
        &curl(
            "other.test",
            "-o /dev/null -w '%{http_code}' -H \"Authorization: Bearer $ORIGIN_TOKEN\"",
        ),
    )
    .await;
    assert_eq!(refused.trim(), "403", "{refused}");
    assert_eq!(
        origin::seen("/headers").len(),
        before,
        "it reached the origin"
    );

    // A login form on the origin, filled without the agent seeing the
    // value: only a password or autocomplete-marked field, only on a page
    // of the secret's host, confirmed by a person under the default policy.
    let socket = daemon.channel_socket(&id);
    let mut tab = cubicle_tests::cdp::Page::first(&socket).await.unwrap();
    let login = format!("https://origin.test:{https}/login");
    tab.call("Page.navigate", json!({ "url": login }))
        .await
        .unwrap();
    tab.wait_for("!!document.getElementById('note')")
        .await
        .unwrap();
    let (status, _) = as_op(
        Method::PUT,
        format!("/v1/workspaces/{id}/policy"),
        Some(json!({"policy": "default"})),
    )
    .await;
    assert_eq!(status, 200);
    // An agent of this workspace's (an operator made it).
    let driver = desk::scoped_token(&daemon, "driver", "agent", &[&id]).await;
    let fill = |body: Value| {
        let daemon = &daemon;
        let agent = driver.secret.clone();
        let id = id.clone();
        async move {
            daemon
                .call_as(
                    Some(&agent),
                    Method::POST,
                    &format!("/v1/workspaces/{id}/fill_secret"),
                    Some(&body.to_string()),
                )
                .await
                .unwrap()
        }
    };
    let (status, refused) = fill(json!({"secret": sec, "selector": "#note"})).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("neither a password field")),
        "{refused}"
    );
    let (status, unknown) = fill(json!({"secret": "sec-000000000000", "selector": "#pw"})).await;
    assert_eq!(
        (status, unknown["error"]["code"].as_str()),
        (404, Some("secret_not_given")),
        "{unknown}"
    );
    for (selector, field) in [("#pw", "password"), ("#otp", "autocomplete:one-time-code")] {
        // By the placeholder the workspace holds, as an agent knows it.
        let body = json!({"secret": placeholder, "selector": selector});
        let (status, held) = fill(body.clone()).await;
        assert_eq!(status, 202, "{held}");
        let approval = held["approval"]["id"].as_str().unwrap().to_owned();
        // The operator sees which secret goes into which field of which
        // page, never the value.
        let (_, record) = as_op(Method::GET, format!("/v1/approvals/{approval}"), None).await;
        assert_eq!(record["params"]["field"], field, "{record}");
        assert_eq!(record["params"]["url"], login.as_str(), "{record}");
        assert!(!record.to_string().contains(VALUE), "{record}");
        let (status, _) = as_op(
            Method::POST,
            format!("/v1/approvals/{approval}/approve"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200);
        let (status, filled) = fill(body).await;
        assert_eq!(status, 200, "{filled}");
        assert_eq!(filled["field"], field, "{filled}");
        assert_eq!(filled["host"], "origin.test", "{filled}");
        assert!(!filled.to_string().contains(VALUE), "{filled}");
    }
    // Masked on screen: the marked text field shows discs, as the password
    // field does.
    let masked = tab
        .eval("getComputedStyle(document.getElementById('otp')).webkitTextSecurity")
        .await
        .unwrap();
    assert_eq!(masked, "disc");
    tab.eval("document.getElementById('user').value = 'alice'; document.getElementById('go').click(); true")
        .await
        .unwrap();
    tab.wait_for("!!document.getElementById('result')")
        .await
        .unwrap();
    let form = origin::posted();
    assert!(
        form.iter()
            .any(|f| f.contains(&format!("pw={VALUE}")) && f.contains(&format!("otp={VALUE}"))),
        "the origin got {form:?}"
    );
    // The same form on a host the secret is not bound to: refused.
    tab.call(
        "Page.navigate",
        json!({ "url": format!("https://other.test:{https}/login") }),
    )
    .await
    .unwrap();
    tab.wait_for("location.hostname === 'other.test' && !!document.getElementById('pw')")
        .await
        .unwrap();
    let (status, elsewhere) = fill(json!({"secret": sec, "selector": "#pw"})).await;
    assert_eq!(status, 409, "{elsewhere}");
    assert!(
        elsewhere["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("goes only to origin.test")),
        "{elsewhere}"
    );

    // Every step is an event; none holds the value.
    let events = desk::events(&daemon, &format!("workspace={id}")).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"secret.bind"), "{kinds:?}");
    let fills: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "secret.fill" && e["outcome"] == "ok")
        .collect();
    assert_eq!(fills.len(), 2, "{kinds:?}");
    assert_eq!(fills[0]["detail"]["field"], "password", "{:?}", fills[0]);
    let blocked = events
        .iter()
        .find(|e| e["kind"] == "egress.secret_blocked")
        .unwrap_or_else(|| panic!("no egress.secret_blocked in {kinds:?}"));
    assert_eq!(blocked["detail"]["host"], "other.test", "{blocked}");
    assert_eq!(blocked["detail"]["secret"], sec.as_str(), "{blocked}");
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "egress.request"
                && e["detail"]["secrets"] == json!([sec.as_str()])),
        "no request names the secret it carried"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "egress.request"
            && e["detail"]["secrets"] == json!([body_sec.as_str()])
            && e["detail"]["swaps"] == json!([{"secret": body_sec.as_str(), "place": "body"}])),
        "no request says its body carried the body secret"
    );
    let everything = serde_json::to_string(&desk::events(&daemon, "").await).unwrap();
    for value in [VALUE, BODY_VALUE] {
        assert!(!everything.contains(value), "{value} is in the event log");
    }
    let bundle = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/audit/export")))
        .bearer_auth(&daemon.token)
        .send()
        .await
        .unwrap();
    assert_eq!(bundle.status(), 200);
    let bytes = bundle.bytes().await.unwrap();
    for value in [VALUE, BODY_VALUE] {
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "{value} is in the audit bundle"
        );
    }
    // Nor anywhere on the workspace's disk.
    let found = desk::exec(
        &daemon,
        &id,
        &format!("grep -rl {VALUE} /home/user /tmp 2>/dev/null; true"),
    )
    .await;
    assert_eq!(found, "", "the value is in the workspace");

    // The traffic as HAR: what the proxy saw, credentials redacted, valid
    // HAR 1.2 (har-validator); agents may not read it.
    let (status, _) = daemon
        .call_as(
            Some(&agent.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}/har"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 403);
    let (status, har) = as_op(Method::GET, format!("/v1/workspaces/{id}/har"), None).await;
    assert_eq!(status, 200, "{har}");
    let text = har.to_string();
    assert!(
        !text.contains(VALUE) && !text.contains(BODY_VALUE),
        "a value is in the HAR"
    );
    let entries = har["log"]["entries"].as_array().unwrap();
    let sent = entries
        .iter()
        .find(|e| e["request"]["url"] == format!("https://origin.test:{https}/headers"))
        .unwrap_or_else(|| panic!("no request to the origin in {har}"));
    assert_eq!(sent["response"]["status"], 200, "{sent}");
    assert_eq!(
        sent["response"]["content"]["mimeType"], "text/plain",
        "{sent}"
    );
    let authorization = sent["request"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "authorization")
        .unwrap_or_else(|| panic!("{sent}"));
    assert_eq!(authorization["value"], "[redacted]");
    assert_eq!(sent["_cubicle"]["secrets"], json!([sec.as_str()]));
    assert_eq!(
        sent["_cubicle"]["swaps"],
        json!([
            {"secret": sec.as_str(), "place": "header authorization"},
            {"secret": sec.as_str(), "place": "header x-api-key"},
        ]),
        "{sent}"
    );
    let file = data.path().join("traffic.har");
    std::fs::write(&file, &text).unwrap();
    let checked = cubicle_tests::browser::run(
        "har_check.mjs",
        &json!({ "file": file }),
        std::time::Duration::from_secs(60),
    )
    .await;
    assert_eq!(checked["valid"], true, "{checked}");
    // The bundle holds the same traffic as traffic.har, made from its sealed
    // records, and verifies with it.
    let bundle = cubicle_recorder::bundle::Bundle::from_tar(&bytes[..]).unwrap();
    let in_bundle: Value =
        serde_json::from_slice(bundle.har.as_deref().expect("traffic.har")).unwrap();
    let urls = |har: &Value| -> Vec<String> {
        har["log"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["request"]["url"].as_str().map(str::to_owned))
            .collect()
    };
    let bundled = urls(&in_bundle);
    assert!(
        bundled.contains(&format!("https://origin.test:{https}/headers")),
        "{bundled:?}"
    );
    assert!(
        bundled.iter().all(|url| urls(&har).contains(url)),
        "the bundle's HAR holds requests the log's does not: {bundled:?}"
    );
    let report =
        cubicle_recorder::verify::verify(&bundle, None, cubicle_recorder::verify::Tail::Signed);
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.har_entries as usize, bundled.len());

    // Removed: its placeholder is refused even toward its own host.
    let (status, _) = as_op(Method::DELETE, format!("/v1/secrets/{sec}"), None).await;
    assert_eq!(status, 204);
    let after = desk::exec(
        &daemon,
        &id,
        &curl(
            "origin.test",
            "-o /dev/null -w '%{http_code}' -H \"Authorization: Bearer $(cat ~/.origin-token)\"",
        ),
    )
    .await;
    assert_eq!(after.trim(), "403", "{after}");
}

/// The Secrets panel in headless Chromium (tests/browser/secrets.mjs): an
/// operator stores a secret for request bodies too and one for headers only
/// (each listed saying so; the value field empties, the page never shows
/// it back), gives it to a workspace with a variable and sees the
/// placeholder, which is what the workspace's commands get; a secret for a
/// host its egress policy does not open is refused with the reason, and
/// removed; the first stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_manages_secrets_in_the_page() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let operator = desk::token(&daemon, "olga", "operator").await;
    let body = json!({"egress": {"allow": ["api.allowed.test:443"]}});
    let ws = desk::create(&daemon, &operator.secret, &body.to_string()).await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let value = "page-typed-value-5d02";
    let config = json!({
        "base": daemon.base,
        "operator": operator.secret,
        "workspace": id,
        "value": value,
    });
    let seen =
        cubicle_tests::browser::run("secrets.mjs", &config, std::time::Duration::from_secs(120))
            .await;
    assert_eq!(seen["error"], Value::Null, "{seen}");
    assert_eq!(seen["hosts"], "goes to api.allowed.test only", "{seen}");
    assert_eq!(seen["swaps"], "in request headers and bodies", "{seen}");
    assert_eq!(seen["swapsElsewhere"], "in request headers only", "{seen}");
    assert_eq!(seen["bodyBoxAfter"], false, "{seen}");
    assert_eq!(
        seen["stored"],
        json!([["api key", true], ["elsewhere", false]]),
        "{seen}"
    );
    assert_eq!(seen["valueField"], "", "{seen}");
    assert_eq!(seen["pageHoldsValue"], false, "{seen}");
    let placeholder = seen["placeholder"].as_str().unwrap_or_default();
    assert!(placeholder.starts_with("cubicle_secret_"), "{seen}");
    assert!(
        seen["given"]
            .as_str()
            .is_some_and(|g| g.contains("$API_KEY")),
        "{seen}"
    );
    assert!(
        seen["refused"]
            .as_str()
            .is_some_and(|r| r.contains("api.notallowed.test") && r.contains("egress policy")),
        "{seen}"
    );
    assert_eq!(seen["left"], json!(["api key"]), "{seen}");
    // What the page gave is what the workspace's commands hold.
    let env = desk::exec(&daemon, &id, "printf %s \"$API_KEY\"").await;
    assert_eq!(env, placeholder);
}
