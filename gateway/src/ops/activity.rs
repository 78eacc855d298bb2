//! The activity clock: each workspace's last operation and its open live
//! views, which the idle timeout reads ([`super::expiry`]). The event
//! writer touches it under every operation, so it sits below the writer.

use std::sync::Arc;

use cubicle_runtime::state::{WorkspaceRecord, now_ms};

use crate::slots::{Seen, Slots};

/// Each workspace's last activity and open live views, kept in its
/// [`Slots`] entry.
#[derive(Default)]
pub struct Activity {
    slots: Arc<Slots>,
}

impl Activity {
    /// Over the gateway's workspace entries.
    pub fn over(slots: Arc<Slots>) -> Self {
        Self { slots }
    }

    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Seen) -> T) -> T {
        f(&mut self.slots.get(id).seen())
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
        if let Some(slot) = self.slots.find(id) {
            // Live views still open keep their count until they close.
            let mut seen = slot.seen();
            seen.active_ms = now_ms();
            seen.started_ms = None;
        }
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
        // A workspace deleted meanwhile has no entry, and gets none.
        if let Some(slot) = self.activity.slots.find(&self.id) {
            let mut seen = slot.seen();
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
        let slots = Arc::new(Slots::default());
        let activity = Arc::new(Activity::over(slots.clone()));
        activity.started("ws-1");
        let view = activity.watch("ws-1");
        activity.touch("ws-2");
        slots.remove("ws-1");
        drop(view);
        assert!(
            slots.find("ws-1").is_none(),
            "the closing view made it again"
        );
        assert!(slots.find("ws-2").is_some());
    }
}
