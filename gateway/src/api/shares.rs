//! Share links: `POST /v1/workspaces/{id}/share` makes one,
//! `GET /v1/workspaces/{id}/shares` lists them,
//! `DELETE /v1/workspaces/{id}/shares/{share}` revokes one, and
//! `GET /v1/share` is what the share page asks with the link's secret.
//! What they are: [`crate::ops::shares`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;
use crate::wire::share::NewShare;

#[utoipa::path(post, path = "/v1/workspaces/{id}/share", tag = "shares", params(("id" = String, Path)),
    request_body = crate::wire::share::NewShare,
    responses((status = 201, body = crate::ops::shares::ShareView, description = "Made: `url` (`/share#<secret>`, on this gateway's address) is shown this once"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad field"),
        (status = 403, body = crate::wire::doc::ErrorBody, description = "Not an operator or admin"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope"),
        crate::wire::doc::TooLarge))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    ops::shares::may_manage(&ctx)?;
    let (mode, seconds) = NewShare::parse(&body)?;
    let view = ops::shares::create(&state, &ctx, &id, mode, seconds).await?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/shares", tag = "shares", params(("id" = String, Path)),
    responses((status = 200, description = "{\"shares\": [share]}: live, expired and revoked (never a secret)"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let all = ops::shares::list(&state, &ctx, &id).await?;
    Ok(Json(json!({ "shares": all })))
}

#[utoipa::path(delete, path = "/v1/workspaces/{id}/shares/{share}", tag = "shares",
    params(("id" = String, Path), ("share" = String, Path)),
    responses((status = 204, description = "Revoked: its live views close now, control it held goes back to the agent, the link answers 410"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace, or no such share link of it")))]
pub async fn revoke(
    State(state): State<AppState>,
    ctx: OpContext,
    Path((id, share)): Path<(String, String)>,
) -> Result<StatusCode, OpError> {
    ops::shares::revoke(&state, &ctx, &id, &share).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/v1/share", tag = "shares",
    responses((status = 200, body = crate::ops::shares::ShareOpened, description = "The share link's workspace and mode (a `share.open` event)"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "`not_a_share_link`: the token is not a share link's"),
        (status = 410, body = crate::wire::doc::ErrorBody, description = "`share_revoked` or `share_expired`: nothing of the workspace is shown")))]
pub async fn open(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let opened = ops::shares::open(&state, &ctx).await?;
    Ok(Json(json!(opened)))
}
