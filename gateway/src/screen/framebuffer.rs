//! The workspace's screen as the gateway last saw it over RFB, RGBA.

use vnc::Rect;

/// A whole screen in RGBA, with a counter that moves on every change.
#[derive(Debug, Clone, Default)]
pub struct Framebuffer {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// What can go wrong applying an update from the server.
#[derive(Debug, thiserror::Error)]
pub enum FramebufferError {
    #[error("RFB rectangle {0:?} has {1} bytes of pixels, expected {2}")]
    ShortRect(Rect, usize, usize),
}

impl Framebuffer {
    pub fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            rgba: vec![0; width as usize * height as usize * 4],
        }
    }

    /// Copies a decoded rectangle in, clipped to the screen. The server is
    /// not trusted: a short buffer is an error, not a panic.
    pub fn apply_raw(&mut self, rect: Rect, data: &[u8]) -> Result<(), FramebufferError> {
        let (w, h) = (usize::from(rect.width), usize::from(rect.height));
        if data.len() < w * h * 4 {
            return Err(FramebufferError::ShortRect(rect, data.len(), w * h * 4));
        }
        let (x0, y0) = (usize::from(rect.x), usize::from(rect.y));
        let visible_w = w.min((self.width as usize).saturating_sub(x0));
        for row in 0..h {
            let y = y0 + row;
            if y >= self.height as usize || visible_w == 0 {
                break;
            }
            let src = &data[row * w * 4..(row * w + visible_w) * 4];
            let dst = (y * self.width as usize + x0) * 4;
            self.rgba[dst..dst + visible_w * 4].copy_from_slice(src);
        }
        Ok(())
    }

    /// CopyRect: moves `src` to `dst` (they may overlap).
    pub fn apply_copy(&mut self, dst: Rect, src: Rect) {
        let region = self.crop(
            src.x.into(),
            src.y.into(),
            dst.width.into(),
            dst.height.into(),
        );
        let rect = Rect {
            x: dst.x,
            y: dst.y,
            width: region.width as u16,
            height: region.height as u16,
        };
        let _ = self.apply_raw(rect, &region.rgba);
    }

    /// The region at `(x, y)` of size `w`×`h`, clipped to the screen.
    pub fn crop(&self, x: u32, y: u32, w: u32, h: u32) -> Framebuffer {
        let x = x.min(self.width);
        let y = y.min(self.height);
        let w = w.min(self.width - x);
        let h = h.min(self.height - y);
        let mut out = Framebuffer::new(w, h);
        for row in 0..h as usize {
            let src = ((y as usize + row) * self.width as usize + x as usize) * 4;
            let dst = row * w as usize * 4;
            out.rgba[dst..dst + w as usize * 4]
                .copy_from_slice(&self.rgba[src..src + w as usize * 4]);
        }
        out
    }

    /// RGB bytes (alpha dropped), for encoders.
    pub fn rgb(&self) -> Vec<u8> {
        self.rgba
            .chunks_exact(4)
            .flat_map(|px| [px[0], px[1], px[2]])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: u16, y: u16, width: u16, height: u16) -> Rect {
        Rect {
            x,
            y,
            width,
            height,
        }
    }

    #[test]
    fn raw_rect_is_clipped_and_short_data_refused() {
        let mut fb = Framebuffer::new(4, 4);
        let data = vec![7u8; 3 * 3 * 4];
        fb.apply_raw(rect(2, 2, 3, 3), &data).unwrap();
        assert_eq!(fb.rgba[(2 * 4 + 2) * 4], 7);
        assert_eq!(fb.rgba[(3 * 4 + 3) * 4], 7);
        assert_eq!(fb.rgba[(4 + 1) * 4], 0);
        assert!(fb.apply_raw(rect(0, 0, 4, 4), &[0u8; 10]).is_err());
        // Entirely off-screen: ignored, no panic.
        fb.apply_raw(rect(60000, 60000, 3, 3), &data).unwrap();
    }

    #[test]
    fn copy_moves_pixels_and_crop_clips() {
        let mut fb = Framebuffer::new(4, 2);
        fb.apply_raw(rect(0, 0, 1, 1), &[1, 2, 3, 255]).unwrap();
        fb.apply_copy(rect(3, 1, 1, 1), rect(0, 0, 1, 1));
        assert_eq!(&fb.rgba[(4 + 3) * 4..(4 + 3) * 4 + 4], &[1, 2, 3, 255]);
        let part = fb.crop(3, 1, 10, 10);
        assert_eq!((part.width, part.height), (1, 1));
        assert_eq!(part.rgb(), vec![1, 2, 3]);
    }
}
