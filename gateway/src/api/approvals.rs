//! `/v1/approvals`: operations a policy held, for operators to decide out
//! of the agent's band, and `/v1/workspaces/{id}/policy`.
//!
//! | route | who | what |
//! | --- | --- | --- |
//! | `GET /v1/approvals?state=&workspace=` | anyone who sees workspaces (agents: their own requests) | the approvals, newest first |
//! | `GET /v1/approvals/events` | same | Server-Sent Events `approval`: every pending one now, then each change |
//! | `GET /v1/approvals/{id}?wait=S` | same | one approval, once decided or after `S` seconds (≤ 300) |
//! | `GET /v1/approvals/{id}/screenshot` | same | the PNG taken when it was asked |
//! | `POST /v1/approvals/{id}/approve`, `/deny` | operators, admins; never the asking token | `{"reason", "scope"}` (`scope`: `once`, or `workspace` for egress) |
//! | `POST /v1/workspaces/{id}/approvals?wait=S` | agents, operators, admins who see it | asks a person to confirm a step: `{"question", "details", "expires_in_seconds"}`; 202 while pending, 200 once decided |
//! | `GET`, `PUT /v1/workspaces/{id}/policy` | see / operators, admins | the workspace's policy, switched (an event) |

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use crate::wire::path::Path;
use axum::extract::{RawQuery, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::body::Body;
use crate::app::AppState;
use crate::approvals::{Approval, ApprovalState};
use crate::error::OpError;
use crate::ops::OpContext;
use crate::ops::approvals::{self as core, Filter};
use crate::wire::approval::{Ask, Decide, SetPolicy};

/// The approvals routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/approvals", get(list))
        .route("/v1/approvals/events", get(events))
        .route("/v1/approvals/{id}", get(one))
        .route("/v1/approvals/{id}/screenshot", get(screenshot))
        .route("/v1/approvals/{id}/approve", post(approve))
        .route("/v1/approvals/{id}/deny", post(deny))
        .route("/v1/workspaces/{id}/policy", get(policy).put(set_policy))
        .route("/v1/workspaces/{id}/approvals", post(ask))
}

fn view(approval: &Approval) -> Value {
    let mut value = serde_json::to_value(approval).unwrap_or(Value::Null);
    if let Some(fields) = value.as_object_mut() {
        fields.insert("url".into(), json!(crate::ops::gates::url_of(&approval.id)));
    }
    value
}

fn filter(raw: Option<&str>) -> Result<Filter, OpError> {
    let params = super::files::query_params(raw, &["state", "workspace"])?;
    let state = match params.get("state").map(String::as_str) {
        None | Some("all") => None,
        Some("pending") => Some(ApprovalState::Pending),
        Some("approved") => Some(ApprovalState::Approved),
        Some("denied") => Some(ApprovalState::Denied),
        Some("expired") => Some(ApprovalState::Expired),
        Some(other) => {
            return Err(OpError::bad_request(format!(
                "state: {other:?} is not one of pending, approved, denied, expired, all"
            )));
        }
    };
    Ok(Filter {
        state,
        workspace: params.get("workspace").cloned(),
    })
}

#[utoipa::path(get, path = "/v1/approvals", tag = "approvals", params(("state" = Option<crate::wire::approval::ApprovalStateFilter>, Query, description = "pending, approved, denied, expired or all"), ("workspace" = Option<String>, Query, description = "Only this workspace's")),
    responses((status = 200, description = "{\"approvals\": [...]}: id, workspace, operation, params (as operators see them), sha256, asked_by, asked_at, expires_at, rule, reason, context (tab URL, origin, host, focus), state, decided_by, decision_reason, used, has_screenshot, url"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such `workspace` (deleted ones included), or one outside the token's scope")))]
pub async fn list(
    State(state): State<AppState>,
    ctx: OpContext,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, OpError> {
    let filter = filter(query.as_deref())?;
    let approvals = core::list(&state, &ctx, &filter).await?;
    Ok(Json(
        json!({ "approvals": approvals.iter().map(view).collect::<Vec<_>>() }),
    ))
}

#[utoipa::path(get, path = "/v1/approvals/{id}", tag = "approvals", params(("id" = String, Path), ("wait" = Option<f64>, Query, minimum = 0, description = "Seconds to wait for a decision (more than 300 waits 300)")),
    responses((status = 200, description = "The approval (see GET /v1/approvals)"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such approval, or one the caller may not see")))]
pub async fn one(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let approval = core::get(&state, &ctx, &id, ctx.hold.wait).await?;
    Ok(Json(view(&approval)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/approvals", tag = "approvals", params(("id" = String, Path), ("wait" = Option<f64>, Query, minimum = 0, description = "Seconds to wait for a person's decision (more than 300 waits 300)")), request_body = crate::wire::approval::Ask,
    responses((status = 202, description = "Asked, and not yet decided: the approval (see GET /v1/approvals), whose `url` to wait on"), (status = 200, description = "Decided within `wait`: the approval, `state` approved, denied or expired"), crate::wire::doc::NoWorkspace, crate::wire::doc::TooLarge, (status = 400, body = crate::wire::doc::ErrorBody, description = "A question or details this operation cannot take"), (status = 409, body = crate::wire::doc::ErrorBody, description = "The workspace is not running, or paused"), (status = 429, body = crate::wire::doc::ErrorBody, description = "The token has 64 approvals pending")))]
pub async fn ask(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Response, OpError> {
    core::may_ask(&ctx)?;
    let body: Ask = crate::wire::parse(&body)?;
    let asked = core::Ask {
        question: body.question,
        details: body.details,
        ttl: body.expires_in_seconds.map(Duration::from_secs),
    };
    let approval = core::ask(&state, &ctx, &id, asked).await?;
    let approval = match ctx.hold.wait.is_zero() {
        true => approval,
        false => core::get(&state, &ctx, &approval.id, ctx.hold.wait).await?,
    };
    let status = match approval.state {
        ApprovalState::Pending => axum::http::StatusCode::ACCEPTED,
        _ => axum::http::StatusCode::OK,
    };
    Ok((status, Json(view(&approval))).into_response())
}

#[utoipa::path(get, path = "/v1/approvals/{id}/screenshot", tag = "approvals", params(("id" = String, Path)),
    responses((status = 200, content_type = "image/png", description = "The screen when the action was asked"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such approval, one the caller may not see, or one without a screenshot")))]
pub async fn screenshot(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Response, OpError> {
    let png = core::screenshot(&state, &ctx, &id).await?;
    Ok(([(CONTENT_TYPE, "image/png")], png).into_response())
}

#[utoipa::path(post, path = "/v1/approvals/{id}/approve", tag = "approvals", params(("id" = String, Path)), request_body(content = crate::wire::approval::Decide, description = "May be empty"),
    responses((status = 200, description = "The approval, approved: the held operation runs once, for exactly its parameters"), (status = 403, body = crate::wire::doc::ErrorBody, description = "Not an operator or admin, or the token that asked"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such approval"), (status = 409, body = crate::wire::doc::ErrorBody, description = "Already decided or expired (`decided`)"), crate::wire::doc::TooLarge))]
pub async fn approve(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    decide(state, ctx, id, body, true).await
}

#[utoipa::path(post, path = "/v1/approvals/{id}/deny", tag = "approvals", params(("id" = String, Path)), request_body(content = crate::wire::approval::Decide, description = "May be empty"),
    responses((status = 200, description = "The approval, denied: the agent gets 403 with the reason"), (status = 403, body = crate::wire::doc::ErrorBody, description = "Not an operator or admin, or the token that asked"), (status = 404, body = crate::wire::doc::ErrorBody, description = "No such approval"), (status = 409, body = crate::wire::doc::ErrorBody, description = "Already decided or expired (`decided`)"), crate::wire::doc::TooLarge))]
pub async fn deny(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    decide(state, ctx, id, body, false).await
}

async fn decide(
    state: AppState,
    ctx: OpContext,
    id: String,
    body: axum::body::Bytes,
    approve: bool,
) -> Result<Json<Value>, OpError> {
    core::may_decide(&ctx)?;
    let body = Decide::parse(&body)?;
    let approval = core::decide(&state, &ctx, &id, approve, body.reason, body.scope).await?;
    Ok(Json(view(&approval)))
}

#[utoipa::path(get, path = "/v1/approvals/events", tag = "approvals",
    responses((status = 200, content_type = "text/event-stream", description = "Server-Sent Events `approval` (the approval as JSON): every pending one first, then each change (asked, decided, expired, used)")))]
pub async fn events(
    State(state): State<AppState>,
    ctx: OpContext,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, OpError> {
    // Subscribed before the snapshot, so nothing falls between them (the
    // snapshot's operation checks the caller; a refusal drops both).
    let changes = state.gates.approvals.subscribe();
    let pending = Filter {
        state: Some(ApprovalState::Pending),
        workspace: None,
    };
    let mut first = core::list(&state, &ctx, &pending).await?;
    first.reverse();
    let revoked = state.revocations.watch(state.store.clone(), &ctx.token.id);
    let seen: HashMap<String, bool> = HashMap::new();
    let stream = futures_util::stream::unfold(
        (state, ctx, changes, first, revoked, seen),
        |(state, ctx, mut changes, mut first, revoked, mut seen)| async move {
            loop {
                if let Some(approval) = first.pop() {
                    let event = Event::default()
                        .event("approval")
                        .data(view(&approval).to_string());
                    return Some((Ok(event), (state, ctx, changes, first, revoked, seen)));
                }
                let next = tokio::select! {
                    next = changes.recv() => next,
                    () = revoked.revoked() => return None,
                };
                let approval = match next {
                    Ok(approval) => approval,
                    // A reader this slow gets a resync note; the page reloads the list.
                    Err(RecvError::Lagged(_)) => {
                        let event = Event::default().event("resync").data("{}");
                        return Some((Ok(event), (state, ctx, changes, first, revoked, seen)));
                    }
                    Err(RecvError::Closed) => return None,
                };
                if core::may_see(&state, &ctx, &approval, &mut seen).await {
                    let event = Event::default()
                        .event("approval")
                        .data(view(&approval).to_string());
                    return Some((Ok(event), (state, ctx, changes, first, revoked, seen)));
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/policy", tag = "approvals", params(("id" = String, Path)),
    responses((status = 200, description = "{\"policy\", \"default\", \"policies\": [{name, description}]}"), crate::wire::doc::NoWorkspace))]
pub async fn policy(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let name = core::policy_of(&state, &ctx, &id).await?;
    Ok(Json(policy_view(&state, &name)))
}

#[utoipa::path(put, path = "/v1/workspaces/{id}/policy", tag = "approvals", params(("id" = String, Path)), request_body = crate::wire::approval::SetPolicy,
    responses((status = 200, description = "The workspace's policy, switched (a policy.switch event)"), crate::wire::doc::NoWorkspace, crate::wire::doc::TooLarge, (status = 400, body = crate::wire::doc::ErrorBody, description = "No such policy, or a body this operation cannot take")))]
pub async fn set_policy(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    Body(body): Body,
) -> Result<Json<Value>, OpError> {
    core::may_switch_policy(&ctx)?;
    let body: SetPolicy = crate::wire::parse(&body)?;
    let name = core::switch_policy(&state, &ctx, &id, &body.policy).await?;
    Ok(Json(policy_view(&state, &name)))
}

fn policy_view(state: &AppState, name: &str) -> Value {
    let policies: Vec<Value> = state
        .gates
        .policies
        .iter()
        .map(|p| json!({ "name": p.name, "description": p.description }))
        .collect();
    json!({ "policy": name, "default": state.gates.default_policy, "policies": policies })
}
