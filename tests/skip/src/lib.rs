//! Tests that cannot run on this host, reported as skipped rather than
//! passed. libtest has no run-time skip: such a test calls [`skip`] and
//! returns (libtest then counts it as passed), and `scripts/test` moves it
//! from passed to skipped by counting the lines [`skip`] wrote, and fails
//! when a test skips that `.ci/skips` does not list for this kind of host.
//!
//! Its own crate, with no dependencies, so that every crate's unit tests
//! can use it (the end-to-end harness, `cubicle-tests`, depends on the
//! product crates and so cannot be their dev-dependency).

use std::io::Write;

/// The file `scripts/test` names for skip lines; each skipped test appends
/// one line `cubicle-skip: <test>: <reason>`.
pub const SKIP_LOG_ENV: &str = "CUBICLE_SKIP_LOG";

/// Set to `1` (CI on a host with hardware virtualization) to make "this
/// host has no usable KVM" a failure instead of a skip.
pub const REQUIRE_KVM_ENV: &str = "CUBICLE_REQUIRE_KVM";

/// Records that the running test is skipped and why. Call it and return:
///
/// ```text
/// if !is_root() {
///     return cubicle_skip::skip("needs root to chown");
/// }
/// ```
///
/// The line names the test by its libtest thread (`module::test_name`, as
/// in `test module::test_name ... ok`). It also goes to the real stderr,
/// past libtest's capture of passing tests' output, so `cargo test` shows
/// it too.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let line = format!("cubicle-skip: {test}: {reason}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    let Some(path) = std::env::var_os(SKIP_LOG_ENV) else {
        return;
    };
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut log| log.write_all(line.as_bytes()));
    // A skip that is not counted would show as a pass: fail loudly instead.
    if let Err(err) = written {
        panic!(
            "cannot append to the skip log {} ({SKIP_LOG_ENV}): {err}",
            std::path::Path::new(&path).display()
        );
    }
}

/// Whether [`REQUIRE_KVM_ENV`] is `1`.
pub fn kvm_required() -> bool {
    std::env::var_os(REQUIRE_KVM_ENV).is_some_and(|v| v == "1")
}

/// [`skip`] for a test that needs hardware virtualization this host lacks;
/// where [`REQUIRE_KVM_ENV`] is `1` it fails the test instead.
pub fn skip_without_kvm(reason: &str) {
    assert!(
        !kvm_required(),
        "{REQUIRE_KVM_ENV}=1, but this host cannot run the test: {reason}"
    );
    skip(reason);
}

/// Whether the test runs as root (the unit tests that make namespaces,
/// mounts or other uids need it; as anyone else they skip).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

unsafe extern "C" {
    fn geteuid() -> u32;
}
