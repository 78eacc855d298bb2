//! Request framing as the client sent it. hyper settles ambiguous framing
//! by itself — `Transfer-Encoding` wins over a `Content-Length`, which it
//! drops from the headers; a repeated equal `Content-Length` is dropped too
//! — so the proxy would never see it. [`Watched`] reads the same bytes on
//! their way to hyper, follows the framing of each request (its head, then
//! its body by length or by chunks) and keeps, in order, whether each
//! head was ambiguous ([`Verdicts`]); the proxy refuses those with 400.
//!
//! It stops looking (every later request passes as framed by hyper) after
//! `CONNECT` or an `Upgrade`, whose bytes are no longer HTTP, and after a
//! head it cannot parse (hyper refuses that one itself).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A request head longer than this is hyper's to refuse (431).
const MAX_HEAD: usize = 128 * 1024;

/// Per request, in order: why its framing is ambiguous, if it is.
#[derive(Debug, Clone, Default)]
pub struct Verdicts(Arc<Mutex<VecDeque<Option<&'static str>>>>);

impl Verdicts {
    /// The verdict of the next request hyper hands over.
    pub fn next(&self) -> Option<&'static str> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
            .flatten()
    }

    fn push(&self, verdict: Option<&'static str>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(verdict);
    }
}

#[derive(Debug)]
enum State {
    Head(Vec<u8>),
    Body(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    ChunkEnd(u8),
    Trailers(Vec<u8>),
    Off,
}

/// Follows request framing through bytes fed in order.
#[derive(Debug)]
struct Scanner {
    state: State,
    verdicts: Verdicts,
}

impl Scanner {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let state = std::mem::replace(&mut self.state, State::Off);
            self.state = match state {
                State::Off => return,
                State::Head(mut head) => {
                    let before = head.len();
                    head.extend_from_slice(bytes);
                    match find(&head, b"\r\n\r\n") {
                        Some(end) => {
                            let used = end + 4 - before;
                            bytes = &bytes[used..];
                            head.truncate(end + 4);
                            self.head(&head)
                        }
                        None if head.len() > MAX_HEAD => State::Off,
                        None => {
                            bytes = &[];
                            State::Head(head)
                        }
                    }
                }
                State::Body(left) => {
                    let take = left.min(bytes.len() as u64);
                    bytes = &bytes[take as usize..];
                    match left - take {
                        0 => State::Head(Vec::new()),
                        left => State::Body(left),
                    }
                }
                State::ChunkSize(mut line) => match bytes.iter().position(|&b| b == b'\n') {
                    Some(at) => {
                        line.extend_from_slice(&bytes[..at]);
                        bytes = &bytes[at + 1..];
                        let text = String::from_utf8_lossy(&line);
                        let digits = text.split(';').next().unwrap_or_default().trim();
                        match u64::from_str_radix(digits, 16) {
                            Ok(0) => State::Trailers(Vec::new()),
                            Ok(size) => State::ChunkData(size),
                            Err(_) => State::Off,
                        }
                    }
                    None if line.len() > 1024 => State::Off,
                    None => {
                        line.extend_from_slice(bytes);
                        bytes = &[];
                        State::ChunkSize(line)
                    }
                },
                State::ChunkData(left) => {
                    let take = left.min(bytes.len() as u64);
                    bytes = &bytes[take as usize..];
                    match left - take {
                        0 => State::ChunkEnd(2),
                        left => State::ChunkData(left),
                    }
                }
                State::ChunkEnd(left) => {
                    let take = usize::from(left).min(bytes.len());
                    bytes = &bytes[take..];
                    match left as usize - take {
                        0 => State::ChunkSize(Vec::new()),
                        left => State::ChunkEnd(left as u8),
                    }
                }
                State::Trailers(mut seen) => {
                    let before = seen.len();
                    seen.extend_from_slice(bytes);
                    let end = if seen.starts_with(b"\r\n") {
                        Some(2)
                    } else {
                        find(&seen, b"\r\n\r\n").map(|at| at + 4)
                    };
                    match end {
                        Some(end) => {
                            bytes = &bytes[end - before..];
                            State::Head(Vec::new())
                        }
                        None if seen.len() > MAX_HEAD => State::Off,
                        None => {
                            bytes = &[];
                            State::Trailers(seen)
                        }
                    }
                }
            };
        }
    }

    /// Judges one head; the state for what follows it.
    fn head(&mut self, head: &[u8]) -> State {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut request = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(_)) = request.parse(head) else {
            self.verdicts.push(None);
            return State::Off;
        };
        let named = |name: &str| {
            request
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value)
                .collect::<Vec<_>>()
        };
        let (te, cl) = (named("transfer-encoding"), named("content-length"));
        let verdict = if !te.is_empty() && !cl.is_empty() {
            Some("the request has both Transfer-Encoding and Content-Length")
        } else if cl.len() > 1 {
            Some("the request has more than one Content-Length")
        } else {
            None
        };
        self.verdicts.push(verdict);
        let switches = request.method == Some("CONNECT") || !named("upgrade").is_empty();
        if switches || (!te.is_empty() && !cl.is_empty()) {
            // hyper closes after an ambiguous one; a switch leaves HTTP.
            return State::Off;
        }
        if !te.is_empty() {
            return State::ChunkSize(Vec::new());
        }
        let length = cl
            .first()
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(|v| v.trim().parse::<u64>());
        match length {
            None => State::Head(Vec::new()),
            Some(Ok(0)) => State::Head(Vec::new()),
            Some(Ok(n)) => State::Body(n),
            Some(Err(_)) => State::Off,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `S`, with the framing of the requests read from it watched.
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    scanner: Scanner,
}

impl<S> Watched<S> {
    pub fn new(inner: S, verdicts: Verdicts) -> Self {
        Self {
            inner,
            scanner: Scanner {
                state: State::Head(Vec::new()),
                verdicts,
            },
        }
    }

    /// The stream, unwatched from here on (a tunnel's bytes are not
    /// requests).
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            this.scanner.feed(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(stream: &[u8], piece: usize) -> Vec<Option<&'static str>> {
        let verdicts = Verdicts::default();
        let mut scanner = Scanner {
            state: State::Head(Vec::new()),
            verdicts: verdicts.clone(),
        };
        for chunk in stream.chunks(piece) {
            scanner.feed(chunk);
        }
        verdicts.0.lock().unwrap().iter().copied().collect()
    }

    #[test]
    fn each_request_is_judged_in_order_through_its_bodies() {
        let stream = b"POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 32\r\n\r\n\
GET http://b/ HTTP/1.1\r\n\r\n012345\
POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1d;x=y\r\nGET / HTTP/1.1\r\nTE: x\r\n\r\n0123\r\n0\r\nX-Trailer: 1\r\n\r\n\
GET http://c/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx";
        for piece in [1, 3, 1000] {
            assert_eq!(
                verdicts(stream, piece),
                [
                    None,
                    None,
                    Some("the request has more than one Content-Length")
                ],
                "in pieces of {piece}: bodies that look like requests are bodies"
            );
        }
        let smuggle = b"POST http://a/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(
            verdicts(smuggle, 5),
            [Some(
                "the request has both Transfer-Encoding and Content-Length"
            )]
        );
        let tunnel = b"CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03\x01Content-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(verdicts(tunnel, 7), [None], "a tunnel's bytes are not HTTP");
    }
}
