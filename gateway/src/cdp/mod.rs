//! The gateway's side of Chromium's DevTools protocol, below the doors and
//! the operations: reaching the workspace's browser over the guest channel
//! ([`discovery`], [`open_browser`]), the gateway's URLs for it
//! ([`rewrite`]), and reading every message ([`inspect`]). The CDP proxy
//! (the agents' door, [`crate::cdp_proxy`]) and the gateway's own CDP
//! session ([`crate::browser_context`]) both stand on it.

pub mod client;
mod devtools_guard;
pub mod discovery;
pub mod inspect;
pub mod rewrite;

use cubicle_image::ports;
use cubicle_runtime::channel::{ChannelError, GuestChannel};
use tokio::net::UnixStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::error::{ErrorKind, OpError};

/// The largest CDP message relayed either way (a full-page screenshot of a
/// long page is tens of MB of base64).
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What can go wrong proxying CDP.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    #[error("cannot reach the workspace's browser over the guest channel: {0}")]
    Channel(#[from] ChannelError),
    #[error(
        "Chromium's DevTools endpoint in the workspace gave no usable answer to {path}: {reason} (is the browser still running?)"
    )]
    Discovery { path: String, reason: String },
    #[error(
        "{what} timed out after {:?}: the workspace's browser is not answering",
        discovery::TIMEOUT
    )]
    Timeout { what: String },
    #[error("Chromium refused the WebSocket to {path}: {source}")]
    Handshake {
        path: String,
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    #[error("no target {0:?} in the workspace's browser: list them at .../cdp/json/list")]
    NoTarget(String),
    #[error("target id {0:?} is not valid: 1..=128 characters of A-Z, a-z, 0-9, '-', '_'")]
    BadTarget(String),
    #[error(
        "cannot build the gateway's CDP URLs from Host {0}: send a Host header of the form name[:port]"
    )]
    BadHost(String),
    #[error("{0}")]
    Malformed(String),
    #[error("this endpoint is a WebSocket: connect with a WebSocket client ({0})")]
    NotWebSocket(String),
}

impl From<CdpError> for OpError {
    fn from(err: CdpError) -> Self {
        let message = err.to_string();
        let (kind, code) = match err {
            CdpError::Channel(_) | CdpError::Discovery { .. } | CdpError::Handshake { .. } => {
                (ErrorKind::Unreachable, "browser_unreachable")
            }
            CdpError::Timeout { .. } => (ErrorKind::Timeout, "browser_timeout"),
            CdpError::NoTarget(_) => (ErrorKind::NotFound, "not_found"),
            CdpError::BadTarget(_)
            | CdpError::BadHost(_)
            | CdpError::Malformed(_)
            | CdpError::NotWebSocket(_) => (ErrorKind::BadRequest, "bad_request"),
        };
        OpError::new(kind, code, message)
    }
}

/// A WebSocket to the workspace's browser (Chromium's, through its
/// supervisor).
pub type Browser = WebSocketStream<UnixStream>;

/// Opens Chromium's WebSocket endpoint at `path` inside the workspace.
pub async fn open_browser(channel: &GuestChannel, path: &str) -> Result<Browser, CdpError> {
    let stream = channel.connect(ports::CDP).await?;
    let url = format!("ws://127.0.0.1:{}{path}", ports::CDP);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let handshake = tokio_tungstenite::client_async_with_config(url, stream, Some(config));
    let (browser, _response) = tokio::time::timeout(discovery::TIMEOUT, handshake)
        .await
        .map_err(|_| CdpError::Timeout {
            what: format!("WebSocket handshake with {path}"),
        })?
        .map_err(|source| CdpError::Handshake {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
    Ok(browser)
}

/// Opens the browser endpoint of the workspace behind `channel` (for the
/// gateway's own CDP session: [`crate::browser_context`]).
pub async fn open_browser_endpoint(channel: &GuestChannel) -> Result<Browser, CdpError> {
    let version = discovery::get_json(channel, "/json/version").await?;
    let path = rewrite::browser_path(&version)?;
    open_browser(channel, &path).await
}
