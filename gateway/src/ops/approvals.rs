//! Operators deciding held operations, out of the agent's band: list,
//! wait on, approve and deny approvals, follow them as a stream, see the
//! screenshot taken when one was asked; and each workspace's policy, shown
//! and switched. Deciding takes [`Permission::ApprovalsDecide`] (operators
//! and admins), never the token that asked; every decision is an event.

use std::collections::HashMap;
use std::time::Duration;

use cubicle_runtime::state::now_ms;
use cubicle_runtime::tokens::Role;
use serde_json::{Value, json};

use super::audit::EventKind;
use super::gates::{approval_error, expire};
use super::{OpContext, Permission, access};
use crate::approvals::{Approval, ApprovalError, ApprovalState, NewApproval, Scope, binding_hash};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// The longest reason kept with a decision.
pub const MAX_REASON: usize = 1000;

/// Whether `text`, sent as `field`, is words for a person: at most
/// [`MAX_REASON`] characters, no control character but line breaks, and
/// not blank when `required`. The one test of reasons and questions.
pub fn check_text(field: &str, text: &str, required: bool) -> Result<(), OpError> {
    let length = text.chars().count();
    if (required && text.trim().is_empty()) || length > MAX_REASON {
        let least = usize::from(required);
        return Err(OpError::bad_request(format!(
            "{field}: give {least} to {MAX_REASON} characters of text (this one has {length})"
        )));
    }
    if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\n') {
        return Err(OpError::bad_request(format!(
            "{field}: holds the control character {c:?}; only line breaks are allowed"
        )));
    }
    Ok(())
}

/// The most JSON text an agent's question may carry as details.
pub const MAX_DETAILS: usize = 16 * 1024;
/// How long a question waits for a person unless the agent says otherwise.
pub const ASK_TTL_DEFAULT: Duration = Duration::from_secs(600);
/// The longest a question may wait for a person.
pub const ASK_TTL_MAX: Duration = Duration::from_secs(3600);

/// What an agent asks a person: a step it is about to take, in words
/// (`question`), with what the person should see of it (`details`).
#[derive(Debug, Clone)]
pub struct Ask {
    pub question: String,
    pub details: Value,
    /// How long it waits for a decision ([`ASK_TTL_DEFAULT`] if `None`).
    pub ttl: Option<Duration>,
}

/// Which approvals a listing shows.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub state: Option<ApprovalState>,
    pub workspace: Option<String>,
}

/// Whether `ctx` may see `approval`: its own requests always; other
/// roles than agents, those of the workspaces they see.
async fn visible(
    state: &Core,
    ctx: &OpContext,
    approval: &Approval,
    seen: &mut HashMap<String, bool>,
) -> bool {
    if approval.asked_by.id == ctx.token.id {
        return true;
    }
    if ctx.token.role == Role::Agent {
        return false;
    }
    if let Some(&known) = seen.get(&approval.workspace) {
        return known;
    }
    let sees = match state.store.get(&approval.workspace).await {
        Ok(Some(record)) => ctx.sees(&record),
        _ => false,
    };
    seen.insert(approval.workspace.clone(), sees);
    sees
}

/// Expires what is due before anyone reads it.
async fn sweep_due(state: &Core) {
    for id in state.gates.approvals.due(now_ms()) {
        expire(state, &id, "nobody decided before it expired").await;
    }
}

pub async fn list(
    state: &Core,
    ctx: &OpContext,
    filter: &Filter,
) -> Result<Vec<Approval>, OpError> {
    ctx.require(Permission::WorkspacesView)?;
    if let Some(id) = &filter.workspace {
        // A workspace outside the caller's scope is answered exactly as one
        // that does not exist (deleted ones keep their history).
        access::any_workspace(state, ctx, id, Permission::WorkspacesView).await?;
    }
    sweep_due(state).await;
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for approval in state.gates.approvals.list() {
        let wanted = filter.state.is_none_or(|s| s == approval.state)
            && filter
                .workspace
                .as_deref()
                .is_none_or(|w| w == approval.workspace);
        if wanted && visible(state, ctx, &approval, &mut seen).await {
            out.push(approval);
        }
    }
    Ok(out)
}

/// Approval `id`, once it is decided or `wait` has passed.
pub async fn get(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    wait: Duration,
) -> Result<Approval, OpError> {
    ctx.require(Permission::WorkspacesView)?;
    sweep_due(state).await;
    let approvals = &state.gates.approvals;
    let not_found = || approval_error(ApprovalError::NotFound(id.to_owned()));
    let approval = approvals.get(id).ok_or_else(not_found)?;
    if !visible(state, ctx, &approval, &mut HashMap::new()).await {
        return Err(not_found());
    }
    if approval.state == ApprovalState::Pending && !wait.is_zero() {
        if let Some(mut decided) = approvals.watch(id) {
            let expiry =
                Duration::from_millis(u64::try_from(approval.expires_at - now_ms()).unwrap_or(0));
            let _ = tokio::time::timeout(
                wait.min(expiry),
                decided.wait_for(|s| *s != ApprovalState::Pending),
            )
            .await;
        }
        sweep_due(state).await;
    }
    approvals.get(id).ok_or_else(not_found)
}

/// Whether the caller's role may decide approvals at all: doors ask this before they
/// read the request, so a caller without the role gets 403, never a 400
/// about a body it may not send. The operation checks it again, with the
/// workspace's scope.
pub fn may_decide(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::ApprovalsDecide)
}

/// Approves or denies approval `id`; `scope` (approve only) says how far
/// an approval reaches: `workspace` is for egress destinations (added to
/// the workspace's allowlist for its lifetime).
pub async fn decide(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    approve: bool,
    reason: Option<String>,
    scope: Option<Scope>,
) -> Result<Approval, OpError> {
    ctx.require(Permission::ApprovalsDecide)?;
    sweep_due(state).await;
    let reason = reason.unwrap_or_default();
    check_text("reason", &reason, false)?;
    let approvals = &state.gates.approvals;
    let not_found = || approval_error(ApprovalError::NotFound(id.to_owned()));
    let approval = approvals.get(id).ok_or_else(not_found)?;
    if !visible(state, ctx, &approval, &mut HashMap::new()).await {
        return Err(not_found());
    }
    if approval.asked_by.id == ctx.token.id {
        return Err(OpError::forbidden(
            "the token that asked for an approval cannot decide it: another operator must",
        ));
    }
    match (scope, approve, approval.operation.as_str()) {
        (Some(Scope::Workspace), false, _) => {
            return Err(OpError::bad_request(
                "scope: a deny has no scope; send scope only with approve",
            ));
        }
        (Some(Scope::Workspace), true, op) if op != "egress" => {
            return Err(OpError::bad_request(format!(
                "scope: \"workspace\" is for egress approvals (a destination added to the workspace's allowlist); approval {id} is a {op}: approve it once"
            )));
        }
        _ => {}
    }
    let scope = approve.then(|| scope.unwrap_or(Scope::Once));
    let (kind, decided) = match approve {
        true => (EventKind::ApprovalApprove, ApprovalState::Approved),
        false => (EventKind::ApprovalDeny, ApprovalState::Denied),
    };
    let detail = json!({
        "approval": id,
        "operation": approval.operation,
        "sha256": approval.sha256,
        "asked_by": approval.asked_by,
        "reason": reason,
        "scope": scope,
    });
    let run = async {
        approvals
            .decide_scoped(id, decided, Some(ctx.actor()), reason.clone(), scope)
            .map_err(approval_error)
    };
    state
        .audit
        .run(ctx, kind, Some(&approval.workspace), detail, run, |_| {
            json!({})
        })
        .await
}

/// Whether the caller's role may ask a person at all, asked before the
/// body is read (a 403 before any 400).
pub fn may_ask(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::ApprovalsAsk)
}

/// An agent asks a person to confirm a step (`POST
/// /v1/workspaces/{id}/approvals`): a pending approval of operation `ask`
/// that operators decide as any other (the page, the stream, webhooks),
/// with a screenshot of the screen as it was. Nothing runs when it is
/// approved: the agent reads the decision (`GET /v1/approvals/{id}?wait=`)
/// and goes on only if approved, which is how a model provider's safety
/// check (OpenAI's `pending_safety_checks`) is handed to a person. Asking
/// the same question with the same details again answers the same
/// approval, pending or decided (an hour after its decision at most); one
/// nobody decided in time is asked anew.
pub async fn ask(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    ask: Ask,
) -> Result<Approval, OpError> {
    access::running(state, ctx, workspace, Permission::ApprovalsAsk).await?;
    let Ask {
        question,
        details,
        ttl,
    } = ask;
    check_text("question", &question, true)?;
    if !(details.is_object() || details.is_null()) {
        return Err(OpError::bad_request(
            "details: a JSON object (what the person should see of the step), or leave it out",
        ));
    }
    if details.to_string().len() > MAX_DETAILS {
        return Err(OpError::bad_request(format!(
            "details: at most {MAX_DETAILS} bytes of JSON; link to anything larger"
        )));
    }
    let ttl = ttl.unwrap_or(ASK_TTL_DEFAULT);
    if ttl.is_zero() || ttl > ASK_TTL_MAX {
        return Err(OpError::bad_request(format!(
            "expires_in_seconds: 1 to {} (how long a person has to decide)",
            ASK_TTL_MAX.as_secs()
        )));
    }
    let shown = json!({ "question": question, "details": details });
    let sha256 = binding_hash(workspace, "ask", &shown, None);
    let approvals = &state.gates.approvals;
    // The same question again reads its answer (newest first), unless
    // nobody answered it in time: then it is asked anew.
    let earlier = approvals.list().into_iter().find(|a| {
        a.asked_by.id == ctx.token.id && a.sha256 == sha256 && a.state != ApprovalState::Expired
    });
    if let Some(earlier) = earlier {
        return Ok(earlier);
    }
    let detail = json!({
        "operation": "ask",
        "rule": "asked",
        "reason": question,
        "details": details,
        "sha256": sha256,
        "expires_in_ms": ttl.as_millis() as u64,
    });
    let asked = NewApproval {
        workspace: workspace.to_owned(),
        operation: "ask".to_owned(),
        sha256,
        shown,
        asked_by: ctx.actor(),
        ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
        rule: "asked".to_owned(),
        reason: question,
        context: None,
        context_error: None,
    };
    super::gates::request(state, ctx, asked, detail).await
}

/// The PNG taken when approval `id` was asked.
pub async fn screenshot(state: &Core, ctx: &OpContext, id: &str) -> Result<Vec<u8>, OpError> {
    let approval = get(state, ctx, id, Duration::ZERO).await?;
    state
        .gates
        .approvals
        .screenshot(&approval.id)
        .map(|png| png.to_vec())
        .ok_or_else(|| OpError::new(ErrorKind::NotFound, "not_found", format!("approval {id} has no screenshot (the screen could not be read when it was asked)")))
}

/// Whether `ctx` may see `approval` (for the stream).
pub async fn may_see(
    state: &Core,
    ctx: &OpContext,
    approval: &Approval,
    seen: &mut HashMap<String, bool>,
) -> bool {
    visible(state, ctx, approval, seen).await
}

/// The name of workspace `id`'s policy.
pub async fn policy_of(state: &Core, ctx: &OpContext, id: &str) -> Result<String, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    state.gates.policy_name(&state.store, id).await
}

/// Whether the caller's role may switch a workspace's policy at all: doors ask this before they
/// read the request, so a caller without the role gets 403, never a 400
/// about a body it may not send. The operation checks it again, with the
/// workspace's scope.
pub fn may_switch_policy(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::PolicySwitch)
}

/// Switches workspace `id` to policy `name`.
pub async fn switch_policy(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    name: &str,
) -> Result<String, OpError> {
    access::workspace(state, ctx, id, Permission::PolicySwitch).await?;
    let name = state.gates.resolve(Some(name))?;
    let from = state.gates.policy_name(&state.store, id).await?;
    let detail = json!({ "from": from, "to": name });
    let run = async {
        state
            .gates
            .assign(&state.store, id, &name, Some(&ctx.token.id))
            .await?;
        Ok(name.clone())
    };
    state
        .audit
        .run(ctx, EventKind::PolicySwitch, Some(id), detail, run, |_| {
            json!({})
        })
        .await
}
