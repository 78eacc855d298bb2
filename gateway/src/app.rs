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
    /// One RFB session per workspace, for the agent's actions.
    pub screens: Arc<crate::screen::Screens>,
    /// Who may send input to each workspace.
    pub control: Arc<crate::control::Controls>,
    /// Ends the open connections of revoked tokens.
    pub revocations: Arc<crate::revocation::Revocations>,
    /// Writes the event log (no event, no operation).
    pub audit: crate::ops::audit::Audit,
    /// Policies, each workspace's choice, pending approvals, browser contexts.
    pub gates: Arc<crate::ops::gates::Gates>,
    /// Each workspace's egress proxy and policy, and the quarantine.
    pub egress: Arc<crate::ops::egress::EgressHub>,
    /// Checkpoint signing, recorders and export (what auditors replay).
    pub replay: Arc<crate::replay::Replay>,
    /// The guard-rail templates a create may name (`--template NAME=FILE`).
    pub templates: Arc<crate::ops::guard_rails::Templates>,
}
