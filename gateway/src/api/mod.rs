//! The REST handlers, one module per resource. Their routes are mounted,
//! beside the other doors', by [`crate::router`].

pub mod actions;
pub mod approvals;
pub mod body;
pub mod clipboard;
pub mod control;
pub mod downloads;
pub mod events;
pub mod exec;
pub mod files;
pub mod profiles;
pub mod replay;
pub mod secrets;
pub mod shares;
pub mod snapshots;
pub mod tokens;
pub mod uploads;
pub mod webhooks;
pub mod workspaces;
