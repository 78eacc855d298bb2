//! What every request handler shares: the operations' core and what only
//! the doors need.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;

use cubicle_runtime::cluster::postgres::PgCluster;

use crate::cluster::credential::EdgeTrust;
use crate::ops::Core;

/// The doors' shared state. It reads as the [`Core`] it holds, so a door
/// passes `&state` to an operation.
#[derive(Clone)]
pub struct AppState {
    pub core: Core,
    /// Where the operator page's files are (`web/` of the source tree).
    pub web_dir: PathBuf,
    /// On a cluster node (`cubicle node`): the edges' public key, whose
    /// credentials name the caller of a request an edge routed here.
    pub edge_trust: Option<Arc<EdgeTrust>>,
    /// On a cluster node: the shared store, which readiness asks.
    pub cluster: Option<PgCluster>,
}

impl AppState {
    pub fn new(core: Core, web_dir: PathBuf) -> Self {
        Self {
            core,
            web_dir,
            edge_trust: None,
            cluster: None,
        }
    }

    /// The same state on a node of the cluster `store`, taking requests
    /// from edges.
    pub fn trusting_edges(mut self, trust: EdgeTrust, store: PgCluster) -> Self {
        self.edge_trust = Some(Arc::new(trust));
        self.cluster = Some(store);
        self
    }
}

impl Deref for AppState {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}
