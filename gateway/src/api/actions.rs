//! `POST /v1/workspaces/{id}/actions`: one action, or `{"actions": [...]}`
//! run in order, stopping at the first error with one result per action run.
//! `GET /v1/workspaces/{id}/screenshot`: the screen as an image, raw bytes.

use crate::wire::path::Path;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::body::Body;
use crate::actions::run::RunError;
use crate::actions::{Action, MAX_BATCH, parse_action};
use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};

fn field_error(err: impl std::fmt::Display) -> OpError {
    OpError::bad_request(err.to_string())
}

impl From<RunError> for OpError {
    fn from(err: RunError) -> Self {
        match err {
            RunError::Field(field) => field_error(field),
            RunError::Screen(screen) => OpError::new(
                ErrorKind::Unreachable,
                "display_unavailable",
                screen.to_string(),
            ),
            RunError::Encode(encode) => OpError::internal(encode.to_string()),
        }
    }
}

/// Parses the body into the actions to run (and each as sent, for the
/// event log); true if it was a batch.
pub fn parse_body(body: &[u8]) -> Result<(Vec<Action>, Vec<Value>, bool), OpError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| OpError::bad_request(format!("request body is not valid JSON: {e}")))?;
    let Some(list) = value.get("actions") else {
        let action = parse_action(&value).map_err(field_error)?;
        return Ok((vec![action], vec![value], false));
    };
    let list = list
        .as_array()
        .ok_or_else(|| OpError::bad_request("actions: must be a list of action objects"))?;
    if list.is_empty() || list.len() > MAX_BATCH {
        return Err(OpError::bad_request(format!(
            "actions: needs 1..={MAX_BATCH} actions, got {}",
            list.len()
        )));
    }
    let actions = list
        .iter()
        .enumerate()
        .map(|(i, item)| {
            parse_action(item).map_err(|e| field_error(e.within(&format!("actions[{i}]"))))
        })
        .collect::<Result<_, _>>()?;
    Ok((actions, list.clone(), true))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/actions", tag = "computer", params(("id" = String, Path)), request_body = crate::wire::doc::ActionRequest, responses((status = 200, body = crate::wire::doc::ActionResponse), crate::wire::doc::InGuest, crate::wire::doc::Held, crate::wire::doc::TooLarge, (status = 400, body = crate::wire::doc::ErrorBody, description = "Names the bad field (in a batch: `error.index`, and `results` of the actions run before it)")))]
pub async fn actions(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Response, OpError> {
    let (actions, sent, batch) = parse_body(&body)?;
    let mut outcome = ops::actions::run_batch(&state, &ctx, &id, &actions, &sent).await?;
    if let Some((index, err)) = outcome.failed {
        return match batch {
            true => Ok(batch_error(index, err, outcome.results)),
            false => Err(err),
        };
    }
    let body = if batch {
        json!({ "results": outcome.results })
    } else {
        json!({ "result": outcome.results.pop().unwrap_or(Value::Null) })
    };
    Ok(Json(body).into_response())
}

fn batch_error(index: usize, err: OpError, results: Vec<Value>) -> Response {
    let message = if err.kind == ErrorKind::BadRequest {
        format!("actions[{index}].{}", err.message)
    } else {
        err.message
    };
    let body = json!({
        "error": { "code": err.code, "message": message, "index": index },
        "results": results,
    });
    (err.kind.status(), Json(body)).into_response()
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/screenshot", tag = "computer", params(("id" = String, Path), ("format" = Option<crate::wire::doc::ImageFormat>, Query, description = "png (default) or jpeg"), ("quality" = Option<u8>, Query, minimum = 1, maximum = 100, description = "JPEG quality (default 80)"), ("width" = Option<u32>, Query, minimum = 16, maximum = 7680, description = "Scale to this width; alone, the height keeps the screen's aspect"), ("height" = Option<u32>, Query, minimum = 16, maximum = 7680, description = "Scale to this height; alone, the width keeps the screen's aspect")), responses((status = 200, content(("image/png"), ("image/jpeg")), description = "The screen, PNG or (`format=jpeg`) JPEG"), crate::wire::doc::InGuest))]
pub async fn screenshot(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    query: Result<Query<Map<String, Value>>, QueryRejection>,
) -> Result<Response, OpError> {
    let Query(query) = query.map_err(|e| OpError::bad_request(e.body_text()))?;
    // Query values arrive as strings; the screenshot action wants numbers.
    let mut fields: Map<String, Value> = query
        .into_iter()
        .map(|(k, v)| {
            let parsed = v
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .map(Value::from);
            (k, parsed.unwrap_or(v))
        })
        .collect();
    // One side alone: the other keeps the screen's aspect.
    match (fields.get("width"), fields.get("height")) {
        (Some(side), None) | (None, Some(side)) if side.is_u64() => {
            let screen = ops::workspaces::get(&state, &ctx, &id).await?.geometry;
            let (missing, other) = match fields.contains_key("width") {
                true => ("height", (screen.height, screen.width)),
                false => ("width", (screen.width, screen.height)),
            };
            let side = side.as_u64().unwrap_or_default();
            let derived = (side * u64::from(other.0)).div_ceil(u64::from(other.1).max(1));
            fields.insert(missing.into(), Value::from(derived.clamp(16, 7680)));
        }
        _ => {}
    }
    fields.insert("action".into(), "screenshot".into());
    let Action::Screenshot(request) = parse_action(&Value::Object(fields)).map_err(field_error)?
    else {
        return Err(OpError::internal(
            "screenshot query parsed as another action",
        ));
    };
    let encoded = ops::actions::screenshot(&state, &ctx, &id, request).await?;
    Ok(([(CONTENT_TYPE, encoded.media_type)], encoded.bytes.clone()).into_response())
}
