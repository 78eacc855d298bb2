//! The policy gate of the operations core: every operation that changes a
//! workspace asks [`check`] once, with its subject (what the policy sees)
//! and its exact parameters (what an approval is bound to), after the
//! permission, scope and control checks and before it runs.
//!
//! `allow` runs it. `deny` refuses it (403 `policy_denied` with the rule's
//! reason). `confirm` holds it: a pending approval is recorded (an event,
//! and a screenshot of the screen as it was), operators see it at once
//! (`/v1/approvals`, its SSE stream, the page), and the caller waits up to
//! its [`Hold::wait`]: approved → the operation runs, and the approval is
//! used up; denied → 403 `denied` with the operator's reason; expired →
//! 403 `expired`; still pending → 202 `held` with the approval's id and the
//! URL to wait on. Asking again with the same parameters (or with
//! `approval=<id>`) picks the same approval up; an approval never runs
//! different parameters. Every step is an event.
//!
//! An approval outlives nothing it approved. It is bound to a hash of
//! everything that changes the effect ([`binding_hash`]: the door's
//! operation, the exact parameters — stdin, screen coordinates after
//! scaling — and the browser context the operator was shown). When it
//! lands ([`land`]), right before the operation runs, the gate looks
//! again: the workspace must still be running and not paused, the control
//! lock must still let the caller act, the policy must still hold (not
//! deny) it, and the hash — with the browser context read again — must be
//! the one approved; it must not have expired; and its use is written to
//! the database before the operation runs.

use std::time::Duration;

use cubicle_policy::{BrowserState, Context, Decision, Outcome, Subject};
use cubicle_runtime::backend::Backend;
use cubicle_runtime::state::now_ms;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::audit::{EventKind, digest};
use super::{OpContext, access};
use crate::approvals::{Approval, ApprovalError, ApprovalState, NewApproval, binding_hash};
use crate::browser_context::Lookup;
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// How often a waiting MCP call is told it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long the request of a held action waits for its screenshot.
const SCREENSHOT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the screenshot of a held action is tried for in all.
const SCREENSHOT_GIVE_UP: Duration = Duration::from_secs(60);

use super::context::Progress;

/// Which control check an operation passes, before it is judged and
/// again when its approval lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Screen input: only the holder of the control lock
    /// ([`access::under_control`]).
    Input,
    /// A change by other means (exec, files, CDP calls that change the
    /// page): refused to the agent during a take-over
    /// ([`access::agent_held_off`]).
    Change,
    /// Reads: only that the workspace is not paused.
    Read,
}

/// One operation as the gate sees it.
#[derive(Debug, Clone)]
pub struct Gated {
    /// The operation's name, as in its event (`exec`, `exec.stream`,
    /// `file.write`, ...): the door is part of what is approved.
    pub operation: &'static str,
    pub subject: Subject,
    /// The exact parameters an approval is bound to (hashed, never shown).
    pub params: Value,
    /// What operators are shown of them (secrets such as environment
    /// values and file contents as their digest).
    pub shown: Value,
    pub lock: Lock,
}

/// What the gate said, before any waiting.
pub enum Verdict {
    Allow,
    /// Held as this approval (pending, or approved and not yet used).
    Held(Box<Approval>),
}

/// The gate, waiting as the caller's [`Hold`] says.
pub async fn check(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: Gated,
) -> Result<(), OpError> {
    check_all(state, ctx, workspace, gated, &[]).await
}

/// Like [`check`], for an operation that is several subjects at once.
pub async fn check_all(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: Gated,
    more: &[Subject],
) -> Result<(), OpError> {
    match decide_all(state, ctx, workspace, &gated, more).await? {
        Verdict::Allow => Ok(()),
        Verdict::Held(approval) => wait(state, ctx, &approval, &gated, more, ctx.hold.wait).await,
    }
}

/// Asks the workspace's policy; a deny is an error, a confirm a held
/// approval (made, or picked up). Does not wait.
pub async fn decide(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: &Gated,
) -> Result<Verdict, OpError> {
    decide_all(state, ctx, workspace, gated, &[]).await
}

/// Like [`decide`], for an operation that is several subjects at once (a
/// CDP `Page.navigate` is a CDP call and a navigation): the strictest
/// outcome counts.
pub async fn decide_all(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: &Gated,
    more: &[Subject],
) -> Result<Verdict, OpError> {
    let (outcome, lookup) = judge(state, workspace, gated, more).await?;
    match outcome.decision {
        Decision::Allow => Ok(Verdict::Allow),
        Decision::Deny => Err(refuse(state, ctx, workspace, gated, &outcome).await),
        Decision::Confirm => held(state, ctx, workspace, gated, outcome, lookup)
            .await
            .map(|a| Verdict::Held(Box::new(a))),
    }
}

/// The workspace's policy on `gated` (and `more`) in the browser context
/// of this moment: the strictest outcome, and the context of the tab it
/// came from (the one operators are shown, and the approval is bound to).
async fn judge(
    state: &Core,
    workspace: &str,
    gated: &Gated,
    more: &[Subject],
) -> Result<(Outcome, Lookup), OpError> {
    let gates = &state.gates;
    let policy = gates.policy_of(&state.store, workspace).await?;
    let needs_browser = std::iter::once(&gated.subject)
        .chain(more)
        .any(|s| policy.needs_browser_for(s));
    let lookup = match needs_browser {
        true => {
            let host = state.hosts.get(workspace);
            crate::browser_context::context(&state.manager, host.browser(), workspace).await
        }
        false => Lookup::Absent,
    };
    let states: Vec<BrowserState<'_>> = match &lookup {
        Lookup::Absent => vec![BrowserState::Absent],
        Lookup::Unreadable(_) => vec![BrowserState::Unreadable],
        Lookup::Known(tabs) => tabs.iter().map(BrowserState::Known).collect(),
    };
    // Each tab the action may land in, each subject: the strictest counts,
    // and the tab it came from is the one operators are shown.
    let mut judged: Option<(Outcome, usize)> = None;
    for (tab, browser) in states.into_iter().enumerate() {
        let context = Context { browser };
        for subject in std::iter::once(&gated.subject).chain(more) {
            let outcome = policy.evaluate(subject, &context);
            judged = Some(match judged {
                None => (outcome, tab),
                Some((best, at)) => {
                    let stricter = best.clone().stricter(outcome);
                    let moved = stricter != best;
                    (stricter, if moved { tab } else { at })
                }
            });
        }
    }
    let (outcome, tab) = judged.expect("at least one subject is judged in at least one state");
    let lookup = match lookup {
        Lookup::Known(mut tabs) if tab < tabs.len() => Lookup::Known(vec![tabs.swap_remove(tab)]),
        other => other,
    };
    Ok((outcome, lookup))
}

/// The browser context an approval is bound to: the tab it was judged in.
fn bound_context(lookup: &Lookup) -> Option<&cubicle_policy::BrowserContext> {
    match lookup {
        Lookup::Known(tabs) => tabs.first(),
        _ => None,
    }
}

/// The event and the 403 of a policy deny.
async fn refuse(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: &Gated,
    outcome: &Outcome,
) -> OpError {
    let detail = json!({
        "operation": gated.operation,
        "rule": outcome.rule,
        "reason": outcome.reason,
        "params": digest(crate::approvals::canonical(&gated.params).as_bytes()),
    });
    if let Err(err) = state
        .audit
        .note(
            Some(ctx),
            EventKind::PolicyDeny,
            Some(workspace),
            detail,
            Some("denied"),
        )
        .await
    {
        return err;
    }
    OpError::new(
        ErrorKind::Forbidden,
        "policy_denied",
        format!("denied by policy ({}): {}", outcome.rule, outcome.reason),
    )
}

/// The approval this operation waits on: the one the caller named, one it
/// already asked for with the same parameters, or a new one.
async fn held(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    gated: &Gated,
    outcome: Outcome,
    lookup: Lookup,
) -> Result<Approval, OpError> {
    let approvals = &state.gates.approvals;
    let sha256 = binding_hash(
        workspace,
        gated.operation,
        &gated.params,
        bound_context(&lookup),
    );
    if let Some(id) = &ctx.hold.approval {
        let named = approvals.get(id).filter(|a| a.asked_by.id == ctx.token.id);
        let Some(named) = named else {
            return Err(approval_error(ApprovalError::NotFound(id.clone())));
        };
        if named.sha256 != sha256 {
            let err = ApprovalError::Mismatch { id: id.clone() };
            let detail =
                json!({ "approval": id, "operation": gated.operation, "why": err.to_string() });
            state
                .audit
                .note(
                    Some(ctx),
                    EventKind::ApprovalRefuse,
                    Some(workspace),
                    detail,
                    Some("denied"),
                )
                .await?;
            return Err(approval_error(err));
        }
        return Ok(named);
    }
    if let Some(existing) = approvals.reusable(&ctx.token.id, &sha256) {
        return Ok(existing);
    }
    let (context, context_error) = match lookup {
        Lookup::Known(mut tabs) => (tabs.pop(), None),
        Lookup::Unreadable(why) => (None, Some(why)),
        Lookup::Absent => (None, None),
    };
    let detail = json!({
        "operation": gated.operation,
        "rule": outcome.rule,
        "reason": outcome.reason,
        "sha256": sha256,
        "context": context,
        "context_error": context_error,
        "expires_in_ms": outcome.timeout.as_millis() as u64,
    });
    let ttl = i64::try_from(outcome.timeout.as_millis()).unwrap_or(i64::MAX);
    let asked = NewApproval {
        workspace: workspace.to_owned(),
        operation: gated.operation.to_owned(),
        sha256: sha256.clone(),
        shown: gated.shown.clone(),
        asked_by: ctx.actor(),
        ttl_ms: ttl,
        rule: outcome.rule,
        reason: outcome.reason,
        context,
        context_error,
    };
    request(state, ctx, asked, detail).await
}

/// A new pending approval: its `approval.request` event (`detail`) first —
/// no event, no approval, so nothing is seen before it is recorded — then
/// the approval, then the screenshot of the screen as it was.
pub(super) async fn request(
    state: &Core,
    ctx: &OpContext,
    asked: NewApproval,
    detail: Value,
) -> Result<Approval, OpError> {
    let workspace = asked.workspace.clone();
    state
        .audit
        .note(
            Some(ctx),
            EventKind::ApprovalRequest,
            Some(&workspace),
            detail,
            Some("pending"),
        )
        .await?;
    let approval = state
        .gates
        .approvals
        .request(asked)
        .map_err(approval_error)?;
    screenshot(state, &workspace, &approval.id).await;
    Ok(state.gates.approvals.get(&approval.id).unwrap_or(approval))
}

/// Keeps a picture of the screen as it was when the action was asked:
/// waited for up to [`SCREENSHOT_TIMEOUT`], so the answer usually has it,
/// then left to finish in the background (on a loaded host reading and
/// encoding the screen can take longer; the picture then arrives later,
/// and the approvals' change stream says so), given up after
/// [`SCREENSHOT_GIVE_UP`].
async fn screenshot(state: &Core, workspace: &str, approval: &str) {
    let (state, workspace, approval) = (state.clone(), workspace.to_owned(), approval.to_owned());
    let taking = tokio::spawn(async move {
        let taken = tokio::time::timeout(SCREENSHOT_GIVE_UP, async {
            let record = state.manager.get(&workspace).await.ok()?;
            let channel = state
                .manager
                .backend()
                .channel(&state.manager.spec(&record));
            let session = state.hosts.screen(&workspace, &channel).await.ok()?;
            let frame = session.snapshot();
            let encoded = tokio::task::spawn_blocking(move || {
                crate::screen::image_out::encode(
                    &frame,
                    crate::screen::image_out::Format::Png,
                    None,
                )
            });
            encoded.await.ok()?.ok()
        })
        .await;
        match taken {
            Ok(Some(encoded)) => state
                .gates
                .approvals
                .set_screenshot(&approval, encoded.bytes),
            _ => tracing::warn!(
                workspace,
                approval,
                "no screenshot for the approval: the screen could not be read"
            ),
        }
    });
    // Not done in time: it goes on without the caller.
    let _ = tokio::time::timeout(SCREENSHOT_TIMEOUT, taking).await;
}

/// Waits up to `wait` for `approval` of `gated` (and `more`) to be
/// decided; on approval, [`land`]s it.
pub async fn wait(
    state: &Core,
    ctx: &OpContext,
    approval: &Approval,
    gated: &Gated,
    more: &[Subject],
    wait: Duration,
) -> Result<(), OpError> {
    let approvals = &state.gates.approvals;
    let id = approval.id.clone();
    let Some(mut decided) = approvals.watch(&id) else {
        return Err(approval_error(ApprovalError::NotFound(id)));
    };
    let started = tokio::time::Instant::now();
    let deadline = started + wait;
    let expiry =
        started + Duration::from_millis(u64::try_from(approval.expires_at - now_ms()).unwrap_or(0));
    loop {
        let current = *decided.borrow_and_update();
        match current {
            ApprovalState::Approved => {
                return land(state, ctx, approval, gated, more).await;
            }
            ApprovalState::Denied | ApprovalState::Expired => {
                let record = approvals.get(&id).unwrap_or_else(|| approval.clone());
                return Err(decided_error(&record));
            }
            ApprovalState::Pending => {}
        }
        let tick = tokio::time::sleep(PROGRESS_EVERY);
        tokio::select! {
            changed = decided.changed() => {
                if changed.is_err() {
                    return Err(approval_error(ApprovalError::NotFound(id)));
                }
            }
            () = tokio::time::sleep_until(expiry) => expire(state, &id, "nobody decided before it expired").await,
            () = tokio::time::sleep_until(deadline) => return Err(still_held(approval)),
            () = tick => {
                if let Some(progress) = &ctx.hold.progress {
                    let note = Progress { approval: id.clone(), waited: started.elapsed(), expires_at: approval.expires_at };
                    let _ = progress.try_send(note);
                }
            }
        }
    }
}

/// An approval landing, right before its operation runs: everything that
/// could have changed while it waited is looked at again — the workspace
/// still running and not paused, the control lock, the policy (a switch to
/// one that denies it), the browser context (bound in the hash), the
/// expiry — and its use is written to the database. Any refusal is an
/// `approval.refuse` event and the operation does not run.
async fn land(
    state: &Core,
    ctx: &OpContext,
    approval: &Approval,
    gated: &Gated,
    more: &[Subject],
) -> Result<(), OpError> {
    let workspace = approval.workspace.as_str();
    let checked = async {
        still_may_act(state, ctx, workspace, gated.lock).await?;
        let (outcome, lookup) = judge(state, workspace, gated, more).await?;
        if outcome.decision == Decision::Deny {
            return Err(OpError::new(
                ErrorKind::Forbidden,
                "policy_denied",
                format!(
                    "approval {} landed, but the policy now denies it ({}): {}",
                    approval.id, outcome.rule, outcome.reason
                ),
            ));
        }
        let sha256 = binding_hash(
            workspace,
            gated.operation,
            &gated.params,
            bound_context(&lookup),
        );
        if sha256 != approval.sha256 {
            return Err(OpError::new(
                ErrorKind::Forbidden,
                "approval_mismatch",
                format!(
                    "approval {} was for another page or focus than the browser shows now (or other parameters): it cannot run here; ask again",
                    approval.id
                ),
            ));
        }
        state
            .gates
            .approvals
            .consume(&approval.id, &ctx.token.id, &sha256)
            .await
            .map_err(approval_error)
    };
    let used = checked.await;
    let (kind, outcome, why) = match &used {
        Ok(_) => (EventKind::ApprovalUse, "ok", None),
        Err(err) => (
            EventKind::ApprovalRefuse,
            "denied",
            Some(err.message.clone()),
        ),
    };
    let detail = json!({
        "approval": approval.id,
        "operation": gated.operation,
        "sha256": approval.sha256,
        "refused": why,
    });
    state
        .audit
        .note(Some(ctx), kind, Some(workspace), detail, Some(outcome))
        .await?;
    used.map(|_| ())
}

/// Whether the caller may still act on `workspace` as `lock` says: it
/// exists, runs, is not paused, and the control lock lets the caller in.
async fn still_may_act(
    state: &Core,
    ctx: &OpContext,
    workspace: &str,
    lock: Lock,
) -> Result<(), OpError> {
    let record = state
        .store
        .get(workspace)
        .await
        .map_err(|e| OpError::internal(e.to_string()))?;
    let record = record.ok_or_else(|| {
        OpError::from(cubicle_runtime::manager::ManagerError::NotFound(
            workspace.to_owned(),
        ))
    })?;
    if record.state == cubicle_runtime::state::WorkspaceState::Paused {
        return Err(crate::control::ControlError::Paused {
            workspace: record.id,
        }
        .into());
    }
    if record.state != cubicle_runtime::state::WorkspaceState::Running {
        return Err(cubicle_runtime::manager::ManagerError::Conflict {
            id: record.id,
            state: record.state.as_str(),
            reason: "it is not running".into(),
        }
        .into());
    }
    match lock {
        Lock::Input => access::under_control(state, ctx, workspace),
        Lock::Change => access::agent_held_off(state, ctx, workspace),
        Lock::Read => state
            .control
            .check_running(workspace)
            .map_err(OpError::from),
    }
}

/// Marks `id` expired (denied, with `why`) and records it.
pub async fn expire(state: &Core, id: &str, why: &str) {
    let Ok(record) = state
        .gates
        .approvals
        .decide(id, ApprovalState::Expired, None, why.to_owned())
    else {
        return;
    };
    let detail = json!({ "approval": id, "operation": record.operation, "reason": why });
    let noted = state
        .audit
        .note(
            None,
            EventKind::ApprovalExpire,
            Some(&record.workspace),
            detail,
            Some("denied"),
        )
        .await;
    if let Err(err) = noted {
        tracing::error!(approval = id, err = %err.message, "cannot record an expiry");
    }
}

/// Expires approvals whose time is up, every second, until `cancel`; the
/// task it runs in is owned by the daemon's serve loop.
pub async fn sweep(state: Core, cancel: CancellationToken) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        for id in state.gates.approvals.due(now_ms()) {
            expire(&state, &id, "nobody decided before it expired").await;
        }
    }
}

/// The wait URL of an approval.
pub fn url_of(id: &str) -> String {
    format!("/v1/approvals/{id}")
}

/// 202: still waiting for an operator.
fn still_held(approval: &Approval) -> OpError {
    OpError::new(
        ErrorKind::Held,
        "held",
        format!(
            "held for an operator's approval ({}): {}. Wait at GET {}?wait=SECONDS, then send the same request again (or with approval={})",
            approval.rule,
            approval.reason,
            url_of(&approval.id),
            approval.id
        ),
    )
    .with_details(json!({ "approval": {
        "id": approval.id,
        "url": url_of(&approval.id),
        "expires_at": approval.expires_at,
        "reason": approval.reason,
        "rule": approval.rule,
    }}))
}

/// 403 for a denied or expired approval, with the operator's reason.
fn decided_error(approval: &Approval) -> OpError {
    let reason = approval.decision_reason.clone().unwrap_or_default();
    let (code, message) = match approval.state {
        ApprovalState::Expired => (
            "expired",
            format!("approval {} expired: {reason}", approval.id),
        ),
        _ => {
            let by = approval
                .decided_by
                .as_ref()
                .map(|a| a.name.as_str())
                .unwrap_or("an operator");
            ("denied", format!("denied by {by}: {reason}"))
        }
    };
    OpError::new(ErrorKind::Forbidden, code, message)
        .with_details(json!({ "approval": { "id": approval.id, "state": approval.state } }))
}

/// How an approval error reaches the caller.
pub fn approval_error(err: ApprovalError) -> OpError {
    let message = err.to_string();
    match err {
        ApprovalError::NotFound(_) => OpError::new(ErrorKind::NotFound, "not_found", message),
        ApprovalError::Decided { .. } => OpError::new(ErrorKind::Conflict, "decided", message),
        ApprovalError::Mismatch { .. } => {
            OpError::new(ErrorKind::Forbidden, "approval_mismatch", message)
        }
        ApprovalError::NotAsker { .. }
        | ApprovalError::Used { .. }
        | ApprovalError::NotApproved { .. } => {
            OpError::new(ErrorKind::Forbidden, "approval_refused", message)
        }
        ApprovalError::ExpiredUnused { .. } => {
            OpError::new(ErrorKind::Forbidden, "expired", message)
        }
        ApprovalError::NotDurable { .. } => {
            OpError::new(ErrorKind::Unavailable, "not_recorded", message)
        }
        ApprovalError::TooMany => OpError::new(ErrorKind::TooMany, "too_many_pending", message),
    }
}

/// The gate's view of a computer action: its name, where it lands in
/// screen coordinates (the agent's scaled coordinates mapped back, or the
/// pointer's position for a click, scroll or button without one), the
/// combination it presses and the text it types. The approval is bound to
/// the action as sent *and* the screen points, so a scaled request and
/// the region a rule names are judged and approved in one space. A drag
/// is judged where it presses and where it releases (`more`).
pub fn action(
    sent: &Value,
    parsed: &crate::actions::Action,
    session: &crate::screen::ScreenSession,
) -> (Gated, Vec<Subject>) {
    use crate::actions::Action as A;
    let screen = |p: &crate::actions::Point| {
        crate::actions::run::to_screen(session, *p)
            .ok()
            .map(|(x, y)| (i64::from(x), i64::from(y)))
    };
    let pointer = || {
        let p = session.pointer();
        Some((i64::from(p.x), i64::from(p.y)))
    };
    let points: Vec<Option<(i64, i64)>> = match parsed {
        A::MouseMove(p) => vec![screen(p)],
        A::Click { at: Some(p), .. } | A::Scroll { at: Some(p), .. } => vec![screen(p)],
        A::Click { at: None, .. }
        | A::Scroll { at: None, .. }
        | A::MouseDown(_)
        | A::MouseUp(_) => vec![pointer()],
        A::Drag(path) => match (path.first(), path.last()) {
            (Some(first), Some(last)) => vec![screen(first), screen(last)],
            _ => vec![None],
        },
        _ => vec![None],
    };
    let name = sent["action"].as_str().unwrap_or_default().to_owned();
    let text = sent["text"].as_str().map(str::to_owned);
    let (keys, text) = match parsed {
        A::Key(_) | A::HoldKey(..) => (text, None),
        A::Type(_) => (None, text),
        // Clicks and scrolls name held modifiers in `text`.
        _ => (text, None),
    };
    let subject_at = |point: Option<(i64, i64)>| Subject::Action {
        name: name.clone(),
        point,
        keys: keys.clone(),
        text: text.clone(),
    };
    let mut subjects = points.iter().map(|p| subject_at(*p));
    let main = subjects.next().unwrap_or_else(|| subject_at(None));
    let more: Vec<Subject> = subjects.collect();
    let at: Vec<Value> = points
        .iter()
        .map(|p| p.map_or(Value::Null, |(x, y)| json!([x, y])))
        .collect();
    let mut shown = sent.clone();
    if let Value::Object(fields) = &mut shown {
        fields.insert("screen_at".into(), json!(at));
    }
    let gated = Gated {
        operation: "action",
        subject: main,
        params: json!({ "action": sent, "screen_at": at }),
        shown,
        lock: Lock::Input,
    };
    (gated, more)
}
