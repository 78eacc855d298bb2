//! Undoing `Content-Encoding` as the browser does, so the quarantine judges
//! and keeps the bytes a client would save, not their compressed form.
//!
//! Chromium decodes `gzip` (and `x-gzip`), `deflate` (zlib-wrapped, or raw
//! as some servers send it), `br` and `zstd`, stacked in any order, and
//! passes a body with a coding it does not know through as it came. So:
//! known codings are undone (last applied, first undone); `identity` and
//! unknown names are taken as no coding (the bytes are judged as they came,
//! as the browser would save them); `zstd` and `compress`, which a client
//! may decode and this decoder cannot, make the body one that cannot be
//! judged (the proxy holds it). The proxy asks servers only for the codings
//! it can undo (`Accept-Encoding: gzip, deflate, br`).
//!
//! Decoding is bounded: input goes in small pieces, so one piece cannot
//! make more than about a megabyte (a "zip bomb" is cut off by the caller's
//! cap on decoded bytes).

use std::io::Write;

use hyper::header::{CONTENT_ENCODING, HeaderMap};

/// What the proxy asks servers for.
pub const ACCEPTED: &str = "gzip, deflate, br";

/// Input fed at a time; deflate expands at most about 1032:1.
const PIECE: usize = 1024;

/// One coding this decoder undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Deflate,
    Brotli,
}

/// The codings of a response, as they were applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codings {
    /// Known codings, in the order the server applied them (may be empty).
    Known(Vec<Coding>),
    /// A coding a client may undo that this decoder cannot (its name).
    Unsupported(String),
}

/// Why a body does not decode.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the body does not decode as its Content-Encoding ({coding:?}) says: {source}")]
    Corrupt {
        coding: Coding,
        #[source]
        source: std::io::Error,
    },
}

/// The codings listed in every `Content-Encoding` header of `headers`.
pub fn codings(headers: &HeaderMap) -> Codings {
    let mut known = Vec::new();
    let names = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
        .collect::<Vec<_>>();
    for name in names.iter().flat_map(|v| v.split(',')).map(str::trim) {
        match name {
            "gzip" | "x-gzip" => known.push(Coding::Gzip),
            "deflate" => known.push(Coding::Deflate),
            "br" => known.push(Coding::Brotli),
            "zstd" | "compress" | "x-compress" => return Codings::Unsupported(name.to_owned()),
            _ => {} // identity, empty, or unknown: passed as is, as Chromium does
        }
    }
    Codings::Known(known)
}

/// A writer whose bytes are taken out as they come.
type Out = Vec<u8>;

enum Stage {
    Gzip(flate2::write::MultiGzDecoder<Out>),
    /// Deflate: which wrapping is known from the first two bytes.
    DeflateUnknown(Vec<u8>),
    Zlib(flate2::write::ZlibDecoder<Out>),
    RawDeflate(flate2::write::DeflateDecoder<Out>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Out>>),
}

impl Stage {
    fn new(coding: Coding) -> Self {
        match coding {
            Coding::Gzip => Self::Gzip(flate2::write::MultiGzDecoder::new(Vec::new())),
            Coding::Deflate => Self::DeflateUnknown(Vec::new()),
            Coding::Brotli => Self::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(
                Vec::new(),
                4096,
            ))),
        }
    }

    fn coding(&self) -> Coding {
        match self {
            Self::Gzip(_) => Coding::Gzip,
            Self::DeflateUnknown(_) | Self::Zlib(_) | Self::RawDeflate(_) => Coding::Deflate,
            Self::Brotli(_) => Coding::Brotli,
        }
    }

    /// Feeds `input`; what came out.
    fn push(&mut self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        if let Self::DeflateUnknown(seen) = self {
            seen.extend_from_slice(input);
            if seen.len() < 2 {
                return Ok(Vec::new());
            }
            // RFC 1950: CM 8, and the header is a multiple of 31.
            let zlib =
                seen[0] & 0x0F == 8 && (u16::from(seen[0]) << 8 | u16::from(seen[1])) % 31 == 0;
            let seen = std::mem::take(seen);
            *self = if zlib {
                Self::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
            } else {
                Self::RawDeflate(flate2::write::DeflateDecoder::new(Vec::new()))
            };
            return self.push(&seen);
        }
        for piece in input.chunks(PIECE) {
            match self {
                Self::Gzip(d) => d.write_all(piece)?,
                Self::Zlib(d) => d.write_all(piece)?,
                Self::RawDeflate(d) => d.write_all(piece)?,
                Self::Brotli(d) => d.write_all(piece)?,
                Self::DeflateUnknown(_) => {}
            }
        }
        Ok(self.take())
    }

    /// Ends the stream; the rest of the output.
    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        match self {
            Self::Gzip(d) => d.try_finish()?,
            Self::Zlib(d) => d.try_finish()?,
            Self::RawDeflate(d) => d.try_finish()?,
            Self::Brotli(d) => d.close()?,
            Self::DeflateUnknown(seen) if seen.is_empty() => {}
            Self::DeflateUnknown(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a deflate stream of one byte",
                ));
            }
        }
        Ok(self.take())
    }

    fn take(&mut self) -> Vec<u8> {
        let out = match self {
            Self::Gzip(d) => d.get_mut(),
            Self::Zlib(d) => d.get_mut(),
            Self::RawDeflate(d) => d.get_mut(),
            Self::Brotli(d) => d.get_mut(),
            Self::DeflateUnknown(_) => return Vec::new(),
        };
        std::mem::take(out)
    }
}

/// Undoes a body's codings as its bytes come.
pub struct Decoder {
    /// Outermost (last applied) first.
    stages: Vec<Stage>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codings: Vec<Coding> = self.stages.iter().map(Stage::coding).collect();
        f.debug_struct("Decoder").field("stages", &codings).finish()
    }
}

impl Decoder {
    /// For codings as the server applied them.
    pub fn new(applied: &[Coding]) -> Self {
        Self {
            stages: applied.iter().rev().copied().map(Stage::new).collect(),
        }
    }

    /// Feeds raw body bytes; the decoded bytes they made.
    pub fn push(&mut self, raw: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut data = raw.to_vec();
        for stage in &mut self.stages {
            let coding = stage.coding();
            data = stage
                .push(&data)
                .map_err(|source| DecodeError::Corrupt { coding, source })?;
        }
        Ok(data)
    }

    /// Ends the body; the last decoded bytes. A body cut short is an error.
    pub fn finish(&mut self) -> Result<Vec<u8>, DecodeError> {
        let mut data = Vec::new();
        for stage in &mut self.stages {
            let coding = stage.coding();
            let corrupt = |source| DecodeError::Corrupt { coding, source };
            let mut out = stage.push(&data).map_err(corrupt)?;
            out.extend(stage.finish().map_err(corrupt)?);
            data = out;
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use hyper::header::HeaderValue;

    use super::*;

    pub fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn decode_all(applied: &[Coding], raw: &[u8], piece: usize) -> Result<Vec<u8>, DecodeError> {
        let mut d = Decoder::new(applied);
        let mut out = Vec::new();
        for chunk in raw.chunks(piece.max(1)) {
            out.extend(d.push(chunk)?);
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn every_known_coding_and_their_stack_is_undone_in_any_piece_size() {
        let text = b"\x7fELF and some more bytes ".repeat(500);
        let gz = gzip(&text);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&text).unwrap();
        let zlib = z.finish().unwrap();
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        r.write_all(&text).unwrap();
        let raw = r.finish().unwrap();
        let double = gzip(&gz);
        for piece in [1, 7, 4096] {
            assert_eq!(decode_all(&[Coding::Gzip], &gz, piece).unwrap(), text);
            assert_eq!(decode_all(&[Coding::Deflate], &zlib, piece).unwrap(), text);
            assert_eq!(decode_all(&[Coding::Deflate], &raw, piece).unwrap(), text);
            assert_eq!(
                decode_all(&[Coding::Gzip, Coding::Gzip], &double, piece).unwrap(),
                text
            );
            assert_eq!(decode_all(&[], &text, piece).unwrap(), text);
        }
        // Two gzip members are one body, as zlib and curl read them.
        let two = [gzip(b"first "), gzip(b"second")].concat();
        assert_eq!(
            decode_all(&[Coding::Gzip], &two, 3).unwrap(),
            b"first second"
        );
    }

    #[test]
    fn brotli_is_undone() {
        // "hello" compressed by `brotli -c` (quality 11).
        let br = [0x0b, 0x02, 0x80, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x03];
        assert_eq!(decode_all(&[Coding::Brotli], &br, 1).unwrap(), b"hello");
    }

    #[test]
    fn a_corrupt_or_cut_body_is_an_error() {
        let gz = gzip(b"some text that is long enough to be cut");
        assert!(decode_all(&[Coding::Gzip], &gz[..gz.len() - 6], 4096).is_err());
        assert!(decode_all(&[Coding::Gzip], b"not gzip at all", 4096).is_err());
    }

    #[test]
    fn headers_name_the_codings_the_browser_would_undo() {
        let mut h = HeaderMap::new();
        assert_eq!(codings(&h), Codings::Known(vec![]));
        h.append(CONTENT_ENCODING, HeaderValue::from_static("x-gzip"));
        h.append(CONTENT_ENCODING, HeaderValue::from_static("identity, BR"));
        assert_eq!(
            codings(&h),
            Codings::Known(vec![Coding::Gzip, Coding::Brotli])
        );
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("x-unknown"));
        assert_eq!(codings(&h), Codings::Known(vec![]), "passed as is");
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip, zstd"));
        assert_eq!(codings(&h), Codings::Unsupported("zstd".into()));
    }
}
