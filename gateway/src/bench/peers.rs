//! What Cubicle is measured against, in the same run: the same desktop
//! started plainly under bubblewrap (no gateway, no guest supervisor, no
//! limits), the guest's services reached straight through the guest channel
//! (no gateway in between), and the processes' memory as the kernel counts
//! it (PSS).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The desktop of the image started directly with bubblewrap: Xvnc, the
/// XFCE session once the display answers, Chromium once the window manager
/// runs, with the same window flags and profile setting (the window
/// manager's frame, not Chromium's own), as `cubicle-guest` starts them, but
/// nothing else. Ready as a
/// workspace is: Chromium's DevTools answer and its window is maximized
/// (the script inside asks with the same X clients the guest's probes use,
/// and says `maximized` on its output). Its network is the host's, so the
/// bench can ask Chromium.
pub struct PlainDesktop {
    child: Child,
    pub port: u16,
    maximized: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PlainDesktop {
    pub fn start(rootfs: &Path, display: u32, port: u16) -> anyhow::Result<Self> {
        let script = format!(
            "export HOME=/tmp/home DISPLAY=:{display}; mkdir -p $HOME /tmp/chrome/Default; \
             echo '{{\"browser\":{{\"custom_chrome_frame\":false}}}}' > /tmp/chrome/Default/Preferences; \
             Xvnc :{display} -geometry 1280x800 -depth 24 -rfbport -1 -SecurityTypes None \
               -AlwaysShared >/dev/null 2>&1 & \
             for i in $(seq 100); do [ -e /tmp/.X11-unix/X{display} ] && break; sleep 0.02; done; \
             dbus-launch --exit-with-session startxfce4 >/dev/null 2>&1 & \
             until xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q 'window id'; do \
               sleep 0.04; \
             done; \
             chromium --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
               --disable-component-update --disable-sync --remote-debugging-port={port} \
               --remote-debugging-address=127.0.0.1 --user-data-dir=/tmp/chrome \
               --start-maximized --window-position=0,0 --window-size=1280,800 about:blank \
               >/dev/null 2>&1 & \
             while sleep 0.04; do \
               for id in $(xdotool search --onlyvisible --class chromium 2>/dev/null); do \
                 xprop -id $id _NET_WM_STATE 2>/dev/null | grep -q MAXIMIZED_HORZ \
                   && echo maximized && break 2; \
               done; \
             done; \
             wait"
        );
        let mut command = Command::new("bwrap");
        command
            .args(["--unshare-all", "--share-net", "--die-with-parent"])
            .arg("--ro-bind")
            .arg(rootfs)
            .arg("/")
            .args([
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
            ])
            .args([
                "--hostname",
                "plain",
                "--cap-drop",
                "ALL",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = command
            .spawn()
            .context("starting bwrap (is bubblewrap installed?)")?;
        let maximized = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(out) = child.stdout.take() {
            let maximized = maximized.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(out).lines() {
                    if line.is_ok_and(|l| l == "maximized") {
                        maximized.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
        Ok(Self {
            child,
            port,
            maximized,
        })
    }

    /// Waits until Chromium's `/json/version` answers and its window is
    /// maximized.
    pub async fn ready(&mut self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let url = format!("http://127.0.0.1:{}/json/version", self.port);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("the plain bubblewrap desktop exited: {status}");
            }
            if self.maximized.load(std::sync::atomic::Ordering::Relaxed)
                && http
                    .get(&url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the plain bubblewrap desktop was not ready within {limit:?}")
    }

    /// Every process of it.
    pub fn pids(&self) -> Vec<i32> {
        let top = i32::try_from(self.child.id()).unwrap_or(0);
        let mut pids = descendants(top);
        pids.push(top);
        pids
    }

    pub fn stop(mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `(pid, ppid, real uid)` of every process.
fn processes() -> Vec<(i32, i32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<i64>().ok())
            };
            Some((
                pid,
                i32::try_from(field("PPid:")?).ok()?,
                u32::try_from(field("Uid:")?).ok()?,
            ))
        })
        .collect()
}

/// Every descendant of `top`.
pub fn descendants(top: i32) -> Vec<i32> {
    let all = processes();
    let mut found = vec![top];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    found.remove(0);
    found
}

/// Processes running as any of `uids`.
pub fn of_uids(uids: &[u32]) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| uids.contains(&p.2))
        .map(|p| p.0)
        .collect()
}

/// Processes whose command line holds `needle` (a workspace's shim names
/// its folder).
pub fn with_argument(needle: &str) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.0))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == needle.as_bytes()))
        })
        .map(|p| p.0)
        .collect()
}

/// Proportional set size of `pids` together, in MiB.
pub fn pss_mib(pids: &[i32]) -> f64 {
    let kib: u64 = pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .sum();
    kib as f64 / 1024.0
}

/// A stream to guest service `port` straight through the workspace's guest
/// channel socket (the handshake, without the gateway).
pub async fn guest(socket: &Path, port: u16) -> anyhow::Result<BufReader<UnixStream>> {
    let mut stream = UnixStream::connect(socket)
        .await
        .with_context(|| format!("connecting to {}", socket.display()))?;
    stream
        .write_all(format!("CONNECT {port}\n").as_bytes())
        .await?;
    let mut reader = BufReader::new(stream);
    let mut reply = String::new();
    reader.read_line(&mut reply).await?;
    if !reply.starts_with("OK ") {
        bail!("the guest refused port {port}: {reply:?}");
    }
    Ok(reader)
}

/// Runs `argv` through the guest's control service directly; true if it
/// exited 0.
pub async fn guest_exec(socket: &Path, argv: &[&str]) -> anyhow::Result<bool> {
    let mut stream = guest(socket, 1024).await?;
    let request = serde_json::json!({ "op": "exec", "argv": argv }).to_string() + "\n";
    stream.get_mut().write_all(request.as_bytes()).await?;
    let mut line = String::new();
    stream.read_line(&mut line).await?;
    let reply: serde_json::Value = serde_json::from_str(&line).context("the guest's exec reply")?;
    Ok(reply["exit_code"] == 0)
}

/// The browser's DevTools WebSocket, straight through the guest channel.
pub async fn devtools(
    socket: &Path,
) -> anyhow::Result<tokio_tungstenite::WebSocketStream<UnixStream>> {
    let path = devtools_path(socket).await?;
    let stream = guest(socket, 9222).await?.into_inner();
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://127.0.0.1{path}"), stream).await?;
    Ok(ws)
}

/// The browser-level DevTools WebSocket path (`/devtools/browser/...`),
/// asked of Chromium directly through the guest channel.
async fn devtools_path(socket: &Path) -> anyhow::Result<String> {
    let mut stream = guest(socket, 9222).await?;
    stream
        .get_mut()
        .write_all(b"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    // Read until the body parses: the channel may stay open after it.
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let doc: serde_json::Value = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the browser closed before /json/version was complete");
        }
        bytes.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&bytes);
        if let Some((_, body)) = text.split_once("\r\n\r\n")
            && let Ok(doc) = serde_json::from_str(body.trim())
        {
            break doc;
        }
    };
    let url = doc["webSocketDebuggerUrl"]
        .as_str()
        .context("no webSocketDebuggerUrl")?;
    url.split_once("/devtools/")
        .map(|(_, rest)| format!("/devtools/{rest}"))
        .context("an unexpected webSocketDebuggerUrl")
}

/// A raw RFB session: with the workspace's Xvnc straight through the guest
/// channel it is the floor of an action and of the live view (the same
/// messages with nothing of ours in between); over the gateway's live-view
/// WebSocket it is a viewer of ours.
///
/// Written here rather than with vnc-rs: the floor needs a receipt for each
/// input — a non-incremental update request for one pixel, which Xvnc
/// answers only after everything sent before it on the connection — and the
/// live view needs each update's arrival and rectangles; vnc-rs asks only
/// for whole-screen updates and hands neither back to its caller. Only what
/// the bench needs: RFB 3.8, security type None, and the lengths of Raw,
/// CopyRect and ZRLE rectangles (their pixels are skipped, not decoded).
pub struct RawRfb<S = BufReader<UnixStream>> {
    stream: BufReader<S>,
    bytes_per_pixel: usize,
    pub width: u16,
    pub height: u16,
}

/// One FramebufferUpdate: its rectangles (x, y, width, height) and size.
pub struct Update {
    pub rects: Vec<[u16; 4]>,
    pub bytes: usize,
}

impl Update {
    /// Whether a rectangle of the update touches the square of side
    /// `2 * reach` around (x, y).
    pub fn touches(&self, x: u16, y: u16, reach: u16) -> bool {
        let (x0, x1) = (x.saturating_sub(reach), x.saturating_add(reach));
        let (y0, y1) = (y.saturating_sub(reach), y.saturating_add(reach));
        self.rects.iter().any(|&[rx, ry, w, h]| {
            rx <= x1 && rx.saturating_add(w) >= x0 && ry <= y1 && ry.saturating_add(h) >= y0
        })
    }
}

/// Encodings a bench viewer asks for: ZRLE (what a viewer would use),
/// CopyRect, Raw.
pub const VIEWER_ENCODINGS: [i32; 3] = [16, 1, 0];

/// A PointerEvent message.
pub fn pointer(x: u16, y: u16, buttons: u8) -> [u8; 6] {
    let [xh, xl] = x.to_be_bytes();
    let [yh, yl] = y.to_be_bytes();
    [5, buttons, xh, xl, yh, yl]
}

impl RawRfb {
    /// Straight to the workspace's Xvnc through its guest channel, asking
    /// Raw pixels only (an action's receipt is one pixel).
    pub async fn connect(socket: &Path) -> anyhow::Result<Self> {
        let stream = guest(socket, cubicle_image::ports::RFB).await?;
        RawRfb::over(stream, &[0]).await
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> RawRfb<S> {
    /// The RFB handshake over `stream` (shared, security None), then
    /// SetEncodings with `encodings`.
    pub async fn over(stream: S, encodings: &[i32]) -> anyhow::Result<Self> {
        let mut s = BufReader::new(stream);
        let mut version = [0u8; 12];
        s.read_exact(&mut version).await?;
        if !version.starts_with(b"RFB 003.") {
            bail!("the server greeted with {version:?}, not RFB 3.x");
        }
        s.get_mut().write_all(b"RFB 003.008\n").await?;
        let offered = usize::from(s.read_u8().await?);
        if offered == 0 {
            let len = s.read_u32().await? as usize;
            let mut reason = vec![0u8; len.min(4096)];
            s.read_exact(&mut reason).await?;
            bail!(
                "the server refused the session: {}",
                String::from_utf8_lossy(&reason)
            );
        }
        let mut types = vec![0u8; offered];
        s.read_exact(&mut types).await?;
        if !types.contains(&1) {
            bail!("the server offers no security type None (offered {types:?})");
        }
        s.get_mut().write_all(&[1]).await?;
        if s.read_u32().await? != 0 {
            bail!("the server failed the None security handshake");
        }
        // ClientInit: shared, so the gateway's own session stays.
        s.get_mut().write_all(&[1]).await?;
        let mut init = [0u8; 20];
        s.read_exact(&mut init).await?;
        let width = u16::from_be_bytes([init[0], init[1]]);
        let height = u16::from_be_bytes([init[2], init[3]]);
        let bytes_per_pixel = usize::from(init[4] / 8).max(1);
        let name = s.read_u32().await? as usize;
        if name > 1 << 16 {
            bail!("the server sent a desktop name of {name} bytes");
        }
        let mut skip = vec![0u8; name];
        s.read_exact(&mut skip).await?;
        let mut set = vec![2, 0];
        set.extend_from_slice(&u16::try_from(encodings.len())?.to_be_bytes());
        for encoding in encodings {
            set.extend_from_slice(&encoding.to_be_bytes());
        }
        s.get_mut().write_all(&set).await?;
        Ok(Self {
            stream: s,
            bytes_per_pixel,
            width,
            height,
        })
    }

    /// Client messages, sent as they are.
    pub async fn send(&mut self, messages: &[u8]) -> anyhow::Result<()> {
        self.stream.get_mut().write_all(messages).await?;
        Ok(())
    }

    /// An incremental update request for the whole screen.
    pub async fn request_update(&mut self) -> anyhow::Result<()> {
        let [wh, wl] = self.width.to_be_bytes();
        let [hh, hl] = self.height.to_be_bytes();
        self.send(&[3, 1, 0, 0, 0, 0, wh, wl, hh, hl]).await
    }

    /// Sends `input` (client messages) and a one-pixel update request, and
    /// waits for that update: Xvnc has then applied the input.
    pub async fn send_with_receipt(&mut self, input: &[u8]) -> anyhow::Result<()> {
        let mut message = input.to_vec();
        message.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 1, 0, 1]);
        self.send(&message).await?;
        self.next_update().await.map(drop)
    }

    /// Reads server messages until a FramebufferUpdate, which it returns
    /// with its pixels skipped.
    pub async fn next_update(&mut self) -> anyhow::Result<Update> {
        loop {
            match self.stream.read_u8().await? {
                0 => return self.update().await,
                1 => {
                    let mut head = [0u8; 5];
                    self.stream.read_exact(&mut head).await?;
                    let colours = usize::from(u16::from_be_bytes([head[3], head[4]]));
                    self.skip(colours * 6).await?;
                }
                2 => {}
                3 => {
                    let mut pad = [0u8; 3];
                    self.stream.read_exact(&mut pad).await?;
                    let len = self.stream.read_u32().await? as usize;
                    if len > 1 << 20 {
                        bail!("the server sent {len} bytes of cut text");
                    }
                    self.skip(len).await?;
                }
                other => {
                    bail!("the server sent message type {other}, which this client does not read")
                }
            }
        }
    }

    async fn update(&mut self) -> anyhow::Result<Update> {
        self.stream.read_u8().await?;
        let count = self.stream.read_u16().await?;
        let mut update = Update {
            rects: Vec::with_capacity(usize::from(count)),
            bytes: 4,
        };
        for _ in 0..count {
            let mut rect = [0u8; 12];
            self.stream.read_exact(&mut rect).await?;
            let at = |i: usize| u16::from_be_bytes([rect[i], rect[i + 1]]);
            let (w, h) = (usize::from(at(4)), usize::from(at(6)));
            let encoding = i32::from_be_bytes([rect[8], rect[9], rect[10], rect[11]]);
            let body = match encoding {
                0 => w * h * self.bytes_per_pixel,
                1 => 4,
                16 => self.stream.read_u32().await? as usize,
                // LastRect: no more rectangles follow.
                -224 => break,
                other => bail!("the server sent encoding {other}, which was not asked for"),
            };
            self.skip(body).await?;
            update.rects.push([at(0), at(2), at(4), at(6)]);
            update.bytes += 12 + body;
        }
        Ok(update)
    }

    async fn skip(&mut self, mut len: usize) -> anyhow::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        while len > 0 {
            let n = len.min(buf.len());
            self.stream.read_exact(&mut buf[..n]).await?;
            len -= n;
        }
        Ok(())
    }
}
