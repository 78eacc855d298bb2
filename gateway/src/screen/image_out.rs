//! Screenshots out of the framebuffer: PNG (default) or JPEG, optionally
//! scaled to a requested size. The encoding itself is
//! `cubicle-screen-encode`, a crate built optimised in every profile (see
//! its docs for why); repeated screenshots of an unchanged screen are
//! served from the screen session's cache ([`super::ScreenSession::screenshot`]).

pub use cubicle_screen_encode::{EncodeError, Encoded, Format};

use super::Framebuffer;

/// Encodes `frame`, scaled to `size` if given.
pub fn encode(
    frame: &Framebuffer,
    format: Format,
    size: Option<(u32, u32)>,
) -> Result<Encoded, EncodeError> {
    cubicle_screen_encode::encode(&frame.rgba, frame.width, frame.height, format, size)
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
