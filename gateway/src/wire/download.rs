//! Held downloads on the wire.

use cubicle_runtime::quarantine::records::DownloadRecord;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::OpError;

/// Longest reason accepted.
pub const MAX_REASON: usize = 1000;

/// One rule that matched.
#[derive(Debug, Serialize, ToSchema)]
pub struct HitView {
    pub rule: String,
    pub description: Option<String>,
    pub severity: Option<String>,
}

/// A download held in quarantine (or decided).
#[derive(Debug, Serialize, ToSchema)]
pub struct DownloadView {
    pub id: String,
    pub workspace: String,
    pub url: String,
    /// The cleaned name it is (or would be) released under.
    pub name: String,
    /// The name the server offered, as it was.
    pub offered_name: String,
    pub size: u64,
    pub sha256: String,
    /// The type the bytes look like.
    pub sniffed_type: Option<String>,
    /// The type the server claimed.
    pub claimed_type: Option<String>,
    /// YARA rules that matched.
    pub hits: Vec<HitView>,
    /// `held`, `released` or `rejected`.
    pub state: String,
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub decided_by: Option<String>,
    /// Where it was written in the workspace.
    pub released_path: Option<String>,
}

impl From<&DownloadRecord> for DownloadView {
    fn from(r: &DownloadRecord) -> Self {
        Self {
            id: r.id.clone(),
            workspace: r.workspace_id.clone(),
            url: r.url.clone(),
            name: r.name.clone(),
            offered_name: r.offered_name.clone(),
            size: r.size,
            sha256: r.sha256.clone(),
            sniffed_type: r.sniffed_type.clone(),
            claimed_type: r.claimed_type.clone(),
            hits: r
                .hits
                .iter()
                .map(|h| HitView {
                    rule: h.rule.clone(),
                    description: h.description.clone(),
                    severity: h.severity.clone(),
                })
                .collect(),
            state: r.state.as_str().to_owned(),
            reason: r.reason.clone(),
            created_at_ms: r.created_at,
            decided_at_ms: r.decided_at,
            decided_by: r.decided_by.clone(),
            released_path: r.released_path.clone(),
        }
    }
}

/// Which downloads `GET /v1/downloads?state=` lists.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DownloadStateFilter {
    Held,
    Released,
    Rejected,
}

/// `{"downloads": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DownloadList {
    pub downloads: Vec<DownloadView>,
}

/// Body of release and reject (may be empty).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Why (kept in the record and the event): at most 1000 characters, no
    /// control characters.
    #[schema(max_length = 1000, pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$")]
    pub reason: Option<String>,
}

impl Decision {
    pub fn parse(body: &[u8]) -> Result<Option<String>, OpError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let decision = super::parse::<Self>(body)?;
        match decision.reason {
            Some(reason)
                if reason.chars().count() > MAX_REASON || reason.chars().any(char::is_control) =>
            {
                Err(OpError::bad_request(format!(
                    "reason: at most {MAX_REASON} characters, no control characters"
                )))
            }
            reason => Ok(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        assert_eq!(Decision::parse(b"").unwrap(), None);
        assert_eq!(
            Decision::parse(br#"{"reason":"looks fine"}"#)
                .unwrap()
                .as_deref(),
            Some("looks fine")
        );
        assert!(
            Decision::parse(br#"{"why":1}"#)
                .unwrap_err()
                .message
                .contains("why")
        );
        let long = format!(r#"{{"reason":"{}"}}"#, "x".repeat(2000));
        assert!(Decision::parse(long.as_bytes()).is_err());
    }
}
