//! The HTTP API on a Unix socket (see README.md).

use std::path::Path;
use std::process::ExitCode;

use crate::vmm::Vmm;

/// Errors serving the API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Not yet.
    #[error("not implemented")]
    Todo,
}

/// Serves until stop.
pub fn serve_until_stopped(_socket: &Path, _seccomp: bool) -> Result<ExitCode, ApiError> {
    Err(ApiError::Todo)
}

/// Serves a built VM.
pub fn serve_running(_socket: &Path, _vmm: Vmm, _seccomp: bool) -> Result<ExitCode, ApiError> {
    Err(ApiError::Todo)
}
