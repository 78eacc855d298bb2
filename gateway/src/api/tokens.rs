//! `/v1/tokens` (admin only): make a token (its secret is in the answer and
//! nowhere else), list tokens, revoke one (which also closes its open live
//! views and event streams and hands back any control it holds).
//! `GET /v1/me`: the caller's own token (any role), for the page.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cubicle_runtime::events::{self, Actor};
use cubicle_runtime::tokens::{self, Role, TokenInfo};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

/// Longest token name accepted.
const MAX_NAME: usize = 128;

fn view(token: &TokenInfo) -> Value {
    json!({
        "id": token.id,
        "name": token.name,
        "role": token.role,
        "created_at_ms": token.created_at,
        "revoked_at_ms": token.revoked_at,
    })
}

fn store_error(err: impl std::fmt::Display) -> ApiError {
    ApiError::internal(err.to_string())
}

#[utoipa::path(get, path = "/v1/me", tag = "tokens", responses((status = 200, description = "The caller's token id, name and role"), (status = 401, body = crate::openapi::ErrorBody)))]
pub async fn me(caller: Caller) -> Json<Value> {
    let token = &caller.token;
    Json(json!({ "id": token.id, "name": token.name, "role": token.role }))
}

/// Parses `{"name": string, "role": "admin"|"agent"|"operator"|"auditor"}`.
pub fn parse_create(body: &[u8]) -> Result<(String, Role), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    if let Some(other) = fields.keys().find(|k| *k != "name" && *k != "role") {
        return Err(ApiError::bad_request(format!(
            "unknown field {other:?}: allowed fields are \"name\" and \"role\""
        )));
    }
    let name = fields.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "name must be a string of 1..={MAX_NAME} bytes without control characters"
        )));
    }
    let role = fields
        .get("role")
        .and_then(Value::as_str)
        .and_then(Role::parse)
        .ok_or_else(|| {
            ApiError::bad_request(
                "role must be one of \"admin\", \"agent\", \"operator\", \"auditor\"",
            )
        })?;
    Ok((name.to_owned(), role))
}

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body(content = Object, description = "{\"name\", \"role\": admin|agent|operator|auditor}"), responses((status = 201, description = "The token, with its secret shown this once"), (status = 400, body = crate::openapi::ErrorBody), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(&[], "manage tokens")?;
    let (name, role) = parse_create(&body)?;
    let (token, secret) = tokens::create(&state.store, &name, role)
        .await
        .map_err(store_error)?;
    let detail = json!({ "token": token.id, "name": name, "role": role });
    events::record(
        &state.store,
        "token.create",
        None,
        Some(&Actor::from(&caller.token)),
        &detail,
    )
    .await
    .map_err(store_error)?;
    let mut body = json!({ "id": token.id, "name": token.name, "role": token.role });
    body["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", responses((status = 200, description = "Every token (never a secret)"), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require(&[], "manage tokens")?;
    let all = tokens::list(&state.store).await.map_err(store_error)?;
    Ok(Json(
        json!({ "tokens": all.iter().map(view).collect::<Vec<_>>() }),
    ))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens", params(("id" = String, Path)), responses((status = 204, description = "Revoked; its open sockets are closed"), (status = 409, body = crate::openapi::ErrorBody, description = "The last admin token"), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require(&[], "manage tokens")?;
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
    tokens::revoke(&state.store, &id)
        .await
        .map_err(store_error)?;
    state.revocations.revoke(&id);
    let by = Actor::from(&caller.token);
    events::record(
        &state.store,
        "token.revoke",
        None,
        Some(&by),
        &json!({ "token": id }),
    )
    .await
    .map_err(store_error)?;
    state.control.release_token(&state.store, &id, &by).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked_field_by_field() {
        let ok = parse_create(br#"{"name":"alice","role":"operator"}"#).unwrap();
        assert_eq!(ok, ("alice".to_owned(), Role::Operator));
        for (body, field) in [
            (r#"{"name":"a","role":"root"}"#, "role"),
            (r#"{"name":"a"}"#, "role"),
            (r#"{"role":"agent"}"#, "name"),
            (r#"{"name":"","role":"agent"}"#, "name"),
            (r#"{"name":"a","role":"agent","x":1}"#, "\"x\""),
            ("[]", "object"),
            ("{", "JSON"),
        ] {
            let message = parse_create(body.as_bytes()).unwrap_err().message;
            assert!(message.contains(field), "{body}: {message}");
        }
    }
}
