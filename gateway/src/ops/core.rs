//! The core every operation runs over: the runtime, the store, the event
//! writer and the services that hold per-workspace state. The doors hold it
//! inside [`crate::app::AppState`] (with what only they need, such as the
//! page's files) and hand the operations this, never the doors' state.

use std::sync::Arc;

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::manager::Manager;
use cubicle_runtime::state::Store;

/// What the operations share. Cloning it clones handles (a task the core
/// spawns takes its own).
#[derive(Clone)]
pub struct Core {
    pub manager: Arc<Manager<AnyBackend>>,
    pub store: Store,
    /// What the gateway holds for each running workspace (screen and CDP
    /// sessions, recorder, egress proxy).
    pub hosts: Arc<crate::host::Hosts>,
    /// Who may send input to each workspace.
    pub control: Arc<crate::control::Controls>,
    /// Ends the open connections of revoked tokens.
    pub revocations: Arc<crate::revocation::Revocations>,
    /// Writes the event log (no event, no operation).
    pub audit: super::audit::Audit,
    /// Policies, each workspace's choice, pending approvals.
    pub gates: Arc<crate::gates::Gates>,
    /// Egress policies, the proxy's shared parts and the quarantine.
    pub egress: Arc<crate::egress::EgressHub>,
    /// Checkpoint signing, recording and export (what auditors replay).
    pub replay: Arc<crate::replay::Replay>,
    /// The guard-rail templates a create may name (`--template NAME=FILE`).
    pub templates: Arc<crate::wire::guard_rails::Templates>,
}

impl Core {
    /// What the recorders need of it.
    pub fn recording(&self) -> crate::replay::record::Recording {
        crate::replay::record::Recording {
            manager: self.manager.clone(),
            audit: self.audit.clone(),
            hosts: self.hosts.clone(),
        }
    }
}
