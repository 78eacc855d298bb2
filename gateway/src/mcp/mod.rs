//! MCP (Model Context Protocol) for agents: the gateway's capabilities —
//! workspaces, computer-use actions, exec and files — as MCP tools.
//!
//! `POST /v1/mcp` speaks MCP's Streamable HTTP transport through the official
//! Rust SDK (`rmcp`), stateless (no `Mcp-Session-Id`; GET and DELETE answer
//! 405) and with plain JSON responses. Every request is authenticated by the
//! same [`OpContext`] extractor as the rest of the API, before the SDK sees it;
//! auditors are refused (the tools drive workspaces). `cubicle mcp`
//! ([`stdio`]) bridges a stdio MCP client to this endpoint.
//!
//! The tools ([`tools`]) call the same functions as the HTTP handlers
//! ([`calls`]), so they validate the same way and fail with the same messages:
//! a tool error is a result with `isError: true`; an unknown tool or a
//! malformed request is a JSON-RPC error. Read [`server::CubicleMcp`] first.

pub mod calls;
pub mod precheck;
pub mod server;
pub mod stdio;
pub mod tools;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use crate::app::AppState;
use crate::error::{ErrorKind, OpError};
use crate::ops::OpContext;

/// The endpoint's path.
pub const PATH: &str = "/v1/mcp";
/// The largest JSON-RPC message accepted: a `write_file` of the 16 MiB file
/// limit in base64, plus room for the envelope.
const MAX_MESSAGE: usize = 23 * 1024 * 1024;
/// The longest plain-text refusal of the SDK that is passed on.
const MAX_REFUSAL: usize = 64 * 1024;
/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// What can go wrong in the MCP layer itself (tool failures are
/// [`OpError`]s, reported as tool results).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("unknown tool {0:?}: call tools/list for the tools this server has")]
    UnknownTool(String),
    #[error(
        "the MCP request carries no authenticated caller (the auth layer must run first; this is a bug)"
    )]
    NoCaller,
}

/// The `/v1/mcp` route, authenticated.
pub fn routes(state: AppState) -> Router<AppState> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_max_request_body_bytes(MAX_MESSAGE)
        // Callers are authenticated by token, never by cookie alone from
        // another site (the cookie is SameSite=Strict), so the SDK's
        // DNS-rebinding Host check would only refuse legitimate remote
        // clients of a gateway listening on a public address.
        .disable_allowed_hosts();
    let for_tools = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(server::CubicleMcp::new(for_tools.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .route_layer(from_fn_with_state(state, authenticate))
}

/// `POST /v1/mcp` as the OpenAPI document shows it. The route itself is
/// served by the MCP SDK's Streamable HTTP service (see [`routes`]); this
/// function only carries the description.
#[utoipa::path(post, path = "/v1/mcp", tag = "mcp",
    request_body(content = Object, description = "A JSON-RPC 2.0 message of the Model Context Protocol (initialize, tools/list, tools/call: list_workspaces, create_workspace, computer, exec, read_file, write_file, list_files, ask_person, call_person, clipboard, fill_secret)"),
    responses((status = 200, description = "The JSON-RPC answer"), (status = 202, description = "A notification was accepted"),
        (status = 401, description = "JSON-RPC error: no valid token"), (status = 403, description = "JSON-RPC error: the role may not drive workspaces")))]
pub async fn described() {}

/// Refuses callers without a valid token (401) or with the auditor role
/// (403), as a JSON-RPC error an MCP client can show; hands the caller to
/// the tools through the request's extensions.
async fn authenticate(
    caller: Result<OpContext, OpError>,
    mut request: Request,
    next: Next,
) -> Result<Response, OpError> {
    let caller = match caller.and_then(crate::ops::access::mcp_session) {
        Ok(caller) => caller,
        Err(refused) => return Ok(json_rpc_refusal(refused)),
    };
    request.extensions_mut().insert(caller);
    let sent_json = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_MESSAGE).await.map_err(|e| {
        OpError::new(
            ErrorKind::TooLarge,
            "too_large",
            format!("MCP message: {e} (at most {MAX_MESSAGE} bytes)"),
        )
    })?;
    if let Some(error) = precheck::check(&body) {
        return Ok(Json(error).into_response());
    }
    let request = Request::from_parts(parts, Body::from(body));
    Ok(json_refusal(next.run(request).await, sent_json).await)
}

/// Server error code for a refused caller (JSON-RPC's implementation-defined range).
const UNAUTHORIZED: i64 = -32001;

/// A refusal of the caller as the HTTP status it is, with a JSON-RPC error
/// body whose message says why and what to do.
fn json_rpc_refusal(refused: OpError) -> Response {
    let mut message = refused.message;
    if refused.kind == ErrorKind::Unauthorized {
        message.push_str(" (MCP clients: send the header `Authorization: Bearer <token>`)");
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": UNAUTHORIZED, "message": message, "data": { "code": refused.code } },
    });
    (refused.kind.status(), Json(body)).into_response()
}

/// The SDK refuses transport-level mistakes (a body that is not JSON, a
/// missing `Accept`) in plain text; the API answers JSON everywhere, so
/// those become JSON-RPC errors. A JSON body the SDK could not parse
/// (it says 415) is a 400 with a parse error, as JSON-RPC over HTTP expects.
async fn json_refusal(response: Response, sent_json: bool) -> Response {
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !response.status().is_client_error() || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_REFUSAL)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let code = if parts.status == StatusCode::UNSUPPORTED_MEDIA_TYPE && sent_json {
        parts.status = StatusCode::BAD_REQUEST;
        PARSE_ERROR
    } else {
        INVALID_REQUEST
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": text },
    });
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(body.to_string()))
}
