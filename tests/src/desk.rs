//! A desk to work at, for the operator and control-attack tests: a daemon
//! with one workspace and tokens of every role, a terminal on its desktop
//! with keyboard focus (so typed keys become files we can look for), and
//! exec.

use std::time::{Duration, Instant};

use crate::Daemon;
use reqwest::Method;
use serde_json::{Value, json};

/// A token made through the API.
#[derive(Debug, Clone)]
pub struct Tok {
    pub id: String,
    pub secret: String,
}

/// A daemon, one running workspace, and tokens of every role.
pub struct Desk {
    pub daemon: Daemon,
    pub id: String,
    pub operator: Tok,
    pub auditor: Tok,
    pub agent: Tok,
    /// The data dir: bind it when destructuring (`..` would drop it, and
    /// the daemon's files with it, at once).
    pub _data: tempfile::TempDir,
}

/// Where the terminal window is on the screen.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

pub async fn token(daemon: &Daemon, name: &str, role: &str) -> Tok {
    let body = json!({"name": name, "role": role}).to_string();
    let (status, made) = daemon
        .call(Method::POST, "/v1/tokens", Some(&body))
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    Tok {
        id: made["id"].as_str().unwrap().to_owned(),
        secret: made["secret"].as_str().unwrap().to_owned(),
    }
}

/// A token of `role` that reaches workspaces `scope` (ids).
pub async fn scoped_token(daemon: &Daemon, name: &str, role: &str, scope: &[&str]) -> Tok {
    let body = json!({"name": name, "role": role, "scope": scope}).to_string();
    let (status, made) = daemon
        .call(Method::POST, "/v1/tokens", Some(&body))
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    Tok {
        id: made["id"].as_str().unwrap().to_owned(),
        secret: made["secret"].as_str().unwrap().to_owned(),
    }
}

pub async fn desk() -> Desk {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    // The agent makes the workspace: agents reach only their own.
    let agent = token(&daemon, "bot", "agent").await;
    let ws = create(&daemon, &agent.secret, r#"{"name":"desk"}"#).await;
    let id = ws["id"].as_str().unwrap().to_owned();
    Desk {
        operator: token(&daemon, "alice", "operator").await,
        auditor: token(&daemon, "carol", "auditor").await,
        agent,
        daemon,
        id,
        _data: data,
    }
}

/// Runs a shell line in the workspace (the server's default limit, 30 s,
/// scaled by `guard`: under emulation Python's start alone outran it); its
/// status and body.
pub async fn exec_status(daemon: &Daemon, id: &str, command: &str) -> (u16, Value) {
    let timeout_ms = crate::guard(std::time::Duration::from_secs(30)).as_millis() as u64;
    let body = json!({"command": command, "timeout_ms": timeout_ms}).to_string();
    daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body),
        )
        .await
        .unwrap()
}

/// Runs a shell line in the workspace; returns its stdout (panics on failure).
pub async fn exec(daemon: &Daemon, id: &str, command: &str) -> String {
    let (status, out) = exec_status(daemon, id, command).await;
    assert_eq!(status, 200, "{command}: {out}");
    out["stdout"].as_str().unwrap_or_default().to_owned()
}

/// Whether `/home/user/<name>` exists in the workspace.
pub async fn exists(daemon: &Daemon, id: &str, name: &str) -> bool {
    exec(
        daemon,
        id,
        &format!("test -e /home/user/{name} && echo yes"),
    )
    .await
    .trim()
        == "yes"
}

/// Polls for `/home/user/<name>` up to `limit`.
pub async fn appears(daemon: &Daemon, id: &str, name: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + crate::guard(limit);
    while Instant::now() < deadline {
        if exists(daemon, id, name).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// Opens a terminal in the home directory, gives it keyboard focus, and
/// returns where it is.
pub async fn terminal(daemon: &Daemon, id: &str) -> Region {
    exec(
        daemon,
        id,
        "cd /home/user && setsid -f xfce4-terminal --disable-server --geometry=80x20+60+60 \
         --working-directory=/home/user >/dev/null 2>&1 </dev/null",
    )
    .await;
    let deadline = Instant::now() + crate::guard(Duration::from_secs(30));
    let window = loop {
        let found = exec(
            daemon,
            id,
            "xdotool search --onlyvisible --class xfce4-terminal | head -1",
        )
        .await;
        if !found.trim().is_empty() {
            break found.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the terminal window never appeared"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    // Let the window manager place it, then focus it.
    tokio::time::sleep(Duration::from_millis(800)).await;
    exec(
        daemon,
        id,
        &format!("xdotool windowactivate --sync {window} windowfocus --sync {window}"),
    )
    .await;
    let shell = exec(
        daemon,
        id,
        &format!("xdotool getwindowgeometry --shell {window}"),
    )
    .await;
    let field = |name: &str| -> u32 {
        shell
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {shell}"))
    };
    Region {
        x: field("X"),
        y: field("Y"),
        width: field("WIDTH"),
        height: field("HEIGHT"),
    }
}

/// `POST /actions` with `token`; the status and body.
pub async fn act(daemon: &Daemon, token: &str, id: &str, action: Value) -> (u16, Value) {
    daemon
        .call_as(
            Some(token),
            Method::POST,
            &format!("/v1/workspaces/{id}/actions"),
            Some(&action.to_string()),
        )
        .await
        .unwrap()
}

/// Every event of the log, page by page; `filter` is the rest of the query
/// (`workspace=ws-…`, or empty for all).
pub async fn events(daemon: &Daemon, filter: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let (status, body) = daemon
            .call(
                Method::GET,
                &format!("/v1/events?{filter}&limit=1000&after={after}"),
                None,
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        let page = body["events"].as_array().cloned().unwrap_or_default();
        let Some(last) = page.last().and_then(|e| e["id"].as_i64()) else {
            return all;
        };
        after = last;
        all.extend(page);
    }
}

/// The first event of workspace `id` of `kind`, waiting up to `limit`.
pub async fn event_of(daemon: &Daemon, id: &str, kind: &str, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + crate::guard(limit);
    while Instant::now() < deadline {
        let found = events(daemon, &format!("workspace={id}"))
            .await
            .into_iter()
            .find(|e| e["kind"] == kind);
        if found.is_some() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// A daemon serving under one policy of the test's own, an agent who made
/// one workspace there, and an operator.
pub struct UnderPolicy {
    pub daemon: Daemon,
    pub id: String,
    pub agent: Tok,
    pub operator: Tok,
    /// `serve`'s policy arguments (for a restart on the same data).
    pub args: Vec<String>,
    pub data: tempfile::TempDir,
    pub policies: tempfile::TempDir,
}

/// `POST /v1/workspaces` with `body` as the token `secret`; the new
/// workspace's view (the create must answer 201).
pub async fn create(daemon: &Daemon, secret: &str, body: &str) -> Value {
    let (status, ws) = daemon
        .call_as(Some(secret), Method::POST, "/v1/workspaces", Some(body))
        .await
        .unwrap();
    assert_eq!(status, 201, "{ws}");
    ws
}

/// A policy holding one command pattern (`touch /home/user/held-*`) for a
/// person, letting everything else through.
pub const HELD_FILES: &str = r#"
description = "e2e: one command pattern held for a person"
default = "allow"

[[rule]]
id = "held-files"
subject = "exec"
command = ["touch /home/user/held-*"]
decision = "confirm"
reason = "making a held file"
"#;

/// Starts a daemon whose default policy is `name`, written from `toml`.
pub async fn under_policy(name: &str, toml: &str) -> UnderPolicy {
    let data = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join(format!("{name}.toml")), toml).unwrap();
    let args = vec![
        "--policy-dir".to_owned(),
        policies.path().to_str().unwrap().to_owned(),
        "--default-policy".to_owned(),
        name.to_owned(),
    ];
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let daemon = Daemon::start(data.path(), None, &arg_refs).unwrap();
    let agent = token(&daemon, "bot", "agent").await;
    let operator = token(&daemon, "alice", "operator").await;
    let ws = create(&daemon, &agent.secret, "{}").await;
    UnderPolicy {
        id: ws["id"].as_str().unwrap().to_owned(),
        daemon,
        agent,
        operator,
        args,
        data,
        policies,
    }
}

/// The next JSON text frame of an exec WebSocket (binary and control
/// frames skipped), waiting up to 30 s (scaled by `guard`).
pub async fn next_json<S>(ws: &mut S) -> Value
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt;
    loop {
        let message = tokio::time::timeout(crate::guard(Duration::from_secs(30)), ws.next())
            .await
            .expect("a frame within 30 s")
            .expect("the socket is open")
            .expect("a good frame");
        if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
            return serde_json::from_str(&text).expect("a JSON frame");
        }
    }
}

/// Sets cookie `name=value` for `https://site.test/` (secure, a day long)
/// in workspace `id`'s browser, over its DevTools on the guest channel.
pub async fn set_cookie(daemon: &Daemon, id: &str, name: &str, value: &str) {
    let mut tab = crate::cdp::Page::first(&daemon.channel_socket(id))
        .await
        .unwrap();
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 86_400;
    let set = tab
        .call(
            "Network.setCookie",
            json!({ "name": name, "value": value, "url": "https://site.test/",
                    "secure": true, "expires": expires }),
        )
        .await
        .unwrap();
    assert_eq!(set["success"], true, "{set}");
}

/// The cookies workspace `id`'s browser holds for `https://site.test/`.
pub async fn site_cookies(daemon: &Daemon, id: &str) -> Vec<Value> {
    let mut tab = crate::cdp::Page::first(&daemon.channel_socket(id))
        .await
        .unwrap();
    let got = tab
        .call(
            "Network.getCookies",
            json!({ "urls": ["https://site.test/"] }),
        )
        .await
        .unwrap();
    got["cookies"].as_array().cloned().unwrap_or_default()
}
