//! The workspace's policy, as the egress proxy asks it
//! ([`cubicle_runtime::egress::EgressGate`]): the egress rules of the
//! policy the workspace runs under, and the operators who decide a
//! `confirm`.
//!
//! A held destination is an approval like any other held operation
//! (`operation: "egress"`, bound to its workspace, host and port; shown with
//! the mode and the page that asked), listed and streamed to operators, and
//! decided with `POST /v1/approvals/{id}/approve` (`scope: "once"` — this
//! connection — or `"workspace"` — the destination joins the workspace's
//! allowlist for its lifetime) or `/deny`. The connection waits for it, no
//! longer than the rule's timeout: expired is denied. Connections to the
//! same destination while it is pending wait on the same approval. Nobody
//! holds a token for the proxy: the approval is asked by the workspace
//! (`egress:<workspace>`), so any operator who sees the workspace decides.

use std::sync::Arc;
use std::time::Duration;

use cubicle_policy::{Context, Decision, Subject};
use cubicle_runtime::egress::gate::{Asked, Confirming};
use cubicle_runtime::egress::store as egress_store;
use cubicle_runtime::egress::{Answer, Ask, EgressGate, EgressPolicyDoc, Ruling, Verdict};
use cubicle_runtime::events::Actor;
use cubicle_runtime::state::{Store, now_ms};
use serde_json::{Value, json};

use super::audit::{Audit, EventKind};
use crate::approvals::{ApprovalState, NewApproval, Scope, binding_hash};
use crate::gates::Gates;

/// The operation name of a held destination.
pub const OPERATION: &str = "egress";

/// The gateway's side of the proxy's questions.
pub struct PolicyGate {
    gates: Arc<Gates>,
    audit: Audit,
    store: Store,
}

impl PolicyGate {
    pub fn new(gates: Arc<Gates>, store: Store) -> Self {
        Self {
            gates,
            audit: Audit::new(store.clone()),
            store,
        }
    }

    /// Writes an event in a task of its own: the proxy's futures are
    /// dropped when a client goes away, and an append cut off inside its
    /// transaction would break the pool's connection.
    async fn note(
        &self,
        kind: EventKind,
        workspace: &str,
        detail: Value,
        outcome: &'static str,
    ) -> Result<(), String> {
        let audit = self.audit.clone();
        let workspace = workspace.to_owned();
        tokio::spawn(async move {
            audit
                .note(None, kind, Some(&workspace), detail, Some(outcome))
                .await
                .map_err(|e| e.message)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn ruling(&self, workspace: &str, ask: &Ask) -> Option<Ruling> {
        let policy = match self.gates.policy_of(&self.store, workspace).await {
            Ok(policy) => policy,
            Err(err) => {
                // Unreadable: held to be safe, as the gate holds actions
                // whose browser cannot be read.
                return Some(Ruling {
                    verdict: Verdict::Deny,
                    rule: "policy#unreadable".into(),
                    reason: format!("the workspace's policy cannot be read: {}", err.message),
                });
            }
        };
        let subject = Subject::Egress {
            host: ask.host.clone(),
            port: ask.port,
        };
        let outcome = policy.rule_for(&subject, &Context::default())?;
        let verdict = match outcome.decision {
            Decision::Allow => Verdict::Allow,
            Decision::Deny => Verdict::Deny,
            Decision::Confirm => Verdict::Confirm,
        };
        Some(Ruling {
            verdict,
            rule: outcome.rule,
            reason: outcome.reason,
        })
    }

    async fn hold(
        &self,
        workspace: &str,
        ask: &Ask,
        ruling: &Ruling,
        allowlist: &EgressPolicyDoc,
    ) -> Answer {
        let denied = |approval: Option<String>, reason: String| Answer::Denied { approval, reason };
        let approvals = &self.gates.approvals;
        let asker = Actor {
            id: format!("egress:{workspace}"),
            name: format!("the egress proxy of {workspace}"),
            role: "workspace".into(),
        };
        let bound = json!({ "host": ask.host, "port": ask.port });
        // No browser context: the connection, not a page, is what is approved.
        let sha256 = binding_hash(workspace, OPERATION, &bound, None);
        let waiting = approvals
            .reusable(&asker.id, &sha256)
            .filter(|a| a.state == ApprovalState::Pending);
        let approval = match waiting {
            Some(approval) => approval,
            None => {
                let timeout = self.timeout_of(workspace, ruling).await;
                let shown = json!({
                    "host": ask.host,
                    "port": ask.port,
                    "mode": ask.mode,
                    "page": ask.page,
                    "allow_rule": ask.rule_text(),
                });
                let detail = json!({
                    "operation": OPERATION,
                    "rule": ruling.rule,
                    "reason": ruling.reason,
                    "sha256": sha256,
                    "params": shown,
                    "expires_in_ms": timeout.as_millis() as u64,
                });
                // No event, no hold.
                if let Err(err) = self
                    .note(EventKind::ApprovalRequest, workspace, detail, "pending")
                    .await
                {
                    return denied(None, format!("the event log cannot be written: {err}"));
                }
                let asked = approvals.request(NewApproval {
                    workspace: workspace.to_owned(),
                    operation: OPERATION.to_owned(),
                    sha256: sha256.clone(),
                    shown,
                    asked_by: asker.clone(),
                    ttl_ms: i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
                    rule: ruling.rule.clone(),
                    reason: ruling.reason.clone(),
                    context: None,
                    context_error: None,
                });
                match asked {
                    Ok(approval) => approval,
                    Err(err) => return denied(None, err.to_string()),
                }
            }
        };
        let id = approval.id.clone();
        let Some(mut decided) = approvals.watch(&id) else {
            return denied(Some(id), "the approval is gone".into());
        };
        let left = u64::try_from(approval.expires_at - now_ms()).unwrap_or(0);
        // `is_ok` drops the watch's read guard here: expiring sends on it.
        let in_time = tokio::time::timeout(
            Duration::from_millis(left),
            decided.wait_for(|s| *s != ApprovalState::Pending),
        )
        .await
        .is_ok();
        if !in_time {
            self.expire(&id).await;
        }
        let Some(record) = approvals.get(&id) else {
            return denied(Some(id), "the approval is gone".into());
        };
        let why = record.decision_reason.clone().unwrap_or_default();
        match record.state {
            ApprovalState::Approved => {}
            ApprovalState::Expired => {
                return denied(Some(id.clone()), format!("approval {id} expired: {why}"));
            }
            ApprovalState::Denied | ApprovalState::Pending => {
                let by = record
                    .decided_by
                    .as_ref()
                    .map_or("an operator", |a| a.name.as_str());
                return denied(Some(id), format!("denied by {by}: {why}"));
            }
        }
        // The first connection waiting on it uses it up (an event); any
        // other that waited on the same approval goes with it; the next
        // new connection asks again.
        if approvals.consume(&id, &asker.id, &sha256).await.is_ok() {
            let detail = json!({ "approval": id, "sha256": sha256, "refused": Value::Null });
            let _ = self
                .note(EventKind::ApprovalUse, workspace, detail, "ok")
                .await;
        }
        if record.scope != Some(Scope::Workspace) {
            return Answer::Once { approval: id };
        }
        let rule = ask.rule_text();
        let mut wider = allowlist.clone();
        if !wider.allow.contains(&rule) {
            wider.allow.push(rule.clone());
        }
        let by = record.decided_by.as_ref().map(|a| a.id.as_str());
        match egress_store::set(&self.store, workspace, &wider, by).await {
            Ok(()) => Answer::Workspace { approval: id, rule },
            Err(err) => {
                tracing::error!(workspace, %err, "egress: cannot store the widened allowlist; allowed once");
                Answer::Once { approval: id }
            }
        }
    }

    /// The rule's own timeout (the policy's `confirm_timeout_secs` when
    /// the rule sets none).
    async fn timeout_of(&self, workspace: &str, ruling: &Ruling) -> Duration {
        let fallback = cubicle_policy::DEFAULT_CONFIRM_TIMEOUT;
        let Ok(policy) = self.gates.policy_of(&self.store, workspace).await else {
            return fallback;
        };
        let id = ruling.rule.rsplit('#').next().unwrap_or_default();
        policy
            .rules
            .iter()
            .find(|r| r.id == id)
            .map_or(policy.confirm_timeout, |r| r.timeout)
    }

    async fn expire(&self, id: &str) {
        let why = "nobody decided before it expired";
        let Ok(record) =
            self.gates
                .approvals
                .decide(id, ApprovalState::Expired, None, why.to_owned())
        else {
            // Decided (or expired by the sweep) in the meantime.
            return;
        };
        let detail = json!({ "approval": id, "operation": record.operation, "reason": why });
        let _ = self
            .note(
                EventKind::ApprovalExpire,
                &record.workspace,
                detail,
                "denied",
            )
            .await;
    }
}

impl EgressGate for PolicyGate {
    fn rule<'a>(&'a self, workspace: &'a str, ask: &'a Ask) -> Asked<'a> {
        Box::pin(self.ruling(workspace, ask))
    }

    fn confirm<'a>(
        &'a self,
        workspace: &'a str,
        ask: &'a Ask,
        ruling: &'a Ruling,
        allowlist: &'a EgressPolicyDoc,
    ) -> Confirming<'a> {
        Box::pin(self.hold(workspace, ask, ruling, allowlist))
    }
}
