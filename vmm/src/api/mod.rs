//! The control API: HTTP/1.1 on a Unix socket, JSON bodies (see README.md).
//! One VM per process: configure it, start it, pause/resume it, read its
//! metrics, stop it. When the VM stops (by API or by the guest) the process
//! exits and removes its socket.

pub mod http;
pub mod server;

pub use server::{OpError, serve_running, serve_until_stopped};
