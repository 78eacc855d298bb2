//! `cubicle-recorder` will own replays: frames to fragmented MP4 (ffmpeg-next),
//! the event log and its SHA-256 hash chain, export and offline verification.
//!
//! Nothing is recorded yet: this crate is a placeholder in the workspace so
//! that the dependency direction (gateway → recorder) is fixed from the start.
