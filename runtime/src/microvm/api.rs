//! The daemon's side of the VMM's API socket (`vm/vmm.sock`, see
//! `vmm/README.md`): one HTTP/1.1 request per connection, answered by the
//! VMM process itself. Like the guest channel, the socket is opened without
//! following a symlink and its listener must be the workspace's VMM (its
//! uid, the top process) before anything is written.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::channel::{ChannelError, GuestPeer, connect_no_follow};

/// How long the VMM may take to answer a pause or a resume (a pause
/// waits for every vCPU).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Longest reply read.
const MAX_REPLY: usize = 64 * 1024;

/// What can go wrong talking to the VMM.
#[derive(Debug, thiserror::Error)]
pub enum VmmApiError {
    #[error("cannot reach the VMM's API socket: {0}")]
    Channel(#[from] ChannelError),
    #[error("VMM API I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("the VMM did not answer {request} within {after:?}")]
    Timeout { request: String, after: Duration },
    #[error("the VMM refused {request}: {status} {body}")]
    Refused {
        request: String,
        status: u16,
        body: String,
    },
    #[error("the VMM's reply to {request} is not HTTP: {reply:?}")]
    BadReply { request: String, reply: String },
}

/// Sends `PUT <path>` with no body; Ok on any 2xx.
pub async fn put(socket: &Path, peer: GuestPeer, path: &str) -> Result<(), VmmApiError> {
    put_json(socket, peer, path, "", TIMEOUT).await.map(drop)
}

/// Sends `PUT <path>` with `body` (JSON, or empty) and returns the reply's
/// body on any 2xx; the VMM must answer within `timeout`.
pub async fn put_json(
    socket: &Path,
    peer: GuestPeer,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<String, VmmApiError> {
    let request = format!("PUT {path}");
    let exchange = async {
        let mut stream = connect_no_follow(socket).await?;
        let cred = stream.peer_cred()?;
        peer.check(cred.uid(), cred.pid())?;
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: vmm\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        // Stop at the body's end or when the VMM closes.
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&chunk[..n]);
            if reply.len() >= MAX_REPLY || complete(&reply) {
                break;
            }
        }
        Ok::<_, VmmApiError>(reply)
    };
    let reply = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| VmmApiError::Timeout {
            request: request.clone(),
            after: timeout,
        })??;
    let text = String::from_utf8_lossy(&reply).into_owned();
    let status = status_of(&text).ok_or_else(|| VmmApiError::BadReply {
        request: request.clone(),
        reply: text.chars().take(200).collect(),
    })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_owned())
        .unwrap_or_default();
    if (200..300).contains(&status) {
        return Ok(body);
    }
    Err(VmmApiError::Refused {
        request,
        status,
        body,
    })
}

/// The status code of an HTTP/1.x reply's status line.
fn status_of(reply: &str) -> Option<u16> {
    let line = reply.lines().next()?;
    let mut parts = line.split(' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Whether `reply` holds its headers and the `Content-Length` bytes after.
fn complete(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_and_lengths() {
        assert_eq!(status_of("HTTP/1.1 204 No Content\r\n\r\n"), Some(204));
        assert_eq!(status_of("SSH-2.0\r\n"), None);
        assert!(complete(b"HTTP/1.1 204 No Content\r\n\r\n"));
        assert!(!complete(
            b"HTTP/1.1 409 Conflict\r\nContent-Length: 5\r\n\r\nab"
        ));
        assert!(complete(
            b"HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\nab"
        ));
    }

    /// A listener of this process (our uid, our pid as the "top process")
    /// answering like the VMM: 204 to pause, 409 with a reason otherwise.
    #[tokio::test]
    async fn put_checks_the_peer_and_reads_the_status() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("vmm.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 1024];
                let n = stream.read(&mut buf).await.unwrap();
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                let reply = if request.starts_with("PUT /vm/pause ") {
                    "HTTP/1.1 204 No Content\r\n\r\n".to_owned()
                } else {
                    "HTTP/1.1 409 Conflict\r\nContent-Length: 11\r\n\r\nnot paused\n".to_owned()
                };
                stream.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let me = GuestPeer {
            uid,
            top_pid: Some(std::process::id() as i32),
        };
        put(&socket, me, "/vm/pause").await.unwrap();
        let err = put(&socket, me, "/vm/resume").await.unwrap_err();
        assert!(err.to_string().contains("409 not paused"), "{err}");
        server.await.unwrap();
        // Someone else's listener is refused before a byte is written.
        let other = GuestPeer {
            uid: uid + 1,
            top_pid: Some(1),
        };
        let _listener = tokio::net::UnixListener::bind(dir.path().join("b.sock")).unwrap();
        let err = put(&dir.path().join("b.sock"), other, "/vm/pause")
            .await
            .unwrap_err();
        assert!(matches!(err, VmmApiError::Channel(_)), "{err}");
    }
}
