//! The activity clock: each workspace's last operation and its open live
//! views, which the idle timeout reads ([`super::expiry`]). The event
//! writer touches it under every operation, so it sits below the writer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cubicle_runtime::state::{WorkspaceRecord, now_ms};

/// What the gateway has seen of one workspace.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// When it last started running (Unix ms), as the lifecycle said.
    started_ms: Option<i64>,
    /// Its last operation by anyone (Unix ms).
    active_ms: i64,
    /// Live views open and operations running now.
    viewers: usize,
}

/// Each workspace's last activity and open live views.
#[derive(Debug, Default)]
pub struct Activity {
    seen: Mutex<HashMap<String, Seen>>,
}

impl Activity {
    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Seen) -> T) -> T {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        f(seen.entry(id.to_owned()).or_insert_with(|| Seen {
            active_ms: now_ms(),
            ..Seen::default()
        }))
    }

    /// Someone did something with workspace `id` now.
    pub fn touch(&self, id: &str) {
        self.with(id, |seen| seen.active_ms = now_ms());
    }

    /// Workspace `id` started running now (its TTL counts from here).
    pub fn started(&self, id: &str) {
        let now = now_ms();
        self.with(id, |seen| {
            seen.started_ms = Some(now);
            seen.active_ms = now;
        });
    }

    /// Workspace `id` no longer runs: nothing of it is kept.
    pub fn forget(&self, id: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = seen.get_mut(id) {
            // Live views still open keep their count until they close.
            *entry = Seen {
                viewers: entry.viewers,
                active_ms: now_ms(),
                started_ms: None,
            };
        }
    }

    /// Workspace `id` was deleted: its entry goes (a live view of it that
    /// closes later does not bring it back).
    pub fn deleted(&self, id: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.remove(id);
    }

    /// Workspace `id` is in use (a live view is open, an operation runs)
    /// until the guard drops.
    pub fn watch(self: &Arc<Self>, id: &str) -> Watching {
        self.with(id, |seen| {
            seen.viewers += 1;
            seen.active_ms = now_ms();
        });
        Watching {
            activity: self.clone(),
            id: id.to_owned(),
        }
    }

    /// (started, last active, watched) of `record`; a workspace this daemon
    /// has not seen start counts from its last state change.
    pub(super) fn of(&self, record: &WorkspaceRecord) -> (i64, i64, bool) {
        self.with(&record.id, |seen| {
            let started = *seen.started_ms.get_or_insert(record.updated_at);
            (started, seen.active_ms, seen.viewers > 0)
        })
    }
}

/// An open live view; it counts as activity until dropped (and its end
/// counts as the last activity).
pub struct Watching {
    activity: Arc<Activity>,
    id: String,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut seen = self.activity.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = seen.get_mut(&self.id) {
            seen.viewers = seen.viewers.saturating_sub(1);
            seen.active_ms = now_ms();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubicle_runtime::state::WorkspaceState;

    #[test]
    fn live_views_count_while_open_and_their_end_is_activity() {
        let activity = Arc::new(Activity::default());
        let record = WorkspaceRecord {
            id: "ws-1".into(),
            name: "ws-1".into(),
            backend: "jail".into(),
            state: WorkspaceState::Running,
            geometry: Default::default(),
            host_uid: 1,
            pid: None,
            error: None,
            created_at: 5,
            updated_at: 7,
            owner_token: None,
            limits: Default::default(),
        };
        let (started, _, watched) = activity.of(&record);
        assert_eq!(started, 7, "unseen start: its last state change");
        assert!(!watched);
        let one = activity.watch("ws-1");
        let two = activity.watch("ws-1");
        drop(one);
        assert!(activity.of(&record).2, "one view is still open");
        drop(two);
        let (_, active, watched) = activity.of(&record);
        assert!(!watched);
        assert!(now_ms() - active < 1000);
        activity.started("ws-1");
        assert!(activity.of(&record).0 > 7);
    }

    #[test]
    fn a_deleted_workspace_leaves_nothing_behind() {
        let activity = Arc::new(Activity::default());
        activity.started("ws-1");
        let view = activity.watch("ws-1");
        activity.touch("ws-2");
        activity.deleted("ws-1");
        drop(view);
        let seen = activity.seen.lock().unwrap();
        assert!(!seen.contains_key("ws-1"), "the closing view made it again");
        assert!(seen.contains_key("ws-2"));
    }
}
