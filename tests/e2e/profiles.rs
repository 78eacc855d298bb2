//! Persistent browser profiles on real workspaces: an agent creates a
//! workspace with `"profile": "work"`, its browser gets a cookie; while it
//! runs the profile is its alone (a second create naming it, and removing
//! it, are 409). Stopping it saves the profile (an event with the
//! archive's SHA-256); the agent's next workspace with the same name runs
//! Chromium with the cookie, loaded from that very archive. Another token
//! neither sees nor removes it, and its own "work" is a fresh profile.
//! The page's Browser profiles panel shows the same story to the agent.

use cubicle_tests::Daemon;
use cubicle_tests::desk;
use reqwest::Method;
use serde_json::{Value, json};

const COOKIE: &str = "kept-4b1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_cookie_reaches_the_owners_next_workspace_and_only_one_runs_it() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let agent = desk::token(&daemon, "ada", "agent").await;
    let other = desk::token(&daemon, "eve", "agent").await;
    let call = |secret: String, method: Method, path: String, body: Option<String>| {
        let daemon = &daemon;
        async move {
            daemon
                .call_as(Some(&secret), method, &path, body.as_deref())
                .await
                .unwrap()
        }
    };

    let first = desk::create(&daemon, &agent.secret, r#"{"profile": "work"}"#).await;
    let first = first["id"].as_str().unwrap().to_owned();
    desk::set_cookie(&daemon, &first, "session", COOKIE).await;

    // While it runs, the profile is the first workspace's alone.
    let (status, refused) = call(
        agent.secret.clone(),
        Method::POST,
        "/v1/workspaces".into(),
        Some(r#"{"profile": "work"}"#.into()),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "profile_in_use", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(&first), "{refused}");
    let (_, listed) = call(
        agent.secret.clone(),
        Method::GET,
        "/v1/profiles".into(),
        None,
    )
    .await;
    let profile = listed["profiles"][0].clone();
    assert_eq!(profile["name"], "work", "{listed}");
    assert_eq!(profile["running_in"], first.as_str(), "{listed}");
    assert_eq!(profile["size"], 0, "never saved yet: {listed}");
    let profile_id = profile["id"].as_str().unwrap().to_owned();
    let (status, body) = call(
        agent.secret.clone(),
        Method::DELETE,
        format!("/v1/profiles/{profile_id}"),
        None,
    )
    .await;
    assert_eq!(status, 409, "removing a profile in use: {body}");

    // Another token sees none of it and cannot remove it.
    let (_, theirs) = call(
        other.secret.clone(),
        Method::GET,
        "/v1/profiles".into(),
        None,
    )
    .await;
    assert_eq!(theirs["profiles"], json!([]), "{theirs}");
    let (status, _) = call(
        other.secret.clone(),
        Method::DELETE,
        format!("/v1/profiles/{profile_id}"),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // Stopping saves it.
    let (status, body) = call(
        agent.secret.clone(),
        Method::POST,
        format!("/v1/workspaces/{first}/stop"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let saved = desk::event_of(
        &daemon,
        &first,
        "profile.save",
        std::time::Duration::from_secs(30),
    )
    .await
    .expect("a profile.save event");
    let sha256 = saved["detail"]["sha256"].as_str().unwrap().to_owned();
    let (_, listed) = call(
        agent.secret.clone(),
        Method::GET,
        "/v1/profiles".into(),
        None,
    )
    .await;
    let profile = &listed["profiles"][0];
    assert_eq!(profile["sha256"], sha256.as_str(), "{listed}");
    assert_eq!(profile["running_in"], Value::Null, "{listed}");
    assert!(profile["size"].as_u64().unwrap() > 0, "{listed}");
    assert_eq!(profile["size"], saved["detail"]["size"], "{listed} {saved}");

    // The owner's next workspace runs on it: the cookie is there.
    let second = desk::create(&daemon, &agent.secret, r#"{"profile": "work"}"#).await;
    let second = second["id"].as_str().unwrap().to_owned();
    let loaded = desk::event_of(
        &daemon,
        &second,
        "profile.load",
        std::time::Duration::from_secs(5),
    )
    .await
    .expect("a profile.load event");
    assert_eq!(loaded["detail"]["sha256"], sha256.as_str(), "{loaded}");
    let jar = desk::site_cookies(&daemon, &second).await;
    assert!(
        jar.iter()
            .any(|c| c["name"] == "session" && c["value"] == COOKIE),
        "the cookie set in the first workspace: {jar:?}"
    );
    // Starting the first again while the second has the profile: refused.
    let (status, body) = call(
        agent.secret.clone(),
        Method::POST,
        format!("/v1/workspaces/{first}/start"),
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&second), "{body}");

    // The other token's "work" is its own, fresh.
    let theirs = desk::create(&daemon, &other.secret, r#"{"profile": "work"}"#).await;
    let theirs = theirs["id"].as_str().unwrap().to_owned();
    let jar = desk::site_cookies(&daemon, &theirs).await;
    assert!(
        !jar.iter().any(|c| c["value"] == COOKIE),
        "another token's profile of the same name is not this one: {jar:?}"
    );

    // Deleting the running workspace saves it too; then the profile goes.
    let (status, _) = call(
        agent.secret.clone(),
        Method::DELETE,
        format!("/v1/workspaces/{second}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    assert!(
        desk::event_of(
            &daemon,
            &second,
            "profile.save",
            std::time::Duration::from_secs(30)
        )
        .await
        .is_some()
    );
    let (status, body) = call(
        agent.secret.clone(),
        Method::DELETE,
        format!("/v1/profiles/{profile_id}"),
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let (_, listed) = call(
        agent.secret.clone(),
        Method::GET,
        "/v1/profiles".into(),
        None,
    )
    .await;
    assert_eq!(listed["profiles"], json!([]), "{listed}");
    let archive = data.path().join(format!("profiles/{profile_id}.tar.gz"));
    assert!(
        !archive.exists(),
        "its archive is gone: {}",
        archive.display()
    );
}

/// The bytes a size the page shows (`"12.3 KiB"`) stands for, and half its
/// last digit's worth (what rounding may have taken).
fn shown_bytes(shown: &str) -> Option<(f64, f64)> {
    let (number, unit) = shown.split_once(' ')?;
    let number: f64 = number.parse().ok()?;
    let (scale, digits) = match unit {
        "bytes" => (1.0, 1.0),
        "KiB" => (1024.0, 0.1),
        "MiB" => (1024.0 * 1024.0, 0.1),
        "GiB" => (1024.0 * 1024.0 * 1024.0, 0.1),
        _ => return None,
    };
    Some((number * scale, digits * scale / 2.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_sees_its_profile_in_use_saved_and_removed_in_the_page() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let agent = desk::token(&daemon, "ada", "agent").await;
    let ws = desk::create(&daemon, &agent.secret, r#"{"profile": "work"}"#).await;
    let id = ws["id"].as_str().unwrap().to_owned();
    // The page writes this file once it has shown the refusal.
    let handshake = tempfile::tempdir().unwrap();
    let ready = handshake.path().join("refused");
    let config = json!({
        "base": daemon.base,
        "agent": agent.secret,
        "ready": ready,
    });
    let page =
        cubicle_tests::browser::run("profiles.mjs", &config, std::time::Duration::from_secs(300));
    let stop = async {
        let deadline =
            std::time::Instant::now() + cubicle_tests::guard(std::time::Duration::from_secs(120));
        while !ready.exists() {
            if std::time::Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let path = format!("/v1/workspaces/{id}/stop");
        let stopped = daemon
            .call_as(Some(&agent.secret), Method::POST, &path, None)
            .await
            .unwrap();
        Some(stopped)
    };
    let (seen, stopped) = tokio::join!(page, stop);
    println!("profiles.mjs saw ({id}): {seen}");
    assert_eq!(seen["error"], Value::Null, "{seen}");
    let (status, body) = stopped.expect("the page showed the refusal");
    assert_eq!(status, 200, "{body}");

    // While the workspace runs: in use, never saved, and Remove refused
    // with the gateway's reason in an alert.
    assert_eq!(seen["count"], "(1)", "{seen}");
    assert_eq!(seen["inUse"], format!("in use by {id}"), "{seen}");
    assert_eq!(seen["before"], "never saved", "{seen}");
    let refused = seen["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains(&format!("in use by running workspace {id}"))
            && refused.contains("stop it first"),
        "{seen}"
    );
    assert_eq!(seen["refusedRole"], "alert", "{seen}");

    // Stopped: free and saved, the size the save event says, and the old
    // refusal gone with the state it was about.
    assert_eq!(seen["use"], "free", "{seen}");
    let saved = desk::event_of(
        &daemon,
        &id,
        "profile.save",
        std::time::Duration::from_secs(30),
    )
    .await
    .expect("a profile.save event");
    let size = saved["detail"]["size"].as_u64().unwrap() as f64;
    let text = seen["saved"].as_str().unwrap_or_default();
    let (amount, when) = text.split_once(", saved ").unwrap_or_default();
    let (bytes, slack) = shown_bytes(amount).unwrap_or_else(|| panic!("no size in {text:?}"));
    assert!(
        (bytes - size).abs() <= slack + 1e-6,
        "{text:?} for {size} bytes"
    );
    assert!(!when.is_empty(), "when it was saved: {text:?}");
    assert_eq!(seen["refusedAfter"], "", "{seen}");

    // Removed: the list is empty, in the page and in the API.
    assert_eq!(seen["rows"], 0, "{seen}");
    assert_eq!(seen["countAfter"], "", "{seen}");
    assert_eq!(seen["left"], json!([]), "{seen}");
    let (_, listed) = daemon
        .call_as(Some(&agent.secret), Method::GET, "/v1/profiles", None)
        .await
        .unwrap();
    assert_eq!(listed["profiles"], json!([]), "{listed}");
}
