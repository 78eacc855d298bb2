//! `/v1/profiles`: the caller's persistent browser profiles (named at
//! create with `"profile": NAME`), listed and removed. What they hold and
//! when they are saved: [`crate::ops::profiles`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::path::Path;

#[utoipa::path(get, path = "/v1/profiles", tag = "profiles",
    responses((status = 200, description = "{\"profiles\": [profile]} (the caller's; an admin's: everyone's)")))]
pub async fn list(State(state): State<AppState>, ctx: OpContext) -> Result<Json<Value>, OpError> {
    let all = ops::profiles::list(&state, &ctx).await?;
    Ok(Json(json!({ "profiles": all })))
}

#[utoipa::path(delete, path = "/v1/profiles/{id}", tag = "profiles", params(("id" = String, Path)),
    responses((status = 204, description = "Removed with its kept archive; a stopped workspace that had it starts with a fresh profile"),
        (status = 404, body = crate::wire::doc::ErrorBody, description = "No such profile of the caller's"),
        (status = 409, body = crate::wire::doc::ErrorBody, description = "`profile_in_use`: a running workspace uses it; stop that one first")))]
pub async fn delete(
    State(state): State<AppState>,
    ctx: OpContext,
    Path(id): Path<String>,
) -> Result<StatusCode, OpError> {
    ops::profiles::delete(&state, &ctx, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
