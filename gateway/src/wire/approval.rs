//! Approvals and workspace policies on the wire.

use serde::Deserialize;
use utoipa::ToSchema;

/// Body of `POST /v1/approvals/{id}/approve` and `.../deny` (may be empty).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decide {
    /// Why: shown to the agent (on a deny) and kept in the event log; at
    /// most 1000 characters, no control characters but line breaks.
    #[schema(
        max_length = 1000,
        pattern = r"^[^\u0000-\u0009\u000B-\u001F\u007F-\u009F]*$"
    )]
    pub reason: Option<String>,
    /// Approve only: `once` (the default), or `workspace` for an egress
    /// approval — the destination joins the workspace's allowlist for the
    /// workspace's lifetime.
    pub scope: Option<crate::approvals::Scope>,
}

impl Decide {
    pub fn parse(body: &[u8]) -> Result<Self, crate::error::OpError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        super::parse(body)
    }
}

/// Which approvals `GET /v1/approvals?state=` lists.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ApprovalStateFilter {
    Pending,
    Approved,
    Denied,
    Expired,
    All,
}

/// Body of `PUT /v1/workspaces/{id}/policy`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPolicy {
    /// A policy name the server loaded (see `GET .../policy`).
    #[schema(min_length = 1, max_length = 64)]
    pub policy: String,
}

/// Body of `POST /v1/workspaces/{id}/approvals`: a step the agent asks a
/// person to confirm before it takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// The step, in words a person decides on (an OpenAI safety check's
    /// message, say); at most 1000 characters, no control characters but
    /// line breaks.
    #[schema(
        min_length = 1,
        max_length = 1000,
        pattern = r"^[^\u0000-\u0009\u000B-\u001F\u007F-\u009F]*$"
    )]
    pub question: String,
    /// What the person should see of it (at most 16 KiB of JSON): shown
    /// with the question and bound to the approval.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub details: serde_json::Value,
    /// How long a person has to decide (default 600, at most 3600).
    #[schema(minimum = 1, maximum = 3600)]
    pub expires_in_seconds: Option<u64>,
}
