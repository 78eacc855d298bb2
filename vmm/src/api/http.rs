//! Just enough HTTP/1.1 for a local control socket: one request per
//! connection, `Content-Length` bodies, JSON responses. Hand-written because
//! the VMM is synchronous and single-purpose; an HTTP stack would add an
//! async runtime and megabytes of resident memory to every VM.

use std::io::{self, Read, Write};

/// Largest header block accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Largest body accepted.
const MAX_BODY: usize = 1024 * 1024;

/// A parsed request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// Method, e.g. `PUT`.
    pub method: String,
    /// Path, e.g. `/vm/start`.
    pub path: String,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// Errors reading a request.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The peer sent something that is not HTTP we accept.
    #[error("malformed HTTP request: {0}")]
    Malformed(&'static str),
    /// The socket failed.
    #[error("API connection failed")]
    Io(#[from] io::Error),
}

/// Reads one request.
pub fn read_request(stream: &mut impl Read) -> Result<Request, HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(HttpError::Malformed("headers too long"));
        }
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(HttpError::Malformed(
                "connection closed before the end of the headers",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| HttpError::Malformed("headers are not UTF-8"))?;
    let (method, path, length) = parse_head(head)?;
    let mut body = buf[head_end + 4..].to_vec();
    if length > MAX_BODY || body.len() > length {
        return Err(HttpError::Malformed("body length"));
    }
    let mut rest = vec![0u8; length - body.len()];
    stream.read_exact(&mut rest)?;
    body.extend(rest);
    Ok(Request { method, path, body })
}

fn parse_head(head: &str) -> Result<(String, String, usize), HttpError> {
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(path), Some(_)) = (first.next(), first.next(), first.next()) else {
        return Err(HttpError::Malformed("request line"));
    };
    let mut length = 0;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = value
                .trim()
                .parse()
                .map_err(|_| HttpError::Malformed("Content-Length"))?;
        }
    }
    Ok((method.to_string(), path.to_string(), length))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes a response with a JSON body (or none for 204).
pub fn write_response(stream: &mut impl Write, status: u16, body: &str) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_put_with_body() {
        let raw = b"PUT /vm/config HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
        let req = read_request(&mut &raw[..]).expect("valid request");
        assert_eq!(
            (req.method.as_str(), req.path.as_str(), req.body.as_slice()),
            ("PUT", "/vm/config", &b"{}"[..])
        );
        assert!(read_request(&mut &b"GARBAGE\r\n\r\n"[..]).is_err());
        assert!(read_request(&mut &b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"[..]).is_err());
        let mut out = Vec::new();
        write_response(&mut out, 204, "").expect("write");
        assert!(out.starts_with(b"HTTP/1.1 204 No Content\r\n"));
    }
}
