//! Disk snapshots on real workspaces: an agent's workspace has a file in
//! its home, one in /tmp and a cookie in its browser; a snapshot of it
//! starts two forks at once, each with the files and the cookie, each its
//! own machine (its own id, uid, machine id and audit chain, whose restore
//! record names the snapshot's digest). A rollback puts a changed file back and removes
//! one made after the snapshot. Another token neither sees nor uses the
//! snapshot. Bad input gets a clear refusal and leaves no half snapshot: a
//! stopped workspace, a taken name, a malformed or unknown id, `count`
//! without a snapshot, an archive changed on the host (refused by its
//! digest, the fork discarded).

use cubicle_tests::Daemon;
use cubicle_tests::desk;
use reqwest::Method;
use serde_json::{Value, json};

const COOKIE: &str = "snap-7e11";

/// The `session` cookie's value in workspace `id`'s browser.
async fn cookie(daemon: &Daemon, id: &str) -> Option<String> {
    desk::site_cookies(daemon, id)
        .await
        .iter()
        .find(|c| c["name"] == "session")
        .and_then(|c| c["value"].as_str().map(str::to_owned))
}

/// Calls MCP tool `name` with `token`; its structured result (panics on
/// an error result).
async fn mcp_tool(daemon: &Daemon, token: &str, name: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": name, "arguments": arguments }
    });
    let (status, body) = crate::mcp::rpc(daemon, Some(token), message).await;
    assert_eq!(status, 200, "{name}: {body}");
    assert_ne!(body["result"]["isError"], true, "{name}: {body}");
    body["result"]["structuredContent"].clone()
}

fn id_of(ws: &Value) -> String {
    ws["id"].as_str().expect("a workspace id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_starts_forks_with_its_files_and_cookie_and_rolls_back() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let agent = desk::token(&daemon, "ada", "agent").await;
    let other = desk::token(&daemon, "eve", "agent").await;
    let call = |secret: &str, method: Method, path: &str, body: Option<Value>| {
        let daemon = &daemon;
        let (secret, path) = (secret.to_owned(), path.to_owned());
        async move {
            let body = body.map(|b| b.to_string());
            daemon
                .call_as(Some(&secret), method, &path, body.as_deref())
                .await
                .unwrap()
        }
    };

    let clock = std::time::Instant::now();
    let source = id_of(&desk::create(&daemon, &agent.secret, "{}").await);
    let create_ms = clock.elapsed().as_millis();
    desk::exec(
        &daemon,
        &source,
        "echo original > ~/notes.txt && echo scratch > /tmp/scratch.txt",
    )
    .await;
    desk::set_cookie(&daemon, &source, "session", COOKIE).await;

    let snapshot_path = format!("/v1/workspaces/{source}/snapshot");
    let clock = std::time::Instant::now();
    let (status, snap) = call(
        &agent.secret,
        Method::POST,
        &snapshot_path,
        Some(json!({"name": "ready"})),
    )
    .await;
    let take_ms = clock.elapsed().as_millis();
    assert_eq!(status, 201, "{snap}");
    assert_eq!(snap["kind"], "disk", "{snap}");
    assert_eq!(snap["workspace_id"], source.as_str(), "{snap}");
    assert!(snap["home_size"].as_u64() > Some(0), "{snap}");
    assert!(snap["profile_size"].as_u64() > Some(0), "{snap}");
    let sha256 = snap["sha256"].as_str().unwrap().to_owned();
    assert_eq!(sha256.len(), 64, "{snap}");
    let snap_id = snap["id"].as_str().unwrap().to_owned();
    // The source runs on, its browser open again.
    assert_eq!(
        desk::exec(&daemon, &source, "cat ~/notes.txt").await,
        "original\n"
    );
    assert_eq!(cookie(&daemon, &source).await.as_deref(), Some(COOKIE));

    // A taken name; another token sees and uses none of it.
    let (status, body) = call(
        &agent.secret,
        Method::POST,
        &snapshot_path,
        Some(json!({"name": "ready"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "snapshot_exists", "{body}");
    let (_, theirs) = call(&other.secret, Method::GET, "/v1/snapshots", None).await;
    assert_eq!(theirs["snapshots"], json!([]), "{theirs}");
    let (status, body) = call(
        &other.secret,
        Method::POST,
        "/v1/workspaces",
        Some(json!({"from_snapshot": snap_id})),
    )
    .await;
    assert_eq!(status, 404, "another token's fork: {body}");

    // Two forks at once.
    let clock = std::time::Instant::now();
    let (status, forks) = call(
        &agent.secret,
        Method::POST,
        "/v1/workspaces",
        Some(json!({"from_snapshot": snap_id, "count": 2})),
    )
    .await;
    let forks_ms = clock.elapsed().as_millis();
    assert_eq!(status, 201, "{forks}");
    assert_eq!(forks["failed"], json!([]), "{forks}");
    let made = forks["workspaces"].as_array().unwrap().clone();
    assert_eq!(made.len(), 2, "{forks}");
    assert_ne!(made[0]["host_uid"], made[1]["host_uid"], "{forks}");
    for fork in &made {
        let id = id_of(fork);
        assert_ne!(id, source);
        assert_eq!(fork["state"], "running", "{fork}");
        assert_eq!(
            desk::exec(&daemon, &id, "cat ~/notes.txt").await,
            "original\n"
        );
        assert_eq!(
            desk::exec(&daemon, &id, "cat /tmp/scratch.txt").await,
            "scratch\n"
        );
        assert_eq!(
            cookie(&daemon, &id).await.as_deref(),
            Some(COOKIE),
            "the fork's browser runs on the snapshot's profile"
        );
        let restored = desk::event_of(
            &daemon,
            &id,
            "snapshot.restore",
            std::time::Duration::from_secs(10),
        )
        .await
        .expect("a snapshot.restore event in the fork's chain");
        assert_eq!(
            restored["detail"]["snapshot"],
            snap_id.as_str(),
            "{restored}"
        );
        assert_eq!(restored["detail"]["sha256"], sha256.as_str(), "{restored}");
    }
    // Each fork is its own machine: a machine id of its own, made at its
    // start (none is baked into the image to be shared).
    let mut ids = std::collections::BTreeSet::new();
    for id in std::iter::once(source.clone()).chain(made.iter().map(id_of)) {
        let machine =
            desk::exec(&daemon, &id, "cat /etc/machine-id /var/lib/dbus/machine-id").await;
        let lines: Vec<&str> = machine.lines().collect();
        assert_eq!(lines.len(), 2, "{id}: {machine:?}");
        assert_eq!(lines[0], lines[1], "{id}: D-Bus reads the same id");
        assert!(
            lines[0].len() == 32 && lines[0].bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}: {machine:?}"
        );
        ids.insert(lines[0].to_owned());
    }
    assert_eq!(
        ids.len(),
        3,
        "the source and two forks share a machine id: {ids:?}"
    );

    // One fork's change is its own.
    let first = id_of(&made[0]);
    let second = id_of(&made[1]);
    desk::exec(&daemon, &first, "echo mine > ~/notes.txt").await;
    assert_eq!(
        desk::exec(&daemon, &second, "cat ~/notes.txt").await,
        "original\n"
    );

    // Rollback: a changed file back, a later one gone.
    desk::exec(
        &daemon,
        &source,
        "echo changed > ~/notes.txt && echo later > ~/after.txt",
    )
    .await;
    // Through MCP, as an agent would: the tool lists the snapshot, and
    // rolls back to it.
    let listed = mcp_tool(&daemon, &agent.secret, "list_snapshots", json!({})).await;
    assert_eq!(listed["snapshots"][0]["id"], snap_id.as_str(), "{listed}");
    let clock = std::time::Instant::now();
    let rolled = mcp_tool(
        &daemon,
        &agent.secret,
        "rollback",
        json!({"workspace": source, "snapshot": snap_id}),
    )
    .await;
    assert_eq!(rolled["sha256"], sha256.as_str(), "{rolled}");
    let rollback_ms = clock.elapsed().as_millis();
    // Measured, never asserted: a plain create is the peer in this run.
    println!(
        "snapshots: create {create_ms} ms; snapshot {take_ms} ms (home {} + profile {} bytes); \
         2 forks in one create {forks_ms} ms ({:.2}x a create); rollback {rollback_ms} ms",
        snap["home_size"],
        snap["profile_size"],
        forks_ms as f64 / create_ms.max(1) as f64
    );
    assert_eq!(
        desk::exec(&daemon, &source, "cat ~/notes.txt").await,
        "original\n"
    );
    assert!(!desk::exists(&daemon, &source, "after.txt").await);
    assert_eq!(cookie(&daemon, &source).await.as_deref(), Some(COOKIE));
    // The rollback's rows in the source's chain: started, then ok.
    let rows: Vec<Value> = desk::events(&daemon, &format!("workspace={source}"))
        .await
        .into_iter()
        .filter(|e| e["kind"] == "snapshot.rollback")
        .collect();
    let outcomes: Vec<&Value> = rows.iter().map(|e| &e["outcome"]).collect();
    assert_eq!(outcomes, [&json!("started"), &json!("ok")], "{rows:?}");
    assert_eq!(rows[1]["detail"]["sha256"], sha256.as_str(), "{rows:?}");

    // Bad input.
    for (body, field) in [
        (json!({"count": 2}), "count:"),
        (
            json!({"from_snapshot": snap_id, "profile": "work"}),
            "from_snapshot:",
        ),
        (json!({"from_snapshot": "../etc"}), "from_snapshot:"),
        (json!({"from_snapshot": snap_id, "count": 11}), "count:"),
    ] {
        let (status, refused) = call(
            &agent.secret,
            Method::POST,
            "/v1/workspaces",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 400, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{body}: {refused}");
    }
    let (status, body) = call(
        &agent.secret,
        Method::POST,
        "/v1/workspaces",
        Some(json!({"from_snapshot": "snap-000000000000"})),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = call(
        &agent.secret,
        Method::POST,
        &format!("/v1/workspaces/{second}/stop"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &agent.secret,
        Method::POST,
        &format!("/v1/workspaces/{second}/snapshot"),
        Some(json!({"name": "of-a-stopped-one"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let (_, listed) = call(&agent.secret, Method::GET, "/v1/snapshots", None).await;
    assert_eq!(
        listed["snapshots"].as_array().map(Vec::len),
        Some(1),
        "no half snapshot is listed: {listed}"
    );

    // An archive changed on the host is refused by its digest; the fork
    // is discarded with the reason.
    let home = data
        .path()
        .join("snapshots")
        .join(format!("{snap_id}.home.tar.gz"));
    let kept = std::fs::read(&home).unwrap();
    std::fs::write(&home, b"not the archive that was taken").unwrap();
    let (status, body) = call(
        &agent.secret,
        Method::POST,
        "/v1/workspaces",
        Some(json!({"from_snapshot": snap_id})),
    )
    .await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("home archive") && message.contains("refused"),
        "{body}"
    );
    std::fs::write(&home, kept).unwrap();

    // Removing the snapshot leaves the forks as they are.
    let (status, _) = call(
        &agent.secret,
        Method::DELETE,
        &format!("/v1/snapshots/{snap_id}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    assert!(!home.exists());
    let (_, listed) = call(&agent.secret, Method::GET, "/v1/snapshots", None).await;
    assert_eq!(listed["snapshots"], json!([]), "{listed}");
    assert_eq!(
        desk::exec(&daemon, &first, "cat ~/notes.txt").await,
        "mine\n"
    );
}

/// The operator page (tests/browser/snapshots.mjs): an agent takes a
/// snapshot from the live view, rolls back to it there, starts two
/// workspaces from it in the list's panel and removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_takes_rolls_back_and_starts_from_a_snapshot() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let agent = desk::token(&daemon, "ada", "agent").await;
    let source = id_of(&desk::create(&daemon, &agent.secret, "{}").await);
    desk::exec(&daemon, &source, "echo original > ~/page.txt").await;

    let config = json!({ "base": daemon.base, "agent": agent.secret, "workspace": source });
    let seen = cubicle_tests::browser::run(
        "snapshots.mjs",
        &config,
        std::time::Duration::from_secs(900),
    )
    .await;
    assert_eq!(seen["error"], Value::Null, "{seen}");
    assert!(
        seen["took"]
            .as_str()
            .is_some_and(|t| t.starts_with("took ready: disk")),
        "{seen}"
    );
    assert_eq!(seen["viewCount"], "(1)", "{seen}");
    assert!(
        seen["refused"]
            .as_str()
            .is_some_and(|t| t.contains("already have a snapshot named \"ready\"")),
        "{seen}"
    );
    assert_eq!(seen["changed"], "changed\n", "{seen}");
    assert_eq!(seen["rolledBack"], "rolled back to ready", "{seen}");
    assert_eq!(seen["afterRollback"], "original\n", "{seen}");
    assert_eq!(seen["count"], "(1)", "{seen}");
    assert_eq!(seen["countAfter"], "", "{seen}");
    let started: Vec<String> = serde_json::from_value(seen["started"].clone()).unwrap();
    assert_eq!(started.len(), 2, "{seen}");
    for id in &started {
        assert_ne!(id, &source);
        assert_eq!(
            desk::exec(&daemon, id, "cat ~/page.txt").await,
            "original\n",
            "{id}"
        );
    }
    let (_, listed) = daemon
        .call_as(Some(&agent.secret), Method::GET, "/v1/snapshots", None)
        .await
        .unwrap();
    assert_eq!(listed["snapshots"], json!([]), "{listed}");
}
