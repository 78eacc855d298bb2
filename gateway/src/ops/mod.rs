//! The operations core: one function per operation, whichever door
//! (REST, WebSocket, MCP over HTTP or stdio, the CDP proxy, the live view)
//! it came through. Each takes an [`OpContext`] (who, which request, from
//! where), checks the caller's [`Permission`] in the one role table, checks
//! the workspace's owner and the caller's scope ([`access`]), takes the
//! control lock where the operation changes the workspace, writes its
//! event ([`audit`]; no event, no operation) and only then calls the
//! runtime. The doors parse, call and render; nothing else.
//!
//! Read [`access::workspace`] and [`audit::Audit::run`] first.

pub mod access;
pub mod actions;
pub mod activity;
pub mod approvals;
pub mod audit;
pub mod cdp;
pub mod clipboard;
pub mod context;
pub mod control;
mod core;
pub mod downloads;
pub mod egress;
pub mod egress_gate;
pub mod events;
pub mod exec;
pub mod expiry;
pub mod files;
pub mod gates;
pub mod guard_rails;
pub mod har;
pub mod host;
pub mod live_view;
pub mod permission;
pub mod profiles;
pub mod replay;
pub mod secret_fill;
pub mod secrets;
pub mod shares;
pub mod snapshots;
pub mod tokens;
pub mod uploads;
pub mod webhooks;
pub mod workspaces;

pub use self::core::Core;
pub use audit::EventKind;
pub use context::OpContext;
pub use permission::Permission;
