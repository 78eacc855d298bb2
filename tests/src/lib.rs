//! Harness for Cubicle's end-to-end tests: starts the real `cubicle serve`
//! on a loopback port with a temporary data directory, and speaks to it with
//! real clients (HTTP, an RFB client over the live-view WebSocket, the guest
//! channel). A test this host cannot run says so with [`skip`].
//!
//! The binaries are taken from the same target directory as the test
//! (`cargo build --workspace` first; `scripts/test` does).

pub mod browser;
pub mod cdp;
pub mod cgroup;
pub mod cluster;
pub mod daemon;
pub mod desk;
pub mod guest;
pub mod netns;
pub mod origin;
pub mod procs;
pub mod rfb;
pub mod skip;
pub mod stats;

pub use daemon::Daemon;
pub use skip::skip;

/// The repository's root (tests/ lives in it).
pub fn repo() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository")
}

/// Whether the tests run inside the nested test host (`scripts/nested`),
/// where QEMU emulates the CPU and everything is tens of times slower.
pub fn nested() -> bool {
    std::env::var_os("CUBICLE_NESTED").is_some()
}

/// A hang guard: `base`, or twenty times it inside the nested test host. A
/// bound on waiting, never a timing assertion.
pub fn guard(base: std::time::Duration) -> std::time::Duration {
    if nested() { base * 20 } else { base }
}
