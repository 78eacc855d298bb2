//! The OpenAPI 3 document of the HTTP API, generated from the handlers'
//! `#[utoipa::path]` annotations and the schema types below, and served at
//! `GET /v1/openapi.json`.
//!
//! Request and response shapes come from the types the handlers parse and
//! write ([`crate::wire`]); only the computer-use action, whose parser is
//! hand-written, is described by a schema type here.
//!
//! Every status an operation can answer is listed: the refusals every
//! request can get (400, 401, 403: [`CallerRefusals`]) are added to each
//! operation here, the rest are named by the operation's annotation, most
//! through the shared sets below ([`NoWorkspace`], [`Lifecycle`],
//! [`InGuest`], [`Held`], [`TooLarge`]). Server faults (500, and 503
//! `audit_unavailable` when the event log cannot be written, so nothing is
//! done) are not listed per operation.
//!
//! The document is committed as `gateway/openapi.json`; a test fails when
//! it differs from the generated one (`UPDATE_OPENAPI=1 cargo test -p
//! cubicle-gateway openapi` rewrites it).

use std::collections::BTreeMap;

use axum::Json;
use serde_json::Value;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

use crate::auth::OpContext;

/// `{"error": {"code", "message"}}`: every error, with a 4xx for input the
/// caller chose.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// Machine-readable: `bad_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `start_failed`, ...
    code: String,
    /// What failed, with which input, and what to do.
    message: String,
}

/// One computer-use action, in Anthropic's form (`action`: key, hold_key,
/// type, cursor_position, mouse_move, left_click, right_click,
/// middle_click, double_click, triple_click, left_mouse_down,
/// left_mouse_up, left_click_drag, scroll, wait, screenshot, zoom) or
/// OpenAI CUA's (`type`: click, double_click, scroll, keypress, type, wait,
/// screenshot, move, drag). Or `{"actions": [...]}` for a batch (1..=100)
/// run in order, stopping at the first error.
///
/// `action` and `type` list the parser's own names ([`ActionNames`] fills
/// them in from `crate::actions::parse`); which other fields an action
/// needs depends on the action (a click its `coordinate`, `type` its
/// `text`), which this schema does not spell out per action.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ActionRequest {
    action: Option<String>,
    r#type: Option<String>,
    /// `[x, y]` in screen pixels, or in the space of the last scaled screenshot.
    #[schema(min_items = 2, max_items = 2)]
    coordinate: Option<Vec<i64>>,
    #[schema(min_items = 2, max_items = 2)]
    start_coordinate: Option<Vec<i64>>,
    /// Text to type, xdotool key combination (`ctrl+shift+t`), or modifiers
    /// held during a click or scroll.
    text: Option<String>,
    /// Seconds (0..=60) for `wait` and `hold_key`.
    #[schema(minimum = 0, maximum = 60)]
    duration: Option<f64>,
    /// `up`, `down`, `left`, `right`.
    #[schema(value_type = Option<ScrollDirection>)]
    scroll_direction: Option<String>,
    #[schema(minimum = 1, maximum = 100)]
    scroll_amount: Option<u32>,
    /// `[x0, y0, x1, y1]` for `zoom`.
    #[schema(min_items = 4, max_items = 4)]
    region: Option<Vec<i64>>,
    /// Screenshot: `png` (default) or `jpeg`, with `quality` 1..=100.
    #[schema(value_type = Option<ImageFormat>)]
    format: Option<String>,
    #[schema(minimum = 1, maximum = 100)]
    quality: Option<u8>,
    /// Screenshot scaled to this size (both, or neither); later
    /// coordinates are in it.
    #[schema(minimum = 16, maximum = 7680)]
    width: Option<u32>,
    #[schema(minimum = 16, maximum = 7680)]
    height: Option<u32>,
    /// A batch: 1..=100 actions run in order.
    #[schema(min_items = 1, max_items = 100)]
    actions: Option<Vec<Value>>,
}

/// A screenshot's image format.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Jpg,
}

/// Which way a scroll goes.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// Fills [`ActionRequest`]'s `action` and `type` with the names the
/// parser knows, so the two cannot drift.
struct ActionNames;

impl Modify for ActionNames {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::Schema;
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        let Some(RefOr::T(Schema::Object(request))) = components.schemas.get_mut("ActionRequest")
        else {
            return;
        };
        for (field, names) in [
            ("action", crate::actions::parse::ANTHROPIC),
            ("type", crate::actions::parse::OPENAI),
        ] {
            if let Some(RefOr::T(Schema::Object(property))) = request.properties.get_mut(field) {
                property.enum_values = Some(names.iter().map(|n| Value::from(*n)).collect());
            }
        }
    }
}

/// `{"result": ...}` for one action, `{"results": [...]}` for a batch. An
/// image result is `{"type": "image", "media_type", "width", "height", "data"}`
/// (base64).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ActionResponse {
    result: Option<Value>,
    results: Option<Vec<Value>>,
}

/// An answer with an [`ErrorBody`].
fn error_answer(description: &str) -> RefOr<Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
        .into()
}

/// A set of error answers several operations share, for their annotations'
/// `responses(...)` (a status the annotation also lists after it keeps
/// the annotation's description).
macro_rules! error_answers {
    ($(#[$doc:meta])* $name:ident { $($status:literal => $description:literal,)+ }) => {
        $(#[$doc])*
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                [$(($status.to_owned(), error_answer($description))),+].into_iter().collect()
            }
        }
    };
}

error_answers!(
    /// What any request can be refused for, by the token check every
    /// operation starts with (added to every operation by [`CallerRefusals`]).
    Refused {
        "400" => "A query parameter (such as `wait`) or a body this operation cannot take; the message names it",
        "401" => "No token, or one that is not valid or was revoked",
        "403" => "The token's role may not do this, or a cookie-authenticated request came from another origin",
    }
);

error_answers!(
    /// A workspace named by the path that the caller cannot reach.
    NoWorkspace {
        "404" => "No such workspace, or one outside the token's scope",
    }
);

error_answers!(
    /// A lifecycle change (start, stop, pause, resume, delete).
    Lifecycle {
        "404" => "No such workspace, or one outside the token's scope",
        "409" => "Not in a state this change applies to, or another lifecycle change on it is in progress",
    }
);

error_answers!(
    /// An operation carried out inside a running workspace (its guest,
    /// display or browser).
    InGuest {
        "404" => "No such workspace (or outside the token's scope), or no such path in it",
        "409" => "Not running, paused (`paused`), or an operator holds control (`control_held`)",
        "502" => "The workspace did not answer or failed to (`guest_unreachable`, `guest_error`, `display_unavailable`)",
        "504" => "The workspace did not answer in time (`guest_timeout`)",
    }
);

error_answers!(
    /// A change the workspace's policy may hold for an operator's approval.
    Held {
        "202" => "Held for an operator's approval (`held`), with `approval` {id, url, expires_at, reason, rule}: wait at its url, then send the same request again; a denied or expired approval, or a policy's deny, is a 403",
        "429" => "Too many approvals of this caller are pending (`too_many_pending`)",
    }
);

error_answers!(
    /// A body over the operation's limit.
    TooLarge {
        "413" => "Over the size limit (`too_large`)",
    }
);

/// Adds [`Refused`] to every operation that does not describe those
/// statuses itself; the MCP endpoint answers them as JSON-RPC errors,
/// and gets its transport's refusals instead.
struct CallerRefusals;

impl Modify for CallerRefusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                match path.as_str() {
                    crate::mcp::PATH => add_missing(operation, mcp_refusals()),
                    _ => add_missing(operation, Refused::responses()),
                }
            }
        }
    }
}

fn add_missing(operation: &mut Operation, answers: BTreeMap<String, RefOr<Response>>) {
    for (status, answer) in answers {
        operation
            .responses
            .responses
            .entry(status)
            .or_insert(answer);
    }
}

/// `POST /v1/mcp`'s refusals of a request its Streamable HTTP transport
/// cannot take, JSON-RPC errors but for the size limit (`crate::mcp::described`
/// lists the rest; these belong beside them, and are here until they move
/// there).
fn mcp_refusals() -> BTreeMap<String, RefOr<Response>> {
    let json_rpc = |description: &str| ResponseBuilder::new().description(description).build();
    let mut answers: BTreeMap<String, RefOr<Response>> = [
        (
            "400",
            "JSON-RPC error: a body that is not JSON-RPC, or a bad `wait` query",
        ),
        (
            "406",
            "JSON-RPC error: the client must accept both application/json and text/event-stream",
        ),
        ("415", "JSON-RPC error: the body must be application/json"),
    ]
    .into_iter()
    .map(|(status, description)| (status.to_owned(), json_rpc(description).into()))
    .collect();
    answers.extend(TooLarge::responses());
    answers
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A token from `cubicle serve`'s first start or `cubicle token create`",
            ))
            .build();
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Cubicle",
        description = "Isolated desktop workspaces for computer-use agents. Every endpoint needs a bearer token."
    ),
    paths(
        crate::api::workspaces::list,
        crate::api::workspaces::create,
        crate::api::workspaces::get,
        crate::api::workspaces::delete,
        crate::api::workspaces::start,
        crate::api::workspaces::stop,
        crate::api::workspaces::pause,
        crate::api::workspaces::pool,
        crate::api::workspaces::resume,
        crate::api::actions::actions,
        crate::api::actions::screenshot,
        crate::api::exec::run,
        crate::api::files::get,
        crate::api::files::put,
        crate::api::files::delete,
        crate::api::files::list,
        crate::cdp_proxy::json_version,
        crate::cdp_proxy::json_list,
        crate::api::control::get,
        crate::api::control::take,
        crate::api::control::release,
        crate::api::control::events,
        crate::api::tokens::me,
        crate::api::tokens::create,
        crate::api::tokens::list,
        crate::api::tokens::revoke,
        crate::api::events::list,
        crate::api::replay::key,
        crate::api::replay::export,
        crate::api::replay::verify,
        crate::api::replay::list,
        crate::api::replay::get,
        crate::api::replay::segment,
        crate::api::approvals::list,
        crate::api::approvals::one,
        crate::api::approvals::screenshot,
        crate::api::approvals::approve,
        crate::api::approvals::deny,
        crate::api::approvals::events,
        crate::api::approvals::policy,
        crate::api::approvals::set_policy,
        crate::api::downloads::list,
        crate::api::downloads::one,
        crate::api::downloads::content,
        crate::api::downloads::release,
        crate::api::downloads::reject,
        crate::api::downloads::egress,
        crate::api::downloads::set_egress,
        crate::api::downloads::ca,
        crate::api::exec::upgrade,
        crate::vnc::upgrade,
        crate::cdp_proxy::browser_socket,
        crate::cdp_proxy::page_socket,
        crate::mcp::described,
        serve,
    ),
    components(schemas(
        ErrorBody, ErrorDetail, ActionRequest, ActionResponse, ImageFormat, ScrollDirection,
        crate::wire::workspace::CreateWorkspace, crate::wire::workspace::WorkspaceView,
        crate::wire::workspace::WorkspaceList, crate::wire::exec::ExecBody,
        crate::wire::exec::ExecResult, crate::wire::token::NewToken,
        crate::wire::approval::Decide, crate::approvals::Scope, crate::wire::approval::SetPolicy,
        crate::wire::download::DownloadView, crate::wire::download::DownloadList,
        crate::wire::download::Decision, crate::wire::egress::EgressBody,
        crate::wire::egress::EgressView,
    )),
    modifiers(&BearerAuth, &CallerRefusals, &ActionNames),
    security(("bearer" = []))
)]
pub struct ApiDoc;

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI 3 document")))]
pub async fn serve(_caller: OpContext) -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_openapi_document_is_the_generated_one() {
        let generated = ApiDoc::openapi().to_pretty_json().unwrap() + "\n";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "gateway/openapi.json differs from the API the handlers describe: \
             run `UPDATE_OPENAPI=1 cargo test -p cubicle-gateway openapi` and commit the file"
        );
    }
}
