//! The DevTools HTTP endpoints (`/json/version`, `/json/list`), fetched
//! from inside the workspace over the guest channel (answered by
//! `cubicle-guest` from Chromium's DevTools pipe).
//!
//! Such a server may keep HTTP connections open (Chromium's own did) and
//! check the `Host` header, so the request names `127.0.0.1:9222` and the
//! body is read by its `Content-Length`. The guest is not trusted: the head and the body are
//! bounded in size, the whole exchange in time.

use std::time::Duration;

use cubicle_image::ports;
use cubicle_runtime::channel::GuestChannel;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use super::CdpError;

/// The largest response head read from Chromium.
const MAX_HEAD: usize = 16 * 1024;
/// The largest body read (a `/json/list` with hundreds of tabs fits).
const MAX_BODY: usize = 8 * 1024 * 1024;
/// How long one request to Chromium may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// `GET path` on Chromium's DevTools HTTP server; the body as JSON.
pub async fn get_json(channel: &GuestChannel, path: &str) -> Result<Value, CdpError> {
    let stream = channel.connect(ports::CDP).await?;
    tokio::time::timeout(TIMEOUT, exchange(stream, path))
        .await
        .map_err(|_| CdpError::Timeout {
            what: format!("GET {path}"),
        })?
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    path: &str,
) -> Result<Value, CdpError> {
    let fail = |reason: String| CdpError::Discovery {
        path: path.to_owned(),
        reason,
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json\r\n\r\n",
        ports::CDP
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader).await.map_err(fail)?;
    let length = body_length(&head).map_err(fail)?;
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|e| fail(format!("body cut short: {e}")))?;
    serde_json::from_slice(&body).map_err(|e| fail(format!("body is not JSON: {e}")))
}

/// Reads header lines up to the blank line, at most [`MAX_HEAD`] bytes.
async fn read_head<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> Result<String, String> {
    let mut head = String::new();
    loop {
        let before = head.len();
        let mut limited = (&mut *reader).take((MAX_HEAD + 1 - before) as u64);
        let n = limited
            .read_line(&mut head)
            .await
            .map_err(|e| format!("reading the response head: {e}"))?;
        if n == 0 {
            return Err("connection closed before the response head ended".into());
        }
        if head.len() > MAX_HEAD {
            return Err(format!("response head longer than {MAX_HEAD} bytes"));
        }
        if head[before..].trim_end_matches(['\r', '\n']).is_empty() {
            return Ok(head);
        }
    }
}

/// Checks the status line is 200 and returns `Content-Length`.
fn body_length(head: &str) -> Result<usize, String> {
    let status = head.lines().next().unwrap_or_default();
    let code = status.split_whitespace().nth(1);
    if code != Some("200") {
        return Err(format!("answered {:?}", status.trim_end()));
    }
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .ok_or("no valid Content-Length in the response")?;
    if length > MAX_BODY {
        return Err(format!("body of {length} bytes exceeds {MAX_BODY}"));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn serve(reply: &'static [u8]) -> Result<Value, CdpError> {
        let (host, mut guest) = tokio::io::duplex(64 * 1024);
        let chromium = tokio::spawn(async move {
            let mut request = vec![0u8; 1024];
            let n = guest.read(&mut request).await.unwrap();
            guest.write_all(reply).await.unwrap();
            // Chromium keeps the connection open after the reply.
            tokio::time::sleep(Duration::from_secs(5)).await;
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        let result = exchange(host, "/json/version").await;
        chromium.abort();
        result
    }

    #[tokio::test]
    async fn reads_the_body_by_content_length_on_a_kept_open_connection() {
        let value = serve(b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: 11\r\n\r\n{\"a\": [1]}\n")
            .await
            .unwrap();
        assert_eq!(value["a"][0], 1);
    }

    #[tokio::test]
    async fn refusals_and_bad_bodies_are_errors_naming_the_path() {
        let err = serve(b"HTTP/1.1 500 Host header is specified and is not an IP address or localhost.\r\nContent-Length: 0\r\n\r\n")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/json/version"), "{err}");
        assert!(err.to_string().contains("500"), "{err}");
        let err = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
        let err = serve(b"HTTP/1.1 200 OK\r\n\r\n{}").await.unwrap_err();
        assert!(err.to_string().contains("Content-Length"), "{err}");
    }

    #[test]
    fn oversized_bodies_are_refused_before_reading() {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert!(body_length(&head).unwrap_err().contains("exceeds"));
    }
}
