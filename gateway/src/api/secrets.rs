//! `/v1/secrets`: store a host-bound secret (its value never shown
//! again), list the caller's, remove one; and
//! `/v1/workspaces/{id}/secrets`: give one to a workspace as a placeholder,
//! list what it was given. What the proxy does with them:
//! [`crate::ops::secrets`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;
use crate::wire::secret::{BindSecret, FillSecret, NewSecret};

#[utoipa::path(post, path = "/v1/secrets", tag = "secrets", request_body = crate::wire::secret::NewSecret,
    responses((status = 201, body = crate::ops::secrets::SecretView, description = "Stored; its value is never shown again"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad field (the message names it)"),
        (status = 429, body = crate::wire::doc::ErrorBody, description = "`too_many_secrets`: this token keeps the most it may"),
        crate::wire::doc::TooLarge))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    ops::secrets::may_manage(&ctx)?;
    let new = NewSecret::parse(&body)?;
    let view = ops::secrets::create(&state, &ctx, new).await?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

#[utoipa::path(get, path = "/v1/secrets", tag = "secrets",
    responses((status = 200, description = "{\"secrets\": [secret]} (the caller's; an admin's: everyone's; never a value)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let all = ops::secrets::list(&state, &ctx).await?;
    Ok(Json(json!({ "secrets": all })))
}

#[utoipa::path(delete, path = "/v1/secrets/{id}", tag = "secrets", params(("id" = String, Path)),
    responses((status = 204, description = "Removed: its placeholders are refused from now on, in every workspace"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such secret of the caller's")))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::secrets::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/secrets", tag = "secrets", params(("id" = String, Path)),
    request_body = crate::wire::secret::BindSecret,
    responses((status = 201, body = crate::ops::secrets::BindingView, description = "Given: the workspace holds the placeholder, the proxy swaps in the value toward the secret's hosts"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad field"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope, or no such secret of the caller's"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "`secret_host_not_allowed`, `secret_host_passthrough`: a host of the secret its egress policy does not open to the proxy; `secret_already_given`"),
        crate::wire::doc::TooLarge))]
pub async fn bind(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    ops::secrets::may_manage(&ctx)?;
    let bind = BindSecret::parse(&body)?;
    let view = ops::secrets::bind(&state, &ctx, &id, bind).await?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/secrets", tag = "secrets", params(("id" = String, Path)),
    responses((status = 200, description = "{\"secrets\": [binding]}: what it was given, with the placeholders (never a value)"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope")))]
pub async fn given(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let all = ops::secrets::of_workspace(&state, &ctx, &id).await?;
    Ok(Json(json!({ "secrets": all })))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/fill_secret", tag = "secrets", params(("id" = String, Path)),
    request_body = crate::wire::secret::FillSecret,
    responses((status = 200, body = crate::ops::secret_fill::Filled, description = "Filled: the field holds the value (shown masked); the caller never sees it"),
        (status = 202, body = crate::wire::doc::ErrorBody, description = "`approval_required`: held by a `secret.fill` rule (the shipped policies confirm); ask again once approved"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad field"),
        (status = 403, body = crate::wire::doc::ErrorBody, description = "Not a role that uses the browser, held off by a take-over, or denied by a rule"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "`secret_not_given`: the workspace does not have that secret; or no such workspace in the caller's scope"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "`fill_refused`: the page is not on https at one of the secret's hosts, or the field is not a password or autocomplete-marked input (the message says which); `no_page`: no tab on screen")))]
pub async fn fill(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    ops::secret_fill::may_fill(&ctx)?;
    let fill = FillSecret::parse(&body)?;
    let filled = ops::secret_fill::fill(&state, &ctx, &id, fill).await?;
    Ok(Json(json!(filled)))
}
