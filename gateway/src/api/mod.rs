//! The HTTP routes.

pub mod workspaces;

use axum::Router;
use axum::routing::get;

use crate::app::AppState;
use crate::error::ApiError;

/// Every route of the gateway.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/v1/workspaces",
            get(workspaces::list).post(workspaces::create),
        )
        .route(
            "/v1/workspaces/{id}",
            get(workspaces::get).delete(workspaces::delete),
        )
        .route(
            "/v1/workspaces/{id}/start",
            axum::routing::post(workspaces::start),
        )
        .route(
            "/v1/workspaces/{id}/stop",
            axum::routing::post(workspaces::stop),
        )
        .route("/v1/workspaces/{id}/vnc", get(crate::vnc::upgrade))
        .merge(crate::cdp_proxy::routes())
        .merge(crate::web::routes(state.clone()))
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {}", uri.path()),
    )
}
