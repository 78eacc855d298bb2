//! Harness for Cubicle's end-to-end tests: starts the real `cubicle serve`
//! on a loopback port with a temporary data directory, and speaks to it with
//! real clients (HTTP, an RFB client over the live-view WebSocket, the guest
//! channel). A test this host cannot run says so with [`skip`].
//!
//! The binaries are taken from the same target directory as the test
//! (`cargo build --workspace` first; `scripts/test` does).

pub mod cdp;
pub mod cgroup;
pub mod daemon;
pub mod desk;
pub mod guest;
pub mod origin;
pub mod procs;
pub mod rfb;
pub mod skip;
pub mod stats;

pub use daemon::Daemon;
pub use skip::skip;
