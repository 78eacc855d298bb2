//! `/v1/tokens` (admin only): make a token (its secret is in the answer and
//! nowhere else), list tokens, revoke one (which also closes its open live
//! views and event streams and hands back any control it holds).
//! `GET /v1/me`: the caller's own token (any role), for the page.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cubicle_runtime::tokens::{self, Role, Scope, TokenInfo};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::permission;
use crate::ops::{EventKind, OpContext, Permission};

/// Longest token name accepted.
const MAX_NAME: usize = 128;

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

#[utoipa::path(get, path = "/v1/me", tag = "tokens", responses((status = 200, description = "The caller's token id, name and role"), (status = 401, body = crate::openapi::ErrorBody)))]
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

/// A token to make.
#[derive(Debug, PartialEq)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
    pub scope: Scope,
}

/// Parses `{"name": string, "role": "admin"|"agent"|"operator"|"auditor",
/// "scope"?: "all" | ["ws-...", ...]}`.
pub fn parse_create(body: &[u8]) -> Result<NewToken, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    if let Some(other) = fields
        .keys()
        .find(|k| !["name", "role", "scope"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown field {other:?}: allowed fields are \"name\", \"role\" and \"scope\""
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
    let scope = match fields.get("scope") {
        None | Some(Value::Null) => Scope::Default,
        Some(value) => parse_scope(value)?,
    };
    Ok(NewToken {
        name: name.to_owned(),
        role,
        scope,
    })
}

fn parse_scope(value: &Value) -> Result<Scope, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "scope must be \"all\" or a list of workspace ids such as [\"ws-0123456789ab\"]",
        )
    };
    match value {
        Value::String(all) if all == "all" => Ok(Scope::All),
        Value::Array(items) if items.len() <= 1000 => items
            .iter()
            .map(|item| {
                item.as_str()
                    .filter(|id| id.starts_with("ws-") && id.len() <= 64)
                    .map(str::to_owned)
                    .ok_or_else(bad)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Scope::Only),
        _ => Err(bad()),
    }
}

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body(content = Object, description = "{\"name\", \"role\": admin|agent|operator|auditor}"), responses((status = 201, description = "The token, with its secret shown this once"), (status = 400, body = crate::openapi::ErrorBody), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    ctx.require(Permission::TokensManage)?;
    let new = parse_create(&body)?;
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

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", responses((status = 200, description = "Every token (never a secret)"), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody)))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, ApiError> {
    ctx.require(Permission::TokensManage)?;
    let all = tokens::list(&state.store).await.map_err(store_error)?;
    Ok(Json(
        json!({ "tokens": all.iter().map(view).collect::<Vec<_>>() }),
    ))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens", params(("id" = String, Path)), responses((status = 204, description = "Revoked; its open sockets are closed"), (status = 409, body = crate::openapi::ErrorBody, description = "The last admin token"), (status = 401, body = crate::openapi::ErrorBody), (status = 403, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked_field_by_field() {
        let ok = parse_create(br#"{"name":"alice","role":"operator"}"#).unwrap();
        assert_eq!(
            (ok.name.as_str(), ok.role, ok.scope),
            ("alice", Role::Operator, Scope::Default)
        );
        let scoped = parse_create(br#"{"name":"a","role":"agent","scope":["ws-1"]}"#).unwrap();
        assert_eq!(scoped.scope, Scope::Only(vec!["ws-1".into()]));
        let all = parse_create(br#"{"name":"a","role":"agent","scope":"all"}"#).unwrap();
        assert_eq!(all.scope, Scope::All);
        for (body, field) in [
            (r#"{"name":"a","role":"root"}"#, "role"),
            (r#"{"name":"a"}"#, "role"),
            (r#"{"role":"agent"}"#, "name"),
            (r#"{"name":"","role":"agent"}"#, "name"),
            (r#"{"name":"a","role":"agent","x":1}"#, "\"x\""),
            ("[]", "object"),
            ("{", "JSON"),
            (r#"{"name":"a","role":"agent","scope":"some"}"#, "scope"),
            (r#"{"name":"a","role":"agent","scope":[1]}"#, "scope"),
        ] {
            let message = parse_create(body.as_bytes()).unwrap_err().message;
            assert!(message.contains(field), "{body}: {message}");
        }
    }
}
