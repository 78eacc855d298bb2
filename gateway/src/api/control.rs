//! `/v1/workspaces/{id}/control`: who holds the control lock (GET), take
//! over and hand back (POST `/take`, `/release`; operator or admin), and a
//! Server-Sent Events stream of holder changes (`/events`) for the page.
//! `/v1/workspaces/{id}/handoff`: the agent calls for a person, who takes
//! over from the page.
//!
//! SSE rather than polling: a change reaches every viewer as it happens, one
//! idle connection per viewer instead of two requests a second, and
//! `EventSource` reconnects by itself. It sends the current state first.

use std::convert::Infallible;
use std::time::Duration;

use crate::wire::path::Path;
use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::Value;

use crate::app::AppState;
use crate::control::ControlError;
use crate::error::{ErrorKind, OpError};
use crate::ops::{self, OpContext};

impl From<ControlError> for OpError {
    fn from(err: ControlError) -> Self {
        let message = err.to_string();
        match err {
            ControlError::Held { .. } | ControlError::NotHolder { .. } => {
                OpError::new(ErrorKind::Conflict, "control_held", message)
            }
            ControlError::Paused { .. } => OpError::new(ErrorKind::Conflict, "paused", message),
            ControlError::Record(_) => OpError::internal(message),
        }
    }
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/control", tag = "control", params(("id" = String, Path)), responses((status = 200, description = "Who holds the controls (agent or an operator) and since when"), crate::wire::doc::NoWorkspace))]
pub async fn get(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let control = ops::control::get(&state, &ctx, &id).await?;
    Ok(Json(crate::control::view(&control, &id)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/control/take", tag = "control", params(("id" = String, Path)), responses((status = 200, description = "This operator now holds control; agent input gets 409"), crate::wire::doc::NoWorkspace, (status = 409, body = crate::wire::doc::ErrorBody, description = "Another operator holds it (`control_held`), or the workspace is not running or paused (`paused`)")))]
pub async fn take(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let control = ops::control::take(&state, &ctx, &id).await?;
    Ok(Json(crate::control::view(&control, &id)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/control/release", tag = "control", params(("id" = String, Path)), responses((status = 200, description = "Control is back with the agent"), crate::wire::doc::NoWorkspace, (status = 409, body = crate::wire::doc::ErrorBody, description = "Another operator holds it (`control_held`)")))]
pub async fn release(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpError> {
    let control = ops::control::release(&state, &ctx, &id).await?;
    Ok(Json(crate::control::view(&control, &id)))
}

#[utoipa::path(post, path = "/v1/workspaces/{id}/handoff", tag = "control", params(("id" = String, Path)), request_body = crate::wire::control::Handoff, responses((status = 200, description = "Called: the control state, with `call` {reason, by, since_ms} until an operator takes over"), crate::wire::doc::NoWorkspace, crate::wire::doc::TooLarge, (status = 409, body = crate::wire::doc::ErrorBody, description = "The workspace is not running, or paused")))]
pub async fn handoff(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
    super::body::Body(body): super::body::Body,
) -> Result<Json<Value>, OpError> {
    ops::control::may_call(&ctx)?;
    let body: crate::wire::control::Handoff = crate::wire::parse(&body)?;
    let control = ops::control::call(&state, &ctx, &id, &body.reason).await?;
    Ok(Json(crate::control::view(&control, &id)))
}

#[utoipa::path(get, path = "/v1/workspaces/{id}/control/events", tag = "control", params(("id" = String, Path)), responses((status = 200, content_type = "text/event-stream", description = "Server-Sent Events: the holder, now and on every change"), crate::wire::doc::NoWorkspace))]
pub async fn events(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, OpError> {
    let control = ops::control::follow(&state, &ctx, &id).await?;
    let revoked = state.revocations.watch(state.store.clone(), &ctx.token.id);
    let stream = futures_util::stream::unfold(
        (control, revoked, id),
        |(mut control, revoked, id)| async move {
            tokio::select! {
                changed = control.changed() => changed.ok()?,
                () = revoked.revoked() => return None,
            }
            let view = crate::control::view(&control.borrow_and_update(), &id);
            let event = Event::default().event("control").data(view.to_string());
            Some((Ok(event), (control, revoked, id)))
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
