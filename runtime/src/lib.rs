//! `cubicle-runtime`: workspaces' lifecycle and state on one host.
//!
//! It owns the workspace state machine and its SQLite store ([`state`]), the
//! isolation backends behind one trait ([`backend::Backend`]: the bubblewrap
//! [`jail`] and the [`microvm`] on `cubicle-vmm`, chosen per host through
//! [`any_backend::AnyBackend`]), the guest channel to `cubicle-guest` inside each
//! workspace ([`channel`]), the desktop image on disk ([`image`]) and host
//! detection ([`host`]). It does not own HTTP, auth or the live view (that is
//! `cubicle-gateway`), nor the VMM (`cubicle-vmm`, reached as a process).
//!
//! Start with [`manager::Manager`]: every workspace operation goes through it,
//! and it writes each state change before reporting it.

pub mod any_backend;
pub mod approval_rows;
pub mod backend;
pub mod chain_store;
pub mod channel;
pub mod cluster;
pub mod egress;
pub mod events;
pub mod geometry;
pub mod guest_ops;
pub mod host;
pub mod image;
pub mod jail;
pub mod lifecycle;
pub mod limits;
pub mod manager;
pub mod microvm;
pub mod pool;
pub mod proc_scan;
pub mod profiles;
pub mod quarantine;
pub mod rootfs_modes;
pub mod secret_rows;
pub mod shim;
pub mod snapshots;
pub mod sparse_copy;
pub mod state;
pub mod time_limits;
pub mod tokens;
pub mod uid_lease;
pub mod unprivileged;
pub mod webhook_rows;
pub mod workspace_policy;
