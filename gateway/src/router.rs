//! Every route of the gateway: the REST handlers ([`crate::api`]), the CDP
//! proxy, MCP, the live view, the page and this API's document, under one
//! set of layers (security headers, request ids, the request's log span).

use axum::Router;
use axum::http::{HeaderName, HeaderValue};
use axum::routing::get;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::api::{
    actions, approvals, clipboard, control, downloads, events, exec, files, profiles, replay,
    secrets, shares, snapshots, tokens, uploads, webhooks, workspaces,
};
use crate::app::AppState;
use crate::error::{ErrorKind, OpError};

/// Every route of the gateway.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/v1/workspaces",
            get(workspaces::list).post(workspaces::create),
        )
        .route(
            "/v1/workspaces/{id}",
            get(workspaces::get).delete(workspaces::delete),
        )
        .route(
            "/v1/workspaces/{id}/start",
            axum::routing::post(workspaces::start),
        )
        .route(
            "/v1/workspaces/{id}/stop",
            axum::routing::post(workspaces::stop),
        )
        .route("/v1/pool", get(workspaces::pool))
        .route(
            "/v1/workspaces/{id}/pause",
            axum::routing::post(workspaces::pause),
        )
        .route(
            "/v1/workspaces/{id}/resume",
            axum::routing::post(workspaces::resume),
        )
        .route("/v1/workspaces/{id}/vnc", get(crate::vnc::upgrade))
        .route("/v1/workspaces/{id}/control", get(control::get))
        .route(
            "/v1/workspaces/{id}/handoff",
            axum::routing::post(control::handoff),
        )
        .route(
            "/v1/workspaces/{id}/control/take",
            axum::routing::post(control::take),
        )
        .route(
            "/v1/workspaces/{id}/control/release",
            axum::routing::post(control::release),
        )
        .route("/v1/workspaces/{id}/control/events", get(control::events))
        .route("/v1/tokens", get(tokens::list).post(tokens::create))
        .route("/v1/tokens/{id}", axum::routing::delete(tokens::revoke))
        .route("/v1/me", get(tokens::me))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(crate::health::ready))
        .route("/v1/events", get(events::list))
        .route("/v1/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/v1/share", get(shares::open))
        .route(
            "/v1/workspaces/{id}/share",
            axum::routing::post(shares::create),
        )
        .route("/v1/workspaces/{id}/shares", get(shares::list))
        .route(
            "/v1/workspaces/{id}/shares/{share}",
            axum::routing::delete(shares::revoke),
        )
        .route(
            "/v1/workspaces/{id}/snapshot",
            axum::routing::post(snapshots::take),
        )
        .route(
            "/v1/workspaces/{id}/rollback",
            axum::routing::post(snapshots::roll_back),
        )
        .route("/v1/snapshots", get(snapshots::list))
        .route(
            "/v1/snapshots/{id}",
            get(snapshots::get).delete(snapshots::delete),
        )
        .route("/v1/profiles", get(profiles::list))
        .route("/v1/profiles/{id}", axum::routing::delete(profiles::delete))
        .route("/v1/secrets", get(secrets::list).post(secrets::create))
        .route("/v1/secrets/{id}", axum::routing::delete(secrets::delete))
        .route(
            "/v1/workspaces/{id}/secrets",
            get(secrets::given).post(secrets::bind),
        )
        .route(
            "/v1/workspaces/{id}/fill_secret",
            axum::routing::post(secrets::fill),
        )
        .route(
            "/v1/workspaces/{id}/upload",
            axum::routing::post(uploads::upload)
                .layer(axum::extract::DefaultBodyLimit::max(uploads::BODY_LIMIT)),
        )
        .route(
            "/v1/webhooks/{id}",
            get(webhooks::one).delete(webhooks::delete),
        )
        .route("/v1/workspaces/{id}/exec", axum::routing::post(exec::run))
        .route("/v1/workspaces/{id}/exec/ws", get(exec::upgrade))
        .route(
            "/v1/workspaces/{id}/files",
            get(files::get)
                .put(files::put)
                .delete(files::delete)
                .layer(axum::extract::DefaultBodyLimit::max(files::BODY_LIMIT)),
        )
        .route("/v1/workspaces/{id}/files/list", get(files::list))
        .route(
            "/v1/workspaces/{id}/clipboard",
            get(clipboard::get)
                .put(clipboard::put)
                .layer(axum::extract::DefaultBodyLimit::max(clipboard::BODY_LIMIT)),
        )
        .route(
            "/v1/workspaces/{id}/actions",
            axum::routing::post(actions::actions),
        )
        .route("/v1/workspaces/{id}/screenshot", get(actions::screenshot))
        .route("/v1/audit/key", get(replay::key))
        .route("/v1/workspaces/{id}/audit/export", get(replay::export))
        .route("/v1/workspaces/{id}/har", get(replay::har))
        .route("/v1/workspaces/{id}/audit/verify", get(replay::verify))
        .route("/v1/recordings", get(replay::list))
        .route("/v1/workspaces/{id}/recordings", get(replay::get))
        .route(
            "/v1/workspaces/{id}/recordings/{file}",
            get(replay::segment),
        )
        .route("/v1/openapi.json", get(crate::openapi::serve))
        .merge(approvals::routes())
        .merge(downloads::routes())
        .merge(crate::cdp_proxy::routes())
        .merge(crate::mcp::routes(state.clone()))
        .merge(crate::web::routes(state.clone()))
        .fallback(not_found)
        .with_state(state)
        .layer(security_header("x-frame-options", "DENY"))
        .layer(security_header("referrer-policy", "no-referrer"))
        .layer(security_header("x-content-type-options", "nosniff"))
        .layer(security_header("content-security-policy", CSP))
        // A request id (`x-request-id`, kept when the client sends one, made
        // otherwise) on the request, its log span, its events and its response.
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, MakeRequestUuid))
}

const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static(crate::auth::REQUEST_ID);

/// The page's content security policy: its own scripts, styles and sockets
/// only (and `blob:` media, the replay's Media Source), never framed.
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn security_header(name: &'static str, value: &'static str) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::if_not_present(
        HeaderName::from_static(name),
        HeaderValue::from_static(value),
    )
}

fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let id = request
        .headers()
        .get(crate::auth::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::info_span!("request", id, method = %request.method(), path = request.uri().path())
}

async fn not_found(uri: axum::http::Uri) -> OpError {
    OpError::new(
        ErrorKind::NotFound,
        "not_found",
        format!("no route {}", uri.path()),
    )
}
