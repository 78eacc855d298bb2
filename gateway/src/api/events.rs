//! `GET /v1/events`: the event log (workspace lifecycle, control taken and
//! handed back, tokens made and revoked), oldest first, for auditors,
//! operators and admins. Paged by `after` (the last id seen) and `limit`.

use axum::Json;
use axum::extract::{Query, State};
use std::collections::HashSet;

use cubicle_runtime::events;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::{OpContext, Permission, access};

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
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "1..=1000, default 100")),
    responses((status = 200, description = "{\"events\": [{id, at, kind, workspace_id, actor, detail}]}"),
        (status = 404, body = crate::openapi::ErrorBody, description = "No such `workspace` (deleted ones included), or one outside the token's scope")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    ctx.require(Permission::EventsRead)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={MAX_LIMIT}, got {limit}"
        )));
    }
    if let Some(id) = &query.workspace {
        // Deleted workspaces too: their history is what auditors read.
        access::any_workspace(&state, &ctx, id, Permission::EventsRead).await?;
    }
    let mut events = events::list(&state.store, query.workspace.as_deref(), query.after, limit)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    if !ctx.sees_all() {
        // A scoped caller sees only the events of workspaces it may see.
        let visible: HashSet<String> = state
            .manager
            .store()
            .list_all()
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .into_iter()
            .filter(|ws| ctx.sees(ws))
            .map(|ws| ws.id)
            .collect();
        events.retain(|e| {
            e.workspace_id
                .as_ref()
                .is_some_and(|id| visible.contains(id))
        });
    }
    Ok(Json(json!({ "events": events })))
}
