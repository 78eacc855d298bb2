//! `/v1/workspaces`: create, list, get, start, stop, delete.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cubicle_runtime::geometry::{Geometry, GeometryError};
use cubicle_runtime::manager::CreateRequest;
use cubicle_runtime::state::WorkspaceRecord;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::{self, OpContext};

/// Longest workspace name accepted.
const MAX_NAME: usize = 128;

/// A workspace as the API shows it.
pub fn view(record: &WorkspaceRecord) -> Value {
    json!({
        "id": record.id,
        "name": record.name,
        "backend": record.backend,
        "state": record.state,
        "geometry": record.geometry,
        "host_uid": record.host_uid,
        "error": record.error,
        "owner_token": record.owner_token,
        "created_at_ms": record.created_at,
        "updated_at_ms": record.updated_at,
        "links": {
            "self": format!("/v1/workspaces/{}", record.id),
            "vnc": format!("/v1/workspaces/{}/vnc", record.id),
        },
    })
}

#[utoipa::path(get, path = "/v1/workspaces", tag = "workspaces", responses((status = 200, body = crate::openapi::WorkspaceList), (status = 401, body = crate::openapi::ErrorBody)))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, ApiError> {
    let records = ops::workspaces::list(&state, &ctx).await?;
    let items: Vec<Value> = records.iter().map(view).collect();
    Ok(Json(json!({ "workspaces": items })))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::openapi::Workspace), (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(view(&ops::workspaces::get(&state, &ctx, &id).await?)))
}

#[utoipa::path(post, path = "/v1/workspaces", tag = "workspaces", request_body(content = crate::openapi::CreateWorkspace, description = "May be empty"), responses((status = 201, body = crate::openapi::Workspace, description = "Created and ready"), (status = 400, body = crate::openapi::ErrorBody), (status = 401, body = crate::openapi::ErrorBody), (status = 502, body = crate::openapi::ErrorBody, description = "Could not start; nothing is left behind")))]
pub async fn create(
    State(state): State<AppState>,
    ctx: OpContext,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    ctx.require(ops::Permission::WorkspacesCreate)?;
    let request = parse_create(&body)?;
    let ws = ops::workspaces::create(&state, &ctx, request).await?;
    Ok((StatusCode::CREATED, Json(view(&ws))))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/start", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::openapi::Workspace), (status = 409, body = crate::openapi::ErrorBody), (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub async fn start(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(view(
        &ops::workspaces::start(&state, &ctx, &id).await?,
    )))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/stop", tag = "workspaces", params(("id" = String, Path)), responses((status = 200, body = crate::openapi::Workspace), (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub async fn stop(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(view(&ops::workspaces::stop(&state, &ctx, &id).await?)))
}

#[utoipa::path(delete, path = "/v1/workspaces/{id}", tag = "workspaces", params(("id" = String, Path)), responses((status = 204, description = "Stopped, and its writable layer removed"), (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    ops::workspaces::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Parses `{"name"?: string, "geometry"?: {"width","height"} | "WxH"}`; an
/// empty body means all defaults. Errors name the field.
pub fn parse_create(body: &[u8]) -> Result<CreateRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(CreateRequest::default());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    let mut request = CreateRequest::default();
    for (key, value) in fields {
        match key.as_str() {
            "name" => request.name = Some(parse_name(&value)?),
            "geometry" => request.geometry = parse_geometry(&value)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown field {other:?}: allowed fields are \"name\" and \"geometry\""
                )));
            }
        }
    }
    Ok(request)
}

fn parse_name(value: &Value) -> Result<String, ApiError> {
    let name = value
        .as_str()
        .ok_or_else(|| ApiError::bad_request("name must be a string"))?;
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "name must be 1..={MAX_NAME} bytes without control characters"
        )));
    }
    Ok(name.to_owned())
}

fn parse_geometry(value: &Value) -> Result<Geometry, ApiError> {
    let geometry = match value {
        Value::String(text) => Geometry::parse(text),
        Value::Object(fields) => {
            let side = |name: &str| {
                fields.get(name).and_then(Value::as_u64).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "geometry.{name} must be a positive integer number of pixels"
                    ))
                })
            };
            Geometry::validated(side("width")?, side("height")?)
        }
        _ => {
            return Err(ApiError::bad_request(
                "geometry must be {\"width\": W, \"height\": H} or \"WxH\"",
            ));
        }
    };
    geometry.map_err(|e: GeometryError| ApiError::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        parse_create(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn bad_geometry_names_the_field() {
        assert!(message(r#"{"geometry":{"width":0,"height":0}}"#).contains("geometry.width"));
        assert!(
            message(r#"{"geometry":{"width":1280,"height":100000}}"#).contains("geometry.height")
        );
        assert!(
            message(r#"{"geometry":{"width":"wide","height":800}}"#).contains("geometry.width")
        );
        assert!(message(r#"{"geometry":"huge"}"#).contains("geometry"));
        assert!(message(r#"{"colour":1}"#).contains("colour"));
        assert!(message("[1]").contains("object"));
    }

    #[test]
    fn empty_body_gives_defaults() {
        let request = parse_create(b"").unwrap();
        assert_eq!(request.geometry, Geometry::default());
        let request = parse_create(br#"{"geometry":"1024x768","name":"a"}"#).unwrap();
        assert_eq!(request.geometry.width, 1024);
        assert_eq!(request.name.as_deref(), Some("a"));
    }
}
