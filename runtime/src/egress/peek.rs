//! The first bytes of a response body, read to judge it before any of it
//! reaches the client, then given back in front of the rest ([`Replayed`]):
//! a large body is never held in memory, only its head.
//!
//! How much is read: until the decoded head is enough to judge
//! ([`sniff::enough`]: 1 KiB of a known kind, 64 KiB of unknown bytes), or
//! the body ends; or, when the server pauses (an event stream, a slow
//! page) for [`IDLE`], as soon as what came is settled
//! ([`sniff::settled`]). Bytes of no known kind are waited for until one of
//! the first two.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use crate::quarantine::decode::{Coding, DecodeError, Decoder};
use crate::quarantine::sniff;

/// A pause after which a short, settled head is judged.
pub const IDLE: Duration = Duration::from_millis(250);

/// What was read of a body.
#[derive(Debug)]
pub struct Peeked<B> {
    /// The decoded head (at most [`sniff::SNIFF_BYTES`]).
    pub head: Vec<u8>,
    /// The body as it came: the frames read, then the rest.
    pub body: Replayed<B>,
}

/// Why a body could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum PeekError {
    #[error("the server's response broke off: {0}")]
    Upstream(String),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Reads the head of `body`, undoing `codings`.
pub async fn peek<B>(mut body: B, codings: &[Coding]) -> Result<Peeked<B>, PeekError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut decoder = Decoder::new(codings);
    let mut frames = VecDeque::new();
    let mut head = Vec::new();
    let mut ended = false;
    while !sniff::enough(&head) {
        let next = if sniff::settled(&head) {
            match tokio::time::timeout(IDLE, body.frame()).await {
                Ok(next) => next,
                Err(_) => break, // paused on a settled head
            }
        } else {
            body.frame().await
        };
        let Some(frame) = next else {
            ended = true;
            break;
        };
        let frame = frame.map_err(|e| PeekError::Upstream(e.to_string()))?;
        if let Some(data) = frame.data_ref() {
            let decoded = decoder.push(data)?;
            let room = sniff::SNIFF_BYTES.saturating_sub(head.len());
            head.extend_from_slice(&decoded[..decoded.len().min(room)]);
        }
        frames.push_back(frame);
    }
    if ended {
        let rest = decoder.finish()?;
        let room = sniff::SNIFF_BYTES.saturating_sub(head.len());
        head.extend_from_slice(&rest[..rest.len().min(room)]);
    }
    Ok(Peeked {
        head,
        body: Replayed {
            frames,
            rest: (!ended).then_some(body),
        },
    })
}

/// Frames already read, then the rest of the body.
#[derive(Debug)]
pub struct Replayed<B> {
    frames: VecDeque<Frame<Bytes>>,
    rest: Option<B>,
}

impl<B> Replayed<B> {
    /// A body none of which was read.
    pub fn whole(body: B) -> Self {
        Self {
            frames: VecDeque::new(),
            rest: Some(body),
        }
    }

    /// `frames`, already read, then the rest of `body`.
    pub fn after(frames: VecDeque<Frame<Bytes>>, body: B) -> Self {
        Self {
            frames,
            rest: Some(body),
        }
    }
}

impl<B> Body for Replayed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(frame) = self.frames.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let buffered: u64 = self
            .frames
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let rest = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + buffered);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + buffered);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use http_body_util::{Full, StreamBody};

    use super::*;

    fn chunks(parts: Vec<Vec<u8>>) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let frames = parts
            .into_iter()
            .map(|p| Ok::<_, std::io::Error>(Frame::data(Bytes::from(p))));
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn the_head_is_decoded_and_the_body_given_back_whole() {
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(200_000, 7);
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&elf).unwrap();
        let gz = e.finish().unwrap();
        let parts: Vec<Vec<u8>> = gz.chunks(100).map(<[u8]>::to_vec).collect();
        let peeked = peek(chunks(parts), &[Coding::Gzip]).await.unwrap();
        assert!(peeked.head.starts_with(b"\x7fELF"));
        assert!(peeked.head.len() >= sniff::SETTLED_BYTES);
        let again = peeked.body.collect().await.unwrap().to_bytes();
        assert_eq!(
            again.as_ref(),
            gz.as_slice(),
            "the client gets the body as it came"
        );
    }

    #[tokio::test]
    async fn a_short_body_is_read_to_its_end_and_a_large_one_only_to_its_head() {
        let peeked = peek(Full::new(Bytes::from_static(b"#!")), &[])
            .await
            .unwrap();
        assert_eq!(peeked.head, b"#!");
        let big = (0..1000).map(|_| vec![b'a'; 1024]).collect();
        let peeked = peek(chunks(big), &[]).await.unwrap();
        assert!(peeked.head.len() < 4096, "{}", peeked.head.len());
        assert_eq!(
            peeked.body.collect().await.unwrap().to_bytes().len(),
            1000 * 1024
        );
    }

    #[tokio::test]
    async fn a_paused_stream_is_judged_on_what_came_once_settled() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
        tx.send(Ok(Frame::data(Bytes::from_static(b"data: {\"n\":1}\n\n"))))
            .await
            .unwrap();
        let body = StreamBody::new(tokio_stream_from(rx));
        let peeked = peek(body, &[]).await.unwrap();
        assert_eq!(peeked.head, b"data: {\"n\":1}\n\n");
        drop(tx);
    }

    fn tokio_stream_from<T>(
        mut rx: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Unpin {
        Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }
}
