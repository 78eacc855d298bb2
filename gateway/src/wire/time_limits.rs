//! A workspace's time limits on the wire: `"time_limits"` in the create
//! body, and what `GET /v1/workspaces/{id}` shows (the effective limits:
//! its own over the server's defaults).

use std::time::Duration;

use cubicle_runtime::time_limits::{OnExpiry, TimeLimits, TimeLimitsSetting};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::OpError;

/// Longest TTL or idle timeout accepted: one year.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// What expiry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiryBody {
    /// Stop it; its home is kept and it can be started again.
    Stop,
    /// Delete it.
    Delete,
}

impl From<OnExpiryBody> for OnExpiry {
    fn from(body: OnExpiryBody) -> Self {
        match body {
            OnExpiryBody::Stop => Self::Stop,
            OnExpiryBody::Delete => Self::Delete,
        }
    }
}

impl From<OnExpiry> for OnExpiryBody {
    fn from(on: OnExpiry) -> Self {
        match on {
            OnExpiry::Stop => Self::Stop,
            OnExpiry::Delete => Self::Delete,
        }
    }
}

/// `"time_limits"` of a create body; each field left out takes the
/// server's default (`--ttl-seconds`, `--idle-timeout-seconds`,
/// `--on-expiry`; none by default).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeLimitsBody {
    /// Longest it may run after each start, in seconds; 0: no limit.
    #[schema(maximum = 31_536_000)]
    pub ttl_seconds: Option<u64>,
    /// Expire after this many seconds with no agent, operator or viewer
    /// activity (an open live view counts as activity); 0: no limit.
    #[schema(maximum = 31_536_000)]
    pub idle_seconds: Option<u64>,
    /// `stop` (home kept; the default) or `delete`.
    pub on_expiry: Option<OnExpiryBody>,
}

impl TimeLimitsBody {
    /// The runtime's setting; refuses values past [`MAX_SECONDS`].
    pub fn setting(&self) -> Result<TimeLimitsSetting, OpError> {
        let seconds = |field: &str, value: Option<u64>| match value {
            Some(s) if s > MAX_SECONDS => Err(OpError::bad_request(format!(
                "time_limits.{field}: must be 0..={MAX_SECONDS} seconds (0: no limit), got {s}"
            ))),
            other => Ok(other.map(Duration::from_secs)),
        };
        Ok(TimeLimitsSetting {
            ttl: seconds("ttl_seconds", self.ttl_seconds)?,
            idle: seconds("idle_seconds", self.idle_seconds)?,
            on_expiry: self.on_expiry.map(OnExpiry::from),
        })
    }
}

/// The time limits a workspace runs under: null where it has none.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct TimeLimitsView {
    pub ttl_seconds: Option<u64>,
    pub idle_seconds: Option<u64>,
    pub on_expiry: OnExpiryBody,
}

impl From<&TimeLimits> for TimeLimitsView {
    fn from(limits: &TimeLimits) -> Self {
        Self {
            ttl_seconds: limits.ttl.map(|d| d.as_secs()),
            idle_seconds: limits.idle.map(|d| d.as_secs()),
            on_expiry: limits.on_expiry.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies() {
        let setting = |text: &str| crate::wire::parse::<TimeLimitsBody>(text.as_bytes())?.setting();
        let setting_ok =
            setting(r#"{"ttl_seconds":60,"idle_seconds":0,"on_expiry":"delete"}"#).unwrap();
        assert_eq!(setting_ok.ttl, Some(Duration::from_secs(60)));
        assert_eq!(setting_ok.idle, Some(Duration::ZERO));
        assert_eq!(setting_ok.on_expiry, Some(OnExpiry::Delete));
        let err = setting(r#"{"ttl_seconds":99999999999}"#).unwrap_err();
        assert!(
            err.message.starts_with("time_limits.ttl_seconds"),
            "{}",
            err.message
        );
        let err = setting(r#"{"on_expiry":"explode"}"#).unwrap_err();
        assert!(err.message.contains("on_expiry"), "{}", err.message);
    }
}
