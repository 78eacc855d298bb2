//! The operations' error: what kind of refusal or failure it is, a stable
//! code and a message naming the input and what to do. It knows nothing of
//! HTTP: the REST doors map its kind to a status once ([`ErrorKind::status`],
//! in [`IntoResponse`]); the MCP door answers it as a tool error carrying
//! the same code (`mcp::server`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cubicle_image::control::ErrorCode;
use cubicle_runtime::guest_ops::GuestOpError;
use cubicle_runtime::manager::ManagerError;
use serde_json::json;

/// What kind of refusal or failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Input the caller chose is wrong (the message names it).
    BadRequest,
    /// No valid token.
    Unauthorized,
    /// The caller may not do this.
    Forbidden,
    /// No such thing, or one outside the caller's scope.
    NotFound,
    /// Not in a state this applies to (or held by someone else).
    Conflict,
    /// It existed and is gone for good.
    Gone,
    /// Over a size limit.
    TooLarge,
    /// Too many of the caller's requests are pending.
    TooMany,
    /// Held for a person's approval: not done yet, ask again.
    Held,
    /// The workspace's disk is full.
    NoSpace,
    /// The gateway cannot do it now (its event log, its capacity).
    Unavailable,
    /// The workspace (its guest, display or browser) did not answer or
    /// failed to.
    Unreachable,
    /// The workspace did not answer in time.
    Timeout,
    /// A fault of the gateway itself.
    Internal,
    /// A door's own refusal of the transport, before any operation runs
    /// (a WebSocket upgrade it cannot take): HTTP's status as it is.
    Transport(StatusCode),
}

impl ErrorKind {
    /// The HTTP status of this kind: the one place the two meet.
    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Conflict => StatusCode::CONFLICT,
            Self::Gone => StatusCode::GONE,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::TooMany => StatusCode::TOO_MANY_REQUESTS,
            Self::Held => StatusCode::ACCEPTED,
            Self::NoSpace => StatusCode::INSUFFICIENT_STORAGE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unreachable => StatusCode::BAD_GATEWAY,
            Self::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Transport(status) => status,
        }
    }
}

/// An error of an operation, as every door answers it.
#[derive(Debug, Clone)]
pub struct OpError {
    pub kind: ErrorKind,
    pub code: &'static str,
    pub message: String,
    /// More fields of the answer's body, beside `error` (a held
    /// operation's `approval`).
    pub details: Option<Box<serde_json::Value>>,
}

impl OpError {
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
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
        Self::new(ErrorKind::BadRequest, "bad_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, "forbidden", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, "internal", message)
    }
}

impl IntoResponse for OpError {
    fn into_response(self) -> Response {
        let status = self.kind.status();
        if status.is_server_error() {
            tracing::error!(code = self.code, message = %self.message, "request failed");
        }
        let mut body = json!({ "error": { "code": self.code, "message": self.message } });
        if let (Some(details), Some(fields)) = (self.details, body.as_object_mut())
            && let serde_json::Value::Object(details) = *details
        {
            fields.extend(details);
        }
        (status, Json(body)).into_response()
    }
}

impl From<ManagerError> for OpError {
    fn from(err: ManagerError) -> Self {
        let message = err.to_string();
        match err {
            ManagerError::NotFound(_) => Self::new(ErrorKind::NotFound, "not_found", message),
            ManagerError::Conflict { .. } => Self::new(ErrorKind::Conflict, "conflict", message),
            ManagerError::StartFailed { .. } => {
                Self::new(ErrorKind::Unreachable, "start_failed", message)
            }
            ManagerError::NoUid => Self::new(ErrorKind::Unavailable, "capacity", message),
            ManagerError::Backend(_) | ManagerError::State(_) => Self::internal(message),
        }
    }
}

/// The API's code and status for a guest's error code.
fn guest_code(code: ErrorCode) -> (ErrorKind, &'static str) {
    match code {
        ErrorCode::BadRequest => (ErrorKind::BadRequest, "bad_request"),
        ErrorCode::NotAbsolute => (ErrorKind::BadRequest, "not_absolute"),
        ErrorCode::BadPath => (ErrorKind::BadRequest, "bad_path"),
        ErrorCode::NotFound => (ErrorKind::NotFound, "not_found"),
        ErrorCode::IsADirectory => (ErrorKind::BadRequest, "is_a_directory"),
        ErrorCode::NotADirectory => (ErrorKind::BadRequest, "not_a_directory"),
        ErrorCode::NotEmpty => (ErrorKind::Conflict, "not_empty"),
        ErrorCode::SpecialFile => (ErrorKind::BadRequest, "special_file"),
        ErrorCode::TooLarge => (ErrorKind::TooLarge, "too_large"),
        ErrorCode::PermissionDenied => (ErrorKind::Forbidden, "permission_denied"),
        ErrorCode::NoSpace => (ErrorKind::NoSpace, "no_space"),
        ErrorCode::NotExecutable => (ErrorKind::BadRequest, "not_executable"),
        ErrorCode::Io => (ErrorKind::Unreachable, "guest_error"),
    }
}

impl From<GuestOpError> for OpError {
    fn from(err: GuestOpError) -> Self {
        let message = err.to_string();
        let (kind, code) = match &err {
            GuestOpError::Invalid(invalid) => guest_code(invalid.code),
            GuestOpError::TooLarge { .. } => guest_code(ErrorCode::TooLarge),
            GuestOpError::Guest { code, .. } => guest_code(*code),
            GuestOpError::Channel(_) | GuestOpError::Io(_) => {
                (ErrorKind::Unreachable, "guest_unreachable")
            }
            GuestOpError::Timeout(_) => (ErrorKind::Timeout, "guest_timeout"),
            GuestOpError::BadReply(_) => (ErrorKind::Unreachable, "guest_error"),
        };
        OpError::new(kind, code, message)
    }
}
