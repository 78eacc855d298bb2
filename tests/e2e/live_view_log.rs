//! The live view in the event log (README "Every operation is an event":
//! "live views opened"): every viewer that connects is a `live_view.open`
//! row, and every one that ends is a `live_view.close` row saying who ended
//! it and why, whether the viewer said goodbye, vanished without a word, or
//! lost its socket to a revoked token. An auditor reading the log can tell
//! how long each person watched.

use std::time::Duration;

use anyhow::{Context, bail};
use cubicle_tests::Daemon;
use cubicle_tests::desk::{Desk, desk};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Reads binary frames until `n` bytes are buffered in `inbox`.
async fn read(ws: &mut Socket, inbox: &mut Vec<u8>, n: usize) -> anyhow::Result<Vec<u8>> {
    while inbox.len() < n {
        match tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(20)), ws.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => inbox.extend_from_slice(&bytes),
            Ok(Some(Ok(Message::Close(frame)))) => bail!("closed: {frame:?}"),
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(err))) => bail!("socket: {err}"),
            Ok(None) => bail!("socket ended"),
            Err(_) => bail!("nothing in 20 s"),
        }
    }
    Ok(inbox.drain(..n).collect())
}

/// A live view of `id` as `token` that has finished the RFB 3.8 handshake
/// (security None, shared) and received one framebuffer update: a viewer
/// that is really watching.
async fn watching(daemon: &Daemon, id: &str, token: &str) -> anyhow::Result<Socket> {
    let url = format!(
        "{}/v1/workspaces/{id}/vnc?access_token={token}",
        daemon.base.replacen("http://", "ws://", 1)
    );
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "binary".parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(request)
        .await
        .context("opening the live view")?;
    let mut inbox = Vec::new();
    let version = read(&mut ws, &mut inbox, 12).await?;
    if &version[..4] != b"RFB " {
        bail!("not RFB: {version:?}");
    }
    ws.send(Message::Binary(b"RFB 003.008\n".to_vec().into()))
        .await?;
    let count = read(&mut ws, &mut inbox, 1).await?[0];
    let types = read(&mut ws, &mut inbox, usize::from(count)).await?;
    if !types.contains(&1) {
        bail!("security None not offered: {types:?}");
    }
    ws.send(Message::Binary(vec![1].into())).await?;
    if read(&mut ws, &mut inbox, 4).await? != [0, 0, 0, 0] {
        bail!("security refused");
    }
    ws.send(Message::Binary(vec![1].into())).await?;
    let init = read(&mut ws, &mut inbox, 24).await?;
    let name = u32::from_be_bytes([init[20], init[21], init[22], init[23]]);
    read(&mut ws, &mut inbox, name as usize).await?;
    // FramebufferUpdateRequest for a 16x16 corner; the answer's first byte
    // is a server message type.
    ws.send(Message::Binary(vec![3, 0, 0, 0, 0, 0, 0, 16, 0, 16].into()))
        .await?;
    let kind = read(&mut ws, &mut inbox, 1).await?[0];
    if kind > 3 {
        bail!("server message type {kind}");
    }
    Ok(ws)
}

/// The workspace's `live_view.*` events, oldest first, as an auditor reads
/// them through `GET /v1/events`.
async fn live_view_events(daemon: &Daemon, auditor: &str, id: &str) -> Vec<Value> {
    let (status, log) = daemon
        .call_as(
            Some(auditor),
            Method::GET,
            &format!("/v1/events?workspace={id}&limit=1000"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{log}");
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("live_view."))
        })
        .cloned()
        .collect()
}

/// Waits up to 10 s until `who` has `closes` `live_view.close` rows; returns
/// all of the workspace's live-view rows then.
async fn until_closed(
    daemon: &Daemon,
    auditor: &str,
    id: &str,
    who: &str,
    closes: usize,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(10));
    loop {
        let rows = live_view_events(daemon, auditor, id).await;
        let seen = rows
            .iter()
            .filter(|e| e["kind"] == "live_view.close" && e["actor"]["name"] == who)
            .count();
        if seen >= closes || tokio::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `who`'s rows of `kind`.
fn of<'a>(rows: &'a [Value], kind: &str, who: &str) -> Vec<&'a Value> {
    rows.iter()
        .filter(|e| e["kind"] == kind && e["actor"]["name"] == who)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_live_view_that_ends_is_in_the_log_with_who_ended_it() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;

    // An auditor watches, then closes the page (a close frame, 1000).
    let mut view = watching(&daemon, &id, &auditor.secret).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    view.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    })))
    .await
    .unwrap();
    drop(view);
    let rows = until_closed(&daemon, &auditor.secret, &id, "carol", 1).await;
    let opens = of(&rows, "live_view.open", "carol");
    let closes = of(&rows, "live_view.close", "carol");
    assert_eq!(
        (opens.len(), closes.len()),
        (1, 1),
        "one open and one close for the auditor's view: {rows:#?}"
    );
    let close = closes[0];
    assert_eq!(close["workspace_id"], id.as_str(), "{close}");
    assert_eq!(close["detail"]["by"], "viewer", "{close}");
    assert_eq!(close["detail"]["code"], 1000, "{close}");
    assert!(
        close["detail"]["seconds"].as_u64().is_some(),
        "how long it was open: {close}"
    );
    assert!(
        close["id"].as_i64() > opens[0]["id"].as_i64(),
        "the close comes after its open: {rows:#?}"
    );
    assert!(
        close["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("127.0.0.1:")),
        "the client's address: {close}"
    );

    // A viewer that vanishes without a word (its TCP connection dropped,
    // as a closed laptop or a killed browser does) is logged too.
    let view = watching(&daemon, &id, &auditor.secret).await.unwrap();
    drop(view);
    let rows = until_closed(&daemon, &auditor.secret, &id, "carol", 2).await;
    assert_eq!(
        (
            of(&rows, "live_view.open", "carol").len(),
            of(&rows, "live_view.close", "carol").len()
        ),
        (2, 2),
        "a dropped viewer's view is closed in the log: {rows:#?}"
    );

    // The gateway ends an operator's view when the token is revoked: the
    // close row says the gateway did, and why.
    let _view = watching(&daemon, &id, &operator.secret).await.unwrap();
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/tokens/{}", operator.id), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    let rows = until_closed(&daemon, &auditor.secret, &id, "alice", 1).await;
    let closes = of(&rows, "live_view.close", "alice");
    assert_eq!(
        closes.len(),
        1,
        "the revoked view is closed in the log: {rows:#?}"
    );
    assert_eq!(closes[0]["detail"]["by"], "gateway", "{}", closes[0]);
    assert_eq!(closes[0]["detail"]["code"], 1008, "{}", closes[0]);
    assert_eq!(
        closes[0]["detail"]["reason"], "token revoked",
        "{}",
        closes[0]
    );
}
