//! Reaching a workspace's guest directly through its channel socket, as the
//! gateway does.

use std::path::Path;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Opens the guest channel at `socket` for `port`.
pub async fn connect(socket: &Path, port: u16) -> anyhow::Result<UnixStream> {
    let mut stream = UnixStream::connect(socket)
        .await
        .with_context(|| format!("connecting {}", socket.display()))?;
    cubicle_guest::handshake::connect(&mut stream, port).await?;
    Ok(stream)
}

/// `GET path` on the guest's HTTP service at `port`; returns the body.
pub async fn http_get(socket: &Path, port: u16, path: &str) -> anyhow::Result<String> {
    let mut stream = connect(socket, port).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(stream.read_u8().await?);
        if head.len() > 16384 {
            bail!("HTTP head too long");
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        bail!("guest answered {head}");
    }
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .context("no Content-Length")?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(String::from_utf8(body)?)
}
