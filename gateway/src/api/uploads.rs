//! `POST /v1/workspaces/{id}/upload`: a file handed to a page's file
//! input — the request's body under `?name=`, or a released download
//! (`?download=dl-…`, empty body) — into the field `?selector=` names (the
//! focused one without it). What is checked and in what order:
//! [`crate::ops::uploads`].

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};

use super::body::Body;
use super::files::query_params;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::uploads::Source;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;

/// The request body limit: what the guest keeps of one file.
pub const BODY_LIMIT: usize = cubicle_image::control::MAX_FILE as usize;

#[utoipa::path(post, path = "/v1/workspaces/{id}/upload", tag = "files",
    params(("id" = String, Path),
        ("name" = Option<String>, Query, description = "The file's name as the page sees it, with the file as the body"),
        ("download" = Option<String>, Query, description = "A released download of this workspace (`dl-…`) instead of a body"),
        ("selector" = Option<String>, Query, description = "A CSS selector of the `<input type=file>`; the focused one without it")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The file (at most 16 MiB), or empty with `download`"),
    responses((status = 200, body = crate::ops::uploads::Uploaded, description = "The page's file input holds the file"),
        (status = 202, body = crate::wire::doc::ErrorBody, description = "`held`: an `upload` rule holds it for a person (the shipped default policy does); ask again once approved"),
        (status = 400, body = crate::wire::doc::ErrorBody, description = "A bad parameter (the message names it)"),
        (status = 403, body = crate::wire::doc::ErrorBody, description = "`upload_flagged`: the quarantine's scan matched a rule (named); or not a role that uses the browser, held off by a take-over, denied by a rule"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace in the caller's scope, or no such download of it"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "`upload_refused`: no file input where the selector or the focus points (the message says what is there); `download_not_released`; `no_page`"),
        crate::wire::doc::TooLarge))]
pub async fn upload(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    ops::uploads::may_upload(&ctx)?;
    let params = query_params(raw.as_deref(), &["name", "download", "selector"])?;
    let selector = params.get("selector").map(String::as_str);
    crate::wire::secret::check_selector(selector)?;
    let source = match (params.get("name"), params.get("download")) {
        (Some(name), None) if !name.is_empty() => Source::Bytes {
            name: name.clone(),
            bytes: body.to_vec(),
        },
        (None, Some(download)) if body.is_empty() && download.starts_with("dl-") => {
            Source::Download(download.clone())
        }
        _ => {
            return Err(OpError::bad_request(
                "name, download: give ?name=FILE with the file as the body, or ?download=dl-… (a released download of this workspace) with an empty body",
            ));
        }
    };
    let uploaded = ops::uploads::upload(&state, &ctx, &id, source, selector).await?;
    Ok(Json(json!(uploaded)))
}
