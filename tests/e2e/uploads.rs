//! Uploads into the browser on a real workspace: a page of an origin on
//! the host (reached through the egress proxy) has a file input whose
//! script shows the chosen file. The agent hands it a file through the
//! API; the default policy holds it for a person, and once approved the
//! page's script reads the name and bytes. The workspace's user cannot
//! read the file where the browser does. The EICAR test file is refused by
//! the quarantine's scan, a selector that names no file input is refused,
//! and the event names the file's SHA-256 and the page's origin.

use cubicle_tests::Daemon;
use cubicle_tests::desk;
use cubicle_tests::origin;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const TEXT: &str = "hello from the host, 4b1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanned_file_reaches_the_pages_file_input_once_approved() {
    let port = origin::serve(None).await;
    let data = tempfile::tempdir().unwrap();
    let hosts = data.path().join("hosts");
    std::fs::write(&hosts, "files.test=127.0.0.1\n").unwrap();
    let state = data.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let daemon = Daemon::start(
        &state,
        None,
        &[
            "--egress-allow-host-services",
            "--egress-test-hosts",
            hosts.to_str().unwrap(),
        ],
    )
    .unwrap();
    let operator = desk::token(&daemon, "olga", "operator").await;
    let body = json!({
        "policy": "default",
        "egress": {"allow": [format!("files.test:{port}"), format!("127.0.0.1/32:{port}")]},
    });
    let ws = desk::create(&daemon, &operator.secret, &body.to_string()).await;
    let id = ws["id"].as_str().unwrap().to_owned();
    // An agent of this workspace's (an operator made it, with its egress).
    let agent = desk::scoped_token(&daemon, "bot", "agent", &[&id]).await;
    let socket = daemon.channel_socket(&id);
    let mut tab = cubicle_tests::cdp::Page::first(&socket).await.unwrap();
    let page = format!("http://files.test:{port}/upload-form");
    tab.call("Page.navigate", json!({ "url": page }))
        .await
        .unwrap();
    tab.wait_for("!!document.getElementById('f')")
        .await
        .unwrap();

    let upload = |query: String, bytes: Vec<u8>| {
        let daemon = &daemon;
        let agent = agent.secret.clone();
        let id = id.clone();
        async move {
            let response = reqwest::Client::new()
                .post(daemon.url(&format!("/v1/workspaces/{id}/upload?{query}")))
                .bearer_auth(agent)
                .header("content-type", "application/octet-stream")
                .body(bytes)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };

    // What the scan flags never reaches the page, nor a person's queue.
    let (status, flagged) = upload(
        "name=eicar.com&selector=%23f".into(),
        origin::EICAR.to_vec(),
    )
    .await;
    assert_eq!(status, 403, "{flagged}");
    assert_eq!(flagged["error"]["code"], "upload_flagged", "{flagged}");
    // A selector that names a text field is no file input.
    let (status, wrong) = upload("name=a.txt&selector=%23t".into(), b"x".to_vec()).await;
    assert_eq!(status, 409, "{wrong}");
    assert!(
        wrong["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a file input")),
        "{wrong}"
    );
    let (status, neither) = upload("selector=%23f".into(), b"x".to_vec()).await;
    assert_eq!(status, 400, "{neither}");

    // Held for a person; approved, the page's script reads it.
    let query = "name=notes.txt&selector=%23f".to_owned();
    let (status, held) = upload(query.clone(), TEXT.as_bytes().to_vec()).await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval"]["id"].as_str().unwrap().to_owned();
    let (_, record) = daemon
        .call_as(
            Some(&operator.secret),
            Method::GET,
            &format!("/v1/approvals/{approval}"),
            None,
        )
        .await
        .unwrap();
    let sha256 = hex::encode(Sha256::digest(TEXT.as_bytes()));
    assert_eq!(record["params"]["sha256"], sha256.as_str(), "{record}");
    assert_eq!(
        record["params"]["origin"],
        format!("http://files.test:{port}"),
        "{record}"
    );
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/approvals/{approval}/approve"),
            Some("{}"),
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, uploaded) = upload(query, TEXT.as_bytes().to_vec()).await;
    assert_eq!(status, 200, "{uploaded}");
    assert_eq!(uploaded["sha256"], sha256.as_str(), "{uploaded}");
    assert_eq!(uploaded["name"], "notes.txt", "{uploaded}");
    tab.wait_for(&format!(
        "document.getElementById('got').textContent === 'notes.txt:{TEXT}'"
    ))
    .await
    .unwrap();

    // The workspace's user cannot read what the browser read, through a
    // command or the files API (which runs with the user's ids). Control,
    // in a jail (whose disk the host sees): the file is there, so the
    // refusals are the wall and not a missing file.
    let looked = desk::exec(
        &daemon,
        &id,
        "cat /run/cubicle-browser/uploads/*/notes.txt 2>&1; true",
    )
    .await;
    assert!(!looked.contains(TEXT), "the user read the upload: {looked}");
    if ws["backend"] == "jail" {
        let uploads = daemon.workspace_dir(&id).join("disk/browser/uploads");
        let folder = std::fs::read_dir(&uploads)
            .unwrap_or_else(|e| panic!("control: {}: {e}", uploads.display()))
            .flatten()
            .next()
            .expect("control: an upload folder");
        let kept = folder.path().join("notes.txt");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), TEXT);
        let inside = format!(
            "/run/cubicle-browser/uploads/{}/notes.txt",
            folder.file_name().to_string_lossy()
        );
        let response = reqwest::Client::new()
            .get(daemon.url(&format!("/v1/workspaces/{id}/files")))
            .query(&[("path", inside.as_str())])
            .bearer_auth(&daemon.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 403, "{inside}");
    }

    let events = desk::events(&daemon, &format!("workspace={id}")).await;
    let started = events
        .iter()
        .find(|e| e["kind"] == "browser.upload" && e["outcome"] == "started")
        .unwrap_or_else(|| panic!("no browser.upload event in {events:?}"));
    assert_eq!(started["detail"]["sha256"], sha256.as_str(), "{started}");
    assert_eq!(
        started["detail"]["origin"],
        format!("http://files.test:{port}"),
        "{started}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "browser.upload" && e["outcome"] == "ok"),
        "the upload did not end ok"
    );
}
