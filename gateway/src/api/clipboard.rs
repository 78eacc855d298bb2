//! `/v1/workspaces/{id}/clipboard`: the desktop's clipboard (the X
//! selection Ctrl+C and Ctrl+V use), read (GET) and set (PUT) as UTF-8
//! text; see [`crate::ops::clipboard`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::body::Body;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::clipboard::ClipboardText;
use crate::wire::path::Path;

/// The request body limit of `PUT .../clipboard`: the text's own limit,
/// escaped as JSON (each byte at most 6).
pub const BODY_LIMIT: usize = ops::clipboard::MAX_TEXT * 6 + 64;

#[utoipa::path(get, path = "/v1/workspaces/{id}/clipboard", tag = "clipboard", params(("id" = String, Path)), responses((status = 200, body = ClipboardText, description = "What the clipboard holds (`\"\"` when nothing does)"), crate::wire::doc::InGuest, crate::wire::doc::Held, crate::wire::doc::TooLarge))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let text = ops::clipboard::read(&state, &ctx, &id).await?;
    Ok(Json(json!({ "text": text })))
}

#[utoipa::path(put, path = "/v1/workspaces/{id}/clipboard", tag = "clipboard", params(("id" = String, Path)), request_body = ClipboardText, responses((status = 204, description = "The clipboard holds the text"), crate::wire::doc::InGuest, crate::wire::doc::Held, crate::wire::doc::TooLarge, (status = 409, body = crate::wire::doc::ErrorBody, description = "Not running, paused (`paused`), an operator holds control (`control_held`), or a program took the clipboard at once (`clipboard_changed`)")))]
pub async fn put(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<StatusCode, OpError> {
    ops::clipboard::may_use(&ctx)?;
    let body: ClipboardText = crate::wire::parse(&body)?;
    ops::clipboard::write(&state, &ctx, &id, &body.text).await?;
    Ok(StatusCode::NO_CONTENT)
}
