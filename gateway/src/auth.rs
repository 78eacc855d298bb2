//! Bearer tokens on every endpoint.
//!
//! A token is accepted from the `Authorization: Bearer` header, from an
//! `access_token` query parameter (WebSocket clients cannot set headers), or
//! from the `cubicle_token` cookie the operator page sets (HttpOnly,
//! SameSite=Strict). Only its SHA-256 hash is stored.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::header::{AUTHORIZATION, COOKIE};
use axum::http::request::Parts;
use cubicle_runtime::tokens::{self, Role, Token};

use crate::app::AppState;
use crate::error::ApiError;

/// The cookie the operator page authenticates with.
pub const COOKIE_NAME: &str = "cubicle_token";

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token: Token,
}

impl Caller {
    /// Refuses the request unless the caller has one of `roles`.
    pub fn require(&self, roles: &[Role], what: &str) -> Result<(), ApiError> {
        if self.token.role == Role::Admin || roles.contains(&self.token.role) {
            return Ok(());
        }
        Err(ApiError::forbidden(format!(
            "a token with role {} cannot {what}",
            self.token.role.as_str()
        )))
    }
}

/// The secret a request presents, if any.
pub fn presented_secret(parts: &Parts) -> Option<String> {
    if let Some(value) = parts.headers.get(AUTHORIZATION) {
        let text = value.to_str().ok()?;
        return text.strip_prefix("Bearer ").map(|s| s.trim().to_owned());
    }
    let from_query = parts.uri.query().and_then(|query| {
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == "access_token").then(|| value.to_owned())
        })
    });
    from_query.or_else(|| cookie(parts, COOKIE_NAME))
}

fn cookie(parts: &Parts, name: &str) -> Option<String> {
    parts
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let secret = presented_secret(parts).ok_or_else(|| {
            ApiError::unauthorized(
                "missing token: send `Authorization: Bearer <token>` (the admin token is printed at first start)",
            )
        })?;
        let token = tokens::verify(&state.store, &secret)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .ok_or_else(|| ApiError::unauthorized("token is not valid or was revoked"))?;
        Ok(Caller { token })
    }
}

impl OptionalFromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Option<Self>, ApiError> {
        match <Caller as FromRequestParts<AppState>>::from_request_parts(parts, state).await {
            Ok(caller) => Ok(Some(caller)),
            Err(err) if err.status == axum::http::StatusCode::UNAUTHORIZED => Ok(None),
            Err(err) => Err(err),
        }
    }
}
