//! Run-time skips, counted by `scripts/test` (see the `cubicle-skip`
//! crate, which every crate's tests share).

pub use cubicle_skip::{REQUIRE_KVM_ENV, SKIP_LOG_ENV, skip, skip_without_kvm};
