//! API errors: a status and a JSON body `{"error": {"code", "message"}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cubicle_image::control::ErrorCode;
use cubicle_runtime::guest_ops::GuestOpError;
use cubicle_runtime::manager::ManagerError;
use serde_json::json;

/// An error as the API client sees it.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// More fields of the answer's body, beside `error` (a held
    /// operation's `approval`).
    pub details: Option<Box<serde_json::Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The same error with more fields in its body (`details` must be an object).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(Box::new(details));
        self
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
        let mut body = json!({ "error": { "code": self.code, "message": self.message } });
        if let (Some(details), Some(fields)) = (self.details, body.as_object_mut())
            && let serde_json::Value::Object(details) = *details
        {
            fields.extend(details);
        }
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

/// The API's code and status for a guest's error code.
fn guest_code(code: ErrorCode) -> (StatusCode, &'static str) {
    match code {
        ErrorCode::BadRequest => (StatusCode::BAD_REQUEST, "bad_request"),
        ErrorCode::NotAbsolute => (StatusCode::BAD_REQUEST, "not_absolute"),
        ErrorCode::BadPath => (StatusCode::BAD_REQUEST, "bad_path"),
        ErrorCode::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        ErrorCode::IsADirectory => (StatusCode::BAD_REQUEST, "is_a_directory"),
        ErrorCode::NotADirectory => (StatusCode::BAD_REQUEST, "not_a_directory"),
        ErrorCode::NotEmpty => (StatusCode::CONFLICT, "not_empty"),
        ErrorCode::SpecialFile => (StatusCode::BAD_REQUEST, "special_file"),
        ErrorCode::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        ErrorCode::PermissionDenied => (StatusCode::FORBIDDEN, "permission_denied"),
        ErrorCode::NoSpace => (StatusCode::INSUFFICIENT_STORAGE, "no_space"),
        ErrorCode::NotExecutable => (StatusCode::BAD_REQUEST, "not_executable"),
        ErrorCode::Io => (StatusCode::BAD_GATEWAY, "guest_error"),
    }
}

impl From<GuestOpError> for ApiError {
    fn from(err: GuestOpError) -> Self {
        let message = err.to_string();
        let (status, code) = match &err {
            GuestOpError::Invalid(invalid) => guest_code(invalid.code),
            GuestOpError::TooLarge { .. } => guest_code(ErrorCode::TooLarge),
            GuestOpError::Guest { code, .. } => guest_code(*code),
            GuestOpError::Channel(_) | GuestOpError::Io(_) => {
                (StatusCode::BAD_GATEWAY, "guest_unreachable")
            }
            GuestOpError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "guest_timeout"),
            GuestOpError::BadReply(_) => (StatusCode::BAD_GATEWAY, "guest_error"),
        };
        ApiError::new(status, code, message)
    }
}
