//! The fixed table of guest services reachable over the guest channel.
//!
//! | port | service | speaks |
//! | ---- | ------- | ------ |
//! | 5900 | Xvnc on display :0 | RFB 3.8 |
//! | 9222 | Chromium's DevTools, served by `cubicle-guest` over Chromium's DevTools pipe (Chromium listens on no port) | HTTP discovery (`/json/version`, `/json/list`, `/json/new`, `/json/activate`, `/json/close`) + WebSocket (CDP), one session per client |
//! | 1024 | `cubicle-guest` control | JSON lines, see [`crate::control`] |
//!
//! No other port is ever forwarded: the guest answers `ERR` and closes.

/// Xvnc's RFB listener inside the workspace.
pub const RFB: u16 = 5900;
/// Chromium's DevTools (CDP), served by the supervisor over Chromium's
/// DevTools pipe: the guest channel's port, not a port inside the workspace.
pub const CDP: u16 = 9222;
/// The supervisor's own control service (health, readiness).
pub const CONTROL: u16 = 1024;

/// Every port the guest channel accepts.
pub const ALLOWED: [u16; 3] = [RFB, CDP, CONTROL];

/// Whether the guest channel forwards `port`.
pub fn is_allowed(port: u16) -> bool {
    ALLOWED.contains(&port)
}
