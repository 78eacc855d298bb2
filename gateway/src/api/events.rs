//! `GET /v1/events`: the event log (workspace lifecycle, control taken and
//! handed back, tokens made and revoked), oldest first, for auditors,
//! operators and admins. Paged by `after` (the last id seen) and `limit`.

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};

#[derive(Debug, Deserialize)]
pub struct EventQuery {
    workspace: Option<String>,
    #[serde(default)]
    after: i64,
    limit: Option<u32>,
}

#[utoipa::path(get, path = "/v1/events", tag = "audit", operation_id = "events",
    params(("workspace" = Option<String>, Query, description = "Only this workspace's events"),
        ("after" = Option<i64>, Query, description = "Events after this id"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "1..=1000, default 100")),
    responses((status = 200, description = "{\"events\": [{id, at, kind, workspace_id, actor, detail}]}"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such `workspace` (deleted ones included), or one outside the token's scope")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, OpError> {
    ops::events::may_list(&ctx)?;
    let Query(query) = query.map_err(|e| OpError::bad_request(e.body_text()))?;
    let limit = query.limit.unwrap_or(100);
    let events =
        ops::events::list(&state, &ctx, query.workspace.as_deref(), query.after, limit).await?;
    Ok(Json(json!({ "events": events })))
}
