//! Share links on a real workspace. An operator makes a view link and a
//! control link. Through the raw live view, every kind of input a hostile
//! viewer sends with either link (before the control link's holder takes
//! control) never reaches the desktop, and neither link reaches any other
//! door (exec, actions, another workspace). In headless Chromium the view
//! link's page shows the screen with no control; the control link's page
//! takes control and its pointer lands. Revoking the view link ends its
//! open page, and the link answers 410 with nothing of the workspace; an
//! expired link answers the same. Every make, open and revoke is an event.

use std::time::Duration;

use cubicle_tests::desk::{self, Desk};
use reqwest::Method;
use serde_json::{Value, json};

use crate::control_attacks::{RawViewer, hostile, mouse, pointer};

async fn make(daemon: &cubicle_tests::Daemon, operator: &str, id: &str, body: Value) -> Value {
    let (status, share) = daemon
        .call_as(
            Some(operator),
            Method::POST,
            &format!("/v1/workspaces/{id}/share"),
            Some(&body.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{share}");
    share
}

/// The secret in a share link's URL (`/share#<secret>`).
fn secret(share: &Value) -> String {
    share["url"]
        .as_str()
        .and_then(|url| url.strip_prefix("/share#"))
        .unwrap_or_else(|| panic!("a /share# link: {share}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_link_shows_the_screen_and_only_its_mode_and_dies_when_revoked() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        agent,
        ..
    } = desk::desk().await;
    desk::terminal(&daemon, &id).await;
    let view = make(&daemon, &operator.secret, &id, json!({"mode": "view"})).await;
    let control = make(
        &daemon,
        &operator.secret,
        &id,
        json!({"mode": "control", "expires_in_s": 600}),
    )
    .await;
    assert_eq!(view["mode"], "view", "{view}");
    assert_eq!(control["mode"], "control", "{control}");
    let (view_secret, control_secret) = (secret(&view), secret(&control));

    // Bad asks: a mode that does not exist, a life out of range, an agent.
    for (who, body, want) in [
        (&operator.secret, json!({"mode": "drive"}), 400),
        (
            &operator.secret,
            json!({"mode": "view", "expires_in_s": 5}),
            400,
        ),
        (&agent.secret, json!({"mode": "view"}), 403),
    ] {
        let (status, answer) = daemon
            .call_as(
                Some(who),
                Method::POST,
                &format!("/v1/workspaces/{id}/share"),
                Some(&body.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(status, want, "{body}: {answer}");
    }

    // Neither link opens any other door.
    for secret in [&view_secret, &control_secret] {
        for (method, path, body) in [
            (
                Method::POST,
                format!("/v1/workspaces/{id}/exec"),
                Some(r#"{"command": "true"}"#),
            ),
            (
                Method::POST,
                format!("/v1/workspaces/{id}/actions"),
                Some(r#"{"action": "left_click", "coordinate": [5, 5]}"#),
            ),
            (
                Method::GET,
                format!("/v1/workspaces/{id}/files?path=/home/user"),
                None,
            ),
            (Method::GET, "/v1/events".to_owned(), None),
            (Method::POST, "/v1/workspaces".to_owned(), Some("{}")),
            (
                Method::POST,
                format!("/v1/workspaces/{id}/share"),
                Some(r#"{"mode": "view"}"#),
            ),
        ] {
            let (status, answer) = daemon
                .call_as(Some(secret), method.clone(), &path, body)
                .await
                .unwrap();
            assert_eq!(status, 403, "{method} {path} with a share link: {answer}");
        }
        let (status, listed) = daemon
            .call_as(Some(secret), Method::GET, "/v1/workspaces", None)
            .await
            .unwrap();
        assert_eq!(status, 200);
        let ids: Vec<&str> = listed["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["id"].as_str())
            .collect();
        assert_eq!(ids, [id.as_str()], "a share link sees its workspace only");
    }

    // Raw viewers with either link (the control one before taking control)
    // send everything a hostile viewer would: none of it lands.
    let pointer_before = mouse(&daemon, &id).await;
    let mut hostiles = Vec::new();
    for (tag, secret) in [("view", &view_secret), ("guest", &control_secret)] {
        let mut viewer = RawViewer::ready(&daemon.base, &id, secret).await.unwrap();
        for message in hostile(&format!("share{tag}")) {
            viewer.send(&message).await.unwrap();
        }
        viewer
            .still_served()
            .await
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        hostiles.push(viewer);
    }
    // A viewer that may act (the operator holding control) moves the
    // pointer last: X handles it after anything sent before it.
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/take"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let mut holder = RawViewer::ready(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    holder.send(&pointer(0, 77, 66)).await.unwrap();
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(10));
    while mouse(&daemon, &id).await != (77, 66) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the holder's pointer never landed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(pointer_before, (77, 66));
    let home = desk::exec(&daemon, &id, "ls -A /home/user").await;
    assert!(
        !home.contains("pwned"),
        "a share link's input landed: {home}"
    );
    let (status, _) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &format!("/v1/workspaces/{id}/control/release"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    drop((hostiles, holder));

    // The pages, as the people who got the links see them.
    let config = json!({
        "base": daemon.base,
        "operator": operator.secret,
        "workspace": id,
        "view": {"id": view["id"], "url": view["url"]},
        "control": {"url": control["url"]},
    });
    let seen = cubicle_tests::browser::run("share.mjs", &config, Duration::from_secs(180)).await;
    assert_eq!(seen["viewPainted"], true, "{seen}");
    assert_eq!(seen["viewState"]["text"], "watching (view only)", "{seen}");
    assert_eq!(seen["viewTakeHidden"], true, "{seen}");
    assert_eq!(seen["controlTakeVisible"], true, "{seen}");
    assert_eq!(seen["controlState"]["state"], "control", "{seen}");
    assert_eq!(seen["revokeStatus"], 204, "{seen}");
    assert_eq!(seen["afterRevoke"]["state"], "gone", "{seen}");
    assert_eq!(seen["afterRevokeCanvas"], false, "{seen}");
    assert!(
        seen["reopened"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("revoked")),
        "{seen}"
    );
    assert_eq!(seen["reopenedMentionsWorkspace"], false, "{seen}");
    // The view page's click and typing landed nowhere; the control page's
    // pointer did (a quarter of the way into the 1280x800 screen).
    let home = desk::exec(&daemon, &id, "ls -A /home/user").await;
    assert!(!home.contains("pwned_share_page"), "{home}");
    let (x, y) = mouse(&daemon, &id).await;
    assert!(
        (300..=345).contains(&x) && (185..=220).contains(&y),
        "the control link's pointer: ({x}, {y})"
    );

    // The revoked link answers 410 on every door, naming nothing of it.
    for path in ["/v1/share".to_owned(), format!("/v1/workspaces/{id}")] {
        let (status, answer) = daemon
            .call_as(Some(&view_secret), Method::GET, &path, None)
            .await
            .unwrap();
        assert_eq!(status, 410, "{path}: {answer}");
        assert_eq!(answer["error"]["code"], "share_revoked", "{answer}");
        assert!(!answer.to_string().contains(&id), "{answer}");
    }
    let (status, listed) = daemon
        .call_as(
            Some(&operator.secret),
            Method::GET,
            &format!("/v1/workspaces/{id}/shares"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let states: Vec<&str> = listed["shares"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["state"].as_str())
        .collect();
    assert_eq!(states, ["revoked", "live"], "{listed}");
    assert!(
        !listed.to_string().contains(&view_secret),
        "never a secret: {listed}"
    );

    // Every make, open and revoke is in the log.
    let events = desk::events(&daemon, &format!("workspace={id}")).await;
    let count = |kind: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["outcome"] == "ok")
            .count()
    };
    assert_eq!(count("share.create"), 2);
    // The two pages' opens; the revoked link's reopening was refused first.
    assert_eq!(count("share.open"), 2);
    assert_eq!(count("share.revoke"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_share_link_answers_410() {
    let data = tempfile::tempdir().unwrap();
    let daemon = cubicle_tests::Daemon::start(data.path(), None, &[]).unwrap();
    let operator = desk::token(&daemon, "olga", "operator").await;
    // A workspace row is enough: a link is refused before any of it is read.
    let ws = desk::create(&daemon, &operator.secret, "{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let share = make(
        &daemon,
        &operator.secret,
        &id,
        json!({"mode": "view", "expires_in_s": 60}),
    )
    .await;
    let secret = secret(&share);
    let (status, _) = daemon
        .call_as(Some(&secret), Method::GET, "/v1/share", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    // Its end, moved to the past in the store as time passing would.
    let db = data.path().join("cubicle.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    let done = sqlx::query("UPDATE tokens SET expires_at = 1 WHERE id = ?")
        .bind(share["id"].as_str().unwrap())
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    pool.close().await;
    let (status, answer) = daemon
        .call_as(Some(&secret), Method::GET, "/v1/share", None)
        .await
        .unwrap();
    assert_eq!(status, 410, "{answer}");
    assert_eq!(answer["error"]["code"], "share_expired", "{answer}");
    assert!(!answer.to_string().contains(&id), "{answer}");
}

/// The operator page's Share pane (tests/browser/share_panel.mjs): a view
/// link made from the live view, opened by a person, revoked from the
/// pane; the person's page ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_makes_and_revokes_a_link_in_the_page() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        ..
    } = desk::desk().await;
    let config = json!({ "base": daemon.base, "operator": operator.secret, "workspace": id });
    let seen =
        cubicle_tests::browser::run("share_panel.mjs", &config, Duration::from_secs(120)).await;
    let url = seen["url"].as_str().unwrap_or_default();
    assert!(
        url.starts_with(&format!("{}/share#cubicle_share_", daemon.base)),
        "{seen}"
    );
    assert_eq!(seen["count"], "(1 live)", "{seen}");
    assert_eq!(seen["personState"], "watching (view only)", "{seen}");
    assert_eq!(seen["listed"], json!(["revoked"]), "{seen}");
    assert!(
        seen["personAfter"]
            .as_str()
            .is_some_and(|t| t.contains("revoked")),
        "{seen}"
    );
}
