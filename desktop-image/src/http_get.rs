//! A minimal HTTP/1.1 GET over any stream, for Chromium's DevTools discovery
//! (`/json/version`, `/json/list`) inside the workspace and through the
//! guest channel. Chromium's DevTools server keeps connections open, so the
//! body is read by `Content-Length`; everything is bounded.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The longest reply head read.
const MAX_HEAD: usize = 16 * 1024;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum HttpGetError {
    #[error("HTTP exchange failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("HTTP reply head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    #[error("HTTP reply is not 200: {0:.120}")]
    Status(String),
    #[error("HTTP reply has no Content-Length")]
    NoLength,
    #[error("HTTP reply body of {0} bytes is over the {1}-byte limit")]
    TooLarge(usize, usize),
}

/// `GET path` with `Host: 127.0.0.1:<port>`; the body of a 200 reply of at
/// most `max` bytes.
pub async fn get<S>(
    stream: &mut S,
    port: u16,
    path: &str,
    max: usize,
) -> Result<String, HttpGetError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(stream.read_u8().await?);
        if head.len() > MAX_HEAD {
            return Err(HttpGetError::HeadTooLong);
        }
    }
    let head = String::from_utf8_lossy(&head);
    if !head.starts_with("HTTP/1.1 200") {
        return Err(HttpGetError::Status(head.into_owned()));
    }
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .ok_or(HttpGetError::NoLength)?;
    if length > max {
        return Err(HttpGetError::TooLarge(length, max));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_by_content_length_and_refuses_the_rest() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        server
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            .await
            .unwrap();
        assert_eq!(
            get(&mut client, 9222, "/json/version", 100).await.unwrap(),
            "{}"
        );

        let (mut client, mut server) = tokio::io::duplex(4096);
        server
            .write_all(b"HTTP/1.1 404 Not Found\r\n\r\n")
            .await
            .unwrap();
        assert!(matches!(
            get(&mut client, 9222, "/x", 100).await,
            Err(HttpGetError::Status(_))
        ));

        let (mut client, mut server) = tokio::io::duplex(4096);
        server
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n")
            .await
            .unwrap();
        assert!(matches!(
            get(&mut client, 9222, "/x", 100).await,
            Err(HttpGetError::TooLarge(5000, 100))
        ));
    }
}
