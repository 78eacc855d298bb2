//! The desktop's clipboard through the API, both ways, with a real program
//! on the other side: text the API sets is pasted by Ctrl+V into a page in
//! the workspace's Chromium, and text the page copies is what the API reads.
//! The policy's `clipboard` rules are asked in both directions, the control
//! lock holds the agent off, and the events keep the text's digest only.

use std::time::Duration;

use cubicle_tests::cdp::Page;
use cubicle_tests::desk::{self, UnderPolicy};
use reqwest::Method;
use serde_json::{Value, json};

const POLICY: &str = r#"
description = "e2e: a clipboard holding a secret stays in"
default = "allow"

[[rule]]
id = "no-secrets-out"
subject = "clipboard"
text = ["*secret*"]
decision = "deny"
reason = "secrets stay in the workspace"
"#;

/// A textarea over the whole page, so a click anywhere on the browser's
/// page lands in it.
const PAGE: &str = "<!doctype html><body style='margin:0'><textarea id=t style='position:fixed;inset:0;width:100vw;height:100vh;font-size:40px'></textarea></body>";

async fn clipboard(
    p: &UnderPolicy,
    secret: &str,
    method: Method,
    body: Option<Value>,
) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    p.daemon
        .call_as(
            Some(secret),
            method,
            &format!("/v1/workspaces/{}/clipboard", p.id),
            body.as_deref(),
        )
        .await
        .unwrap()
}

/// The textarea's value once it equals `want`, or what it held at the end.
async fn textarea_becomes(page: &mut Page, want: &str) -> String {
    let deadline = std::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(10));
    loop {
        let value = page
            .eval("document.getElementById('t').value")
            .await
            .unwrap();
        let value = value.as_str().unwrap_or_default().to_owned();
        if value == want || std::time::Instant::now() > deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clipboard_both_ways_judged_and_never_logged() {
    let p = desk::under_policy("clip", POLICY).await;
    let agent = p.agent.secret.clone();
    let mut page = Page::first(&p.daemon.channel_socket(&p.id)).await.unwrap();
    let url = format!(
        "data:text/html;base64,{}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, PAGE)
    );
    page.goto(&url).await.unwrap();

    // The API sets it (UTF-8 beyond Latin-1), reads it back, and a person's
    // Ctrl+V in the page pastes it.
    let text = "Grüße ✓ 日本 from the API\nline two";
    let (status, said) = clipboard(&p, &agent, Method::PUT, Some(json!({ "text": text }))).await;
    assert_eq!(status, 204, "{said}");
    let (status, read) = clipboard(&p, &agent, Method::GET, None).await;
    assert_eq!((status, read["text"].as_str()), (200, Some(text)), "{read}");
    // A click on the page focuses the textarea (the window manager may
    // still be placing the browser's window right after the workspace is
    // ready: clicked again until the page says it has the focus), then a
    // person's Ctrl+V.
    let deadline = std::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(20));
    loop {
        let (status, out) = desk::act(
            &p.daemon,
            &agent,
            &p.id,
            json!({"action": "left_click", "coordinate": [640, 400]}),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let focused = page
            .eval("document.hasFocus() && document.activeElement.id")
            .await
            .unwrap();
        if focused == "t" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the textarea never took the focus: {focused}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, out) = desk::act(
        &p.daemon,
        &agent,
        &p.id,
        json!({"action": "key", "text": "ctrl+v"}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(textarea_becomes(&mut page, text).await, text);

    // The page copies (a user's gesture, as CDP gives it), and the API
    // reads what the page copied.
    let copied = "copied in the page ✓";
    let result = page
        .call(
            "Runtime.evaluate",
            json!({
                "expression": format!("const t = document.getElementById('t'); t.value = {copied:?}; t.select(); document.execCommand('copy')"),
                "userGesture": true,
                "returnByValue": true,
            }),
        )
        .await
        .unwrap();
    assert_eq!(result["result"]["value"], true, "{result}");
    let (status, read) = clipboard(&p, &agent, Method::GET, None).await;
    assert_eq!(
        (status, read["text"].as_str()),
        (200, Some(copied)),
        "{read}"
    );

    // The policy, both ways: a secret is not set, and one the page copied
    // is not read.
    let (status, said) = clipboard(
        &p,
        &agent,
        Method::PUT,
        Some(json!({ "text": "the secret is 42" })),
    )
    .await;
    assert_eq!(status, 403, "{said}");
    assert!(
        said.to_string().contains("secrets stay in the workspace"),
        "{said}"
    );
    page.call(
        "Runtime.evaluate",
        json!({
            "expression": "const u = document.getElementById('t'); u.value = 'a secret of the page'; u.select(); document.execCommand('copy')",
            "userGesture": true,
        }),
    )
    .await
    .unwrap();
    let (status, said) = clipboard(&p, &agent, Method::GET, None).await;
    assert_eq!(status, 403, "{said}");
    assert!(!said.to_string().contains("a secret of the page"), "{said}");

    // Who may: an auditor may not; the agent is held off while an operator
    // holds the controls, and the operator may set it.
    let auditor = desk::token(&p.daemon, "carol", "auditor").await;
    let (status, said) = clipboard(&p, &auditor.secret, Method::GET, None).await;
    assert_eq!(status, 403, "{said}");
    let operator = p.operator.secret.clone();
    let (status, said) = p
        .daemon
        .call_as(
            Some(&operator),
            Method::POST,
            &format!("/v1/workspaces/{}/control/take", p.id),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{said}");
    let (status, said) = clipboard(&p, &agent, Method::PUT, Some(json!({ "text": "agent" }))).await;
    assert_eq!(
        (status, said["error"]["code"].as_str()),
        (409, Some("control_held")),
        "{said}"
    );
    let (status, said) = clipboard(
        &p,
        &operator,
        Method::PUT,
        Some(json!({ "text": "from the operator" })),
    )
    .await;
    assert_eq!(status, 204, "{said}");

    // Bad input: a body that is not the shape, and one over the limit.
    let (status, said) = clipboard(&p, &operator, Method::PUT, Some(json!({ "txt": "x" }))).await;
    assert_eq!(status, 400, "{said}");
    let big = "x".repeat(1024 * 1024 + 1);
    let (status, said) = clipboard(&p, &operator, Method::PUT, Some(json!({ "text": big }))).await;
    assert_eq!(status, 413, "{said}");

    // Every use is an event with the length and digest, never the text (a
    // set says them before it runs, a read once it has read).
    let events = desk::events(&p.daemon, &format!("workspace={}", p.id)).await;
    let log = serde_json::to_string(&events).unwrap();
    let uses: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("clipboard."))
        })
        .collect();
    assert!(
        uses.iter().any(|e| e["kind"] == "clipboard.write"
            && e["outcome"] == "started"
            && e["detail"]["length"] == text.len()),
        "{uses:?}"
    );
    assert!(
        uses.iter().any(|e| e["kind"] == "clipboard.read"
            && e["outcome"] == "ok"
            && e["detail"]["length"] == copied.len()),
        "{uses:?}"
    );
    for secret in [text, copied, "a secret of the page", "the secret is 42"] {
        assert!(!log.contains(secret), "{secret:?} is in the event log");
    }
}
