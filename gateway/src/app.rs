//! What every request handler shares.

use std::path::PathBuf;
use std::sync::Arc;

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::manager::Manager;
use cubicle_runtime::state::Store;

/// The gateway's shared state.
#[derive(Clone)]
pub struct AppState {
    pub manager: Arc<Manager<AnyBackend>>,
    pub store: Store,
    /// Where the operator page's files are (`web/` of the source tree).
    pub web_dir: PathBuf,
    /// What the gateway holds for each running workspace (screen and CDP
    /// sessions, recorder, egress proxy).
    pub hosts: Arc<crate::host::Hosts>,
    /// Who may send input to each workspace.
    pub control: Arc<crate::control::Controls>,
    /// Ends the open connections of revoked tokens.
    pub revocations: Arc<crate::revocation::Revocations>,
    /// Writes the event log (no event, no operation).
    pub audit: crate::ops::audit::Audit,
    /// Policies, each workspace's choice, pending approvals.
    pub gates: Arc<crate::ops::gates::Gates>,
    /// Egress policies, the proxy's shared parts and the quarantine.
    pub egress: Arc<crate::ops::egress::EgressHub>,
    /// Checkpoint signing, recording and export (what auditors replay).
    pub replay: Arc<crate::replay::Replay>,
    /// The guard-rail templates a create may name (`--template NAME=FILE`).
    pub templates: Arc<crate::ops::guard_rails::Templates>,
}
