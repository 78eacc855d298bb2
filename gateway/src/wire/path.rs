//! Path parameters (`{id}`, `{target}`, `{file}`): one that axum cannot
//! take (not UTF-8 once percent-decoded, say `%FF`) is refused as the API's
//! JSON 400 naming the path, never axum's plain-text answer.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::OpError;

/// The route's path parameters, as `T`.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = OpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, OpError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|path| Path(path.0))
            .map_err(|rejection| {
                OpError::bad_request(format!(
                    "path {}: {} (ids are ASCII; percent-encode nothing else)",
                    parts.uri.path(),
                    rejection.body_text()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn an_id_that_is_not_utf8_is_a_json_400_naming_the_path() {
        let app = Router::new().route(
            "/v1/workspaces/{id}",
            get(|Path(id): Path<String>| async move { id }),
        );
        let request = Request::get("/v1/workspaces/%FF")
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["code"], "bad_request", "{json}");
        assert!(
            json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("/v1/workspaces/%FF"),
            "{json}"
        );
        // A good one passes through.
        let request = Request::get("/v1/workspaces/ws-1")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
}
