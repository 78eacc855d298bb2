//! A workspace's guard rails as a create body or a template asks for them:
//! what the create operation decides over ([`crate::ops::guard_rails`]).

use cubicle_runtime::egress::EgressPolicy;
use cubicle_runtime::limits::LimitsRequest;
use cubicle_runtime::time_limits::TimeLimitsSetting;
use serde_json::{Value, json};

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
