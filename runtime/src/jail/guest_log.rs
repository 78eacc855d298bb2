//! The jail's stdout and stderr go to the root-owned `<dir>/guest.log`,
//! at most [`MAX_LOG`] bytes of it, through a pipe its shim drains
//! (`cubicle-shim`).
//!
//! Why not hand the jail the file itself: every process that inherits the
//! descriptor could seek and overwrite what was logged before it, or fill
//! the host's disk, since `guest.log` lies outside the workspace's own disk.
//! Through a pipe the jail can only add bytes at the end, and no more than
//! the cap.

/// The most a jail writes to its `guest.log` per start.
pub const MAX_LOG: u64 = 8 * 1024 * 1024;
