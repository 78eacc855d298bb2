//! A real RFB client (vnc-rs) over the gateway's live-view WebSocket, and a
//! framebuffer assembled from what it receives.

use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use vnc::{PixelFormat, VncConnector, VncEncoding, VncEvent, X11Event};

/// A whole screen, RGBA.
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

impl Frame {
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 4) as usize;
        [self.rgba[i], self.rgba[i + 1], self.rgba[i + 2]]
    }

    /// Distinct colours in rows `y0..y1`.
    pub fn colours_in_rows(&self, y0: u32, y1: u32) -> usize {
        let mut seen = std::collections::HashSet::new();
        for y in y0..y1.min(self.height) {
            for x in 0..self.width {
                seen.insert(self.pixel(x, y));
            }
        }
        seen.len()
    }

    pub fn save_png(&self, path: &std::path::Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        image::save_buffer(
            path,
            &self.rgba,
            self.width,
            self.height,
            image::ColorType::Rgba8,
        )?;
        Ok(())
    }
}

/// Opens the live-view WebSocket at `url` and returns a byte stream over it
/// (binary frames both ways), for an RFB client to run on.
pub async fn websocket_stream(url: &str) -> anyhow::Result<tokio::io::DuplexStream> {
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "binary".parse()?);
    let (ws, _) = match tokio_tungstenite::connect_async(request).await {
        Ok(opened) => opened,
        // A refusal's body says why (the gateway's error code and message).
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default()
                .into_owned();
            anyhow::bail!(
                "opening the live-view WebSocket: {} {body}",
                response.status()
            );
        }
        Err(err) => return Err(err).context("opening the live-view WebSocket"),
    };
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (mut ws_tx, mut ws_rx) = ws.split();
    let (mut read_half, mut write_half) = tokio::io::split(ours);
    tokio::spawn(async move {
        while let Some(Ok(message)) = ws_rx.next().await {
            if let Message::Binary(bytes) = message
                && write_half.write_all(&bytes).await.is_err()
            {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = read_half.read(&mut buf).await {
            if n == 0
                || ws_tx
                    .send(Message::Binary(buf[..n].to_vec().into()))
                    .await
                    .is_err()
            {
                break;
            }
        }
    });
    Ok(theirs)
}

/// A shared-session vnc-rs client (ZRLE, CopyRect, Raw; RGBA) on the live
/// view at `url`, as a viewer would open it.
pub async fn connect(url: &str) -> anyhow::Result<vnc::VncClient> {
    let stream = websocket_stream(url).await?;
    Ok(VncConnector::new(stream)
        .set_auth_method(async move { Ok(String::new()) })
        .add_encoding(VncEncoding::Zrle)
        .add_encoding(VncEncoding::CopyRect)
        .add_encoding(VncEncoding::Raw)
        .allow_shared(true)
        .set_pixel_format(PixelFormat::rgba())
        .build()?
        .try_start()
        .await?
        .finish()?)
}

/// Connects an RFB client to the live view at `url` and returns the first
/// complete framebuffer (every pixel covered by an update).
pub async fn first_full_frame(url: &str, timeout: Duration) -> anyhow::Result<Frame> {
    let timeout = crate::guard(timeout);
    let client = connect(url).await?;
    let collect = async {
        let (mut width, mut height) = (0u32, 0u32);
        let mut rgba = Vec::new();
        let mut covered = Vec::new();
        let mut missing = u64::MAX;
        client.input(X11Event::FullRefresh).await?;
        while missing > 0 {
            match client.recv_event().await? {
                VncEvent::SetResolution(screen) => {
                    width = u32::from(screen.width);
                    height = u32::from(screen.height);
                    rgba = vec![0u8; (width * height * 4) as usize];
                    covered = vec![false; (width * height) as usize];
                    missing = u64::from(width) * u64::from(height);
                }
                VncEvent::RawImage(rect, data) => {
                    for row in 0..u32::from(rect.height) {
                        let y = u32::from(rect.y) + row;
                        for col in 0..u32::from(rect.width) {
                            let x = u32::from(rect.x) + col;
                            if x >= width || y >= height {
                                continue;
                            }
                            let src = ((row * u32::from(rect.width) + col) * 4) as usize;
                            let dst = (y * width + x) as usize;
                            if src + 4 > data.len() {
                                bail!("RFB rectangle shorter than its size");
                            }
                            rgba[dst * 4..dst * 4 + 3].copy_from_slice(&data[src..src + 3]);
                            rgba[dst * 4 + 3] = 255;
                            if !covered[dst] {
                                covered[dst] = true;
                                missing -= 1;
                            }
                        }
                    }
                }
                VncEvent::Error(err) => bail!("RFB error: {err}"),
                _ => {}
            }
        }
        Ok(Frame {
            width,
            height,
            rgba,
        })
    };
    let frame = tokio::time::timeout(timeout, collect)
        .await
        .context("no full framebuffer in time")?;
    let _ = client.close().await;
    frame
}
