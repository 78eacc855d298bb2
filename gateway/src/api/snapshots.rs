//! Snapshots: `POST /v1/workspaces/{id}/snapshot` takes one,
//! `POST /v1/workspaces/{id}/rollback` puts one back, `/v1/snapshots`
//! lists, shows and removes them; `POST /v1/workspaces` with
//! `from_snapshot` (and `count`) starts workspaces from one. What they hold:
//! [`crate::ops::snapshots`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;
use crate::wire::snapshot::{NewSnapshot, Rollback};

#[utoipa::path(post, path = "/v1/workspaces/{id}/snapshot", tag = "snapshots", params(("id" = String, Path)),
    request_body = crate::wire::snapshot::NewSnapshot,
    responses((status = 201, body = crate::ops::snapshots::SnapshotView, description = "Taken. On a microVM host (kind `memory`): the whole machine, paused for the copy and resumed. In a jail (kind `disk`): the user's files in /home/user and /tmp and the browser profile, no memory; the browser closed for it and runs again"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad name"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "Not running (`conflict`), or the caller has a snapshot of that name (`snapshot_exists`)"),
        (status = 429, body = crate::wire::doc::ErrorBody, description = "`too_many_snapshots`: remove one first"),
        (status = 502, body = crate::wire::doc::ErrorBody, description = "`snapshot_failed`: the reason (too large, disk full, the guest's); nothing is kept and the workspace runs on"),
        crate::wire::doc::TooLarge))]
pub async fn take(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    let name = NewSnapshot::parse(&body)?;
    let view = ops::snapshots::take(&state, &ctx, &id, &name).await?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/rollback", tag = "snapshots", params(("id" = String, Path)),
    request_body = crate::wire::snapshot::Rollback,
    responses((status = 200, body = crate::ops::snapshots::SnapshotView, description = "Rolled back. Kind `memory`: its VM was replaced by one restored from the snapshot (with a fresh identity). Kind `disk`: its files in /home/user and /tmp are the snapshot's (what was made since is removed) and the browser runs on the snapshot's profile"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad snapshot id"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope, or no such snapshot of the caller's"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "Not running"),
        (status = 502, body = crate::wire::doc::ErrorBody, description = "`rollback_failed`: the reason; the workspace runs on")))]
pub async fn roll_back(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    let snapshot = Rollback::parse(&body)?;
    let view = ops::snapshots::roll_back(&state, &ctx, &id, &snapshot).await?;
    Ok(Json(json!(view)))
}

#[utoipa::path(get, path = "/v1/snapshots", tag = "snapshots",
    responses((status = 200, description = "{\"snapshots\": [snapshot]} (the caller's; an admin's: everyone's)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let all = ops::snapshots::list(&state, &ctx).await?;
    Ok(Json(json!({ "snapshots": all })))
}

#[utoipa::path(get, path = "/v1/snapshots/{id}", tag = "snapshots", params(("id" = String, Path)),
    responses((status = 200, body = crate::ops::snapshots::SnapshotView),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such snapshot of the caller's")))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    Ok(Json(json!(ops::snapshots::get(&state, &ctx, &id).await?)))
}

#[utoipa::path(delete, path = "/v1/snapshots/{id}", tag = "snapshots", params(("id" = String, Path)),
    responses((status = 204, description = "Removed with its archives; workspaces started from it keep what it gave them"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such snapshot of the caller's")))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::snapshots::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
