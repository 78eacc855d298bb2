//! Where a keystroke would land, as the gate reads it (README "Confirmation
//! gates": the browser context): a password field inside an open shadow
//! root and inside a same-origin iframe is seen as one (held), the text
//! field beside it as text (let through); a cross-origin iframe is `frame`;
//! and when two tabs both claim the keyboard (focus emulation, as a CDP
//! client turns on), each is judged and the strictest wins. The pages are
//! set up from the test's own CDP connection over the guest channel; the
//! agent's key press goes through the API like any other.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use cubicle_tests::Daemon;
use cubicle_tests::desk;
use reqwest::Method;
use serde_json::{Value, json};

const POLICY: &str = r#"
description = "e2e: password fields held, cross-origin frames refused"
default = "allow"

[[rule]]
id = "password"
subject = "action"
action = ["type", "key"]
focus = ["password"]
decision = "confirm"
reason = "typing into a password field"

[[rule]]
id = "frame"
subject = "action"
action = ["type", "key"]
focus = ["frame"]
decision = "deny"
reason = "typing into a frame the gate cannot read"
"#;

/// The page: a text field, an open shadow root with a password and a text
/// field, a same-origin iframe (srcdoc) with the same two, a cross-origin
/// iframe (a data: URL).
const PAGE: &str = r#"(async () => {
  document.body.innerHTML = '<input id=plain><div id=host></div>'
    + '<iframe id=same srcdoc="<input id=p type=password><input id=t>"></iframe>'
    + '<iframe id=cross src="data:text/html,<input id=x>"></iframe>';
  const root = document.getElementById('host').attachShadow({ mode: 'open' });
  root.innerHTML = '<input id=sp type=password><input id=st>';
  for (let i = 0; i < 100 && !document.getElementById('same').contentDocument?.getElementById('t'); i++) {
    await new Promise(r => setTimeout(r, 50));
  }
  return !!document.getElementById('same').contentDocument.getElementById('t');
})()"#;

/// A tab of the workspace's browser, over CDP through the guest channel.
type Tab = cubicle_tests::cdp::Page;

/// Evaluates `expression` in `tab` as a user gesture (focus and popups need
/// one); an exception fails the test.
async fn eval(tab: &mut Tab, expression: &str) -> Value {
    let result = tab
        .call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true,
                    "awaitPromise": true, "userGesture": true }),
        )
        .await
        .unwrap();
    assert!(
        result.get("exceptionDetails").is_none(),
        "{expression}: {result}"
    );
    result["result"]["value"].clone()
}

/// The page targets of the browser, by id.
async fn pages(socket: &Path) -> anyhow::Result<Vec<String>> {
    let list = cubicle_tests::guest::http_get(socket, 9222, "/json/list").await?;
    let list: Value = serde_json::from_str(&list)?;
    Ok(list
        .as_array()
        .context("a target list")?
        .iter()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect())
}

/// The agent presses shift (which changes nothing): the status, and the
/// focus the gate saw when it held or refused it.
async fn press(daemon: &Daemon, agent: &str, id: &str) -> (u16, Value) {
    let (status, body) =
        desk::act(daemon, agent, id, json!({"action": "key", "text": "shift"})).await;
    if status == 202 {
        let approval = body["approval"]["id"].as_str().unwrap();
        let (_, record) = daemon
            .call(Method::GET, &format!("/v1/approvals/{approval}"), None)
            .await
            .unwrap();
        return (status, record["context"]["focus"].clone());
    }
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_sees_focus_through_shadow_roots_iframes_and_every_focused_tab() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("focus", POLICY).await;
    let socket = daemon.channel_socket(&id);
    let first = pages(&socket).await.unwrap();
    let mut tab = Tab::open(&socket, &first[0]).await.unwrap();
    tab.call("Page.navigate", json!({"url": "about:blank"}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(eval(&mut tab, PAGE).await, true, "the page was built");

    let mut seen = Vec::new();
    let cases = [
        (
            "plain text field",
            "document.getElementById('plain')",
            200,
            None,
        ),
        (
            "text field in an open shadow root",
            "document.getElementById('host').shadowRoot.getElementById('st')",
            200,
            None,
        ),
        (
            "password in an open shadow root",
            "document.getElementById('host').shadowRoot.getElementById('sp')",
            202,
            Some("password"),
        ),
        (
            "text field in a same-origin iframe",
            "document.getElementById('same').contentDocument.getElementById('t')",
            200,
            None,
        ),
        (
            "password in a same-origin iframe",
            "document.getElementById('same').contentDocument.getElementById('p')",
            202,
            Some("password"),
        ),
        (
            "a cross-origin iframe",
            "document.getElementById('cross')",
            403,
            None,
        ),
    ];
    for (what, element, want, focus) in cases {
        eval(&mut tab, &format!("{element}.focus()")).await;
        let (status, said) = press(&daemon, &agent.secret, &id).await;
        seen.push(format!("{what}: {status}"));
        assert_eq!(status, want, "{what}: {said}");
        if let Some(focus) = focus {
            assert_eq!(said, focus, "{what}: the approval's context");
        }
        if want == 403 {
            let reason = said["error"]["message"].as_str().unwrap_or_default();
            assert!(reason.contains("cannot read"), "{what}: {said}");
        }
    }

    // A second window; both tabs claim the keyboard.
    eval(&mut tab, "document.getElementById('plain').focus()").await;
    eval(
        &mut tab,
        "!!window.open('about:blank', '_blank', 'popup,width=420,height=300')",
    )
    .await;
    let mut other = None;
    for _ in 0..50 {
        if let Some(target) = pages(&socket)
            .await
            .unwrap()
            .into_iter()
            .find(|t| !first.contains(t))
        {
            other = Some(target);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut second = Tab::open(&socket, &other.expect("a second tab opened"))
        .await
        .unwrap();
    eval(
        &mut second,
        "document.body.innerHTML = '<input id=t><input id=p type=password>'; true",
    )
    .await;
    for t in [&mut tab, &mut second] {
        t.call(
            "Emulation.setFocusEmulationEnabled",
            json!({"enabled": true}),
        )
        .await
        .unwrap();
    }
    // Text in both: let through. A password in either one, whichever of
    // the two windows X gives the keys to: held.
    let both = [
        ("text in both tabs", "t", "plain", 200),
        ("a password in the second tab", "p", "plain", 202),
        (
            "a password in the first tab",
            "t",
            "host').shadowRoot.getElementById('sp",
            202,
        ),
    ];
    for (what, in_second, in_first, want) in both {
        eval(
            &mut second,
            &format!("document.getElementById('{in_second}').focus()"),
        )
        .await;
        eval(
            &mut tab,
            &format!("document.getElementById('{in_first}').focus()"),
        )
        .await;
        let focused = [
            eval(&mut tab, "document.hasFocus()").await,
            eval(&mut second, "document.hasFocus()").await,
        ];
        assert_eq!(focused, [true, true], "both tabs claim the keyboard");
        let (status, said) = press(&daemon, &agent.secret, &id).await;
        seen.push(format!("{what}: {status}"));
        assert_eq!(status, want, "{what}: {said}");
        if want == 202 {
            assert_eq!(said, "password", "{what}");
        }
    }
    eprintln!("browser focus: {}", seen.join("; "));
}
