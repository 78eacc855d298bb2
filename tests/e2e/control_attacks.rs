//! Attacks on the live view's control lock, with a raw RFB client over the
//! gateway's WebSocket: viewers that may not hold control send hand-crafted
//! input (nothing reaches the desktop), malformed RFB (that viewer is closed
//! with a reason, the rest carry on), revoked tokens (their live view ends
//! within a second), and a viewer that stops reading (dropped, the agent
//! unaffected).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cubicle_tests::desk::{Desk, act, appears, desk, exec, exists, terminal};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::json;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A hand-driven RFB client on the raw live-view WebSocket.
pub(crate) struct RawViewer {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    inbox: Vec<u8>,
}

impl RawViewer {
    async fn open(base: &str, id: &str, token: &str) -> anyhow::Result<Self> {
        let url = format!(
            "{}/v1/workspaces/{id}/vnc?access_token={token}",
            base.replacen("http://", "ws://", 1)
        );
        let mut request = url.into_client_request()?;
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "binary".parse()?);
        let (ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|err| match err {
                tokio_tungstenite::tungstenite::Error::Http(response) => anyhow::anyhow!(
                    "live view refused: {} {}",
                    response.status(),
                    String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                ),
                other => other.into(),
            })?;
        Ok(Self {
            ws,
            inbox: Vec::new(),
        })
    }

    /// Opens and completes the RFB 3.8 handshake (security None, shared).
    pub(crate) async fn ready(base: &str, id: &str, token: &str) -> anyhow::Result<Self> {
        let mut viewer = Self::open(base, id, token).await?;
        let version = viewer.read(12).await?;
        if &version[..4] != b"RFB " {
            bail!("not RFB: {version:?}");
        }
        viewer.send(b"RFB 003.008\n").await?;
        let count = viewer.read(1).await?[0];
        let types = viewer.read(usize::from(count)).await?;
        if !types.contains(&1) {
            bail!("security None not offered: {types:?}");
        }
        viewer.send(&[1]).await?;
        let result = viewer.read(4).await?;
        if result != [0, 0, 0, 0] {
            bail!("security result {result:?}");
        }
        viewer.send(&[1]).await?;
        let init = viewer.read(24).await?;
        let name = u32::from_be_bytes([init[20], init[21], init[22], init[23]]);
        viewer.read(name as usize).await?;
        Ok(viewer)
    }

    pub(crate) async fn send(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.ws.send(Message::Binary(bytes.to_vec().into())).await?;
        Ok(())
    }

    async fn read(&mut self, n: usize) -> anyhow::Result<Vec<u8>> {
        while self.inbox.len() < n {
            match tokio::time::timeout(
                cubicle_tests::guard(Duration::from_secs(20)),
                self.ws.next(),
            )
            .await
            {
                Ok(Some(Ok(Message::Binary(bytes)))) => self.inbox.extend_from_slice(&bytes),
                Ok(Some(Ok(Message::Close(frame)))) => bail!("closed: {frame:?}"),
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(err))) => bail!("socket: {err}"),
                Ok(None) => bail!("socket ended"),
                Err(_) => bail!("nothing in 20 s"),
            }
        }
        Ok(self.inbox.drain(..n).collect())
    }

    /// Proves the connection still works: asks for one small update and
    /// waits for the FramebufferUpdate message's first byte.
    pub(crate) async fn still_served(&mut self) -> anyhow::Result<()> {
        self.inbox.clear();
        self.send(&[3, 0, 0, 0, 0, 0, 0, 16, 0, 16]).await?;
        let kind = self.read(1).await?[0];
        if kind != 0 && kind != 2 && kind != 3 {
            bail!("server message type {kind}");
        }
        Ok(())
    }

    /// Waits up to `limit` for the server's close frame: (code, reason, when).
    async fn closed(&mut self, limit: Duration) -> Option<(u16, String, Duration)> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + cubicle_tests::guard(limit);
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let (code, reason) = frame
                        .map(|f| (u16::from(f.code), f.reason.to_string()))
                        .unwrap_or((1005, String::new()));
                    return Some((code, reason, started.elapsed()));
                }
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return Some((1006, String::new(), started.elapsed())),
                Err(_) => return None,
            }
        }
    }
}

fn key(keysym: u32, down: bool) -> Vec<u8> {
    let mut m = vec![4, u8::from(down), 0, 0];
    m.extend_from_slice(&keysym.to_be_bytes());
    m
}

/// The XT scancode (QEMU "qnum") of a lowercase letter, space or Return;
/// Xvnc ignores QEMU key events without one.
fn qnum(keysym: u32) -> u32 {
    const LETTERS: &[u8; 26] = &[
        0x1e, 0x30, 0x2e, 0x20, 0x12, 0x21, 0x22, 0x23, 0x17, 0x24, 0x25, 0x26, 0x32, 0x31, 0x18,
        0x19, 0x10, 0x13, 0x1f, 0x14, 0x16, 0x2f, 0x11, 0x2d, 0x15, 0x2c,
    ];
    match keysym {
        0x61..=0x7a => u32::from(LETTERS[(keysym - 0x61) as usize]),
        0x20 => 0x39,
        0xff0d => 0x1c,
        other => panic!("no scancode for keysym {other:#x} in this test"),
    }
}

fn qemu_key(keysym: u32, down: bool) -> Vec<u8> {
    let mut m = vec![255, 0, 0, u8::from(down)];
    m.extend_from_slice(&keysym.to_be_bytes());
    m.extend_from_slice(&qnum(keysym).to_be_bytes());
    m
}

pub(crate) fn pointer(buttons: u8, x: u16, y: u16) -> Vec<u8> {
    let mut m = vec![5, buttons];
    m.extend_from_slice(&x.to_be_bytes());
    m.extend_from_slice(&y.to_be_bytes());
    m
}

fn cut_text(len: i32, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![6, 0, 0, 0];
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(payload);
    m
}

/// KeyEvents typing `text` then Return (ASCII keysyms are the characters).
fn typing(text: &str, qemu: bool) -> Vec<u8> {
    let keysyms = text.bytes().map(u32::from).chain([0xff0d]);
    let mut out = Vec::new();
    for keysym in keysyms {
        for down in [true, false] {
            out.extend(if qemu {
                qemu_key(keysym, down)
            } else {
                key(keysym, down)
            });
        }
    }
    out
}

/// Everything a hostile viewer might send to act on the desktop.
pub(crate) fn hostile(tag: &str) -> Vec<Vec<u8>> {
    let mut size = vec![251, 0, 3, 32, 2, 88, 1, 0];
    size.extend_from_slice(&[0; 16]);
    let clip = format!("touch pwned_clip_{tag}\n");
    let mut extended = 0x1000_0001u32.to_be_bytes().to_vec(); // provide, text
    extended.extend_from_slice(clip.as_bytes());
    vec![
        typing(&format!("touch pwned_{tag}"), false),
        typing(&format!("touch pwnedqemu{tag}"), true),
        [
            pointer(0, 900, 500),
            pointer(1, 900, 500),
            pointer(0, 901, 501),
            pointer(4, 10, 790),
            pointer(0, 10, 790),
        ]
        .concat(),
        cut_text(clip.len() as i32, clip.as_bytes()),
        cut_text(-(extended.len() as i32), &extended),
        // Middle click pastes the selection in X.
        [pointer(2, 300, 300), pointer(0, 300, 300)].concat(),
        size,
        vec![250, 0, 1, 2], // xvp reboot
    ]
}

/// Where X has the pointer (`xdotool getmouselocation`); panics unless X
/// answered with both coordinates, so two failures never compare equal.
pub(crate) async fn mouse(daemon: &cubicle_tests::Daemon, id: &str) -> (u32, u32) {
    let out = exec(daemon, id, "xdotool getmouselocation --shell").await;
    let field = |name: &str| -> u32 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in xdotool's answer {out:?}"))
    };
    (field("X"), field("Y"))
}

/// Reads the X selections the way a pasting program does (ConvertSelection
/// to UTF8_STRING, then the property), with libX11 through ctypes: prints
/// `NAME owner-none`, `NAME refused`, or `NAME text <repr>` for each.
const SELECTIONS: &str = r#"
import ctypes, sys, time
x = ctypes.cdll.LoadLibrary("libX11.so.6")
P, U, L = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_long
x.XOpenDisplay.restype = P; x.XOpenDisplay.argtypes = [ctypes.c_char_p]
x.XDefaultRootWindow.restype = U; x.XDefaultRootWindow.argtypes = [P]
x.XCreateSimpleWindow.restype = U
x.XCreateSimpleWindow.argtypes = [P, U, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, U, U]
x.XInternAtom.restype = U; x.XInternAtom.argtypes = [P, ctypes.c_char_p, ctypes.c_int]
x.XGetSelectionOwner.restype = U; x.XGetSelectionOwner.argtypes = [P, U]
x.XConvertSelection.argtypes = [P, U, U, U, U, U]
x.XPending.argtypes = [P]; x.XNextEvent.argtypes = [P, P]; x.XFlush.argtypes = [P]
x.XGetWindowProperty.argtypes = [P, U, U, L, L, ctypes.c_int, U, ctypes.POINTER(U),
    ctypes.POINTER(ctypes.c_int), ctypes.POINTER(U), ctypes.POINTER(U), ctypes.POINTER(P)]
d = x.XOpenDisplay(None)
if not d:
    print("no-display"); sys.exit(1)
w = x.XCreateSimpleWindow(d, x.XDefaultRootWindow(d), 0, 0, 1, 1, 0, 0, 0)
utf8 = x.XInternAtom(d, b"UTF8_STRING", 0)
prop = x.XInternAtom(d, b"CUBICLE_PROBE", 0)
for name in sys.argv[1:]:
    sel = x.XInternAtom(d, name.encode(), 0)
    if x.XGetSelectionOwner(d, sel) == 0:
        print(name, "owner-none"); continue
    x.XConvertSelection(d, sel, utf8, prop, w, 0)
    x.XFlush(d)
    event = (L * 24)()
    got = None
    deadline = time.time() + 5
    while time.time() < deadline and got is None:
        if x.XPending(d):
            x.XNextEvent(d, event)
            if event[0] & 0xffffffff == 31:  # SelectionNotify
                got = event[7]  # its property: None (0) when refused
        else:
            time.sleep(0.02)
    if not got:
        print(name, "refused"); continue
    kind, fmt, n, after, data = U(), ctypes.c_int(), U(), U(), P()
    x.XGetWindowProperty(d, w, prop, 0, 1 << 20, 1, 0, ctypes.byref(kind), ctypes.byref(fmt),
        ctypes.byref(n), ctypes.byref(after), ctypes.byref(data))
    print(name, "text", repr(ctypes.string_at(data, n.value).decode("utf-8", "replace")))
"#;

/// The X selections CLIPBOARD and PRIMARY as X clients see them.
async fn selections(daemon: &cubicle_tests::Daemon, id: &str) -> String {
    exec(
        daemon,
        id,
        &format!("python3 - CLIPBOARD PRIMARY <<'EOF'\n{SELECTIONS}\nEOF"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_without_control_cannot_inject_input() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        agent,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;
    terminal(&daemon, &id).await;
    let pointer_before = mouse(&daemon, &id).await;
    let selections_before = selections(&daemon, &id).await;
    assert!(!selections_before.contains("pwned"), "{selections_before}");
    // The auditor, the agent's token, and an operator who has not taken over.
    // They stay connected through every look below: Xvnc drops a cut text
    // whose viewer has left, so a leak would only show while it is there.
    let mut hostiles = Vec::new();
    for (tag, who) in [
        ("auditor", &auditor),
        ("agent", &agent),
        ("operator", &operator),
    ] {
        let mut viewer = RawViewer::ready(&daemon.base, &id, &who.secret)
            .await
            .unwrap();
        for message in hostile(tag) {
            viewer.send(&message).await.unwrap();
        }
        // Dropped input is not an error: the viewer is still served.
        viewer
            .still_served()
            .await
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        hostiles.push(viewer);
    }
    // Nothing of it shows, looked at for a while (the decisive look comes
    // after the holder's input below, which X handles after anything sent
    // before it).
    let nothing_landed = async |when: &str| {
        let home = exec(&daemon, &id, "ls -A /home/user").await;
        assert!(
            !home.contains("pwned"),
            "{when}: input from a viewer without control reached the desktop: {home}"
        );
        assert_eq!(
            mouse(&daemon, &id).await,
            pointer_before,
            "{when}: the pointer moved"
        );
        let now = selections(&daemon, &id).await;
        assert_eq!(now, selections_before, "{when}: the X selections changed");
        // The desktop's size, from X itself (SetDesktopSize was sent).
        let size = exec(&daemon, &id, "xdotool getdisplaygeometry").await;
        assert_eq!(size, "1280 800\n", "{when}: the screen was resized");
    };
    for round in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        nothing_landed(&format!("after {} ms", 500 * (round + 1))).await;
    }

    // The same bytes work once that operator holds control: the test can see
    // input when it arrives.
    let mut viewer = RawViewer::ready(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    let path = format!("/v1/workspaces/{id}/control/take");
    let (status, _) = daemon
        .call_as(Some(&operator.secret), Method::POST, &path, None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    viewer
        .send(&typing("touch typed_by_holder", false))
        .await
        .unwrap();
    assert!(appears(&daemon, &id, "typed_by_holder", Duration::from_secs(10)).await);
    viewer
        .send(&typing("touch typedbyqemuholder", true))
        .await
        .unwrap();
    assert!(appears(&daemon, &id, "typedbyqemuholder", Duration::from_secs(10)).await);
    nothing_landed("after the holder's input").await;
    drop(hostiles);
    // The holder's cut text does reach X's selections: the test can see a
    // clipboard injection when there is one.
    let clip = b"cubicle-clip-from-holder";
    viewer
        .send(&cut_text(clip.len() as i32, clip))
        .await
        .unwrap();
    let mut seen = String::new();
    for _ in 0..20 {
        seen = selections(&daemon, &id).await;
        if seen.contains("cubicle-clip-from-holder") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        seen.contains("CLIPBOARD text 'cubicle-clip-from-holder'"),
        "control: the holder's cut text is not in the X clipboard: {seen}"
    );
    // Handed back mid-keypress: the held key is released, later input dropped.
    viewer.send(&key(u32::from(b'z'), true)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let path = format!("/v1/workspaces/{id}/control/release");
    let (status, _) = daemon
        .call_as(Some(&operator.secret), Method::POST, &path, None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    viewer
        .send(&typing("touch after_release", false))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!exists(&daemon, &id, "after_release").await);
    // Clear whatever the held key typed before the release, then type.
    act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "key", "text": "ctrl+u"}),
    )
    .await;
    let (status, body) = act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "type", "text": "touch agent_after\n"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        appears(&daemon, &id, "agent_after", Duration::from_secs(10)).await,
        "a key stayed pressed after hand-back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_rfb_closes_only_that_viewer() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        agent,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;
    let mut bystander = RawViewer::ready(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "unknown type",
            vec![7, 0, 0, 0],
            "unknown RFB message type 7",
        ),
        (
            "huge ClientCutText",
            cut_text(0x7fff_ffff, b"x"),
            "over the 1 MiB limit",
        ),
        (
            "i32::MIN ClientCutText",
            cut_text(i32::MIN, b""),
            "over the 1 MiB limit",
        ),
        (
            "extended ClientCutText without flags",
            cut_text(-2, b"ab"),
            "lacks its 4-byte flags",
        ),
        (
            "Fence too long",
            vec![248, 0, 0, 0, 0, 0, 0, 0, 200],
            "Fence payload",
        ),
        (
            "truncated PointerEvent",
            vec![5, 1, 0],
            "truncated RFB PointerEvent: 3 of 6 bytes",
        ),
    ];
    for (name, bytes, expected) in cases {
        let mut viewer = RawViewer::ready(&daemon.base, &id, &operator.secret)
            .await
            .unwrap();
        viewer.send(&bytes).await.unwrap();
        let (code, reason, after) = viewer
            .closed(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{name}: the viewer was not closed"));
        assert_eq!(code, 1002, "{name}: {reason}");
        assert!(
            reason.contains(expected),
            "{name}: {reason:?} lacks {expected:?}"
        );
        println!("{name}: closed after {after:?} with {reason:?}");
    }
    // Before the handshake ends, too.
    let mut viewer = RawViewer::open(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    viewer.read(12).await.unwrap();
    viewer.send(b"GET / HTTP/1.1\r\n").await.unwrap();
    let (code, reason, _) = viewer.closed(Duration::from_secs(5)).await.expect("closed");
    assert_eq!(code, 1002);
    assert!(reason.contains("bad RFB ProtocolVersion"), "{reason}");
    let mut viewer = RawViewer::ready(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    viewer.ws.send(Message::Text("hello".into())).await.unwrap();
    let (code, _, _) = viewer.closed(Duration::from_secs(5)).await.expect("closed");
    assert_eq!(code, 1003);

    // The workspace and the other viewer carry on.
    bystander
        .still_served()
        .await
        .expect("the other viewer still gets updates");
    let (status, body) = act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "mouse_move", "coordinate": [5, 5]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let url = daemon.ws_url(&format!("/v1/workspaces/{id}/vnc"));
    let frame = cubicle_tests::rfb::first_full_frame(&url, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!((frame.width, frame.height), (1280, 800));
}

/// Reads a Server-Sent Events response until it ends; true if it ended
/// within `limit`.
async fn sse_ends(mut response: reqwest::Response, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(limit);
    loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None) | Err(_)) => return true,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_tokens_lose_their_live_view_within_a_second() {
    let Desk {
        _data,
        daemon,
        id,
        operator,
        auditor,
        // Bound, not `..`: the data dir must live as long as the daemon.
        ..
    } = desk().await;
    let mut view = RawViewer::ready(&daemon.base, &id, &operator.secret)
        .await
        .unwrap();
    let mut other = RawViewer::ready(&daemon.base, &id, &auditor.secret)
        .await
        .unwrap();
    let events = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/workspaces/{id}/control/events")))
        .bearer_auth(&operator.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);

    let started = Instant::now();
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/tokens/{}", operator.id), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    let (code, reason, _) = view
        .closed(Duration::from_secs(1))
        .await
        .expect("the revoked token's live view was still open after a second");
    let api_close = started.elapsed();
    assert_eq!((code, reason.as_str()), (1008, "token revoked"));
    assert!(
        sse_ends(events, Duration::from_secs(1)).await,
        "the event stream stayed open"
    );
    other
        .still_served()
        .await
        .expect("other tokens' viewers carry on");

    // Revoked from the command line (another process): the daemon notices.
    let revoke = std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
        .args(["token", "revoke", &auditor.id, "--data-dir"])
        .arg(&daemon.data_dir)
        .output()
        .unwrap();
    assert!(revoke.status.success(), "{revoke:?}");
    let started = Instant::now();
    let (code, reason, _) = other
        .closed(Duration::from_secs(1))
        .await
        .expect("a token revoked by the CLI kept its live view for over a second");
    assert_eq!((code, reason.as_str()), (1008, "token revoked"));
    println!(
        "measure: revoked token's live view closed {:.0} ms after DELETE /v1/tokens, {:.0} ms after `cubicle token revoke` returned",
        api_close.as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64() * 1000.0
    );
    let refused = RawViewer::open(&daemon.base, &id, &auditor.secret).await;
    assert!(refused.is_err(), "a revoked token opened a live view");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_stops_reading_is_dropped() {
    let Desk {
        _data,
        daemon,
        id,
        agent,
        ..
    } = desk().await;
    let mut slow = RawViewer::ready(&daemon.base, &id, &agent.secret)
        .await
        .unwrap();
    // Raw encoding only: every full update is 4 MB.
    slow.send(&[2, 0, 0, 1, 0, 0, 0, 0]).await.unwrap();
    let full = [3, 0, 0, 0, 0, 0, 5, 0, 3, 32];
    let started = Instant::now();
    let mut actions = Vec::new();
    while started.elapsed() < Duration::from_secs(8) {
        // Keeps asking, never reads.
        if tokio::time::timeout(
            cubicle_tests::guard(Duration::from_millis(50)),
            slow.send(&full),
        )
        .await
        .is_err()
        {
            break;
        }
        let t = Instant::now();
        let (status, _) = act(
            &daemon,
            &agent.secret,
            &id,
            json!({"action": "mouse_move", "coordinate": [20, 20]}),
        )
        .await;
        assert_eq!(status, 200);
        actions.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    // Now read: what is queued arrives, then the end (the gateway let go).
    let ended = async {
        loop {
            match slow.ws.next().await {
                Some(Ok(Message::Close(frame))) => {
                    return Ok::<_, anyhow::Error>(frame.map(|f| f.reason.to_string()));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Ok(None),
            }
        }
    };
    let reason = tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(60)), ended)
        .await
        .context("the slow viewer was never dropped")
        .unwrap()
        .unwrap();
    // Why it was dropped: in the close frame when the gateway could still
    // send one (the viewer's socket is backed up, so often it cannot), and
    // always in the daemon's log.
    if let Some(reason) = &reason {
        assert!(reason.contains("too far behind"), "{reason}");
    }
    let log = daemon.data_dir.with_extension("daemon.log");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged
            .lines()
            .any(|l| l.contains("live view closed by the gateway") && l.contains("too far behind")),
        "{} does not say the slow viewer was too far behind",
        log.display()
    );
    actions.sort_by(f64::total_cmp);
    println!(
        "measure: slow viewer dropped ({reason:?}); agent mouse_move meanwhile p50 {:.1} ms over {} actions",
        actions.get(actions.len() / 2).copied().unwrap_or(f64::NAN),
        actions.len()
    );
    let (status, _) = act(&daemon, &agent.secret, &id, json!({"action": "screenshot"})).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_viewers_locks_no_one_out() {
    let Desk {
        _data,
        daemon,
        id,
        auditor,
        agent,
        ..
    } = desk().await;
    // Xvnc blacklists its peer after 5 connections that have not finished
    // their handshake; every viewer reaches it from the same address.
    let opens = (0..12).map(|_| RawViewer::ready(&daemon.base, &id, &auditor.secret));
    let viewers = futures_util::future::join_all(opens).await;
    let failed: Vec<String> = viewers
        .iter()
        .filter_map(|v| v.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert!(failed.is_empty(), "viewers refused: {failed:?}");
    let (status, body) = act(
        &daemon,
        &agent.secret,
        &id,
        json!({"action": "mouse_move", "coordinate": [9, 9]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Opens a WebSocket at `path` with `secret` as the bearer token.
async fn open_ws(
    daemon: &cubicle_tests::Daemon,
    path: &str,
    secret: &str,
) -> WebSocketStream<MaybeTlsStream<TcpStream>> {
    let url = format!("{}{path}", daemon.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {secret}").parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// Whether the socket ends (close frame, error or EOF) within `limit`.
async fn ends_within(ws: &mut WebSocketStream<MaybeTlsStream<TcpStream>>, limit: Duration) -> bool {
    let drain = async {
        while let Some(Ok(message)) = ws.next().await {
            if message.is_close() {
                return;
            }
        }
    };
    tokio::time::timeout(limit, drain).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_tokens_lose_their_cdp_and_exec_sockets() {
    let Desk {
        _data,
        daemon,
        id,
        agent,
        ..
    } = desk().await;
    let mut cdp = open_ws(&daemon, &format!("/v1/workspaces/{id}/cdp"), &agent.secret).await;
    let call = json!({"id": 1, "method": "Browser.getVersion"}).to_string();
    cdp.send(Message::Text(call.into())).await.unwrap();
    let reply = tokio::time::timeout(cubicle_tests::guard(Duration::from_secs(10)), cdp.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(reply.to_text().unwrap().contains("product"), "{reply}");
    let mut shell = open_ws(
        &daemon,
        &format!("/v1/workspaces/{id}/exec/ws?arg=cat"),
        &agent.secret,
    )
    .await;

    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/tokens/{}", agent.id), None)
        .await
        .unwrap();
    assert_eq!(status, 204);
    assert!(
        ends_within(&mut cdp, Duration::from_secs(1)).await,
        "the revoked token's CDP socket stayed open"
    );
    assert!(
        ends_within(&mut shell, Duration::from_secs(1)).await,
        "the revoked token's exec socket stayed open"
    );
}
