//! `GET /v1/events`: the event log (workspace lifecycle, control taken and
//! handed back, tokens made and revoked), oldest first, for auditors,
//! operators and admins. Paged by `after` (the last id seen) and `limit`.

use axum::Json;
use axum::extract::{Query, State};
use cubicle_runtime::events::{self, Actor};
use cubicle_runtime::tokens::Role;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

/// Most events one page returns.
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize)]
pub struct EventQuery {
    workspace: Option<String>,
    #[serde(default)]
    after: i64,
    limit: Option<u32>,
}

#[utoipa::path(get, path = "/v1/events", tag = "audit",
    params(("workspace" = Option<String>, Query, description = "Only this workspace's events"),
        ("after" = Option<i64>, Query, description = "Events after this id"),
        ("limit" = Option<u32>, Query, description = "1..=1000, default 100")),
    responses((status = 200, description = "{\"events\": [{id, at, kind, workspace_id, actor, detail}]}"),
        (status = 400, body = crate::openapi::ErrorBody), (status = 401, body = crate::openapi::ErrorBody),
        (status = 403, body = crate::openapi::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    caller.require(&[Role::Auditor, Role::Operator], "read the event log")?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={MAX_LIMIT}, got {limit}"
        )));
    }
    let events = events::list(&state.store, query.workspace.as_deref(), query.after, limit)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(json!({ "events": events })))
}

/// Records that `caller` did `kind` to workspace `id`. A failure to record
/// is logged loudly: the action itself already happened.
pub async fn record(state: &AppState, caller: &Caller, kind: &str, id: &str, detail: Value) {
    let actor = Actor::from(&caller.token);
    if let Err(err) = events::record(&state.store, kind, Some(id), Some(&actor), &detail).await {
        tracing::error!(%err, kind, workspace = id, "cannot record an event");
    }
}
