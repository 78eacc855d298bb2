//! Health for a service manager or Kubernetes: `GET /healthz` answers while
//! the process serves (liveness); `GET /readyz` answers 200 only when the
//! daemon can do its work — its own database answers and, on a cluster
//! node, so does the shared store (readiness). No token: they say nothing
//! of any workspace.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cubicle_runtime::cluster::ClusterStore;
use serde_json::json;

use crate::app::AppState;

/// 200 `{"ready": true}`, or 503 with the reason.
pub async fn ready(State(state): State<AppState>) -> Response {
    let local = local_ready(&state).await;
    let cluster = match &state.cluster {
        Some(store) => store.nodes().await.map(|_| ()).map_err(|e| e.to_string()),
        None => Ok(()),
    };
    match local.and(cluster) {
        Ok(()) => Json(json!({ "ready": true })).into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "ready": false, "reason": reason })),
        )
            .into_response(),
    }
}

async fn local_ready(state: &AppState) -> Result<(), String> {
    state
        .manager
        .list()
        .await
        .map(|_| ())
        .map_err(|e| format!("the state database: {e}"))
}
