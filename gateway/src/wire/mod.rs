//! One type per wire shape. Each request type is what the handler parses
//! (with serde; an error names the field by its path), what the OpenAPI
//! document shows (utoipa's `ToSchema`) and what the MCP tool lists as its
//! input schema ([`input_schema`]) — one source, so the three cannot drift.
//!
//! Shapes not yet here (the computer-use action, whose parser resolves key
//! names and coordinates) keep a description type in [`crate::openapi`].

pub mod approval;
pub mod clipboard;
pub mod control;
pub mod doc;
pub mod download;
pub mod egress;
pub mod exec;
pub mod guard_rails;
pub mod path;
pub mod replay;
pub mod secret;
pub mod share;
pub mod snapshot;
pub mod time_limits;
pub mod token;
pub mod webhook;
pub mod workspace;

use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::PartialSchema;

use crate::error::OpError;

/// Parses a JSON body into `T`; an error names the field (`geometry.width:
/// invalid type: string "wide", expected u64`) or says the body is not JSON.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, OpError> {
    // Serde would read a list into a struct's fields in order; every body
    // here is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Ok(_) => OpError::bad_request("request body must be a JSON object"),
                Err(err) => OpError::bad_request(format!("request body is not valid JSON: {err}")),
            },
        );
    }
    let mut reader = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return OpError::bad_request(format!("request body is not valid JSON: {inner}"));
        }
        match path.as_str() {
            "." => OpError::bad_request(format!("request body: {inner}")),
            _ => OpError::bad_request(format!("{path}: {inner}")),
        }
    })
}

/// The JSON Schema of `T` for an MCP tool's input, with `workspace` (the
/// id) added first when `with_workspace`.
pub fn input_schema<T: PartialSchema>(with_workspace: bool) -> Value {
    let mut schema = serde_json::to_value(T::schema()).unwrap_or_default();
    if with_workspace && let Some(fields) = schema.as_object_mut() {
        let properties = fields
            .entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert(
                "workspace".into(),
                serde_json::json!({ "type": "string", "description": "The workspace id (ws-...), from list_workspaces." }),
            );
        }
        let required = fields
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(required) = required.as_array_mut() {
            required.insert(0, Value::from("workspace"));
        }
    }
    schema
}
