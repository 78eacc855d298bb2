//! What the gates hold: the policies loaded at start, the policy each
//! workspace runs under (read once from the store, then cached), and the
//! pending approvals. The gates themselves (checking an operation, holding
//! it for a person) are operations: [`crate::ops::gates`].

use std::sync::Arc;

use cubicle_policy::{Policy, PolicySet};
use cubicle_runtime::state::Store;

use crate::approvals::Approvals;
use crate::error::OpError;
use crate::slots::Slots;

/// The policies, each workspace's choice of one and the pending approvals:
/// what the gate needs, one per daemon.
pub struct Gates {
    pub policies: PolicySet,
    pub default_policy: String,
    /// Each workspace's policy, once read (in its entry).
    slots: Arc<Slots>,
    pub approvals: Approvals,
}

impl Gates {
    /// Over `policies`, with `default_policy` for workspaces that name none.
    pub fn new(
        policies: PolicySet,
        default_policy: &str,
        slots: Arc<Slots>,
    ) -> Result<Self, cubicle_policy::PolicyError> {
        policies.get(default_policy)?;
        Ok(Self {
            policies,
            default_policy: default_policy.to_owned(),
            slots,
            approvals: Approvals::default(),
        })
    }

    /// The shipped policies with `default` as the default.
    pub fn shipped(slots: Arc<Slots>) -> Self {
        let policies =
            PolicySet::shipped().expect("the shipped policies parse (a unit test checks them)");
        Self::new(policies, "default", slots).expect("the shipped policies include default")
    }

    /// The name of workspace `id`'s policy.
    pub async fn policy_name(&self, store: &Store, id: &str) -> Result<String, OpError> {
        if let Some(name) = &*self.slots.get(id).policy() {
            return Ok(name.clone());
        }
        let stored = cubicle_runtime::workspace_policy::get(store, id)
            .await
            .map_err(|e| OpError::internal(e.to_string()))?;
        let name = stored.unwrap_or_else(|| self.default_policy.clone());
        *self.slots.get(id).policy() = Some(name.clone());
        Ok(name)
    }

    /// Workspace `id`'s policy. A name no longer loaded (the directory
    /// changed between runs) falls back to the strictest shipped choice
    /// there is: the default policy.
    pub async fn policy_of(&self, store: &Store, id: &str) -> Result<Arc<Policy>, OpError> {
        let name = self.policy_name(store, id).await?;
        match self.policies.get(&name) {
            Ok(policy) => Ok(policy),
            Err(_) => self
                .policies
                .get(&self.default_policy)
                .map_err(|e| OpError::internal(e.to_string())),
        }
    }

    /// `name` if it is a loaded policy, else a 400 listing them.
    pub fn resolve(&self, name: Option<&str>) -> Result<String, OpError> {
        let name = name.unwrap_or(&self.default_policy);
        self.policies
            .get(name)
            .map(|_| name.to_owned())
            .map_err(|e| OpError::bad_request(format!("policy: {e}")))
    }

    /// Records `name` as workspace `id`'s policy.
    pub async fn assign(
        &self,
        store: &Store,
        id: &str,
        name: &str,
        by: Option<&str>,
    ) -> Result<(), OpError> {
        cubicle_runtime::workspace_policy::set(store, id, name, by)
            .await
            .map_err(|e| OpError::internal(e.to_string()))?;
        *self.slots.get(id).policy() = Some(name.to_owned());
        Ok(())
    }
}
