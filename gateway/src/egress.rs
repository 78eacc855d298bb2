//! What the egress side of the gateway holds for every workspace: the
//! proxies' shared parts (CA, walls, quarantine), the server's default
//! policy, each workspace's stored policy, and the automatic release of
//! held downloads. Starting a workspace's proxy and every change to a
//! policy are operations: [`crate::ops::egress`].

use std::sync::{Arc, Mutex};

use cubicle_runtime::egress::store as egress_store;
use cubicle_runtime::egress::{Egress, EgressPolicy};
use cubicle_runtime::state::Store;
use tokio::task::JoinHandle;

use crate::error::OpError;

/// The server's default for workspaces that were given no policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDefault {
    /// No egress at all.
    Deny,
    /// Any public address, any port (special ranges stay closed).
    Allow,
}

impl EgressDefault {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "deny" => Ok(Self::Deny),
            "allow" => Ok(Self::Allow),
            other => Err(format!(
                "--egress-default {other:?}: use deny (no egress) or allow (public addresses)"
            )),
        }
    }

    pub(crate) fn policy(self) -> EgressPolicy {
        match self {
            Self::Deny => EgressPolicy::default(),
            Self::Allow => EgressPolicy::allow_public(),
        }
    }
}

/// The egress of every workspace.
pub struct EgressHub {
    store: Store,
    /// `None`: no proxy runs (tests of the HTTP layer).
    egress: Option<Arc<Egress>>,
    default: EgressDefault,
    ca_pem: Option<String>,
    /// Downloads just held, for the automatic release (taken by the first
    /// start, which runs the task that reads it).
    held: Mutex<Option<tokio::sync::mpsc::Receiver<(String, String)>>>,
    auto_release: Mutex<Option<JoinHandle<()>>>,
}

/// A policy as `GET .../egress` shows it.
#[derive(Debug, Clone)]
pub struct PolicyView {
    pub policy: EgressPolicy,
    /// True when it is the server's default (none was set).
    pub is_default: bool,
}

impl EgressHub {
    pub fn new(
        store: Store,
        egress: Option<Arc<Egress>>,
        default: EgressDefault,
        ca_pem: Option<String>,
    ) -> Self {
        Self {
            store,
            egress,
            default,
            ca_pem,
            held: Mutex::new(None),
            auto_release: Mutex::new(None),
        }
    }

    /// Where the event sink reports held downloads (see [`AuditEvents`]).
    pub(crate) fn with_held(self, held: tokio::sync::mpsc::Receiver<(String, String)>) -> Self {
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(held);
        self
    }

    /// No proxy at all (the fast tests).
    pub fn disabled(store: Store) -> Self {
        Self::new(store, None, EgressDefault::Deny, None)
    }

    /// The policy of workspaces given none (`--egress-default`).
    pub fn default_policy(&self) -> EgressPolicy {
        self.default.policy()
    }

    /// The interception CA's certificate (PEM), when there is one.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    pub fn quarantine(&self) -> Option<&cubicle_runtime::quarantine::Quarantine> {
        self.egress.as_ref().and_then(|e| e.quarantine.as_ref())
    }

    /// The policy workspace `id` runs under.
    pub async fn policy_of(&self, id: &str) -> Result<PolicyView, OpError> {
        let stored = egress_store::get(&self.store, id)
            .await
            .map_err(|e| OpError::internal(e.to_string()))?;
        let Some(doc) = stored else {
            return Ok(PolicyView {
                policy: self.default.policy(),
                is_default: true,
            });
        };
        let policy = EgressPolicy::from_doc(&doc)
            .map_err(|e| OpError::internal(format!("stored egress policy of {id}: {e}")))?;
        Ok(PolicyView {
            policy,
            is_default: false,
        })
    }

    /// Stores `policy` for `id` and applies it to its running proxy.
    pub(crate) async fn store_policy(
        &self,
        hosts: &crate::host::Hosts,
        id: &str,
        policy: &EgressPolicy,
        by: Option<&str>,
    ) -> Result<(), OpError> {
        egress_store::set(&self.store, id, &policy.to_doc(), by)
            .await
            .map_err(|e| OpError::internal(e.to_string()))?;
        if let Some(host) = hosts.find(id) {
            host.with_egress(|live| live.proxy.policy().set(policy.clone()));
        }
        Ok(())
    }

    /// The proxies' shared parts, when a proxy runs at all.
    pub fn proxies(&self) -> Option<Arc<Egress>> {
        self.egress.clone()
    }

    /// The held downloads' receiver, once (the first start takes it).
    pub fn take_held(&self) -> Option<tokio::sync::mpsc::Receiver<(String, String)>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Keeps the task that releases held downloads automatically.
    pub fn set_auto_release(&self, task: JoinHandle<()>) {
        *self
            .auto_release
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
    }

    /// Stops the automatic release of held downloads (daemon shutdown;
    /// the proxies go with their hosts).
    pub fn stop_auto_release(&self) {
        let task = self
            .auto_release
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }
}
