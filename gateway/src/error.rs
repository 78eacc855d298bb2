//! API errors: a status and a JSON body `{"error": {"code", "message"}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cubicle_runtime::manager::ManagerError;
use serde_json::json;

/// An error as the API client sees it.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, message = %self.message, "request failed");
        }
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}

impl From<ManagerError> for ApiError {
    fn from(err: ManagerError) -> Self {
        let message = err.to_string();
        match err {
            ManagerError::NotFound(_) => Self::new(StatusCode::NOT_FOUND, "not_found", message),
            ManagerError::Conflict { .. } => Self::new(StatusCode::CONFLICT, "conflict", message),
            ManagerError::StartFailed { .. } => {
                Self::new(StatusCode::BAD_GATEWAY, "start_failed", message)
            }
            ManagerError::NoUid => Self::new(StatusCode::SERVICE_UNAVAILABLE, "capacity", message),
            ManagerError::Backend(_) | ManagerError::State(_) => Self::internal(message),
        }
    }
}
