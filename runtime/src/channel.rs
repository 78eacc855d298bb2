//! The host end of the guest channel: a Unix socket per workspace, the
//! `CONNECT <port>` handshake, then a byte stream to the guest service.
//!
//! Nothing the guest sends is trusted: replies are bounded in size and time.

use std::path::PathBuf;
use std::time::Duration;

use cubicle_guest::control::{Health, Request};
use cubicle_guest::handshake::{self, HandshakeError};
use cubicle_guest::ports;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The longest control reply the host reads.
const MAX_REPLY: u64 = 1024 * 1024;
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// What can go wrong talking to a guest.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("cannot reach the guest channel at {path}: {source}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("guest control request failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("guest control reply timed out after {CONTROL_TIMEOUT:?}")]
    Timeout,
    #[error("guest control reply is not valid: {0}")]
    BadReply(String),
}

/// How to reach one workspace's guest.
#[derive(Debug, Clone)]
pub struct GuestChannel {
    socket: PathBuf,
}

impl GuestChannel {
    pub fn new(socket: PathBuf) -> Self {
        Self { socket }
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Opens a stream to the guest service on `port`.
    pub async fn connect(&self, port: u16) -> Result<UnixStream, ChannelError> {
        if !ports::is_allowed(port) {
            return Err(HandshakeError::PortNotAllowed(port).into());
        }
        let mut stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|source| ChannelError::Connect {
                    path: self.socket.display().to_string(),
                    source,
                })?;
        handshake::connect(&mut stream, port).await?;
        Ok(stream)
    }

    /// Asks the guest's control service for its health report.
    pub async fn health(&self) -> Result<Health, ChannelError> {
        let stream = self.connect(ports::CONTROL).await?;
        let exchange = async {
            let (read, mut write) = stream.into_split();
            let mut line = serde_json::to_string(&Request::Health)
                .map_err(|err| ChannelError::BadReply(err.to_string()))?;
            line.push('\n');
            write.write_all(line.as_bytes()).await?;
            let mut reply = String::new();
            BufReader::new(read.take(MAX_REPLY))
                .read_line(&mut reply)
                .await?;
            serde_json::from_str::<Health>(&reply)
                .map_err(|err| ChannelError::BadReply(format!("{err}: {reply:.200}")))
        };
        tokio::time::timeout(CONTROL_TIMEOUT, exchange)
            .await
            .map_err(|_| ChannelError::Timeout)?
    }
}
