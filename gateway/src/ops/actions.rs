//! Computer-use actions and screenshots through the gateway's own RFB
//! session. A batch runs in order under the session's action lock; the
//! control lock is checked before each input action *inside* that lock, so
//! a take-over that lands while a call waits for its turn is honoured.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::audit::{EventKind, digest};
use super::{OpContext, Permission, access, gates};
use crate::actions::Action;
use crate::actions::run;
use crate::error::OpError;
use crate::ops::Core;
use crate::screen::ScreenSession;
use crate::screen::image_out::Encoded;

/// How a batch ended: the results of the actions that ran, and the error
/// that stopped it (with the index of the failing action), if any.
pub struct BatchOutcome {
    pub results: Vec<Value>,
    pub failed: Option<(usize, OpError)>,
}

/// The workspace's screen session, once the caller may use it.
async fn session(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<Arc<ScreenSession>, OpError> {
    let channel = access::guest(state, ctx, id, permission).await?;
    state
        .hosts
        .screen(id, &channel)
        .await
        .map_err(access::display_unavailable)
}

/// What the event keeps of an action as the client sent it: names and
/// coordinates, but typed text only as its length and SHA-256.
pub fn redact(action: &Value) -> Value {
    let mut fields: Map<String, Value> = action.as_object().cloned().unwrap_or_default();
    if let Some(text) = fields.remove("text") {
        let text = text.as_str().unwrap_or_default();
        fields.insert("text".into(), digest(text.as_bytes()));
    }
    Value::Object(fields)
}

/// Runs `actions` (as sent: `sent`, for the event) in order, stopping at
/// the first error.
pub async fn run_batch(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    actions: &[Action],
    sent: &[Value],
) -> Result<BatchOutcome, OpError> {
    let permission = if actions.iter().any(Action::is_input) {
        Permission::Input
    } else {
        Permission::ScreenView
    };
    let session = session(state, ctx, id, permission).await?;
    let detail = json!({ "actions": sent.iter().map(redact).collect::<Vec<_>>() });
    let started = state
        .audit
        .begin(ctx, EventKind::Action, Some(id), detail)
        .await?;
    let outcome = {
        let _one_at_a_time = session.actions.lock().await;
        let mut results = Vec::with_capacity(actions.len());
        let mut failed = None;
        for (index, action) in actions.iter().enumerate() {
            // Checked before each input action: an operator may take over mid-batch.
            // ... and so is the policy, in the browser context of that moment.
            let allowed = match action.is_input() {
                true => match access::under_control(state, ctx, id) {
                    Ok(()) => {
                        let sent = sent.get(index).cloned().unwrap_or_default();
                        let (gated, more) = gates::action(&sent, action, &session);
                        gates::check_all(state, ctx, id, gated, &more).await
                    }
                    Err(held) => Err(held),
                },
                false => Ok(()),
            };
            let ran = match allowed {
                Ok(()) => run::run(&session, action).await.map_err(OpError::from),
                Err(held) => Err(held),
            };
            match ran {
                Ok(result) => results.push(result),
                Err(err) => {
                    failed = Some((index, err));
                    break;
                }
            }
        }
        BatchOutcome { results, failed }
    };
    let (result, detail) = match &outcome.failed {
        None => (Ok(()), json!({ "ran": outcome.results.len() })),
        Some((index, err)) => (
            Err(err.clone()),
            json!({ "ran": outcome.results.len(), "failed_at": index, "message": err.message }),
        ),
    };
    started.finish(&result, detail).await;
    Ok(outcome)
}

/// Text pasted into the workspace's clipboard from a live view (a viewer
/// holding the control lock): judged by the workspace's `clipboard` rules
/// like any operation. A paste a rule holds is not forwarded; once an
/// operator approves it, the same paste again goes through. The approval
/// is bound to the text's digest; operators are shown the text.
pub async fn paste(state: &Core, ctx: &OpContext, id: &str, text: &str) -> Result<(), OpError> {
    let gated = gates::Gated {
        operation: "clipboard",
        subject: cubicle_policy::Subject::Clipboard {
            text: text.to_owned(),
        },
        params: json!({ "text": digest(text.as_bytes()) }),
        shown: json!({ "text": text, "from": "live view" }),
        lock: gates::Lock::Input,
    };
    gates::check(state, ctx, id, gated).await
}

/// The screen as an image (encoded once per screen change, see
/// [`ScreenSession::screenshot`]).
pub async fn screenshot(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    request: crate::actions::ImageRequest,
) -> Result<Arc<Encoded>, OpError> {
    let session = session(state, ctx, id, Permission::ScreenView).await?;
    let detail = json!({ "format": format!("{:?}", request.format), "size": request.size });
    let run = async {
        let session = session.clone();
        tokio::task::spawn_blocking(move || session.screenshot(request.format, request.size))
            .await
            .map_err(|e| OpError::internal(e.to_string()))?
            .map_err(|e| OpError::internal(e.to_string()))
    };
    let kind = EventKind::Screenshot;
    state
        .audit
        .run_read_only(
            ctx,
            kind,
            Some(id),
            detail,
            run,
            |out: &Arc<Encoded>| json!({ "bytes": out.bytes.len() }),
        )
        .await
}
