//! The little HTTP the DevTools endpoint speaks: one request per
//! connection, read up to its blank line; an answer with `Content-Length`
//! and `Connection: close`, or the switch to a WebSocket.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// A request's head.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query (after `?`), undecoded.
    pub query: String,
    /// `Sec-WebSocket-Key`, when the request asks to switch to a WebSocket.
    pub websocket_key: Option<String>,
}

/// What can go wrong reading a request.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("reading the request: {0}")]
    Io(#[from] std::io::Error),
    #[error("request head longer than {MAX_HEAD} bytes")]
    TooLong,
    #[error("not an HTTP/1.1 request line: {0:.80?}")]
    BadLine(String),
}

/// Reads one request head, a byte at a time so that nothing after it is
/// consumed (the WebSocket's frames follow on the same stream).
pub async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Request, HttpError> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(stream.read_u8().await?);
        if head.len() > MAX_HEAD {
            return Err(HttpError::TooLong);
        }
    }
    parse(&String::from_utf8_lossy(&head))
}

fn parse(head: &str) -> Result<Request, HttpError> {
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(HttpError::BadLine(line.to_owned()));
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(HttpError::BadLine(line.to_owned()));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let upgrade = header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    Ok(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        websocket_key: header("sec-websocket-key").filter(|_| upgrade),
    })
}

/// Writes a whole answer; the connection ends after it.
pub async fn answer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}

/// Accepts the switch to a WebSocket.
pub async fn switch<S: AsyncWrite + Unpin>(stream: &mut S, key: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 101 WebSocket Protocol Handshake\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_queries_and_the_websocket_key() {
        let get = parse("GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:9222\r\n\r\n").unwrap();
        assert_eq!(
            (get.method.as_str(), get.path.as_str(), get.websocket_key),
            ("GET", "/json/version", None)
        );
        let new = parse("PUT /json/new?about:blank HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            (new.path.as_str(), new.query.as_str()),
            ("/json/new", "about:blank")
        );
        let ws = parse("GET /devtools/browser/X HTTP/1.1\r\nUPGRADE: websocket\r\nsec-websocket-key: abc==\r\n\r\n").unwrap();
        assert_eq!(ws.websocket_key.as_deref(), Some("abc=="));
        let no_upgrade =
            parse("GET /devtools/browser/X HTTP/1.1\r\nSec-WebSocket-Key: abc==\r\n\r\n").unwrap();
        assert_eq!(no_upgrade.websocket_key, None);
        for bad in [
            "GET\r\n\r\n",
            "GET json HTTP/1.1\r\n\r\n",
            "GET / SPDY\r\n\r\n",
            "GET / HTTP/1.1 x\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_long_head_is_refused() {
        let mut long =
            format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)).into_bytes();
        let mut reader: &[u8] = &mut long;
        assert!(matches!(
            read_request(&mut reader).await,
            Err(HttpError::TooLong)
        ));
    }
}
