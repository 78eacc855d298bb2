//! `/v1/webhooks`: subscribe a URL to event kinds (its secret is in the
//! answer, this once), list the caller's subscriptions (an admin's:
//! everyone's), read or remove one. Deliveries: [`crate::webhooks`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;
use crate::wire::webhook::NewWebhook;

#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", request_body = crate::wire::webhook::NewWebhook,
    responses((status = 201, description = "The subscription, with its `secret` shown this once"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad field; `webhook_url`: a URL that is not http(s), does not resolve, or resolves to a non-public address"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such `workspace`, or one outside the token's scope"),
        crate::wire::doc::TooLarge))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    ops::webhooks::may_manage(&ctx)?;
    let new = NewWebhook::parse(&body)?;
    let (view, secret) = ops::webhooks::create(&state, &ctx, new).await?;
    let mut body = json!(view);
    body["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    responses((status = 200, description = "{\"webhooks\": [subscription]} (never a secret)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let all = ops::webhooks::list(&state, &ctx).await?;
    Ok(Json(json!({ "webhooks": all })))
}

#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, body = crate::ops::webhooks::WebhookView, description = "The subscription and its last delivery"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such webhook of the caller's")))]
pub async fn one(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let view = ops::webhooks::get(&state, &ctx, &id).await?;
    Ok(Json(json!(view)))
}

#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 204, description = "Removed: nothing more is delivered"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such webhook of the caller's")))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::webhooks::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
