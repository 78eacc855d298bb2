//! Time limits of workspaces: a TTL (how long it may run after each start)
//! and an idle timeout (how long it may go without any agent, operator or
//! viewer activity), and what expiry does: stop it (its home is kept) or
//! delete it. Default: none.
//!
//! The runtime keeps the settings ([`TimeLimitsSetting`], one row per
//! workspace, fields left out take the server's [`TimeLimits`] defaults)
//! and the one rule ([`due`]); the gateway, which sees every operation and
//! every live view, tracks activity and runs the sweeper.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state::{StateError, Store, now_ms};

/// What happens when a workspace's time is up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    /// Stopped; its home is kept and it can be started again.
    #[default]
    Stop,
    /// Deleted: nothing of it is left but its row and its audit record.
    Delete,
}

impl OnExpiry {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Delete => "delete",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "stop" => Some(Self::Stop),
            "delete" => Some(Self::Delete),
            _ => None,
        }
    }
}

/// The time limits a workspace runs under (effective: setting over the
/// server's defaults). `None`: no such limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TimeLimits {
    pub ttl: Option<Duration>,
    pub idle: Option<Duration>,
    pub on_expiry: OnExpiry,
}

impl TimeLimits {
    pub fn is_none(&self) -> bool {
        self.ttl.is_none() && self.idle.is_none()
    }
}

/// A workspace's own choice; each `None` takes the server's default, and a
/// zero duration means "no limit" even where the server has one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeLimitsSetting {
    pub ttl: Option<Duration>,
    pub idle: Option<Duration>,
    pub on_expiry: Option<OnExpiry>,
}

impl TimeLimitsSetting {
    /// The limits this setting gives under `defaults`.
    pub fn over(self, defaults: TimeLimits) -> TimeLimits {
        let pick = |own: Option<Duration>, default: Option<Duration>| match own {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => default,
        };
        TimeLimits {
            ttl: pick(self.ttl, defaults.ttl),
            idle: pick(self.idle, defaults.idle),
            on_expiry: self.on_expiry.unwrap_or(defaults.on_expiry),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Why a workspace's time is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expiry {
    /// It ran its TTL.
    Ttl,
    /// Nobody did anything with it for its idle timeout.
    Idle,
}

impl Expiry {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ttl => "ttl",
            Self::Idle => "idle",
        }
    }
}

/// The one rule: whether a workspace running since `started_ms`, last
/// used at `active_ms`, with a live view open or not (`watched`), is due
/// at `now_ms`. The TTL wins when both are due.
pub fn due(
    limits: &TimeLimits,
    now_ms: i64,
    started_ms: i64,
    active_ms: i64,
    watched: bool,
) -> Option<Expiry> {
    let past = |since: i64, limit: Duration| {
        let limit = i64::try_from(limit.as_millis()).unwrap_or(i64::MAX);
        now_ms.saturating_sub(since) >= limit
    };
    if limits.ttl.is_some_and(|ttl| past(started_ms, ttl)) {
        return Some(Expiry::Ttl);
    }
    let last = active_ms.max(started_ms);
    if !watched && limits.idle.is_some_and(|idle| past(last, idle)) {
        return Some(Expiry::Idle);
    }
    None
}

fn ms(d: Option<Duration>) -> Option<i64> {
    d.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn duration(ms: Option<i64>) -> Option<Duration> {
    ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// Writes workspace `id`'s setting (replacing any earlier one).
pub async fn set(store: &Store, id: &str, setting: &TimeLimitsSetting) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO workspace_time_limits (workspace_id, ttl_ms, idle_ms, on_expiry, set_at) \
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id) DO UPDATE SET \
         ttl_ms = excluded.ttl_ms, idle_ms = excluded.idle_ms, \
         on_expiry = excluded.on_expiry, set_at = excluded.set_at",
    )
    .bind(id)
    .bind(ms(setting.ttl))
    .bind(ms(setting.idle))
    .bind(setting.on_expiry.map(OnExpiry::as_str))
    .bind(now_ms())
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Workspace `id`'s own setting (empty when it has none).
pub async fn get(store: &Store, id: &str) -> Result<TimeLimitsSetting, StateError> {
    let row: Option<(Option<i64>, Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT ttl_ms, idle_ms, on_expiry FROM workspace_time_limits WHERE workspace_id = ?",
    )
    .bind(id)
    .fetch_optional(store.pool())
    .await?;
    Ok(row
        .map(|(ttl, idle, on_expiry)| TimeLimitsSetting {
            ttl: duration(ttl),
            idle: duration(idle),
            on_expiry: on_expiry.as_deref().and_then(OnExpiry::parse),
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn settings_override_defaults_and_zero_means_none() {
        let defaults = TimeLimits {
            ttl: Some(3600 * S),
            idle: Some(600 * S),
            on_expiry: OnExpiry::Stop,
        };
        assert_eq!(TimeLimitsSetting::default().over(defaults), defaults);
        let own = TimeLimitsSetting {
            ttl: Some(Duration::ZERO),
            idle: Some(5 * S),
            on_expiry: Some(OnExpiry::Delete),
        };
        let limits = own.over(defaults);
        assert_eq!(limits.ttl, None, "0 lifts the server's TTL");
        assert_eq!(limits.idle, Some(5 * S));
        assert_eq!(limits.on_expiry, OnExpiry::Delete);
        assert!(
            TimeLimitsSetting::default()
                .over(TimeLimits::default())
                .is_none()
        );
    }

    #[test]
    fn ttl_and_idle_are_due_on_time_and_a_viewer_keeps_it_alive() {
        let limits = TimeLimits {
            ttl: Some(10 * S),
            idle: Some(4 * S),
            on_expiry: OnExpiry::Stop,
        };
        // Started at 0, used at 3 s.
        assert_eq!(due(&limits, 6_999, 0, 3_000, false), None);
        assert_eq!(due(&limits, 7_000, 0, 3_000, false), Some(Expiry::Idle));
        assert_eq!(due(&limits, 7_000, 0, 3_000, true), None, "watched live");
        assert_eq!(due(&limits, 10_000, 0, 9_999, true), Some(Expiry::Ttl));
        // Activity before the start does not count against it.
        assert_eq!(due(&limits, 3_000, 1_000, 0, false), None);
        let none = TimeLimits::default();
        assert_eq!(due(&none, i64::MAX, 0, 0, false), None);
    }

    #[tokio::test]
    async fn settings_persist() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        assert!(get(&store, "ws-1").await.unwrap().is_empty());
        let setting = TimeLimitsSetting {
            ttl: Some(90 * S),
            idle: None,
            on_expiry: Some(OnExpiry::Delete),
        };
        set(&store, "ws-1", &setting).await.unwrap();
        assert_eq!(get(&store, "ws-1").await.unwrap(), setting);
        let again = TimeLimitsSetting {
            idle: Some(Duration::ZERO),
            ..Default::default()
        };
        set(&store, "ws-1", &again).await.unwrap();
        assert_eq!(get(&store, "ws-1").await.unwrap(), again);
    }
}
