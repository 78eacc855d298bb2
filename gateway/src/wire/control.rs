//! The agent's call for a person.

use serde::Deserialize;
use utoipa::ToSchema;

/// Body of `POST /v1/workspaces/{id}/handoff`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// What a person should do, in words they read (1 to 1000 characters,
    /// no control characters but line breaks): shown in the page until an
    /// operator takes over.
    #[schema(
        min_length = 1,
        max_length = 1000,
        pattern = r"^[^\u0000-\u0009\u000B-\u001F\u007F-\u009F]*$"
    )]
    pub reason: String,
}
