//! The guest channel handshake, modelled on Firecracker's hybrid vsock.
//!
//! The host connects to the workspace's Unix socket and writes
//! `CONNECT <port>\n`. The guest answers `OK <n>\n` (n: the guest's number for
//! this stream) and from then on the stream is the service on that port, or
//! answers `ERR <reason>\n` and closes. Both lines are short and bounded: a
//! peer that sends more than [`MAX_LINE`] bytes without a newline is refused.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The longest handshake line either side accepts, newline included.
pub const MAX_LINE: usize = 128;
/// How long either side waits for the other's handshake line.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What can go wrong in the handshake.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("guest channel I/O failed during the handshake: {0}")]
    Io(#[from] std::io::Error),
    #[error("guest channel handshake timed out after {TIMEOUT:?}")]
    Timeout,
    #[error("handshake line longer than {MAX_LINE} bytes or not terminated by a newline")]
    LineTooLong,
    #[error("malformed handshake line {0:?}: expected `CONNECT <port>`")]
    BadConnect(String),
    #[error("port {0} is not a guest service (allowed: 5900 RFB, 9222 CDP, 1024 control)")]
    PortNotAllowed(u16),
    #[error("the guest refused port {port}: {reason}")]
    Refused { port: u16, reason: String },
    #[error("malformed guest reply {0:?}: expected `OK <n>` or `ERR <reason>`")]
    BadReply(String),
}

/// Reads one `\n`-terminated line of at most [`MAX_LINE`] bytes, byte by
/// byte so that nothing after the newline is consumed from the stream.
pub async fn read_line<R: AsyncRead + Unpin>(reader: &mut R) -> Result<String, HandshakeError> {
    let read = async {
        let mut line = Vec::with_capacity(32);
        loop {
            let byte = reader.read_u8().await?;
            if byte == b'\n' {
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if line.len() + 1 >= MAX_LINE {
                return Err(HandshakeError::LineTooLong);
            }
            line.push(byte);
        }
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .map_err(|_| HandshakeError::Timeout)?
}

/// Parses the host's `CONNECT <port>` line (without its newline).
pub fn parse_connect(line: &str) -> Result<u16, HandshakeError> {
    let port = line
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.trim_end_matches('\r').parse::<u16>().ok())
        .ok_or_else(|| HandshakeError::BadConnect(line.to_owned()))?;
    if !crate::ports::is_allowed(port) {
        return Err(HandshakeError::PortNotAllowed(port));
    }
    Ok(port)
}

/// Host side: asks the guest for `port` on a freshly connected stream.
/// On success the stream is the guest service.
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    port: u16,
) -> Result<u32, HandshakeError> {
    stream
        .write_all(format!("CONNECT {port}\n").as_bytes())
        .await?;
    let reply = read_line(stream).await?;
    if let Some(reason) = reply.strip_prefix("ERR ") {
        return Err(HandshakeError::Refused {
            port,
            reason: reason.to_owned(),
        });
    }
    reply
        .strip_prefix("OK ")
        .and_then(|n| n.parse::<u32>().ok())
        .ok_or(HandshakeError::BadReply(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_line_accepts_only_listed_ports() {
        assert_eq!(parse_connect("CONNECT 5900").unwrap(), 5900);
        assert_eq!(parse_connect("CONNECT 1024\r").unwrap(), 1024);
        assert!(matches!(
            parse_connect("CONNECT 22"),
            Err(HandshakeError::PortNotAllowed(22))
        ));
        for bad in ["CONNECT", "CONNECT x", "connect 5900", "CONNECT 70000", ""] {
            assert!(matches!(
                parse_connect(bad),
                Err(HandshakeError::BadConnect(_))
            ));
        }
    }

    #[tokio::test]
    async fn host_reads_ok_and_err_replies() {
        let (mut host, mut guest) = tokio::io::duplex(256);
        guest.write_all(b"OK 7\n").await.unwrap();
        assert_eq!(connect(&mut host, 5900).await.unwrap(), 7);
        assert_eq!(read_line(&mut guest).await.unwrap(), "CONNECT 5900");

        guest.write_all(b"ERR nope\n").await.unwrap();
        let err = connect(&mut host, 9222).await.unwrap_err();
        assert!(matches!(err, HandshakeError::Refused { port: 9222, .. }));
    }

    #[tokio::test]
    async fn overlong_line_is_refused() {
        let (mut host, mut guest) = tokio::io::duplex(1024);
        host.write_all(&[b'A'; 300]).await.unwrap();
        assert!(matches!(
            read_line(&mut guest).await,
            Err(HandshakeError::LineTooLong)
        ));
    }
}
