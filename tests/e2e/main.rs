//! Cubicle's end-to-end tests, in one binary: each module is one feature
//! tried on a real `cubicle serve` with real clients. One binary links once
//! and runs its tests side by side (`--test-threads`), instead of one
//! binary per file run one after another.
//!
//! Fixtures live in the `cubicle_tests` library (`tests/src/`); each daemon
//! a test starts gets a uid range of its own from it. A test this host
//! cannot run calls `cubicle_tests::skip` and returns, and `scripts/test`
//! counts it as skipped, not passed. Run one module with
//! `cargo test -p cubicle-tests --test e2e <module>::`.

mod actions;
mod approvals_wait;
mod browser_focus;
mod cdp;
mod cdp_parked;
mod checkpoints;
mod cli_remote;
mod clipboard;
mod cluster;
mod control_attacks;
mod devtools_reach;
mod doors;
mod egress;
mod egress_no_intercept;
mod egress_policy;
mod every_door;
mod exec_files;
mod first_light;
mod first_start;
mod gates;
mod geometry;
mod guard_rails;
mod image;
mod isolation;
mod lifecycle;
mod limits;
mod limits_asked;
mod live_view_log;
mod mcp;
mod memory_snapshots;
mod microvm;
mod namespaces;
mod operator;
mod pause;
mod policy_file_errors;
mod pool;
mod profiles;
mod python_client;
mod readme;
mod recording_frames;
mod replay;
mod request_ids;
mod restarts;
mod schemathesis;
mod scopes;
mod secrets;
mod share;
mod snapshots;
mod survive;
mod time_limits;
mod ts_client;
mod ttl_restart;
mod uploads;
mod walls;
mod webhooks;
