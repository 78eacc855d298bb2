//! `/v1/tokens` (admin only): make a token (its secret is in the answer and
//! nowhere else), list tokens, revoke one (which also closes its open live
//! views and event streams and hands back any control it holds).
//! `GET /v1/me`: the caller's own token (any role), for the page.

use crate::api::path::Path;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cubicle_runtime::tokens::{self, Role, TokenInfo};
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::permission;
use crate::ops::{EventKind, OpContext, Permission};
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

fn store_error(err: impl std::fmt::Display) -> ApiError {
    ApiError::internal(err.to_string())
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

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = crate::wire::token::NewToken, responses((status = 201, description = "The token, with its secret shown this once"), crate::openapi::TooLarge))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    Body(body): Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    ctx.require(Permission::TokensManage)?;
    let new = NewToken::parse(&body)?;
    let detail = json!({ "name": new.name, "role": new.role, "scope": new.scope });
    let store = state.store.clone();
    let run = async move {
        tokens::create(&store, &new.name, new.role, new.scope)
            .await
            .map_err(store_error)
    };
    let summary = |(token, _): &(tokens::Token, String)| json!({ "token": token.id });
    let kind = EventKind::TokenCreate;
    let (token, secret) = state
        .audit
        .run(&ctx, kind, None, detail, run, summary)
        .await?;
    let mut body = json!({
        "id": token.id, "name": token.name, "role": token.role, "scope": token.scope,
    });
    body["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", responses((status = 200, description = "Every token (never a secret)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, ApiError> {
    ctx.require(Permission::TokensManage)?;
    let all = tokens::list(&state.store).await.map_err(store_error)?;
    Ok(Json(
        json!({ "tokens": all.iter().map(view).collect::<Vec<_>>() }),
    ))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens", params(("id" = String, Path)), responses((status = 204, description = "Revoked; its open sockets are closed"), (status = 404, body = crate::openapi::ErrorBody, description = "No such token"), (status = 409, body = crate::openapi::ErrorBody, description = "The last admin token (`last_admin`)")))]
pub async fn revoke(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    ctx.require(Permission::TokensManage)?;
    let token = tokens::get(&state.store, &id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no token with id {id:?}"),
            )
        })?;
    if token.revoked_at.is_some() {
        return Ok(StatusCode::NO_CONTENT);
    }
    let admins = tokens::live_admins(&state.store)
        .await
        .map_err(store_error)?;
    if token.role == Role::Admin && admins <= 1 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "last_admin",
            format!(
                "{id} is the last live admin token: create another admin token before revoking it"
            ),
        ));
    }
    let store = state.store.clone();
    let revoke = async {
        tokens::revoke(&store, &id).await.map_err(store_error)?;
        state.revocations.revoke(&id);
        Ok(())
    };
    let kind = EventKind::TokenRevoke;
    let detail = json!({ "token": id });
    state
        .audit
        .run(&ctx, kind, None, detail, revoke, |_| json!({}))
        .await?;
    let by = ctx.actor();
    state.control.release_token(&state.store, &id, &by).await?;
    Ok(StatusCode::NO_CONTENT)
}
