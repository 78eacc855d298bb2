//! A workspace's egress policy on the wire: in the create body
//! (`"egress": {...}`), `GET` and `PUT /v1/workspaces/{id}/egress`.

use cubicle_runtime::egress::{EgressPolicy, EgressPolicyDoc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::OpError;

/// What a workspace may reach. Default: nothing.
///
/// Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
/// (names below it), `api.example.org:8000-8100,9000`,
/// `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
/// private, link-local (cloud metadata), CGNAT, unique-local, multicast and
/// IPv4-mapped addresses are refused after resolution unless a network
/// rule inside that range names them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressBody {
    /// Allow rules (at most 256).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts (`name` or `*.suffix`) whose TLS is not intercepted: host and
    /// port are still checked, but URLs are not seen and downloads from
    /// them are not captured.
    #[serde(default)]
    pub passthrough: Vec<String>,
    /// Intercept TLS so URLs and downloads are seen (default true).
    pub intercept: Option<bool>,
    /// Sniffed media types released without an operator when the scan
    /// found nothing (e.g. `application/pdf`).
    #[serde(default)]
    pub auto_release: Vec<String>,
}

impl EgressBody {
    pub fn doc(&self) -> EgressPolicyDoc {
        EgressPolicyDoc {
            allow: self.allow.clone(),
            passthrough: self.passthrough.clone(),
            intercept: self.intercept,
            auto_release: self.auto_release.clone(),
        }
    }

    /// Checks it; the error names the field (`egress.allow[2]: ...`).
    pub fn validated(&self) -> Result<EgressPolicy, OpError> {
        EgressPolicy::from_doc(&self.doc()).map_err(|e| OpError::bad_request(e.to_string()))
    }

    pub fn of(policy: &EgressPolicy) -> Self {
        let doc = policy.to_doc();
        Self {
            allow: doc.allow,
            passthrough: doc.passthrough,
            intercept: doc.intercept,
            auto_release: doc.auto_release,
        }
    }

    /// Parses a `PUT` body.
    pub fn parse(body: &[u8]) -> Result<EgressPolicy, OpError> {
        super::parse::<Self>(body)?.validated()
    }
}

/// `GET /v1/workspaces/{id}/egress`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressView {
    pub workspace: String,
    #[schema(inline)]
    pub policy: EgressBody,
    /// True when none was set and the server's default applies.
    pub is_default: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rules_name_the_field() {
        let err = EgressBody::parse(br#"{"allow":["ok.example","bad host"]}"#).unwrap_err();
        assert!(
            err.message.starts_with("egress.allow[1]"),
            "{}",
            err.message
        );
        let err = EgressBody::parse(br#"{"allow":["a.org"],"proxy":1}"#).unwrap_err();
        assert!(err.message.contains("proxy"), "{}", err.message);
        let ok =
            EgressBody::parse(br#"{"allow":["*.example.org:443"],"passthrough":["bank.example"]}"#)
                .unwrap();
        assert!(ok.passes_through("bank.example"));
        assert_eq!(EgressBody::of(&ok).allow, ["*.example.org:443"]);
    }
}
