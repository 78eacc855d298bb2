//! `cubicle serve --egress-no-intercept` (README "Egress"): HTTPS from a
//! workspace reaches the origin untouched, the workspace sees the origin's
//! own certificate (not one of the installation CA's), and the proxy sees
//! only host and port: the decision is an event, no URL is. The default,
//! intercepted, is `egress.rs`'s (it sees the Cubicle CA and each request).

use cubicle_tests::Daemon;
use cubicle_tests::desk::exec;
use cubicle_tests::origin::{self, TestPki};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_intercept_tunnels_tls_untouched_and_sees_no_url() {
    let pki = TestPki::new(&["origin.test", "127.0.0.1"]);
    let https = origin::serve(Some(pki.server.clone())).await;
    let data = tempfile::tempdir().unwrap();
    let ca = data.path().join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let hosts = data.path().join("hosts");
    std::fs::write(&hosts, "origin.test=127.0.0.1\n").unwrap();
    let state = data.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let daemon = Daemon::start(
        &state,
        None,
        &[
            "--egress-no-intercept",
            "--egress-extra-ca",
            ca.to_str().unwrap(),
            // The origins run on the host's loopback.
            "--egress-allow-host-services",
            "--egress-test-hosts",
            hosts.to_str().unwrap(),
        ],
    )
    .unwrap();
    let body = json!({"egress": {"allow": [
        format!("origin.test:{https}"),
        // The origin is on loopback: a rule inside that range must name it.
        format!("127.0.0.1/32:{https}"),
    ]}})
    .to_string();
    let ws = daemon.create_workspace(&body).await;
    let id = ws["id"].as_str().unwrap().to_owned();

    // The workspace trusts only the origin's own CA for this call: it
    // verifies, and the certificate it got is the origin's.
    exec(
        &daemon,
        &id,
        &format!("cat > /tmp/origin-ca.pem <<'EOF'\n{}EOF", pki.ca_pem),
    )
    .await;
    let page = exec(
        &daemon,
        &id,
        &format!(
            "curl -sS -m 20 --cacert /tmp/origin-ca.pem https://origin.test:{https}/ 2>&1; echo rc=$?"
        ),
    )
    .await;
    assert!(
        page.contains("hello from origin") && page.contains("rc=0"),
        "{page}"
    );
    let issuer = exec(
        &daemon,
        &id,
        &format!(
            "curl -sS -m 20 -k -o /dev/null -w '%{{certs}}' https://origin.test:{https}/ | grep -m1 Issuer"
        ),
    )
    .await;
    assert!(
        issuer.contains("Cubicle test origin CA") && !issuer.contains("Cubicle egress CA"),
        "not intercepted: the origin's own certificate, got {issuer}"
    );

    let (status, events) = daemon
        .call(Method::GET, &format!("/v1/events?workspace={id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{events}");
    let events = events["events"].as_array().unwrap();
    let decisions: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "egress.decision" && e["outcome"] == "allowed")
        .collect();
    assert!(
        !decisions.is_empty()
            && decisions
                .iter()
                .all(|e| e["detail"]["mode"] != "intercepted"),
        "the decision is an event, not intercepted: {decisions:#?}"
    );
    let requests: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "egress.request")
        .collect();
    assert!(
        requests.is_empty(),
        "URLs seen without interception: {requests:#?}"
    );
    eprintln!(
        "no intercept: {} allowed decisions (mode {}), no egress.request; {}",
        decisions.len(),
        decisions[0]["detail"]["mode"],
        issuer.trim()
    );
}
