//! The live view's rows: how long a screen change takes to reach a viewer
//! of ours (an RFB client on the gateway's live-view WebSocket) against a
//! viewer connected to the workspace's Xvnc directly through the guest
//! channel, and the interval between the frames each receives while a page
//! scrolls. Both viewers are connected at once and see the same changes;
//! the direct one connects first, so Xvnc serves it first. Both read
//! through an in-process pipe (the WebSocket's messages have to be made a
//! byte stream for the RFB client; the direct stream goes through the same
//! kind of pipe so that copy is not counted against the gateway).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::daemon::Daemon;
use super::measure::{cdp_call, page_session};
use super::peers::{self, RawRfb, Update};
use super::{Row, Stat};

/// How long the screen must stay still before a change is timed.
const QUIET: Duration = Duration::from_millis(120);
/// Longest wait for a change to reach a viewer.
const ARRIVAL: Duration = Duration::from_secs(3);
/// Wheel clicks of one scroll, and the time between two.
const WHEEL_CLICKS: usize = 100;
const WHEEL_EVERY: Duration = Duration::from_millis(20);
/// How near the pointer a rectangle must be to carry the moved cursor.
const CURSOR_REACH: u16 = 40;

/// A viewer that asks for the next update as soon as one arrives (as
/// noVNC does), reporting each with the instant it was read.
struct Watch {
    updates: mpsc::UnboundedReceiver<(Instant, Update)>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start<S>(mut rfb: RawRfb<S>) -> Self
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, updates) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while rfb.request_update().await.is_ok() {
                let Ok(update) = rfb.next_update().await else {
                    return;
                };
                if tx.send((Instant::now(), update)).is_err() {
                    return;
                }
            }
        });
        Self { updates, task }
    }

    /// Drops what has arrived; true if anything had.
    fn drain(&mut self) -> bool {
        let mut any = false;
        while self.updates.try_recv().is_ok() {
            any = true;
        }
        any
    }

    /// The first update after now that touches (x, y), and when it came.
    async fn first_touching(&mut self, x: u16, y: u16) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + ARRIVAL;
        loop {
            let (at, update) = tokio::time::timeout_at(deadline, self.updates.recv())
                .await
                .ok()??;
            if update.touches(x, y, CURSOR_REACH) {
                return Some(at);
            }
        }
    }

    /// Every update's arrival until `until`, then what arrived later is
    /// left unread.
    async fn arrivals_until(&mut self, until: Instant) -> Vec<(Instant, usize)> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::from_std(until);
        while let Ok(Some((at, update))) =
            tokio::time::timeout_at(deadline, self.updates.recv()).await
        {
            seen.push((at, update.bytes));
        }
        seen
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Our viewer: the gateway's live-view WebSocket, its binary messages
/// pumped through an in-process pipe so the same RFB client reads it (the
/// direct viewer reads through the same kind of pipe: see [`piped`]).
async fn through_gateway(daemon: &Daemon, id: &str) -> anyhow::Result<RawRfb<DuplexStream>> {
    let url = format!("ws://{}/v1/workspaces/{id}/vnc", daemon.authority());
    let mut request = url.into_client_request()?;
    let headers = request.headers_mut();
    headers.insert("authorization", format!("Bearer {}", daemon.token).parse()?);
    headers.insert("sec-websocket-protocol", "binary".parse()?);
    // Nagle's algorithm off, as a browser has it (Chromium turns it off on
    // every socket).
    let (ws, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
        .await
        .context("opening the live view")?;
    let (mut ws_tx, mut ws_rx) = ws.split();
    let (near, far) = tokio::io::duplex(1 << 20);
    let (mut far_rx, mut far_tx) = tokio::io::split(far);
    tokio::spawn(async move {
        while let Some(Ok(message)) = ws_rx.next().await {
            if let Message::Binary(bytes) = message
                && far_tx.write_all(&bytes).await.is_err()
            {
                return;
            }
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = far_rx.read(&mut buf).await {
            if ws_tx
                .send(Message::binary(buf[..n].to_vec()))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    RawRfb::over(near, &peers::VIEWER_ENCODINGS).await
}

/// A byte stream pumped through an in-process pipe, as the WebSocket of
/// [`through_gateway`] is: the direct viewer pays the same copy and task
/// hop on its side, so the difference left is the gateway's.
fn piped<S>(stream: S) -> DuplexStream
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (near, far) = tokio::io::duplex(1 << 20);
    let (mut far_rx, mut far_tx) = tokio::io::split(far);
    let (mut rx, mut tx) = tokio::io::split(stream);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = rx.read(&mut buf).await {
            if far_tx.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = far_rx.read(&mut buf).await {
            if tx.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    near
}

/// Waits until neither viewer has had an update for [`QUIET`] (at most a
/// few seconds: a screen that never rests is timed anyway, each viewer
/// waiting for a rectangle where the change is).
async fn quiet(viewers: &mut [&mut Watch]) {
    let give_up = Instant::now() + Duration::from_secs(3);
    loop {
        tokio::time::sleep(QUIET).await;
        let mut any = false;
        for viewer in viewers.iter_mut() {
            any |= viewer.drain();
        }
        if !any || Instant::now() > give_up {
            return;
        }
    }
}

/// The two rows: latency of a change and frame interval while scrolling.
pub async fn rows(daemon: &Daemon, id: &str, runs: usize) -> anyhow::Result<Vec<Row>> {
    let socket = daemon.channel_socket(id);
    let direct = RawRfb::over(
        piped(peers::guest(&socket, cubicle_image::ports::RFB).await?),
        &peers::VIEWER_ENCODINGS,
    )
    .await
    .context("a viewer straight to Xvnc")?;
    let mut direct = Watch::start(direct);
    let mut ours = Watch::start(through_gateway(daemon, id).await?);
    // The change's source: a third session moving the pointer (the cursor
    // is drawn into the framebuffer of viewers that do not draw their own).
    let mut pointer = RawRfb::connect(&socket).await?;

    let (mut theirs_ms, mut ours_ms, mut missed) = (Vec::new(), Vec::new(), 0);
    for run in 0..runs {
        let (x, y) = if run % 2 == 0 { (500, 420) } else { (580, 470) };
        quiet(&mut [&mut direct, &mut ours]).await;
        let moved = Instant::now();
        pointer.send(&peers::pointer(x, y, 0)).await?;
        let (theirs, mine) = (
            direct.first_touching(x, y).await,
            ours.first_touching(x, y).await,
        );
        match (theirs, mine) {
            (Some(theirs), Some(mine)) => {
                theirs_ms.push(theirs - moved);
                ours_ms.push(mine - moved);
            }
            _ => missed += 1,
        }
    }
    if ours_ms.is_empty() {
        bail!("no pointer move reached both viewers ({missed} tries)");
    }
    let latency = Row::new(
        "live view: a change to a viewer's update",
        "ms",
        Stat::of_durations(&ours_ms),
        "a viewer straight to Xvnc",
        Stat::of_durations(&theirs_ms),
    )
    .note(format!(
        "the pointer moved by a third RFB session; ZRLE; {missed} of {runs} not seen by both"
    ));

    let scrolling = scroll(&socket, &mut pointer, &mut direct, &mut ours).await?;
    Ok(vec![latency, scrolling])
}

/// A long page in the workspace's Chromium, scrolled down and back up with
/// the wheel; the intervals between the frames each viewer receives.
async fn scroll(
    socket: &std::path::Path,
    pointer: &mut RawRfb,
    direct: &mut Watch,
    ours: &mut Watch,
) -> anyhow::Result<Row> {
    long_page(socket).await?;
    let (cx, cy) = (640, 450);
    pointer.send(&peers::pointer(cx, cy, 0)).await?;
    let (mut theirs, mut mine) = (Vec::new(), Vec::new());
    let (mut their_frames, mut my_frames, mut their_bytes, mut my_bytes) = (0, 0, 0, 0);
    let mut window = Duration::ZERO;
    // Wheel down is button 5, up button 4.
    for button in [16u8, 8] {
        quiet(&mut [&mut *direct, &mut *ours]).await;
        let started = Instant::now();
        let mut tick = tokio::time::interval(WHEEL_EVERY);
        for _ in 0..WHEEL_CLICKS {
            tick.tick().await;
            let click = [peers::pointer(cx, cy, button), peers::pointer(cx, cy, 0)].concat();
            pointer.send(&click).await?;
        }
        let ended = Instant::now();
        window += ended - started;
        let (a, b) = (
            direct.arrivals_until(ended).await,
            ours.arrivals_until(ended).await,
        );
        for (arrivals, intervals, frames, bytes) in [
            (a, &mut theirs, &mut their_frames, &mut their_bytes),
            (b, &mut mine, &mut my_frames, &mut my_bytes),
        ] {
            *frames += arrivals.len();
            *bytes += arrivals.iter().map(|(_, n)| n).sum::<usize>();
            intervals.extend(arrivals.windows(2).map(|w| w[1].0 - w[0].0));
        }
    }
    if mine.is_empty() || theirs.is_empty() {
        bail!("scrolling the page changed nothing a viewer saw");
    }
    let fps = |frames: usize| frames as f64 / window.as_secs_f64();
    Ok(Row::new(
        "live view: frame interval while scrolling",
        "ms",
        Stat::of_durations(&mine),
        "a viewer straight to Xvnc",
        Stat::of_durations(&theirs),
    )
    .note(format!(
        "{:.1} vs {:.1} frames/s, {:.1} vs {:.1} MiB/s (ours vs direct), {WHEEL_CLICKS} wheel clicks each way",
        fps(my_frames),
        fps(their_frames),
        my_bytes as f64 / 1048576.0 / window.as_secs_f64(),
        their_bytes as f64 / 1048576.0 / window.as_secs_f64(),
    )))
}

/// Puts a long page of text in the workspace's first tab (straight through
/// the guest channel: setting up, not measured).
async fn long_page(socket: &std::path::Path) -> anyhow::Result<()> {
    let mut ws = peers::devtools(socket).await?;
    let session = page_session(&mut ws, 1).await?;
    let lines: String = (0..2000)
        .map(|i| format!("<p>line {i}: the quick brown fox jumps over the lazy dog</p>"))
        .collect();
    let url = format!("data:text/html,<body style='font-size:20px'>{lines}</body>");
    cdp_call(
        &mut ws,
        3,
        Some(&session),
        "Page.navigate",
        json!({ "url": url }),
    )
    .await?;
    for id in 4..100 {
        let state = cdp_call(
            &mut ws,
            id,
            Some(&session),
            "Runtime.evaluate",
            json!({"expression": "document.readyState + ' ' + document.body.scrollHeight", "returnByValue": true}),
        )
        .await?;
        if state["result"]["value"]
            .as_str()
            .is_some_and(|s| s.starts_with("complete") && !s.ends_with(" 0"))
        {
            // Let the first paint reach the screen.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the long page did not load")
}
