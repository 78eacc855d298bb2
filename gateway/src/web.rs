//! The operator page at `/` and its assets (the page's own files from
//! `web/static`, noVNC from `web/node_modules/@novnc/novnc`, installed by npm;
//! never a CDN).
//!
//! The pages need a token like everything else: open `/?token=<token>` (or
//! `/replay?token=<token>`) once; the gateway checks it, sets it as an
//! HttpOnly, SameSite=Strict cookie and redirects to the same page without
//! it, so the token does not stay in the address bar.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use cubicle_runtime::tokens;
use tower_http::services::{ServeDir, ServeFile};

use crate::app::AppState;
use crate::auth::COOKIE_NAME;
use crate::ops::OpContext;

pub fn routes(state: AppState) -> Router<AppState> {
    let web_dir = state.web_dir.clone();
    let assets = Router::new()
        .nest_service(
            "/assets/novnc",
            ServeDir::new(state.web_dir.join("node_modules/@novnc/novnc")),
        )
        .nest_service("/assets", ServeDir::new(state.web_dir.join("static")))
        .layer(middleware::from_fn_with_state(state, require_token));
    // The share page and what it runs are open to anyone: the page holds
    // nothing of a workspace (the link's secret is in its fragment, which
    // the browser keeps), and noVNC and its own script are public code.
    let share_assets = Router::new()
        .nest_service(
            "/share-assets/novnc",
            ServeDir::new(web_dir.join("node_modules/@novnc/novnc")),
        )
        .route_service(
            "/share-assets/share.js",
            ServeFile::new(web_dir.join("static/share.js")),
        )
        .route_service(
            "/share-assets/share.css",
            ServeFile::new(web_dir.join("static/share.css")),
        );
    Router::new()
        .route("/", get(index))
        .route("/replay", get(replay))
        .route("/share", get(share))
        .merge(assets)
        .merge(share_assets)
}

/// The share page (`web/share.html`): a share link's live view.
async fn share(State(state): State<AppState>) -> Response {
    match tokio::fs::read(state.web_dir.join("share.html")).await {
        Ok(page) => ([(CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        Err(err) => crate::error::OpError::internal(format!(
            "the share page is missing from {}: {err}",
            state.web_dir.display()
        ))
        .into_response(),
    }
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match <OpContext as axum::extract::FromRequestParts<AppState>>::from_request_parts(
        &mut parts, &state,
    )
    .await
    {
        Ok(_) => next.run(Request::from_parts(parts, body)).await,
        Err(err) => err.into_response(),
    }
}

async fn index(
    State(state): State<AppState>,
    caller: Option<OpContext>,
    uri: axum::http::Uri,
) -> Response {
    if let Some((secret, back)) = token_in(&uri) {
        return login(&state, &secret, &back).await;
    }
    if caller.is_none() {
        return (
            StatusCode::UNAUTHORIZED,
            [(CONTENT_TYPE, "text/html; charset=utf-8")],
            "<!doctype html><title>Cubicle</title><p>Cubicle needs a token: open <code>/?token=&lt;your token&gt;</code>. The admin token is printed when <code>cubicle serve</code> first starts.</p>",
        )
            .into_response();
    }
    match tokio::fs::read(state.web_dir.join("index.html")).await {
        Ok(page) => ([(CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        Err(err) => crate::error::OpError::internal(format!(
            "the operator page is missing from {}: {err}",
            state.web_dir.display()
        ))
        .into_response(),
    }
}

/// The auditor's replay page (`web/replay.html`); `/replay?token=` signs in
/// like `/?token=` does.
async fn replay(
    State(state): State<AppState>,
    caller: Option<OpContext>,
    uri: axum::http::Uri,
) -> Response {
    if let Some((secret, back)) = token_in(&uri) {
        return login(&state, &secret, &back).await;
    }
    if caller.is_none() {
        return (
            StatusCode::UNAUTHORIZED,
            [(CONTENT_TYPE, "text/html; charset=utf-8")],
            "<!doctype html><title>Cubicle</title><p>The replay page needs a token: open <code>/replay?token=&lt;your token&gt;</code>.</p>",
        )
            .into_response();
    }
    match tokio::fs::read(state.web_dir.join("replay.html")).await {
        Ok(page) => ([(CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        Err(err) => crate::error::OpError::internal(format!(
            "the replay page is missing from {}: {err}",
            state.web_dir.display()
        ))
        .into_response(),
    }
}

/// The token in a page's query, and where to send the browser once it is
/// a cookie: the same path with the rest of the query (`?workspace=` on the
/// replay page).
fn token_in(uri: &axum::http::Uri) -> Option<(String, String)> {
    let query = uri.query()?;
    let secret = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))?
        .to_owned();
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.starts_with("token=") && !pair.is_empty())
        .collect();
    let back = if rest.is_empty() {
        uri.path().to_owned()
    } else {
        format!("{}?{}", uri.path(), rest.join("&"))
    };
    Some((secret, back))
}

async fn login(state: &AppState, secret: &str, back: &str) -> Response {
    match tokens::verify(&state.store, secret).await {
        Ok(Some(_)) => {
            let cookie = format!("{COOKIE_NAME}={secret}; HttpOnly; SameSite=Strict; Path=/");
            let mut response = (StatusCode::SEE_OTHER, [(LOCATION, back)]).into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(SET_COOKIE, value);
            }
            response
        }
        Ok(None) => {
            crate::error::OpError::unauthorized("token is not valid or was revoked").into_response()
        }
        Err(err) => crate::error::OpError::internal(err.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::token_in;

    #[test]
    fn a_token_in_the_query_leaves_the_page_and_the_rest_of_the_query() {
        let uri = |s: &str| s.parse::<axum::http::Uri>().unwrap();
        assert_eq!(
            token_in(&uri("/?token=cubicle_abc")),
            Some(("cubicle_abc".into(), "/".into()))
        );
        assert_eq!(
            token_in(&uri("/replay?workspace=ws-1&token=cubicle_abc")),
            Some(("cubicle_abc".into(), "/replay?workspace=ws-1".into()))
        );
        assert_eq!(token_in(&uri("/replay?workspace=ws-1")), None);
    }
}
