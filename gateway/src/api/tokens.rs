//! `/v1/tokens` (admin only): make a token (its secret is in the answer and
//! nowhere else), list tokens, revoke one (which also closes its open live
//! views and event streams and hands back any control it holds).
//! `GET /v1/me`: the caller's own token (any role), for the page.

use crate::wire::path::Path;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cubicle_runtime::tokens::TokenInfo;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext, permission};
use crate::wire::token::NewToken;

fn view(token: &TokenInfo) -> Value {
    json!({
        "id": token.id,
        "name": token.name,
        "role": token.role,
        "scope": token.scope,
        "created_at_ms": token.created_at,
        "revoked_at_ms": token.revoked_at,
    })
}

#[utoipa::path(get, path = "/v1/me", tag = "tokens", responses((status = 200, description = "The caller's token id, name and role")))]
pub async fn me(ctx: OpContext) -> Json<Value> {
    let token = &ctx.token;
    Json(json!({
        "id": token.id,
        "name": token.name,
        "role": token.role,
        "scope": token.scope,
        "permissions": permission::of_role(token.role),
    }))
}

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = crate::wire::token::NewToken, responses((status = 201, description = "The token, with its secret shown this once"), crate::wire::doc::TooLarge))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), OpError> {
    ops::tokens::may_create(&ctx)?;
    let new = NewToken::parse(&body)?;
    let (token, secret) = ops::tokens::create(&state.store, &state.audit, &ctx, new).await?;
    let mut body = json!({
        "id": token.id, "name": token.name, "role": token.role, "scope": token.scope,
    });
    body["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", responses((status = 200, description = "Every token (never a secret)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let all = ops::tokens::list(&state.store, &ctx).await?;
    Ok(Json(
        json!({ "tokens": all.iter().map(view).collect::<Vec<_>>() }),
    ))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens", params(("id" = String, Path)), responses((status = 204, description = "Revoked; its open sockets are closed"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such token"), (status = 409, body = crate::wire::doc::ErrorBody, description = "The last admin token (`last_admin`)")))]
pub async fn revoke(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::tokens::revoke_live(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
