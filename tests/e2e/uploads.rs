//! Uploads into the browser on a real workspace: a page of an origin on
//! the host (reached through the egress proxy) has a file input whose
//! script shows the chosen file. The agent hands it a file through the
//! API; the default policy holds it for a person, and once approved the
//! page's script reads the name and bytes. The workspace's user cannot
//! read the file where the browser does. The EICAR test file is refused by
//! the quarantine's scan, a selector that names no file input is refused,
//! and the event names the file's SHA-256 and the page's origin. The live
//! view's Upload pane does the same for an operator watching.

use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::cdp::Page;
use cubicle_tests::desk::{self, Tok};
use cubicle_tests::origin;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const TEXT: &str = "hello from the host, 4b1d";

/// A daemon with one workspace on screen at the origin's upload form (a
/// file input `#f` whose script shows the chosen file's name and text in
/// `#got`, and a text field `#t`).
struct Form {
    /// A CDP connection to the workspace's page, to see what it read.
    tab: Page,
    daemon: Daemon,
    /// The origin's port (`http://files.test:{port}`).
    port: u16,
    ws: Value,
    id: String,
    /// The operator who made the workspace (under the default policy,
    /// which confirms uploads).
    operator: Tok,
    _data: tempfile::TempDir,
}

impl Form {
    fn origin(&self) -> String {
        format!("http://files.test:{}", self.port)
    }

    /// Waits until the page's script shows it read file `name` holding `text`.
    async fn reads(&mut self, name: &str, text: &str) {
        let shown = json!(format!("{name}:{text}"));
        self.tab
            .wait_for(&format!(
                "document.getElementById('got').textContent === {shown}"
            ))
            .await
            .unwrap_or_else(|err| panic!("the page never read {shown}: {err}"));
    }
}

async fn form() -> Form {
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
    let socket = daemon.channel_socket(&id);
    let mut tab = Page::first(&socket).await.unwrap();
    let page = format!("http://files.test:{port}/upload-form");
    tab.call("Page.navigate", json!({ "url": page }))
        .await
        .unwrap();
    tab.wait_for("!!document.getElementById('f')")
        .await
        .unwrap();
    Form {
        tab,
        daemon,
        port,
        ws,
        id,
        operator,
        _data: data,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanned_file_reaches_the_pages_file_input_once_approved() {
    // The data dir bound first, so it goes last (after the daemon).
    let Form {
        _data,
        mut tab,
        daemon,
        port,
        ws,
        id,
        operator,
    } = form().await;
    // An agent of this workspace's (an operator made it, with its egress).
    let agent = desk::scoped_token(&daemon, "bot", "agent", &[&id]).await;

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

/// The live view's Upload pane, as two operators use it
/// (tests/browser/uploads_panel.mjs): the workspace's maker uploads a text
/// file from the pane into the page's file input; the default policy holds
/// it, the other operator approves it in the Approvals panel of their
/// page, the pane sends it again by itself and says what went where, and
/// the page's script reads the name and text. A field that is no file
/// input, the EICAR test file (the scan's rule named) and a file the other
/// operator denies are shown refused, with the file still chosen; a
/// released download picked in the pane reaches the page the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_views_upload_pane_hands_a_file_to_the_page_once_approved() {
    let mut form = form().await;
    let decider = desk::token(&form.daemon, "otto", "operator").await;
    let origin = form.origin();
    let (base, uploader, id) = (
        form.daemon.base.clone(),
        form.operator.secret.clone(),
        form.id.clone(),
    );
    let config = |part: &str, download: &str| {
        json!({
            "base": base,
            "uploader": uploader,
            "decider": decider.secret,
            "workspace": id,
            "part": part,
            "download": download,
            "text": TEXT,
            "eicar": String::from_utf8_lossy(origin::EICAR),
        })
    };
    let limit = Duration::from_secs(300);

    let seen = cubicle_tests::browser::run("uploads_panel.mjs", &config("file", ""), limit).await;
    let said = |key: &str| seen[key].as_str().unwrap_or_default().to_owned();
    assert!(said("notFileInput").contains("not a file input"), "{seen}");
    assert_eq!(seen["keptAfterRefusal"], "notes.txt", "{seen}");
    let file = &seen["file"];
    assert!(
        file["held"]
            .as_str()
            .is_some_and(|h| h.starts_with("held: waiting for approval")),
        "{seen}"
    );
    assert_eq!(file["disabledWhileHeld"], true, "{seen}");
    assert_eq!(file["stopWhileHeld"], true, "{seen}");
    assert_eq!(
        file["card"],
        format!("upload notes.txt ({} bytes) into {origin}", TEXT.len()),
        "{seen}"
    );
    let sha256 = hex::encode(Sha256::digest(TEXT.as_bytes()));
    assert_eq!(
        file["uploaded"],
        format!(
            "uploaded notes.txt ({} bytes, sha256 {}…) into {origin}",
            TEXT.len(),
            &sha256[..12]
        ),
        "{seen}"
    );
    assert_eq!(file["enabledAfter"], true, "{seen}");
    assert_eq!(seen["clearedAfterUpload"], "", "{seen}");
    assert!(said("flagged").contains("eicar_test_file"), "{seen}");
    assert_eq!(seen["keptAfterFlag"], "eicar.com", "{seen}");
    assert_eq!(seen["enabledAfterFlag"], true, "{seen}");
    assert_eq!(
        seen["denied"], "not uploaded: denied by otto: not this one",
        "{seen}"
    );
    assert_eq!(seen["keptAfterDenial"], "other.txt", "{seen}");
    // The flagged file was nobody's question, and the page kept the first
    // (neither the flagged nor the denied one reached it).
    let (_, pending) = form
        .daemon
        .call_as(
            Some(&decider.secret),
            Method::GET,
            "/v1/approvals?state=pending",
            None,
        )
        .await
        .unwrap();
    assert_eq!(pending["approvals"], json!([]), "{pending}");
    form.reads("notes.txt", TEXT).await;

    // A download of the workspace's, held by the egress proxy and released.
    let fetched = desk::exec(
        &form.daemon,
        &id,
        &format!("curl -sS -m 30 -D - -o /dev/null {origin}/report.txt 2>&1"),
    )
    .await;
    let download = fetched
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case("x-cubicle-download")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("the report was not held: {fetched}"));
    let (status, released) = form
        .daemon
        .call_as(
            Some(&decider.secret),
            Method::POST,
            &format!("/v1/downloads/{download}/release"),
            Some("{}"),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{released}");
    let name = released["name"].as_str().unwrap().to_owned();

    let seen =
        cubicle_tests::browser::run("uploads_panel.mjs", &config("download", &download), limit)
            .await;
    assert!(
        seen["offered"]
            .as_str()
            .is_some_and(|o| o.starts_with(&format!("{name} ("))),
        "{seen}"
    );
    assert_eq!(seen["fileFieldDisabled"], true, "{seen}");
    assert!(
        seen["download"]["uploaded"]
            .as_str()
            .is_some_and(|u| u.starts_with(&format!("uploaded {name} (")) && u.ends_with(&origin)),
        "{seen}"
    );
    form.reads(&name, "quarterly numbers: all fine\n").await;

    // Both reached the page as the uploading operator's own.
    let events = desk::events(&form.daemon, &format!("workspace={id}")).await;
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "browser.upload" && e["outcome"] == "ok")
        .collect();
    assert_eq!(done.len(), 2, "{events:?}");
    for event in done {
        assert_eq!(event["actor"]["name"], "olga", "{event}");
    }
}
