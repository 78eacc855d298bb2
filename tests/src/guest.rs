//! Reaching a workspace's guest directly through its channel socket, as the
//! gateway does.

use std::path::Path;

use anyhow::Context;
use tokio::net::UnixStream;

/// Opens the guest channel at `socket` for `port`.
pub async fn connect(socket: &Path, port: u16) -> anyhow::Result<UnixStream> {
    let mut stream = UnixStream::connect(socket)
        .await
        .with_context(|| format!("connecting {}", socket.display()))?;
    cubicle_image::handshake::connect(&mut stream, port).await?;
    Ok(stream)
}

/// `GET path` on the guest's HTTP service at `port`; returns the body.
pub async fn http_get(socket: &Path, port: u16, path: &str) -> anyhow::Result<String> {
    let mut stream = connect(socket, port).await?;
    Ok(cubicle_image::http_get::get(&mut stream, port, path, 16 * 1024 * 1024).await?)
}
