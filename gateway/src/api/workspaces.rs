//! `/v1/workspaces`: create, list, get, start, stop, delete.

use crate::wire::path::Path;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cubicle_runtime::state::WorkspaceRecord;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::workspace::{CreateWorkspace, WorkspaceView};

/// A workspace as the API shows it.
pub fn view(record: &WorkspaceRecord) -> Value {
    serde_json::to_value(WorkspaceView::from(record)).unwrap_or(Value::Null)
}

/// The agent's standing call for a person on workspace `id`, if any.
fn called(state: &AppState, id: &str) -> Option<Value> {
    let call = state.control.current(id).call?;
    serde_json::to_value(call).ok()
}

#[utoipa::path(get, path = "/v1/workspaces", tag = "workspaces", responses((status = 200, body = crate::wire::workspace::WorkspaceList)))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let records = ops::workspaces::list(&state, &ctx).await?;
    let items: Vec<Value> = records
        .iter()
        .map(|record| {
            let mut view = WorkspaceView::from(record);
            view.call = called(&state, &record.id);
            serde_json::to_value(view).unwrap_or(Value::Null)
        })
        .collect();
    Ok(Json(json!({ "workspaces": items })))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::wire::workspace::WorkspaceView), crate::wire::doc::NoWorkspace))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let record = ops::workspaces::get(&state, &ctx, &id).await?;
    let usage = ops::workspaces::usage(&state, &ctx, &id).await?;
    let mut view = WorkspaceView::from(&record);
    view.usage = serde_json::to_value(usage).ok();
    view.policy = Some(ops::approvals::policy_of(&state, &ctx, &id).await?);
    let egress = ops::egress::get(&state, &ctx, &id).await?;
    view.egress = Some(crate::wire::egress::EgressBody::of(&egress.policy));
    view.time_limits = Some(ops::expiry::view_of(&state, &id).await?);
    view.call = called(&state, &id);
    Ok(Json(serde_json::to_value(view).unwrap_or(Value::Null)))
}

#[utoipa::path(post, path = "/v1/workspaces", tag = "workspaces", request_body(content = crate::wire::workspace::CreateWorkspace, description = "May be empty"), responses((status = 201, body = crate::wire::workspace::Created, description = "Created and ready: the workspace, or with `count` (from a snapshot) `{workspaces, failed}`"), (status = 400, body = crate::wire::doc::ErrorBody, description = "A body this operation cannot take, or a template, policy, limit or time limit the server does not have or allow; the message names the field"), (status = 403, body = crate::wire::doc::ErrorBody, description = "Guard rails (egress, policy, record, time_limits, limits) wider than the caller's role may choose: agents get the server's defaults or the named template's, or narrower; the message names the field and what to do"), crate::wire::doc::TooLarge, (status = 502, body = crate::wire::doc::ErrorBody, description = "Could not start (`start_failed`); nothing is left behind"), (status = 503, body = crate::wire::doc::ErrorBody, description = "No room for another workspace (`capacity`)")))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    let ask = CreateWorkspace::parse(&body)?;
    if ask.count.is_some() {
        return Ok((
            StatusCode::CREATED,
            Json(created_many(&state, &ctx, ask).await?),
        ));
    }
    let created = ops::workspaces::create(&state, &ctx, ask).await?;
    Ok((StatusCode::CREATED, Json(created_view(&state, &created))))
}

/// The workspaces a create with `count` made, and why the others were not
/// (both doors); the first refusal when none was made.
pub async fn created_many(
    state: &AppState,
    ctx: &OpContext,
    ask: crate::wire::workspace::CreateAsk,
) -> Result<Value, OpError> {
    let mut made = Vec::new();
    let mut failed = Vec::new();
    for outcome in ops::workspaces::create_many(state, ctx, ask).await {
        match outcome {
            Ok(created) => made.push(created_view(state, &created)),
            Err(err) => failed.push(err),
        }
    }
    if made.is_empty() && !failed.is_empty() {
        return Err(failed.swap_remove(0));
    }
    let failed: Vec<Value> = failed
        .iter()
        .map(|err| serde_json::json!({ "code": err.code, "message": err.message }))
        .collect();
    Ok(serde_json::json!({ "workspaces": made, "failed": failed }))
}

/// A workspace just made, with the guard rails it was given (both doors).
pub fn created_view(
    state: &AppState,
    (ws, rails): &(WorkspaceRecord, ops::guard_rails::Chosen),
) -> Value {
    let mut view = WorkspaceView::from(ws);
    view.policy = Some(rails.policy.clone());
    view.egress = Some(crate::wire::egress::EgressBody::of(
        &rails
            .egress
            .clone()
            .unwrap_or_else(|| state.egress.default_policy()),
    ));
    let limits = rails.time_limits.over(state.manager.default_time_limits());
    view.time_limits = Some(crate::wire::time_limits::TimeLimitsView::from(&limits));
    view.record = Some(rails.record);
    serde_json::to_value(view).unwrap_or(Value::Null)
}

#[utoipa::path(get, path = "/v1/pool", tag = "workspaces", responses((status = 200, description = "The warm pool (`cubicle serve --warm N`): `size`, `ready`, `filling`, `hits` (creates served from it), `misses` (creates that matched but found it empty), `failures`")))]
pub async fn pool(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let stats = ops::workspaces::pool(&state, &ctx)?;
    Ok(Json(serde_json::to_value(stats).unwrap_or(Value::Null)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/start", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::wire::workspace::WorkspaceView), crate::wire::doc::Lifecycle, (status = 502, body = crate::wire::doc::ErrorBody, description = "Could not start (`start_failed`); it is stopped again")))]
pub async fn start(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    Ok(Json(view(
        &ops::workspaces::start(&state, &ctx, &id).await?,
    )))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/stop", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::wire::workspace::WorkspaceView), crate::wire::doc::Lifecycle))]
pub async fn stop(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    Ok(Json(view(&ops::workspaces::stop(&state, &ctx, &id).await?)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/pause", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::wire::workspace::WorkspaceView, description = "Paused: memory kept, no CPU; input and changes get 409 `paused` until resumed"), crate::wire::doc::Lifecycle))]
pub async fn pause(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    Ok(Json(view(
        &ops::workspaces::pause(&state, &ctx, &id).await?,
    )))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/resume", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::wire::workspace::WorkspaceView, description = "Running again: the same processes continue"), crate::wire::doc::Lifecycle))]
pub async fn resume(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    Ok(Json(view(
        &ops::workspaces::resume(&state, &ctx, &id).await?,
    )))
}

#[utoipa::path(delete, path = "/v1/workspaces/{id}", tag = "workspaces", params(("id" = String, Path)), responses((status = 204, description = "Stopped, and its writable layer removed"), crate::wire::doc::Lifecycle))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::workspaces::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
