//! `cubicle-screen-encode`: a framebuffer (RGBA, as the gateway's RFB
//! client keeps it) to PNG or JPEG bytes, optionally scaled. It owns the
//! encoding and nothing else: no RFB, no HTTP, no caching (the gateway's
//! screen session caches per framebuffer version).
//!
//! Why a crate of its own: the encoders are generic (over the writer, the
//! pixel type), so their code is compiled in whichever crate instantiates
//! them, at that crate's optimisation level. Called from the gateway in a
//! debug build that was opt-level 0: a 1280x800 PNG took ~35 ms and a JPEG
//! ~78 ms instead of ~1 ms and ~7 ms. Here every instantiation is made in
//! this crate, which the workspace builds at opt-level 3 in every profile,
//! and the gateway calls plain functions. Start with [`encode`].

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::imageops::{self, FilterType as Resize};
use image::{ImageEncoder, RgbImage, RgbaImage};

/// The image format of a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Png,
    /// JPEG with a quality of 1..=100.
    Jpeg(u8),
}

impl Format {
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg(_) => "image/jpeg",
        }
    }
}

/// An encoded screenshot.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub media_type: &'static str,
}

/// What can go wrong encoding.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("the workspace's screen has no pixels yet")]
    Empty,
    #[error("the framebuffer holds {got} bytes, not {width}x{height} RGBA pixels")]
    Size { width: u32, height: u32, got: usize },
    #[error("cannot encode the screenshot: {0}")]
    Image(#[from] image::ImageError),
    #[error("cannot encode the screenshot as JPEG: {0}")]
    Jpeg(#[from] jpeg_encoder::EncodingError),
    #[error("a {0}x{1} screenshot is larger than JPEG allows (65535 pixels a side)")]
    TooLarge(u32, u32),
}

/// Encodes the `width`×`height` RGBA pixels `rgba` (alpha ignored), scaled
/// to `size` if given and different.
pub fn encode(
    rgba: &[u8],
    width: u32,
    height: u32,
    format: Format,
    size: Option<(u32, u32)>,
) -> Result<Encoded, EncodeError> {
    if width == 0 || height == 0 {
        return Err(EncodeError::Empty);
    }
    let expected = width as usize * height as usize * 4;
    if rgba.len() != expected {
        return Err(EncodeError::Size {
            width,
            height,
            got: rgba.len(),
        });
    }
    match size {
        Some((w, h)) if (w, h) != (width, height) && w > 0 && h > 0 => {
            let full =
                RgbaImage::from_raw(width, height, rgba.to_vec()).ok_or(EncodeError::Empty)?;
            let scaled = imageops::resize(&full, w, h, Resize::Triangle);
            encode_exact(scaled.as_raw(), w, h, format)
        }
        _ => encode_exact(rgba, width, height, format),
    }
}

fn encode_exact(
    rgba: &[u8],
    width: u32,
    height: u32,
    format: Format,
) -> Result<Encoded, EncodeError> {
    let mut bytes = Vec::with_capacity(rgba.len() / 16);
    match format {
        Format::Png => {
            // Screens are mostly flat colour: RGB with adaptive filters and
            // fdeflate's fast mode is small and ~1 ms for 1280x800.
            let rgb = to_rgb(rgba, width, height);
            PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Adaptive)
                .write_image(&rgb, width, height, image::ExtendedColorType::Rgb8)?
        }
        Format::Jpeg(quality) => {
            let (Ok(w), Ok(h)) = (u16::try_from(width), u16::try_from(height)) else {
                return Err(EncodeError::TooLarge(width, height));
            };
            // jpeg-encoder with its AVX2 paths (detected at run time), fed
            // RGBA directly (no conversion), 4:2:0 below quality 90.
            jpeg_encoder::Encoder::new(&mut bytes, quality.clamp(1, 100)).encode(
                rgba,
                w,
                h,
                jpeg_encoder::ColorType::Rgba,
            )?
        }
    }
    Ok(Encoded {
        bytes,
        width,
        height,
        media_type: format.media_type(),
    })
}

/// An encoded image (PNG or JPEG) back to its `(rgba, width, height)`:
/// `cubicle bench` re-encodes a frame the gateway served, to time the
/// encoder alone on the same pixels.
pub fn decode(bytes: &[u8]) -> Result<(Vec<u8>, u32, u32), EncodeError> {
    let image = image::load_from_memory(bytes)?.to_rgba8();
    let (width, height) = image.dimensions();
    Ok((image.into_raw(), width, height))
}

/// RGBA to RGB (alpha dropped).
fn to_rgb(rgba: &[u8], width: u32, height: u32) -> RgbImage {
    let mut rgb = Vec::with_capacity(rgba.len() / 4 * 3);
    for px in rgba.chunks_exact(4) {
        rgb.extend_from_slice(&px[..3]);
    }
    RgbImage::from_raw(width, height, rgb).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(width: u32, height: u32) -> Vec<u8> {
        let mut rgba = vec![255u8; (width * height * 4) as usize];
        rgba[0..4].copy_from_slice(&[255, 0, 0, 0]);
        rgba
    }

    #[test]
    fn png_round_trips_and_jpeg_scales() {
        let rgba = screen(8, 4);
        let out = encode(&rgba, 8, 4, Format::Png, None).unwrap();
        let back = image::load_from_memory(&out.bytes).unwrap().to_rgb8();
        assert_eq!(back.dimensions(), (8, 4));
        assert_eq!(back.get_pixel(0, 0).0, [255, 0, 0]);
        assert_eq!(back.get_pixel(1, 0).0, [255, 255, 255]);
        let small = encode(&rgba, 8, 4, Format::Jpeg(80), Some((4, 2))).unwrap();
        assert_eq!((small.width, small.height), (4, 2));
        assert_eq!(small.media_type, "image/jpeg");
        let back = image::load_from_memory(&small.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (4, 2));
        let (pixels, width, height) = decode(&out.bytes).unwrap();
        assert_eq!((width, height, &pixels[..4]), (8, 4, &[255, 0, 0, 255][..]));
        assert!(decode(b"not an image").is_err());
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert!(matches!(
            encode(&[], 0, 0, Format::Png, None),
            Err(EncodeError::Empty)
        ));
        assert!(matches!(
            encode(&[0; 12], 2, 2, Format::Png, None),
            Err(EncodeError::Size { .. })
        ));
        assert!(matches!(
            encode(&vec![0; 70_000 * 4], 70_000, 1, Format::Jpeg(80), None),
            Err(EncodeError::TooLarge(..))
        ));
    }
}
