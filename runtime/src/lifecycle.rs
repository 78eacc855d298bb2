//! The manager's typed stream of lifecycle changes: every state a workspace
//! enters, whoever caused it (an API call, the exit watcher, reconcile,
//! shutdown). The gateway follows it to record crashes and to tear down
//! what it keeps per running workspace; it never polls the store for this.

use serde::Serialize;
use tokio::sync::broadcast;

/// How many changes a slow follower may lag behind before it misses some
/// (it is told how many with `RecvError::Lagged`).
const BACKLOG: usize = 1024;

/// One lifecycle change of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    pub workspace: String,
    pub change: Change,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    Created,
    Starting,
    Running,
    /// Frozen on request; its processes and memory are kept.
    Paused,
    /// Thawed: running again, the same processes as before the pause.
    Resumed,
    /// Stopped on request (API, shutdown); its home is kept.
    Stopped {
        reason: Option<String>,
    },
    /// Its processes ended without being asked to, or never became ready.
    Crashed {
        reason: String,
    },
    Deleted,
    /// Its browser profile was loaded from the kept archive as it started.
    ProfileLoaded {
        profile: String,
        size: u64,
        sha256: String,
    },
    /// Its browser profile was saved as it stopped.
    ProfileSaved {
        profile: String,
        size: u64,
        sha256: String,
    },
    /// Saving its browser profile failed (the archive kept is the one
    /// before), or it crashed and nothing could be saved.
    ProfileNotSaved {
        profile: String,
        reason: String,
    },
    /// A snapshot's files and browser profile were put in place at its
    /// first start (the snapshot and its digest).
    SnapshotRestored {
        snapshot: String,
        sha256: String,
    },
}

impl Change {
    /// Whether the workspace no longer runs after this change.
    pub fn ends_running(&self) -> bool {
        matches!(
            self,
            Self::Stopped { .. } | Self::Crashed { .. } | Self::Deleted
        )
    }
}

/// The sending side, owned by the manager.
#[derive(Debug)]
pub struct Publisher {
    sender: broadcast::Sender<Lifecycle>,
}

impl Default for Publisher {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

impl Publisher {
    /// Tells every follower; a change nobody follows is simply dropped.
    pub fn publish(&self, workspace: &str, change: Change) {
        let _ = self.sender.send(Lifecycle {
            workspace: workspace.to_owned(),
            change,
        });
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Lifecycle> {
        self.sender.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_see_changes_in_order() {
        let publisher = Publisher::default();
        let mut follower = publisher.subscribe();
        publisher.publish("ws-1", Change::Starting);
        publisher.publish(
            "ws-1",
            Change::Crashed {
                reason: "gone".into(),
            },
        );
        assert_eq!(follower.recv().await.unwrap().change, Change::Starting);
        let crashed = follower.recv().await.unwrap();
        assert!(crashed.change.ends_running());
        assert_eq!(crashed.workspace, "ws-1");
    }
}
