//! A request body read whole, up to a cap, so that a secret's
//! placeholders can be put in it ([`super::secrets::swap_body`]). A body
//! longer than the cap is given back as it came (what was read, then the
//! rest, streamed), never held past the cap.
//!
//! Framing: a whole body is sent on with a `Content-Length` of what it
//! became, chunked or not as it came (its trailers, if any, are dropped).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};

use super::peek::Replayed;

/// What was read of a request body.
#[derive(Debug)]
pub enum Read<B> {
    /// The whole body (at most the cap).
    Whole(Bytes),
    /// Longer than the cap: the body as it came, for sending unchanged.
    TooLong(Replayed<B>),
}

/// Reads `body` whole if it is at most `cap` bytes; `declared`: its
/// `Content-Length`, when it has one (a longer one is not read at all).
/// `Err`: the client's body broke off.
pub async fn read<B>(mut body: B, declared: Option<u64>, cap: usize) -> Result<Read<B>, String>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if declared.is_some_and(|length| length > cap as u64) {
        return Ok(Read::TooLong(Replayed::whole(body)));
    }
    let mut frames = VecDeque::new();
    let mut length = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the request body broke off: {e}"))?;
        length += frame.data_ref().map_or(0, Bytes::len);
        frames.push_back(frame);
        if length > cap {
            return Ok(Read::TooLong(Replayed::after(frames, body)));
        }
    }
    let mut whole = BytesMut::with_capacity(length);
    for data in frames.into_iter().filter_map(|f| Frame::into_data(f).ok()) {
        whole.extend_from_slice(&data);
    }
    Ok(Read::Whole(whole.freeze()))
}

#[cfg(test)]
mod tests {
    use http_body_util::{Full, StreamBody};

    use super::*;

    fn chunks(
        parts: Vec<&'static [u8]>,
    ) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let frames = parts
            .into_iter()
            .map(|p| Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(p))));
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_up_to_the_cap_is_read_whole_and_a_longer_one_given_back_as_it_came() {
        let Read::Whole(whole) = read(chunks(vec![b"ab", b"cd"]), None, 4).await.unwrap() else {
            panic!("4 bytes fit a cap of 4");
        };
        assert_eq!(whole.as_ref(), b"abcd");
        let Read::TooLong(again) = read(chunks(vec![b"ab", b"cd", b"e", b"fg"]), None, 4)
            .await
            .unwrap()
        else {
            panic!("5 bytes do not fit");
        };
        assert_eq!(
            again.collect().await.unwrap().to_bytes().as_ref(),
            b"abcdefg"
        );
        // A declared length over the cap: nothing is read.
        let Read::TooLong(untouched) = read(Full::new(Bytes::from_static(b"abcdef")), Some(6), 4)
            .await
            .unwrap()
        else {
            panic!("6 declared bytes do not fit");
        };
        assert_eq!(
            untouched.collect().await.unwrap().to_bytes().as_ref(),
            b"abcdef"
        );
        let broken = StreamBody::new(futures_util::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"a"))),
            Err(std::io::Error::other("gone")),
        ]));
        assert!(
            read(broken, None, 4)
                .await
                .unwrap_err()
                .contains("broke off")
        );
    }
}
