//! Screenshots out of the framebuffer: PNG (default) or JPEG, optionally
//! scaled to a requested size.

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::imageops::{self, FilterType as Resize};
use image::{DynamicImage, ImageEncoder, RgbImage, RgbaImage};

use super::Framebuffer;

/// The image format of a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    #[error("cannot encode the screenshot: {0}")]
    Image(#[from] image::ImageError),
    #[error("cannot encode the screenshot as JPEG: {0}")]
    Jpeg(#[from] jpeg_encoder::EncodingError),
    #[error("a {0}x{1} screenshot is larger than JPEG allows (65535 pixels a side)")]
    TooLarge(u32, u32),
}

/// Encodes `frame`, scaled to `size` if given.
pub fn encode(
    frame: &Framebuffer,
    format: Format,
    size: Option<(u32, u32)>,
) -> Result<Encoded, EncodeError> {
    // The conversion runs inside `image` (built optimised even in debug
    // builds, see the root Cargo.toml), not in a per-pixel loop here.
    let rgba = RgbaImage::from_raw(frame.width, frame.height, frame.rgba.clone())
        .ok_or(EncodeError::Empty)?;
    let image: RgbImage = DynamicImage::ImageRgba8(rgba).to_rgb8();
    if image.width() == 0 || image.height() == 0 {
        return Err(EncodeError::Empty);
    }
    let image = match size {
        Some((w, h)) if (w, h) != image.dimensions() => {
            imageops::resize(&image, w, h, Resize::Triangle)
        }
        _ => image,
    };
    let (width, height) = image.dimensions();
    let mut bytes = Vec::with_capacity(image.len() / 4);
    match format {
        Format::Png => {
            PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Adaptive)
                .write_image(&image, width, height, image::ExtendedColorType::Rgb8)?
        }
        // image's own JPEG encoder is several times slower than
        // jpeg-encoder (which newer image versions use themselves).
        Format::Jpeg(quality) => {
            let (w, h) = (u16::try_from(width), u16::try_from(height));
            let (Ok(w), Ok(h)) = (w, h) else {
                return Err(EncodeError::TooLarge(width, height));
            };
            jpeg_encoder::Encoder::new(&mut bytes, quality).encode(
                image.as_raw(),
                w,
                h,
                jpeg_encoder::ColorType::Rgb,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trips_and_scales() {
        let mut frame = Framebuffer::new(8, 4);
        frame.rgba[0..4].copy_from_slice(&[255, 0, 0, 0]);
        let out = encode(&frame, Format::Png, None).unwrap();
        let back = image::load_from_memory(&out.bytes).unwrap().to_rgb8();
        assert_eq!(back.dimensions(), (8, 4));
        assert_eq!(back.get_pixel(0, 0).0, [255, 0, 0]);
        let small = encode(&frame, Format::Jpeg(80), Some((4, 2))).unwrap();
        assert_eq!((small.width, small.height), (4, 2));
        assert_eq!(small.media_type, "image/jpeg");
        assert!(encode(&Framebuffer::default(), Format::Png, None).is_err());
    }
}
