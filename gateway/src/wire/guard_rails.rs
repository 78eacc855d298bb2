//! A workspace's guard rails as a create body or a template asks for them,
//! and the templates an admin configured: what the create operation
//! decides over ([`crate::ops::guard_rails`]).

use std::collections::BTreeMap;

use cubicle_runtime::egress::EgressPolicy;
use cubicle_runtime::limits::{LimitsPolicy, LimitsRequest};
use cubicle_runtime::time_limits::TimeLimitsSetting;
use serde_json::{Value, json};

use crate::error::OpError;

/// Guard rails as a create body or a template gives them; `None`: not
/// given (the base's).
#[derive(Debug, Clone, Default)]
pub struct GuardRails {
    pub egress: Option<EgressPolicy>,
    pub policy: Option<String>,
    pub time_limits: Option<TimeLimitsSetting>,
    pub record: Option<bool>,
    pub limits: Option<LimitsRequest>,
}

impl GuardRails {
    pub fn is_empty(&self) -> bool {
        self.egress.is_none()
            && self.policy.is_none()
            && self.time_limits.is_none()
            && self.record.is_none()
            && self.limits.is_none()
    }

    /// What was asked, for the create's event.
    pub fn describe(&self) -> Value {
        json!({
            "egress": self.egress.as_ref().map(EgressPolicy::to_doc),
            "policy": self.policy,
            "time_limits": self.time_limits.map(|t| json!({
                "ttl_seconds": t.ttl.map(|d| d.as_secs()),
                "idle_seconds": t.idle.map(|d| d.as_secs()),
                "on_expiry": t.on_expiry.map(|o| o.as_str()),
            })),
            "record": self.record,
            "limits": self.limits.map(|l| json!({
                "memory_mb": l.memory_mb, "cpus": l.cpus, "cpu_weight": l.cpu_weight,
                "pids": l.pids, "disk_mb": l.disk_mb,
            })),
        })
    }
}

/// The templates the admin configured (`cubicle serve --template NAME=FILE`).
#[derive(Debug, Default)]
pub struct Templates {
    named: BTreeMap<String, GuardRails>,
}

/// Longest template name.
pub const MAX_TEMPLATE_NAME: usize = 64;

impl Templates {
    /// Reads `NAME=FILE` specs; every error names the spec and what to fix.
    pub fn load(specs: &[String]) -> Result<Self, String> {
        let mut named = BTreeMap::new();
        for spec in specs {
            let Some((name, file)) = spec.split_once('=') else {
                return Err(format!(
                    "--template {spec:?}: give NAME=FILE (a JSON file with the create body's egress, policy, time_limits, record, limits)"
                ));
            };
            let ok_name = !name.is_empty()
                && name.len() <= MAX_TEMPLATE_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if !ok_name {
                return Err(format!(
                    "--template {spec:?}: the name must be 1..={MAX_TEMPLATE_NAME} letters, digits, '-', '_' or '.'"
                ));
            }
            let text = std::fs::read(file).map_err(|e| format!("--template {name}={file}: {e}"))?;
            let rails = super::workspace::TemplateBody::parse(&text)
                .map_err(|e| format!("--template {name}={file}: {}", e.message))?;
            if named.insert(name.to_owned(), rails).is_some() {
                return Err(format!("--template {name}: given twice"));
            }
        }
        Ok(Self { named })
    }

    /// Checks each template against what the server has: its policy is
    /// loaded, its limits within the maxima.
    pub fn check(
        &self,
        policies: &cubicle_policy::PolicySet,
        limits: &LimitsPolicy,
    ) -> Result<(), String> {
        for (name, rails) in &self.named {
            if let Some(policy) = &rails.policy {
                policies
                    .get(policy)
                    .map_err(|e| format!("--template {name}: policy: {e}"))?;
            }
            if let Some(request) = &rails.limits {
                limits
                    .resolve(request)
                    .map_err(|e| format!("--template {name}: {e}"))?;
            }
        }
        Ok(())
    }

    pub fn names(&self) -> Vec<&str> {
        self.named.keys().map(String::as_str).collect()
    }

    pub fn len(&self) -> usize {
        self.named.len()
    }

    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Result<&GuardRails, OpError> {
        self.named.get(name).ok_or_else(|| {
            OpError::bad_request(format!(
                "template: no template {name:?} on this server ({})",
                self.listed()
            ))
        })
    }

    pub(crate) fn listed(&self) -> String {
        match self.named.is_empty() {
            true => {
                "it has none; an admin adds them with `cubicle serve --template NAME=FILE`".into()
            }
            false => format!("it has: {}", self.names().join(", ")),
        }
    }
}
