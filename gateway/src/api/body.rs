//! The request body of the handlers that parse their own (JSON with
//! [`crate::wire::parse`], a file's bytes): a body axum cannot take (over
//! the route's limit, cut off) is refused as the API's JSON error, 413
//! `too_large` or 400 `bad_request`, never axum's plain-text answer.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;

use crate::error::{ErrorKind, OpError};

/// The whole request body, as bytes.
pub struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = OpError;

    async fn from_request(request: Request, state: &S) -> Result<Self, OpError> {
        Bytes::from_request(request, state)
            .await
            .map(Body)
            .map_err(body_error)
    }
}

/// The API error for a body axum could not take.
fn body_error(rejection: BytesRejection) -> OpError {
    let status = rejection.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "too_large"
    } else {
        "bad_request"
    };
    OpError::new(
        ErrorKind::Transport(status),
        code,
        format!("request body: {}", rejection.body_text()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_over_the_limit_is_a_json_413() {
        let request = Request::new(axum::body::Body::from(vec![b' '; 3 * 1024 * 1024]));
        let Err(err) = Body::from_request(request, &()).await else {
            panic!("a body over the default 2 MB limit was taken");
        };
        assert_eq!(
            (err.kind.status(), err.code),
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
        );
        assert!(err.message.starts_with("request body:"), "{}", err.message);
    }
}
