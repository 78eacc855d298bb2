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
use utoipa::openapi::{RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, Modify, OpenApi};

use crate::ops::OpContext;
use crate::wire::doc::{
    ActionRequest, ActionResponse, ErrorBody, ErrorDetail, ImageFormat, Refused, ScrollDirection,
    TooLarge,
};

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
        crate::api::clipboard::get,
        crate::api::clipboard::put,
        crate::cdp_proxy::json_version,
        crate::cdp_proxy::json_list,
        crate::api::control::get,
        crate::api::control::take,
        crate::api::control::release,
        crate::api::control::events,
        crate::api::control::handoff,
        crate::api::tokens::me,
        crate::api::tokens::create,
        crate::api::tokens::list,
        crate::api::tokens::revoke,
        crate::api::events::list,
        crate::api::webhooks::create,
        crate::api::webhooks::list,
        crate::api::webhooks::one,
        crate::api::webhooks::delete,
        crate::api::shares::create,
        crate::api::shares::list,
        crate::api::shares::revoke,
        crate::api::shares::open,
        crate::api::snapshots::take,
        crate::api::snapshots::roll_back,
        crate::api::snapshots::list,
        crate::api::snapshots::get,
        crate::api::snapshots::delete,
        crate::api::profiles::list,
        crate::api::profiles::delete,
        crate::api::secrets::create,
        crate::api::secrets::list,
        crate::api::secrets::delete,
        crate::api::secrets::bind,
        crate::api::secrets::given,
        crate::api::secrets::fill,
        crate::api::uploads::upload,
        crate::api::replay::key,
        crate::api::replay::export,
        crate::api::replay::har,
        crate::api::replay::verify,
        crate::api::replay::list,
        crate::api::replay::get,
        crate::api::replay::segment,
        crate::api::approvals::list,
        crate::api::approvals::one,
        crate::api::approvals::ask,
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
        crate::wire::workspace::Created, crate::wire::workspace::CreatedMany,
        crate::wire::workspace::CreateFailure,
        crate::wire::workspace::WorkspaceList, crate::wire::exec::ExecBody,
        crate::wire::exec::ExecResult, crate::wire::token::NewToken,
        crate::wire::approval::Decide, crate::wire::approval::Ask, crate::wire::approval::ApprovalStateFilter, crate::wire::download::DownloadStateFilter, crate::approvals::Scope, crate::wire::approval::SetPolicy,
        crate::wire::download::DownloadView, crate::wire::download::DownloadList,
        crate::wire::download::Decision, crate::wire::egress::EgressBody,
        crate::wire::egress::EgressView, crate::wire::webhook::NewWebhook,
        crate::ops::webhooks::WebhookView, crate::wire::clipboard::ClipboardText, crate::wire::control::Handoff,
        crate::wire::secret::NewSecret, crate::wire::secret::BindSecret,
        crate::ops::secrets::SecretView, crate::ops::secrets::BindingView,
        crate::ops::profiles::ProfileView,
        crate::ops::snapshots::SnapshotView,
        crate::ops::snapshots::MachineView,
        crate::wire::snapshot::NewSnapshot, crate::wire::snapshot::Rollback,
        crate::ops::shares::ShareView, crate::ops::shares::ShareOpened,
        crate::wire::share::NewShare, crate::wire::share::ShareMode,
        crate::wire::secret::FillSecret, crate::ops::secret_fill::Filled,
        crate::ops::uploads::Uploaded,
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
    fn operation_ids_are_unique_within_a_tag() {
        // Client generators make one module per tag and one function per
        // operation id there: two alike and one is silently lost.
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let mut seen = std::collections::HashSet::new();
        for (path, operations) in doc["paths"].as_object().unwrap() {
            for (method, operation) in operations.as_object().unwrap() {
                let key = (
                    operation["tags"][0].as_str().unwrap_or("").to_owned(),
                    operation["operationId"].as_str().unwrap_or("").to_owned(),
                );
                assert!(seen.insert(key.clone()), "{method} {path}: {key:?} again");
            }
        }
    }

    #[test]
    fn every_reference_names_a_registered_schema() {
        // A type used only in a `params(...)` is not registered by utoipa
        // on its own: its `$ref` dangles and strict generators give up.
        fn refs(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(serde_json::Value::String(r)) = map.get("$ref") {
                        out.push(r.clone());
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for reference in found {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .or_else(|| reference.strip_prefix("#/components/responses/"));
            let resolved = name.is_some_and(|n| {
                doc["components"]["schemas"].get(n).is_some()
                    || doc["components"]["responses"].get(n).is_some()
            });
            assert!(resolved, "{reference} names nothing in the document");
        }
    }

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
