//! `/v1/workspaces/{id}/files`: read, write, list, stat and delete files
//! inside a running workspace, as the workspace user.
//!
//! | method | query | answer |
//! | --- | --- | --- |
//! | GET | `path`, optional `offset`, `length` | the bytes, `application/octet-stream`; `x-file-size` is the whole size |
//! | GET | `path`, `list=true` (or `GET .../files/list?path=`) | `{"path", "entries": [{name, type, size, mode, mtime_ms, link_target?}], "truncated"}` |
//! | GET | `path`, `stat=true` | `{name, type, size, mode, mtime_ms, link_target?}` |
//! | PUT | `path`, optional `mode` (octal, e.g. `0755`); raw body | the written file's stat |
//! | DELETE | `path`, optional `recursive=true` | `{"deleted": stat}` |
//!
//! Paths are absolute inside the workspace (no `..`); files are at most
//! 16 MiB (413 above it; read bigger files in parts with `offset`/`length`).
//! Only `/home/user` and `/tmp` are writable. Guest errors map to 4xx with
//! the guest's code (`not_absolute`, `bad_path`, `not_found`,
//! `is_a_directory`, `not_a_directory`, `not_empty`, `special_file`,
//! `too_large`, `permission_denied`).

use std::collections::HashMap;

use crate::wire::path::Path;
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use cubicle_image::control::MAX_FILE;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};

/// The request body limit of `PUT .../files`.
pub const BODY_LIMIT: usize = MAX_FILE as usize;
/// A query string's parameters; any key not in `allowed` is a 400.
pub fn query_params(
    raw: Option<&str>,
    allowed: &[&str],
) -> Result<HashMap<String, String>, OpError> {
    let mut params = HashMap::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        // The token, and how to wait when a policy holds the operation
        // (read by the caller's context).
        if matches!(key.as_ref(), "access_token" | "wait" | "approval") {
            continue;
        }
        if !allowed.contains(&key.as_ref()) {
            return Err(OpError::bad_request(format!(
                "unknown query parameter {key:?}: allowed are {allowed:?}"
            )));
        }
        params.insert(key.into_owned(), value.into_owned());
    }
    Ok(params)
}

fn required_path(params: &HashMap<String, String>) -> Result<String, OpError> {
    let path = params
        .get("path")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            OpError::new(
                ErrorKind::BadRequest,
                "not_absolute",
                "path: missing: give ?path=/home/user/... (an absolute path inside the workspace)",
            )
        })?;
    Ok(path.clone())
}

fn flag(params: &HashMap<String, String>, name: &str) -> Result<bool, OpError> {
    match params.get(name).map(String::as_str) {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1" | "") => Ok(true),
        Some(other) => Err(OpError::bad_request(format!(
            "{name}: {other:?} is not true or false"
        ))),
    }
}

fn number(params: &HashMap<String, String>, name: &str) -> Result<Option<u64>, OpError> {
    params
        .get(name)
        .map(|text| {
            text.parse::<u64>().map_err(|_| {
                OpError::bad_request(format!("{name}: {text:?} is not a non-negative integer"))
            })
        })
        .transpose()
}

fn mode(params: &HashMap<String, String>) -> Result<Option<u32>, OpError> {
    params
        .get("mode")
        .map(|text| {
            u32::from_str_radix(text, 8)
                .ok()
                .filter(|&mode| mode <= 0o7777)
                .ok_or_else(|| {
                    OpError::bad_request(format!("mode: {text:?} is not an octal mode like 0644"))
                })
        })
        .transpose()
}

/// `GET .../files`: read, or list / stat with `list=true` / `stat=true`.
#[utoipa::path(get, path = "/v1/workspaces/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query, description = "Absolute path in the workspace"), ("offset" = Option<u64>, Query), ("length" = Option<u64>, Query), ("list" = Option<bool>, Query), ("stat" = Option<bool>, Query)), responses((status = 200, content((Vec<u8> = "application/octet-stream"), (Object = "application/json")), description = "The bytes, or the listing / stat as JSON with `list=true` / `stat=true`"), crate::wire::doc::InGuest, (status = 413, body = crate::wire::doc::ErrorBody, description = "Over 16 MiB: read it in parts with `offset` and `length` (`too_large`)")))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, OpError> {
    let allowed = ["path", "list", "stat", "offset", "length"];
    ops::files::may_read(&ctx)?;
    let params = query_params(query.as_deref(), &allowed)?;
    let path = required_path(&params)?;
    let (list, stat) = (flag(&params, "list")?, flag(&params, "stat")?);
    if list {
        let listing = ops::files::list(&state, &ctx, &id, &path).await?;
        return Ok(Json(listing).into_response());
    }
    if stat {
        let info = ops::files::stat(&state, &ctx, &id, &path).await?;
        return Ok(Json(info).into_response());
    }
    let offset = number(&params, "offset")?.unwrap_or(0);
    let length = number(&params, "length")?;
    let chunk = ops::files::read(&state, &ctx, &id, &path, offset, length).await?;
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
        (
            header::HeaderName::from_static("x-file-size"),
            chunk.size.to_string(),
        ),
    ];
    Ok((headers, chunk.bytes).into_response())
}

/// `GET .../files/list?path=`: a directory listing.
#[utoipa::path(get, path = "/v1/workspaces/{id}/files/list", tag = "files", params(("id" = String, Path), ("path" = String, Query)), responses((status = 200, description = "Directory entries: name, type, size, mode, mtime"), crate::wire::doc::InGuest))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, OpError> {
    ops::files::may_read(&ctx)?;
    let params = query_params(query.as_deref(), &["path"])?;
    let path = required_path(&params)?;
    let listing = ops::files::list(&state, &ctx, &id, &path).await?;
    Ok(Json(json!(listing)))
}

/// `PUT .../files?path=[&mode=]`: create or replace a file with the body.
#[utoipa::path(put, path = "/v1/workspaces/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query), ("mode" = Option<String>, Query, description = "Octal, e.g. 0644")), request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "Up to 16 MiB"), responses((status = 200, description = "Written"), crate::wire::doc::InGuest, crate::wire::doc::Held, crate::wire::doc::TooLarge, (status = 507, body = crate::wire::doc::ErrorBody, description = "No space left in the workspace (`no_space`)")))]
pub async fn put(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    ops::files::may_write(&ctx)?;
    let params = query_params(query.as_deref(), &["path", "mode"])?;
    let path = required_path(&params)?;
    let mode = mode(&params)?;
    let info = ops::files::write(&state, &ctx, &id, &path, &body, mode).await?;
    Ok(Json(json!(info)))
}

/// `DELETE .../files?path=[&recursive=true]`.
#[utoipa::path(delete, path = "/v1/workspaces/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query), ("recursive" = Option<bool>, Query)), responses((status = 200, description = "Deleted"), crate::wire::doc::InGuest, crate::wire::doc::Held, (status = 409, body = crate::wire::doc::ErrorBody, description = "Not running, paused (`paused`), an operator holds control (`control_held`), or a directory that is not empty without `recursive=true` (`not_empty`)")))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, OpError> {
    ops::files::may_write(&ctx)?;
    let params = query_params(query.as_deref(), &["path", "recursive"])?;
    let path = required_path(&params)?;
    let recursive = flag(&params, "recursive")?;
    let removed = ops::files::delete(&state, &ctx, &id, &path, recursive).await?;
    Ok(Json(json!({ "deleted": removed })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_errors_name_the_parameter() {
        let params = query_params(Some("path=%2Ftmp%2Fa%20b&access_token=x"), &["path"]).unwrap();
        assert_eq!(params["path"], "/tmp/a b");
        let err = query_params(Some("pth=/tmp"), &["path"]).unwrap_err();
        assert!(err.message.contains("pth"), "{}", err.message);
        let err = required_path(&HashMap::new()).unwrap_err();
        assert!(err.message.starts_with("path:"), "{}", err.message);
        let params = query_params(Some("mode=999&offset=-1"), &["mode", "offset"]).unwrap();
        assert!(mode(&params).unwrap_err().message.starts_with("mode:"));
        assert!(
            number(&params, "offset")
                .unwrap_err()
                .message
                .starts_with("offset:")
        );
    }
}
