//! One persistent RFB client per workspace: it keeps the current framebuffer
//! up to date (incremental updates; ZRLE, CopyRect, Raw — the lossless
//! encodings Xvnc offers that vnc-rs decodes) and sends the agent's input as
//! RFB pointer and key events. No tool inside the workspace is trusted for
//! input or screenshots.

pub mod framebuffer;
pub mod image_out;

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use cubicle_image::ports;
use cubicle_runtime::channel::GuestChannel;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use vnc::{PixelFormat, VncClient, VncConnector, VncEncoding, VncEvent, X11Event};

pub use framebuffer::Framebuffer;
use image_out::{EncodeError, Encoded, Format};

/// Encoded screenshots kept per framebuffer version (formats and sizes).
const CACHED_VARIANTS: usize = 4;

/// A screenshot encoded from one framebuffer version.
struct Cached {
    version: u64,
    format: Format,
    size: Option<(u32, u32)>,
    image: Arc<Encoded>,
}

/// How often the session asks for an incremental update.
const REFRESH: Duration = Duration::from_millis(15);
/// How long to wait for the first whole framebuffer.
const FIRST_FRAME: Duration = Duration::from_secs(15);

/// What can go wrong with a screen session.
#[derive(Debug, thiserror::Error)]
pub enum ScreenError {
    #[error("cannot reach the workspace's display: {0}")]
    Channel(#[from] cubicle_runtime::channel::ChannelError),
    #[error("RFB session with the workspace failed: {0}")]
    Rfb(#[from] vnc::VncError),
    #[error("the workspace's display sent no framebuffer within {FIRST_FRAME:?}")]
    NoFrame,
    #[error("the RFB session with the workspace ended; retry the action")]
    Closed,
}

/// Where the pointer is and which buttons are down, as we last sent them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pointer {
    pub x: u16,
    pub y: u16,
    pub buttons: u8,
}

/// A live RFB session with one workspace's Xvnc.
pub struct ScreenSession {
    client: VncClient,
    /// Shared with screenshots and the recorder while they read it: the
    /// pump copies it only when it must change a frame one of them still
    /// holds (copy on write), instead of every reader copying 4 MiB.
    frame: RwLock<Arc<Framebuffer>>,
    version: watch::Receiver<u64>,
    pointer: Mutex<Pointer>,
    /// Serialises actions, so two never interleave their events.
    pub actions: tokio::sync::Mutex<()>,
    /// The size the agent's coordinates are in, if it asked for a scaled
    /// screenshot (coordinates are mapped back to the real screen).
    pub coordinate_space: Mutex<Option<(u32, u32)>>,
    /// The workspace is paused: no update requests pile up in front of a
    /// frozen Xvnc.
    paused: std::sync::atomic::AtomicBool,
    /// Screenshots of the current framebuffer version, encoded once and
    /// reused until the screen changes.
    encoded: Mutex<Vec<Cached>>,
    cancel: CancellationToken,
    /// Whose turn it is with the RFB client: the pump's wait for an event,
    /// or an input. vnc-rs holds the client's lock for the whole of a
    /// `recv_event` and takes it twice per `input`, so an input that queued
    /// behind the pump's wait waited for that wait to run out, twice (9 ms
    /// of a 12 ms `mouse_move` in `cubicle bench`). An input asks for the
    /// turn and wakes the pump ([`Self::input_wanted`]), which lets go of
    /// its wait at once and takes the turn back when the input is sent.
    turn: tokio::sync::Mutex<()>,
    input_wanted: tokio::sync::Notify,
}

impl ScreenSession {
    /// Connects to the workspace's Xvnc and waits for the first full frame.
    pub async fn connect(channel: &GuestChannel) -> Result<Arc<Self>, ScreenError> {
        let stream = channel.connect(ports::RFB).await?;
        let client = VncConnector::new(stream)
            .set_auth_method(async move { Ok(String::new()) })
            .add_encoding(VncEncoding::Zrle)
            .add_encoding(VncEncoding::CopyRect)
            .add_encoding(VncEncoding::Raw)
            .allow_shared(true)
            .set_pixel_format(PixelFormat::rgba())
            .build()?
            .try_start()
            .await?
            .finish()?;
        let (version_tx, version) = watch::channel(0u64);
        let session = Arc::new(Self {
            client,
            frame: RwLock::new(Arc::new(Framebuffer::default())),
            version,
            pointer: Mutex::new(Pointer::default()),
            actions: tokio::sync::Mutex::new(()),
            coordinate_space: Mutex::new(None),
            paused: std::sync::atomic::AtomicBool::new(false),
            encoded: Mutex::new(Vec::new()),
            cancel: CancellationToken::new(),
            turn: tokio::sync::Mutex::new(()),
            input_wanted: tokio::sync::Notify::new(),
        });
        session.client.input(X11Event::FullRefresh).await?;
        tokio::spawn(pump(session.clone(), version_tx));
        let mut first = session.version.clone();
        tokio::time::timeout(FIRST_FRAME, first.wait_for(|v| *v > 0))
            .await
            .map_err(|_| ScreenError::NoFrame)?
            .map_err(|_| ScreenError::Closed)?;
        Ok(session)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    fn is_paused(&self) -> bool {
        self.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// The current framebuffer (shared, not copied: see [`Self::frame`]).
    pub fn snapshot(&self) -> Arc<Framebuffer> {
        self.frame.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The screen as an image: encoded once per framebuffer version (and
    /// format and size), then served from the cache until the screen
    /// changes. Encoding runs on the calling thread: call it from a
    /// blocking task where a miss must not hold up the runtime.
    pub fn screenshot(
        &self,
        format: Format,
        size: Option<(u32, u32)>,
    ) -> Result<Arc<Encoded>, EncodeError> {
        // The version is read before the pixels, so the pixels are at
        // least as new as the version they are filed under.
        let version = *self.version.borrow();
        let cached = |cache: &Vec<Cached>| {
            cache
                .iter()
                .find(|c| c.version == version && c.format == format && c.size == size)
                .map(|c| c.image.clone())
        };
        if let Some(hit) = cached(&self.encoded.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(hit);
        }
        let frame = self.snapshot();
        let image = Arc::new(image_out::encode(&frame, format, size)?);
        let mut cache = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|c| c.version == version);
        if let Some(raced) = cached(&cache) {
            return Ok(raced);
        }
        if cache.len() >= CACHED_VARIANTS {
            cache.remove(0);
        }
        cache.push(Cached {
            version,
            format,
            size,
            image: image.clone(),
        });
        Ok(image)
    }

    pub fn size(&self) -> (u32, u32) {
        let frame = self.frame.read().unwrap_or_else(|p| p.into_inner());
        (frame.width, frame.height)
    }

    /// The update counter (moves on every rectangle received).
    pub fn version(&self) -> watch::Receiver<u64> {
        self.version.clone()
    }

    pub fn pointer(&self) -> Pointer {
        *self.pointer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the pointer and sets the button mask.
    pub async fn pointer_event(&self, x: u16, y: u16, buttons: u8) -> Result<(), ScreenError> {
        *self.pointer.lock().unwrap_or_else(|p| p.into_inner()) = Pointer { x, y, buttons };
        let event = vnc::ClientMouseEvent {
            position_x: x,
            position_y: y,
            bottons: buttons,
        };
        self.send(X11Event::PointerEvent(event)).await
    }

    /// Presses or releases the key with X keysym `keysym`.
    pub async fn key_event(&self, keysym: u32, down: bool) -> Result<(), ScreenError> {
        let event = vnc::ClientKeyEvent {
            keycode: keysym,
            down,
        };
        self.send(X11Event::KeyEvent(event)).await
    }

    async fn send(&self, event: X11Event) -> Result<(), ScreenError> {
        if self.is_closed() {
            return Err(ScreenError::Closed);
        }
        self.input_wanted.notify_one();
        let _turn = self.turn.lock().await;
        self.client.input(event).await.map_err(|err| {
            self.close();
            ScreenError::Rfb(err)
        })
    }
}

/// Drains RFB events into the framebuffer and keeps asking for updates,
/// until the session is closed or the connection fails. It waits for an
/// event only while it has the turn (see [`ScreenSession::turn`]), and lets
/// go of the wait as soon as an input asks (the receive is cancel-safe: a
/// channel receive).
async fn pump(session: Arc<ScreenSession>, version: watch::Sender<u64>) {
    let mut next_request = tokio::time::Instant::now() + REFRESH;
    while !session.is_closed() {
        let event = {
            let _turn = session.turn.lock().await;
            tokio::select! {
                biased;
                () = session.cancel.cancelled() => None,
                () = session.input_wanted.notified() => None,
                () = tokio::time::sleep_until(next_request) => None,
                event = session.client.recv_event() => Some(event),
            }
        };
        let changed = match event {
            Some(Ok(event)) => apply(&session.frame, event),
            Some(Err(err)) => {
                tracing::warn!(%err, "RFB session ended");
                session.close();
                false
            }
            None => false,
        };
        if changed {
            version.send_modify(|v| *v += 1);
        }
        let now = tokio::time::Instant::now();
        if now >= next_request {
            next_request = now + REFRESH;
            // Paused: no update requests pile up in front of a frozen Xvnc.
            if !session.is_paused() && session.client.input(X11Event::Refresh).await.is_err() {
                session.close();
            }
        }
    }
    let _ = session.client.close().await;
}

/// Applies one event; true if the screen changed.
fn apply(frame: &RwLock<Arc<Framebuffer>>, event: VncEvent) -> bool {
    let mut shared = frame.write().unwrap_or_else(|p| p.into_inner());
    match event {
        // A new size is a new (blank) screen: cached screenshots are stale.
        VncEvent::SetResolution(screen) => {
            *shared = Arc::new(Framebuffer::new(screen.width.into(), screen.height.into()));
            true
        }
        VncEvent::RawImage(rect, data) => match Arc::make_mut(&mut shared).apply_raw(rect, &data) {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(%err, "bad RFB rectangle ignored");
                false
            }
        },
        VncEvent::Copy(dst, src) => {
            Arc::make_mut(&mut shared).apply_copy(dst, src);
            true
        }
        _ => false,
    }
}
