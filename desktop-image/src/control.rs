//! The control service (guest port 1024): JSON lines, one request and one
//! reply per line.
//!
//! Requests are `{"op": "health"}`; the reply is a [`Health`] report. Later
//! operations (exec, files) are added as new `op` values.

use serde::{Deserialize, Serialize};

/// The longest request line the guest accepts.
pub const MAX_REQUEST: usize = 64 * 1024;

/// A request on the control port.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Report the state of every supervised service and overall readiness.
    Health,
}

/// One supervised process as the guest sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceStatus {
    pub name: String,
    /// `starting`, `running`, `restarting` or `failed`.
    pub state: String,
    /// Whether its readiness probe passed (RFB banner, CDP `/json/version`).
    pub ready: bool,
    pub restarts: u32,
    /// How the last run ended, if it did.
    pub last_exit: Option<String>,
}

/// The reply to [`Request::Health`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Health {
    /// Xvnc answers RFB and Chromium answers `/json/version`.
    pub ready: bool,
    /// Set when the workspace cannot become ready; the reason for a human.
    pub failed: Option<String>,
    pub services: Vec<ServiceStatus>,
}

/// The reply to a request the guest could not serve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorReply {
    pub error: String,
}
