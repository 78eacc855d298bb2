//! Frames to video: H.264 (libx264, preset fast) in fragmented MP4, one
//! file per segment (a minute by default), written by FFmpeg through
//! ffmpeg-next.
//!
//! Frames come only when the screen changed, each stamped with its wall
//! clock time: a segment's time 0 is its first frame's `at_ms`, and every
//! frame sits at `at_ms - start_ms` (time base 1/1000), so the video's clock
//! is the event log's clock. A keyframe is forced every `keyframe_every`,
//! and each keyframe starts a new MP4 fragment (`frag_keyframe`,
//! `empty_moov`): a process killed mid-segment leaves a file whose finished
//! fragments play.
//!
//! [`Encoder`] runs on a thread of its own (the caller's: it blocks while
//! it encodes); [`run`] is that thread's loop over a bounded channel.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use ffmpeg::{Dictionary, Rational, codec, encoder, format, frame, picture, software};
use ffmpeg_next as ffmpeg;

use crate::audit_chain::Hash;
use crate::bundle::digest_reader;

/// What can go wrong recording.
#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    #[error("FFmpeg has no libx264 encoder: install Debian's libavcodec (it includes libx264)")]
    NoX264,
    #[error("FFmpeg failed to {what} for {path}: {source}")]
    Ffmpeg {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: ffmpeg::Error,
    },
    #[error("cannot write recording file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("a frame of {width}x{height} carries {got} bytes, not {expected}")]
    BadFrame {
        width: u32,
        height: u32,
        got: usize,
        expected: usize,
    },
}

/// One screen image, RGBA, and when it was on screen.
#[derive(Debug, Clone)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
    /// Unix milliseconds.
    pub at_ms: i64,
}

/// What the encoder thread is fed.
#[derive(Debug)]
pub enum Feed {
    Frame(Frame),
    /// Throw away the open segment (its workspace asked not to be recorded)
    /// and stop.
    Discard,
}

/// How to record.
#[derive(Debug, Clone)]
pub struct VideoOptions {
    /// Where segment files go.
    pub dir: PathBuf,
    pub fps: u32,
    pub segment: Duration,
    pub keyframe_every: Duration,
}

/// A finished segment file, ready to be sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedSegment {
    pub file: String,
    pub path: PathBuf,
    pub sha256: Hash,
    pub bytes: u64,
    /// Wall clock of its time 0 and of its end, Unix ms.
    pub start_ms: i64,
    pub end_ms: i64,
    pub frames: u64,
    /// Cut short (the daemon died while it was open).
    pub partial: bool,
}

/// What an encoder did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    pub frames: u64,
    pub segments: u64,
    pub bytes: u64,
}

fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        // Only fails for a broken libavformat; the first open then says so.
        let _ = ffmpeg::init();
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Error);
    });
}

/// The segment file name for a segment starting at `start_ms`.
pub fn segment_name(start_ms: i64) -> String {
    format!("seg-{start_ms}.mp4")
}

/// The start time a segment file name carries.
pub fn segment_start(name: &str) -> Option<i64> {
    name.strip_prefix("seg-")?
        .strip_suffix(".mp4")?
        .parse()
        .ok()
}

/// One fragmented MP4 file being written.
struct SegmentWriter {
    output: format::context::Output,
    encoder: encoder::Video,
    scaler: software::scaling::Context,
    rgba: frame::Video,
    yuv: frame::Video,
    stream_time_base: Rational,
    path: PathBuf,
    file: String,
    width: u32,
    height: u32,
    start_ms: i64,
    last_pts: i64,
    last_key_pts: i64,
    frames: u64,
}

const MS: Rational = Rational(1, 1000);

impl SegmentWriter {
    fn create(options: &VideoOptions, first: &Frame) -> Result<Self, VideoError> {
        let mut start_ms = first.at_ms;
        let mut file = segment_name(start_ms);
        while options.dir.join(&file).exists() {
            start_ms += 1;
            file = segment_name(start_ms);
        }
        let path = options.dir.join(&file);
        let fail = |what| {
            let path = path.clone();
            move |source| VideoError::Ffmpeg { what, path, source }
        };
        let mut output = format::output_as(&path, "mp4").map_err(fail("open the MP4 muxer"))?;
        let codec = encoder::find_by_name("libx264").ok_or(VideoError::NoX264)?;
        let global_header = output
            .format()
            .flags()
            .contains(format::Flags::GLOBAL_HEADER);
        // H.264 4:2:0 needs even sizes: an odd last row or column is cut.
        let (width, height) = (first.width & !1, first.height & !1);
        let mut stream = output.add_stream(codec).map_err(fail("add a stream"))?;
        let mut setup = codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(fail("make the encoder"))?;
        setup.set_width(width);
        setup.set_height(height);
        setup.set_format(format::Pixel::YUV420P);
        setup.set_time_base(MS);
        setup.set_frame_rate(Some(Rational(options.fps as i32, 1)));
        setup.set_max_b_frames(0);
        // Keyframes are forced by time (frames come only on change).
        setup.set_gop(u32::MAX >> 1);
        if global_header {
            setup.set_flags(codec::Flags::GLOBAL_HEADER);
        }
        let mut x264 = Dictionary::new();
        x264.set("preset", "fast");
        x264.set("tune", "zerolatency");
        x264.set("forced-idr", "1");
        // One thread per recording: many workspaces share the host's cores.
        x264.set("threads", "1");
        let encoder = setup.open_with(x264).map_err(fail("open libx264"))?;
        stream.set_parameters(&encoder);
        stream.set_time_base(MS);
        let mut mux = Dictionary::new();
        mux.set("movflags", "frag_keyframe+empty_moov+default_base_moof");
        mux.set("flush_packets", "1");
        output
            .write_header_with(mux)
            .map_err(fail("write the MP4 header"))?;
        let stream_time_base = output.stream(0).map(|s| s.time_base()).unwrap_or(MS);
        let scaler = software::scaling::Context::get(
            format::Pixel::RGBA,
            first.width,
            first.height,
            format::Pixel::YUV420P,
            width,
            height,
            software::scaling::Flags::FAST_BILINEAR,
        )
        .map_err(fail("make the colour converter"))?;
        Ok(Self {
            output,
            encoder,
            scaler,
            rgba: frame::Video::new(format::Pixel::RGBA, first.width, first.height),
            yuv: frame::Video::new(format::Pixel::YUV420P, width, height),
            stream_time_base,
            path,
            file,
            width: first.width,
            height: first.height,
            start_ms,
            last_pts: -1,
            last_key_pts: i64::MIN / 2,
            frames: 0,
        })
    }

    fn fail(&self, what: &'static str) -> impl FnOnce(ffmpeg::Error) -> VideoError + use<> {
        let path = self.path.clone();
        move |source| VideoError::Ffmpeg { what, path, source }
    }

    fn push(&mut self, frame: &Frame, keyframe_every: Duration) -> Result<(), VideoError> {
        let expected = frame.width as usize * frame.height as usize * 4;
        if frame.rgba.len() != expected {
            return Err(VideoError::BadFrame {
                width: frame.width,
                height: frame.height,
                got: frame.rgba.len(),
                expected,
            });
        }
        let row = frame.width as usize * 4;
        let stride = self.rgba.stride(0);
        let plane = self.rgba.data_mut(0);
        for (y, src) in frame.rgba.chunks_exact(row).enumerate() {
            plane[y * stride..y * stride + row].copy_from_slice(src);
        }
        self.scaler
            .run(&self.rgba, &mut self.yuv)
            .map_err(self.fail("convert a frame to YUV"))?;
        let pts = (frame.at_ms - self.start_ms).max(self.last_pts + 1);
        self.last_pts = pts;
        self.yuv.set_pts(Some(pts));
        let key = pts - self.last_key_pts >= keyframe_every.as_millis() as i64;
        self.yuv.set_kind(if key {
            self.last_key_pts = pts;
            picture::Type::I
        } else {
            picture::Type::None
        });
        self.encoder
            .send_frame(&self.yuv)
            .map_err(self.fail("encode a frame"))?;
        self.frames += 1;
        self.drain()
    }

    fn drain(&mut self) -> Result<(), VideoError> {
        let mut packet = ffmpeg::Packet::empty();
        while self.encoder.receive_packet(&mut packet).is_ok() {
            packet.set_stream(0);
            packet.rescale_ts(MS, self.stream_time_base);
            packet
                .write_interleaved(&mut self.output)
                .map_err(self.fail("write a packet"))?;
        }
        Ok(())
    }

    /// Ends the file at wall time `end_ms` and hashes it.
    fn finish(mut self, end_ms: i64) -> Result<ClosedSegment, VideoError> {
        // The screen as last seen lasts until the end: the last frame again
        // just before and at the end time, so segments played back to back
        // leave no gap (the muxer gives the very last sample the length of
        // the one before it: 1 ms here).
        let tail = end_ms - self.start_ms;
        if self.frames > 0 && tail - 1 > self.last_pts {
            for pts in [tail - 1, tail] {
                self.yuv.set_pts(Some(pts));
                self.yuv.set_kind(picture::Type::None);
                self.encoder
                    .send_frame(&self.yuv)
                    .map_err(self.fail("encode the last frame"))?;
                self.frames += 1;
            }
            self.last_pts = tail;
            self.drain()?;
        }
        self.encoder
            .send_eof()
            .map_err(self.fail("flush the encoder"))?;
        self.drain()?;
        self.output
            .write_trailer()
            .map_err(self.fail("finish the MP4"))?;
        let Self {
            path,
            file,
            start_ms,
            last_pts,
            frames,
            ..
        } = self;
        // The tail frames put its last sample at `end_ms`.
        let end_ms = end_ms.max(start_ms + last_pts);
        sealable(path, file, start_ms, end_ms, frames, false)
    }
}

fn sealable(
    path: PathBuf,
    file: String,
    start_ms: i64,
    end_ms: i64,
    frames: u64,
    partial: bool,
) -> Result<ClosedSegment, VideoError> {
    let io = |source| VideoError::Io {
        path: path.clone(),
        source,
    };
    let digest = digest_reader(std::fs::File::open(&path).map_err(io)?).map_err(io)?;
    Ok(ClosedSegment {
        file,
        sha256: digest.sha256,
        bytes: digest.bytes,
        path,
        start_ms,
        end_ms,
        frames,
        partial,
    })
}

/// A segment file a dead process left open, as it is: hashed, its end
/// taken from its last write.
pub fn orphan(path: &Path) -> Result<Option<ClosedSegment>, VideoError> {
    let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let Some(start_ms) = segment_start(file) else {
        return Ok(None);
    };
    let io = |source| VideoError::Io {
        path: path.to_owned(),
        source,
    };
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(io)?;
    let end_ms = modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(start_ms, |d| d.as_millis() as i64)
        .max(start_ms);
    sealable(path.to_owned(), file.to_owned(), start_ms, end_ms, 0, true).map(Some)
}

/// Segments one recording: opens a new file on the first frame, after each
/// `segment` of time and when the screen size changes.
pub struct Encoder {
    options: VideoOptions,
    current: Option<SegmentWriter>,
    stats: EncoderStats,
}

impl Encoder {
    pub fn new(options: VideoOptions) -> Result<Self, VideoError> {
        init();
        std::fs::create_dir_all(&options.dir).map_err(|source| VideoError::Io {
            path: options.dir.clone(),
            source,
        })?;
        Ok(Self {
            options,
            current: None,
            stats: EncoderStats::default(),
        })
    }

    /// Encodes `frame`; returns the segment it closed, if it began a new one.
    pub fn push(&mut self, frame: &Frame) -> Result<Option<ClosedSegment>, VideoError> {
        let mut closed = None;
        let rotate = self.current.as_ref().is_some_and(|w| {
            frame.at_ms - w.start_ms >= self.options.segment.as_millis() as i64
                || (w.width, w.height) != (frame.width, frame.height)
        });
        if rotate && let Some(writer) = self.current.take() {
            closed = Some(self.close(writer, frame.at_ms)?);
        }
        let writer = match &mut self.current {
            Some(writer) => writer,
            None => self
                .current
                .insert(SegmentWriter::create(&self.options, frame)?),
        };
        writer.push(frame, self.options.keyframe_every)?;
        self.stats.frames += 1;
        Ok(closed)
    }

    fn close(&mut self, writer: SegmentWriter, end_ms: i64) -> Result<ClosedSegment, VideoError> {
        let closed = writer.finish(end_ms)?;
        self.stats.segments += 1;
        self.stats.bytes += closed.bytes;
        Ok(closed)
    }

    /// Closes the open segment at wall time `end_ms`.
    pub fn finish(
        mut self,
        end_ms: i64,
    ) -> Result<(Option<ClosedSegment>, EncoderStats), VideoError> {
        let closed = match self.current.take() {
            Some(writer) => Some(self.close(writer, end_ms)?),
            None => None,
        };
        Ok((closed, self.stats))
    }

    /// Removes the open segment's file unsealed.
    pub fn discard(mut self) -> EncoderStats {
        if let Some(writer) = self.current.take() {
            let path = writer.path.clone();
            drop(writer);
            let _ = std::fs::remove_file(path);
        }
        self.stats
    }
}

/// The encoder thread: encodes what `feed` brings until it closes (then
/// closes the open segment at `now()`) or says [`Feed::Discard`]; hands
/// each closed segment to `closed`.
pub fn run(
    options: VideoOptions,
    feed: Receiver<Feed>,
    now: impl Fn() -> i64,
    mut closed: impl FnMut(ClosedSegment),
) -> Result<EncoderStats, VideoError> {
    let mut encoder = Encoder::new(options)?;
    while let Ok(input) = feed.recv() {
        match input {
            Feed::Frame(frame) => {
                if let Some(segment) = encoder.push(&frame)? {
                    closed(segment);
                }
            }
            Feed::Discard => return Ok(encoder.discard()),
        }
    }
    let (last, stats) = encoder.finish(now())?;
    if let Some(segment) = last {
        closed(segment);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(at_ms: i64, shade: u8) -> Frame {
        let (width, height) = (320, 200);
        let mut rgba = vec![0u8; width as usize * height as usize * 4];
        for (i, px) in rgba.chunks_exact_mut(4).enumerate() {
            px.copy_from_slice(&[shade, (i % 251) as u8, 255 - shade, 255]);
        }
        Frame {
            width,
            height,
            rgba,
            at_ms,
        }
    }

    #[test]
    fn segments_rotate_by_time_and_seal_with_their_hash() {
        let dir = tempfile::tempdir().unwrap();
        let options = VideoOptions {
            dir: dir.path().to_owned(),
            fps: 10,
            segment: Duration::from_secs(2),
            keyframe_every: Duration::from_millis(500),
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let mut sealed = Vec::new();
        let feeder = std::thread::spawn(move || {
            for i in 0..50i64 {
                tx.send(Feed::Frame(frame(1_000_000 + i * 100, (i * 5) as u8)))
                    .unwrap();
            }
        });
        let stats = run(options, rx, || 1_005_000, |s| sealed.push(s)).unwrap();
        feeder.join().unwrap();
        assert_eq!(stats.frames, 50);
        assert_eq!(sealed.len(), 3, "{sealed:#?}");
        assert_eq!(sealed[0].start_ms, 1_000_000);
        assert_eq!(sealed[1].start_ms, 1_002_000);
        assert_eq!(sealed[0].end_ms, 1_002_000);
        assert_eq!(sealed[2].end_ms, 1_005_000);
        for segment in &sealed {
            let bytes = std::fs::read(&segment.path).unwrap();
            assert_eq!(bytes.len() as u64, segment.bytes);
            assert_eq!(&bytes[4..8], b"ftyp");
            assert!(bytes.windows(4).any(|w| w == b"moof"), "fragmented");
            // FFmpeg's own reader agrees, where it is installed.
            if let Ok(out) = std::process::Command::new("ffprobe")
                .args([
                    "-v",
                    "error",
                    "-show_entries",
                    "format=duration",
                    "-of",
                    "csv=p=0",
                ])
                .arg(&segment.path)
                .output()
            {
                let duration: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                assert!(duration > 0.5, "{segment:?}: {duration}");
            }
        }
    }
}
