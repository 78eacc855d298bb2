//! `/v1/downloads`: files the egress proxy held in quarantine, and
//! `/v1/workspaces/{id}/egress`, the workspace's egress policy.
//!
//! | route | who | what |
//! | --- | --- | --- |
//! | `GET /v1/downloads?workspace=&state=` | auditors, operators, admins; agents for their own workspaces | the records, newest first |
//! | `GET /v1/downloads/{id}` | same | one record |
//! | `GET /v1/downloads/{id}/content` | operators, admins | the bytes, as an attachment with `nosniff` |
//! | `POST /v1/downloads/{id}/release`, `/reject` | operators, admins | `{"reason"}`; release writes `~/Downloads/<name>`, mode 0644 |
//! | `GET`, `PUT /v1/workspaces/{id}/egress` | who sees it / operators, admins | the egress policy, changed (an event) |
//! | `GET /v1/egress/ca` | any token | the interception CA's certificate (PEM) |

use crate::wire::path::Path;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cubicle_runtime::quarantine::records::DownloadState;
use serde::Deserialize;

use super::body::Body as RequestBody;
use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};
use crate::wire::download::{Decision, DownloadList, DownloadView};
use crate::wire::egress::{EgressBody, EgressView};

/// The downloads and egress routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/downloads", get(list))
        .route("/v1/downloads/{id}", get(one))
        .route("/v1/downloads/{id}/content", get(content))
        .route("/v1/downloads/{id}/release", post(release))
        .route("/v1/downloads/{id}/reject", post(reject))
        .route("/v1/workspaces/{id}/egress", get(egress).put(set_egress))
        .route("/v1/egress/ca", get(ca))
}

/// Filters of `GET /v1/downloads`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this workspace's.
    pub workspace: Option<String>,
    /// `held`, `released` or `rejected`.
    #[param(value_type = Option<crate::wire::download::DownloadStateFilter>)]
    pub state: Option<String>,
}

#[utoipa::path(get, path = "/v1/downloads", tag = "downloads", params(ListQuery),
    responses((status = 200, body = DownloadList), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such `workspace`, or one outside the token's scope")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<DownloadList>, OpError> {
    let Query(query) = query.map_err(|e| OpError::bad_request(e.body_text()))?;
    let held_state = match query.state.as_deref() {
        None => None,
        Some(text) => Some(DownloadState::parse(text).ok_or_else(|| {
            OpError::bad_request(format!("state: {text:?} is not held, released or rejected"))
        })?),
    };
    let records =
        ops::downloads::list(&state, &ctx, query.workspace.as_deref(), held_state).await?;
    Ok(Json(DownloadList {
        downloads: records.iter().map(DownloadView::from).collect(),
    }))
}

#[utoipa::path(get, path = "/v1/downloads/{id}", tag = "downloads", params(("id" = String, Path)),
    responses((status = 200, body = DownloadView), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such download, or one the caller may not see")))]
pub async fn one(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<DownloadView>, OpError> {
    let record = ops::downloads::get(&state, &ctx, &id).await?;
    Ok(Json(DownloadView::from(&record)))
}

#[utoipa::path(get, path = "/v1/downloads/{id}/content", tag = "downloads", params(("id" = String, Path)),
    responses((status = 200, description = "The held bytes (attachment, nosniff)", content_type = "application/octet-stream"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such download, or one the caller may not see"), (status = 410, body = crate::wire::doc::ErrorBody, description = "Rejected: nothing kept")))]
pub async fn content(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Response, OpError> {
    let (record, path) = ops::downloads::content(&state, &ctx, &id).await?;
    let file = tokio::fs::File::open(&path)
        .await
        .map_err(|e| OpError::internal(e.to_string()))?;
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    // The cleaned name, ASCII only in the plain parameter.
    let ascii: String = record
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = format!("attachment; filename=\"{ascii}\"");
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(record.size));
    Ok(response)
}

#[utoipa::path(post, path = "/v1/downloads/{id}/release", tag = "downloads", params(("id" = String, Path)), request_body(content = Decision, description = "May be empty"),
    responses((status = 200, body = DownloadView, description = "Written to ~/Downloads, not executable"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such download, or one the caller may not see"), (status = 409, body = crate::wire::doc::ErrorBody, description = "Already decided, or the workspace is not running or paused"), crate::wire::doc::TooLarge, (status = 502, body = crate::wire::doc::ErrorBody, description = "The workspace could not take the file (`guest_unreachable`, `guest_error`)"), (status = 504, body = crate::wire::doc::ErrorBody, description = "The workspace did not answer in time (`guest_timeout`)")))]
pub async fn release(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RequestBody(body): RequestBody,
) -> Result<Json<DownloadView>, OpError> {
    ops::downloads::may_decide(&ctx)?;
    let reason = Decision::parse(&body)?;
    let record = ops::downloads::release(&state, &ctx, &id, reason.as_deref()).await?;
    Ok(Json(DownloadView::from(&record)))
}

#[utoipa::path(post, path = "/v1/downloads/{id}/reject", tag = "downloads", params(("id" = String, Path)), request_body(content = Decision, description = "May be empty"),
    responses((status = 200, body = DownloadView, description = "Rejected; its content is gone"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such download, or one the caller may not see"), (status = 409, body = crate::wire::doc::ErrorBody, description = "Already decided"), crate::wire::doc::TooLarge))]
pub async fn reject(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RequestBody(body): RequestBody,
) -> Result<Json<DownloadView>, OpError> {
    ops::downloads::may_decide(&ctx)?;
    let reason = Decision::parse(&body)?;
    let record = ops::downloads::reject(&state, &ctx, &id, reason.as_deref()).await?;
    Ok(Json(DownloadView::from(&record)))
}

fn egress_view(id: &str, view: &crate::egress::PolicyView) -> EgressView {
    EgressView {
        workspace: id.to_owned(),
        policy: EgressBody::of(&view.policy),
        is_default: view.is_default,
    }
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/egress", tag = "egress", params(("id" = String, Path)),
    responses((status = 200, body = EgressView), crate::wire::doc::NoWorkspace))]
pub async fn egress(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<EgressView>, OpError> {
    let view = ops::egress::get(&state, &ctx, &id).await?;
    Ok(Json(egress_view(&id, &view)))
}

#[utoipa::path(put, path = "/v1/workspaces/{id}/egress", tag = "egress", params(("id" = String, Path)), request_body = EgressBody,
    responses((status = 200, body = EgressView, description = "Changed, for new connections at once (an egress.policy event)"), crate::wire::doc::NoWorkspace, crate::wire::doc::TooLarge))]
pub async fn set_egress(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    RequestBody(body): RequestBody,
) -> Result<Json<EgressView>, OpError> {
    ops::egress::may_put(&ctx)?;
    let policy = EgressBody::parse(&body)?;
    let view = ops::egress::put(&state, &ctx, &id, policy).await?;
    Ok(Json(egress_view(&id, &view)))
}

#[utoipa::path(get, path = "/v1/egress/ca", tag = "egress",
    responses((status = 200, description = "The interception CA certificate, PEM", content_type = "application/x-pem-file"), (status = 404, body = crate::wire::doc::ErrorBody, description = "Interception is off")))]
pub async fn ca(State(state): State<AppState>, _ctx: OpContext) -> Result<Response, OpError> {
    let pem = state.egress.ca_pem().ok_or_else(|| {
        OpError::new(
            ErrorKind::NotFound,
            "not_found",
            "TLS interception is off: no CA",
        )
    })?;
    Ok((
        [(header::CONTENT_TYPE, "application/x-pem-file")],
        pem.to_owned(),
    )
        .into_response())
}
