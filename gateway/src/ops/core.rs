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
    /// What the gateway keeps of each workspace from create to delete
    /// (its control lock, activity and policy name).
    pub slots: Arc<crate::slots::Slots>,
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
    /// Webhook deliveries' settings and client.
    pub webhooks: Arc<crate::webhooks::Webhooks>,
}

impl Core {
    /// A core with no egress proxy, the shipped policies, no templates and
    /// its signing key and recordings under `data_dir`: what tests of the
    /// HTTP layer stand on (a field or two replaced with `..`). `serve`
    /// builds its own.
    pub fn bare(
        manager: Arc<Manager<AnyBackend>>,
        store: Store,
        data_dir: &std::path::Path,
    ) -> Result<Self, cubicle_recorder::checkpoint::CheckpointError> {
        let replay =
            crate::replay::Replay::open(store.clone(), crate::replay::ReplayConfig::new(data_dir))?;
        let slots = Arc::new(crate::slots::Slots::default());
        Ok(Self {
            manager,
            audit: super::audit::Audit::over(store.clone(), slots.clone()),
            hosts: Arc::default(),
            control: Arc::new(crate::control::Controls::over(slots.clone())),
            revocations: Arc::default(),
            gates: Arc::new(crate::gates::Gates::shipped(slots.clone())),
            slots,
            egress: Arc::new(crate::egress::EgressHub::disabled(store.clone())),
            replay: Arc::new(replay),
            templates: Arc::default(),
            webhooks: Arc::default(),
            store,
        })
    }

    /// What the recorders need of it.
    pub fn recording(&self) -> crate::replay::record::Recording {
        crate::replay::record::Recording {
            manager: self.manager.clone(),
            audit: self.audit.clone(),
            hosts: self.hosts.clone(),
        }
    }
}
