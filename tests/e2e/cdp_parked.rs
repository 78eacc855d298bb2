//! A held CDP call is parked on its connection and later calls flow (README
//! "Confirmation gates"): a client's `Target.createTarget` to a page the
//! policy holds gets no answer while it waits for an operator, the calls
//! it sends after it are answered meanwhile, and once approved the held
//! call is forwarded and answered (the tab opens); denied, it is answered
//! with a CDP error naming the reason, and no tab opens.

use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::desk;
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const POLICY: &str = r#"
description = "e2e: one page held"
default = "allow"

[[rule]]
id = "held-pages"
subject = "navigate"
url = ["data:text/html,held*"]
decision = "confirm"
reason = "opening a held page"
"#;

type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send(client: &mut Client, id: u64, method: &str, params: Value) {
    let text = json!({ "id": id, "method": method, "params": params }).to_string();
    client.send(Message::text(text)).await.unwrap();
}

/// The next reply (a message with an id), or `None` if none comes within
/// `limit`; events are skipped.
async fn next_reply(client: &mut Client, limit: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(limit);
    loop {
        let message = tokio::time::timeout_at(deadline, client.next())
            .await
            .ok()?;
        let Some(Ok(Message::Text(text))) = message else {
            assert!(message.is_some(), "the CDP connection closed");
            continue;
        };
        let value: Value = serde_json::from_str(&text).unwrap();
        if value.get("id").is_some() {
            return Some(value);
        }
    }
}

/// The one pending `cdp` approval, once it is there.
async fn pending(daemon: &Daemon) -> Value {
    for _ in 0..100 {
        let (status, list) = daemon
            .call(Method::GET, "/v1/approvals?state=pending", None)
            .await
            .unwrap();
        assert_eq!(status, 200, "{list}");
        if let Some(held) = list["approvals"].as_array().unwrap().first() {
            return held.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the held call never became an approval");
}

async fn page_urls(client: &mut Client, id: u64) -> Vec<String> {
    send(client, id, "Target.getTargets", json!({})).await;
    let reply = next_reply(client, Duration::from_secs(10)).await.unwrap();
    assert_eq!(reply["id"], id, "{reply}");
    reply["result"]["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["url"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_cdp_call_is_parked_while_later_calls_flow() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("held", POLICY).await;
    let url = daemon
        .url(&format!("/v1/workspaces/{id}/cdp"))
        .replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().unwrap();
    let bearer = format!("Bearer {}", agent.secret).parse().unwrap();
    request.headers_mut().insert("Authorization", bearer);
    let (mut client, _) = tokio_tungstenite::connect_async(request).await.unwrap();

    for (round, verb) in [(0u64, "approve"), (100, "deny")] {
        let page = format!("data:text/html,held-{verb}");
        send(
            &mut client,
            round + 1,
            "Target.createTarget",
            json!({ "url": page }),
        )
        .await;
        let held = pending(&daemon).await;
        assert_eq!(held["operation"], "cdp", "{held}");
        // Later calls are answered, in order, while the first waits.
        for n in 2..=4 {
            send(&mut client, round + n, "Browser.getVersion", json!({})).await;
            let reply = next_reply(&mut client, Duration::from_secs(10))
                .await
                .expect("a later call is answered while one is held");
            assert_eq!(
                reply["id"],
                round + n,
                "the held call was answered: {reply}"
            );
            assert!(reply["result"]["product"].is_string(), "{reply}");
        }
        let urls = page_urls(&mut client, round + 5).await;
        assert!(!urls.contains(&page), "opened while held: {urls:?}");
        let (status, body) = daemon
            .call_as(
                Some(&operator.secret),
                Method::POST,
                &format!("/v1/approvals/{}/{verb}", held["id"].as_str().unwrap()),
                Some(r#"{"reason":"not this page"}"#),
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        let answer = next_reply(&mut client, Duration::from_secs(30))
            .await
            .expect("the held call is answered once decided");
        assert_eq!(answer["id"], round + 1, "{answer}");
        let urls = page_urls(&mut client, round + 6).await;
        if verb == "approve" {
            assert!(answer["result"]["targetId"].is_string(), "{answer}");
            assert!(urls.contains(&page), "approved, the tab opens: {urls:?}");
        } else {
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("not this page"), "{answer}");
            assert!(!urls.contains(&page), "denied, no tab: {urls:?}");
        }
    }
    eprintln!(
        "cdp parked: three calls answered while each createTarget was held; approved opened, denied refused"
    );
}
