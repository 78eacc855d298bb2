//! Bearer tokens on every endpoint, turned into the operation context.
//!
//! A token is accepted from the `Authorization: Bearer` header, from an
//! `access_token` query parameter (WebSocket clients cannot set headers), or
//! from the `cubicle_token` cookie the operator page sets (HttpOnly,
//! SameSite=Strict). Only its SHA-256 hash is stored.
//!
//! A cookie is sent by the browser whatever page made the request, and
//! SameSite does not tell ports apart, so a cookie-authenticated request must
//! come from the gateway's own origin: `Sec-Fetch-Site` must be
//! `same-origin` or `none`, and an `Origin`, when sent, must be the
//! gateway's own (the request's `Host`). Bearer and query tokens are not
//! ambient credentials and are unaffected.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, OptionalFromRequestParts, OriginalUri};
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use axum::http::request::Parts;
use cubicle_runtime::tokens;

use crate::app::AppState;
use crate::cluster::credential;
use crate::error::OpError;
use crate::ops::OpContext;

/// The cookie the operator page authenticates with.
pub const COOKIE_NAME: &str = "cubicle_token";
/// The request id header (set on every request and response).
pub const REQUEST_ID: &str = "x-request-id";

/// Where a request's token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    Bearer,
    Query,
    Cookie,
}

/// The secret a request presents, if any, and where it was.
pub fn presented_secret(parts: &Parts) -> Option<(String, Presented)> {
    if let Some(value) = parts.headers.get(AUTHORIZATION) {
        let text = value.to_str().ok()?;
        let secret = text.strip_prefix("Bearer ")?.trim().to_owned();
        return Some((secret, Presented::Bearer));
    }
    let from_query = parts.uri.query().and_then(|query| {
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == "access_token").then(|| value.to_owned())
        })
    });
    if let Some(secret) = from_query {
        return Some((secret, Presented::Query));
    }
    cookie(parts, COOKIE_NAME).map(|secret| (secret, Presented::Cookie))
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

/// Refuses a cookie-authenticated request made by another origin's page.
pub fn check_same_origin(parts: &Parts) -> Result<(), OpError> {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return Err(OpError::forbidden(format!(
            "a request authenticated by the page's cookie must come from the gateway's own page (Sec-Fetch-Site: {site}); other clients send `Authorization: Bearer <token>`"
        )));
    }
    if let Some(origin) = header(ORIGIN.as_str()) {
        let host = header(HOST.as_str()).unwrap_or_default();
        let own = ["http://", "https://"]
            .iter()
            .any(|scheme| origin.strip_prefix(scheme) == Some(host.as_str()));
        if !own {
            return Err(OpError::forbidden(format!(
                "a request authenticated by the page's cookie must come from the gateway's own origin, not {origin:?}; other clients send `Authorization: Bearer <token>`"
            )));
        }
    }
    Ok(())
}

/// The request id the request-id layer put on the request.
pub fn request_id(parts: &Parts) -> String {
    parts
        .headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned()
}

impl FromRequestParts<AppState> for OpContext {
    type Rejection = OpError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, OpError> {
        if let Some(value) = parts.headers.get(credential::HEADER) {
            let token = edge_caller(parts, state, value)?;
            return context(parts, token);
        }
        let (secret, presented) = presented_secret(parts).ok_or_else(|| {
            OpError::unauthorized(
                "missing token: send `Authorization: Bearer <token>` (the admin token is printed at first start)",
            )
        })?;
        let token = tokens::verify(&state.store, &secret)
            .await
            .map_err(|e| OpError::internal(e.to_string()))?;
        let Some(token) = token else {
            return Err(dead_share(state, &secret)
                .await
                .unwrap_or_else(|| OpError::unauthorized("token is not valid or was revoked")));
        };
        if presented == Presented::Cookie {
            check_same_origin(parts)?;
        }
        context(parts, token)
    }
}

fn context(parts: &Parts, token: tokens::Token) -> Result<OpContext, OpError> {
    let client = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr);
    Ok(OpContext {
        token,
        request_id: request_id(parts),
        client,
        hold: crate::ops::context::Hold::from_query(parts.uri.query())?,
    })
}

/// The caller an edge's credential names, on a node that trusts the edges
/// (anywhere else a credential is refused: only a node's edges may vouch).
fn edge_caller(
    parts: &Parts,
    state: &AppState,
    value: &axum::http::HeaderValue,
) -> Result<tokens::Token, OpError> {
    let Some(trust) = &state.edge_trust else {
        return Err(OpError::unauthorized(
            "this daemon is not a cluster node: it takes no edge credential",
        ));
    };
    // The URI as it came, before any nested router cut its prefix.
    let uri = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(&parts.uri, |OriginalUri(uri)| uri);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let value = value
        .to_str()
        .map_err(|_| OpError::unauthorized("the edge credential is not text"))?;
    let (token, _edge) = trust
        .verify(
            value,
            parts.method.as_str(),
            path,
            cubicle_runtime::state::now_ms(),
        )
        .map_err(|err| OpError::unauthorized(err.to_string()))?;
    Ok(token)
}

/// A share link that was revoked or has expired: 410 saying which, and
/// nothing of its workspace.
async fn dead_share(state: &AppState, secret: &str) -> Option<OpError> {
    let share = tokens::share_by_secret(&state.store, secret).await.ok()??;
    let (code, message) = if share.revoked_at.is_some() {
        (
            "share_revoked",
            "this share link was revoked: ask whoever sent it for a new one",
        )
    } else {
        (
            "share_expired",
            "this share link has expired: ask whoever sent it for a new one",
        )
    };
    Some(OpError::new(crate::error::ErrorKind::Gone, code, message))
}

impl OptionalFromRequestParts<AppState> for OpContext {
    type Rejection = OpError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Option<Self>, OpError> {
        match <OpContext as FromRequestParts<AppState>>::from_request_parts(parts, state).await {
            Ok(ctx) => Ok(Some(ctx)),
            Err(err) if err.kind == crate::error::ErrorKind::Unauthorized => Ok(None),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::builder().uri("/v1/workspaces");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn cookies_from_other_origins_are_refused() {
        let host = ("host", "127.0.0.1:7878");
        assert!(
            check_same_origin(&parts(&[host])).is_ok(),
            "no browser headers: curl"
        );
        assert!(check_same_origin(&parts(&[host, ("sec-fetch-site", "same-origin")])).is_ok());
        assert!(check_same_origin(&parts(&[host, ("origin", "http://127.0.0.1:7878")])).is_ok());
        for bad in [
            [host, ("sec-fetch-site", "same-site")],
            [host, ("sec-fetch-site", "cross-site")],
            [host, ("origin", "http://127.0.0.1:9999")],
            [host, ("origin", "null")],
        ] {
            assert!(check_same_origin(&parts(&bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn where_the_token_came_from() {
        let p = parts(&[
            ("authorization", "Bearer cubicle_x"),
            ("cookie", "cubicle_token=y"),
        ]);
        assert_eq!(
            presented_secret(&p),
            Some(("cubicle_x".into(), Presented::Bearer))
        );
        let p = parts(&[("cookie", "a=b; cubicle_token=y")]);
        assert_eq!(presented_secret(&p), Some(("y".into(), Presented::Cookie)));
    }
}
