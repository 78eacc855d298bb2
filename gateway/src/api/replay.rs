//! The auditor's doors: export a workspace's sealed record as one bundle,
//! verify it on the server (the replay page's badge), the recorded
//! sessions with their timelines, their video segments, and the public
//! key checkpoints are signed with.

use crate::wire::path::Path;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::replay::{self as wire, RecordingList, RecordingView};

#[utoipa::path(get, path = "/v1/audit/key", tag = "audit",
    responses((status = 200, description = "{\"algorithm\": \"ed25519\", \"public_key\": hex}: the key checkpoints are signed with; give it to `cubicle audit verify --key`")))]
pub async fn key(State(state): State<AppState>, _ctx: OpContext) -> Json<Value> {
    Json(json!({ "algorithm": "ed25519", "public_key": state.replay.key.public_hex() }))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/audit/export", tag = "audit",
    params(("id" = String, Path)),
    responses((status = 200, content_type = "application/x-tar", description = "The bundle: manifest.json, audit-key.pub, events.jsonl, checkpoints.jsonl, segments/*.mp4; check it with `cubicle audit verify`"),
        crate::wire::doc::NoWorkspace))]
pub async fn export(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Response, OpError> {
    let (_, file) = ops::replay::export(&state, &ctx, &id).await?;
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    let disposition = format!("attachment; filename=\"cubicle-audit-{id}.tar\"");
    Ok((
        [
            (CONTENT_TYPE, "application/x-tar".to_owned()),
            (CONTENT_DISPOSITION, disposition),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/har", tag = "audit",
    params(("id" = String, Path)),
    responses((status = 200, content_type = "application/json", description = "HAR 1.2 of every request the workspace's egress proxy saw (plain HTTP and intercepted HTTPS): method, URL, status, headers with credentials and cookies redacted, start and wait time; no bodies. Operators, auditors, admins"),
        crate::wire::doc::NoWorkspace))]
pub async fn har(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Response, OpError> {
    let har = ops::har::har(&state, &ctx, &id).await?;
    let disposition = format!("attachment; filename=\"cubicle-{id}.har\"");
    Ok((
        [
            (CONTENT_TYPE, "application/json".to_owned()),
            (CONTENT_DISPOSITION, disposition),
        ],
        Json(har),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/audit/verify", tag = "audit",
    params(("id" = String, Path)),
    responses((status = 200, description = "The report of `cubicle audit verify` on a fresh export: {ok, records, checkpoints, segments, last_seq, checkpointed_seq, failures: [{seq, line, message}], warnings}"),
        crate::wire::doc::NoWorkspace))]
pub async fn verify(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let report = ops::replay::verify(&state, &ctx, &id).await?;
    let mut body = serde_json::to_value(&report).map_err(|e| OpError::internal(e.to_string()))?;
    body["ok"] = Value::Bool(report.ok());
    Ok(Json(body))
}

#[utoipa::path(get, path = "/v1/recordings", tag = "audit",
    responses((status = 200, body = RecordingList, description = "Recorded sessions the caller may see, deleted workspaces included, newest first")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
) -> Result<Json<RecordingList>, OpError> {
    let recordings = ops::replay::recordings(&state, &ctx)
        .await?
        .iter()
        .map(|r| {
            let segments = wire::segments(&r.workspace.id, &r.segments);
            wire::summary(&r.workspace, &segments)
        })
        .collect();
    Ok(Json(RecordingList { recordings }))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/recordings", tag = "audit",
    params(("id" = String, Path)),
    responses((status = 200, body = RecordingView, description = "The segments back to back on one timeline, and every event with its place on it (video_ms)"),
        crate::wire::doc::NoWorkspace))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<RecordingView>, OpError> {
    let (recorded, events) = ops::replay::recording(&state, &ctx, &id).await?;
    let segments = wire::segments(&id, &recorded.segments);
    Ok(Json(RecordingView {
        recording: wire::summary(&recorded.workspace, &segments),
        events: wire::timeline(&segments, events),
        segments,
    }))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/recordings/{file}", tag = "audit",
    params(("id" = String, Path), ("file" = String, Path, description = "A segment's file name, as the recording lists it")),
    responses((status = 200, content_type = "video/mp4", description = "The segment: H.264 in fragmented MP4"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such workspace (or outside the token's scope), or no such sealed segment of it")))]
pub async fn segment(
    State(state): State<AppState>,
    ctx: OpContext,
    Path((id, file)): Path<(String, String)>,
) -> Result<Response, OpError> {
    let path = ops::replay::segment(&state, &ctx, &id, &file).await?;
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| OpError::internal(format!("cannot read segment {file}: {e}")))?;
    Ok((
        [
            (CONTENT_TYPE, "video/mp4"),
            // Sealed: it never changes.
            (CACHE_CONTROL, "private, max-age=86400, immutable"),
        ],
        bytes,
    )
        .into_response())
}
