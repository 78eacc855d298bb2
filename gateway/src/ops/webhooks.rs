//! Webhook subscriptions: make one (its secret is in the answer), list,
//! remove; and the deliveries, which run off the event log on the
//! subscriber token's view of it (see [`crate::webhooks`] for the wire
//! format and where deliveries may go).
//!
//! Any role may subscribe to the events its token may see: an agent to its
//! own workspaces', an operator or auditor to all. A subscription stops
//! delivering when its token is revoked. Making and removing one are
//! events; so is each delivery and each failed attempt (on the host's
//! chain, never delivered themselves).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cubicle_runtime::events::{self, Event, EventKind};
use cubicle_runtime::tokens::{self, Token};
use cubicle_runtime::webhook_rows::{self, Row};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::webhooks::{RETRY_AFTER, Secret};
use crate::wire::webhook::WebhookRequest;

/// How often an idle subscription looks for new events.
const POLL: Duration = Duration::from_millis(200);

/// Most events one look reads.
const PAGE: u32 = 100;

/// Most subscriptions one token may have (each is a task polling the log).
pub const MAX_PER_TOKEN: usize = 20;

/// A subscription as the API shows it (never its secret).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub kinds: Vec<String>,
    /// Only this workspace's events; `null`: every workspace the token sees.
    pub workspace: Option<String>,
    /// The token that made it: the events it may see are the ones delivered.
    pub owner_token: String,
    pub created_at_ms: i64,
    /// The id of the last event dealt with.
    pub cursor: i64,
    /// The last delivery's outcome: `{event, kind, attempt, ok, status?, error?, at_ms}`.
    #[schema(value_type = Option<Object>)]
    pub last: Option<Value>,
}

impl From<&Row> for WebhookView {
    fn from(row: &Row) -> Self {
        Self {
            id: row.id.clone(),
            url: row.url.clone(),
            kinds: serde_json::from_str(&row.kinds).unwrap_or_default(),
            workspace: row.workspace.clone(),
            owner_token: row.owner_token.clone(),
            created_at_ms: row.created_at,
            cursor: row.cursor,
            last: row
                .last
                .as_deref()
                .and_then(|l| serde_json::from_str(l).ok()),
        }
    }
}

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether the caller's role may manage webhooks: asked before the body is
/// read.
pub fn may_manage(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::WebhooksManage)
}

/// Makes a subscription; returns it and its secret (the caller's, or one
/// made now). It delivers events from now on.
pub async fn create(
    core: &Core,
    ctx: &OpContext,
    new: WebhookRequest,
) -> Result<(WebhookView, String), OpError> {
    may_manage(ctx)?;
    if let Some(id) = &new.workspace {
        access::any_workspace(core, ctx, id, Permission::WebhooksManage).await?;
    }
    let url = core
        .webhooks
        .check_url(&new.url)
        .await
        .map_err(|message| OpError::new(ErrorKind::BadRequest, "webhook_url", message))?;
    let theirs = webhook_rows::list(&core.store)
        .await
        .map_err(store_error)?
        .into_iter()
        .filter(|row| row.owner_token == ctx.token.id)
        .count();
    if theirs >= MAX_PER_TOKEN {
        return Err(OpError::new(
            ErrorKind::TooMany,
            "too_many_webhooks",
            format!(
                "this token has {theirs} webhook subscriptions, the most one may have: remove one (DELETE /v1/webhooks/{{id}}) or widen the kinds of another"
            ),
        ));
    }
    let secret = new.secret.unwrap_or_else(Secret::generate);
    let mut id = [0u8; 6];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut id);
    let row = Row {
        id: format!("wh-{}", hex::encode(id)),
        owner_token: ctx.token.id.clone(),
        url: url.to_string(),
        kinds: serde_json::Value::from(new.kinds.clone()).to_string(),
        workspace: new.workspace.clone(),
        secret: secret.encoded(),
        cursor: 0,
        created_at: cubicle_runtime::state::now_ms(),
        last: None,
    };
    let detail = json!({
        "webhook": row.id, "url": row.url, "kinds": new.kinds, "workspace": new.workspace,
    });
    let store = &core.store;
    let run = async {
        let mut row = row;
        row.cursor = webhook_rows::newest_event(store)
            .await
            .map_err(store_error)?;
        webhook_rows::insert(store, &row)
            .await
            .map_err(store_error)?;
        Ok(row)
    };
    let row = core
        .audit
        .run(
            ctx,
            EventKind::WebhookCreate,
            new.workspace.as_deref(),
            detail,
            run,
            |row: &Row| json!({ "webhook": row.id }),
        )
        .await?;
    core.webhooks.changed();
    Ok((WebhookView::from(&row), secret.encoded()))
}

/// Whether `ctx` manages every token's subscriptions (admins), not only
/// its own.
fn manages_all(ctx: &OpContext) -> bool {
    super::permission::granted(ctx.token.role, Permission::TokensManage)
}

/// The caller's subscriptions (an admin's: everyone's).
pub async fn list(core: &Core, ctx: &OpContext) -> Result<Vec<WebhookView>, OpError> {
    may_manage(ctx)?;
    let everyone = manages_all(ctx);
    let rows = webhook_rows::list(&core.store).await.map_err(store_error)?;
    Ok(rows
        .iter()
        .filter(|row| everyone || row.owner_token == ctx.token.id)
        .map(WebhookView::from)
        .collect())
}

/// Subscription `id`, if the caller's (or the caller is an admin).
pub async fn get(core: &Core, ctx: &OpContext, id: &str) -> Result<WebhookView, OpError> {
    let row = own(core, ctx, id).await?;
    Ok(WebhookView::from(&row))
}

async fn own(core: &Core, ctx: &OpContext, id: &str) -> Result<Row, OpError> {
    may_manage(ctx)?;
    let everyone = manages_all(ctx);
    match webhook_rows::get(&core.store, id)
        .await
        .map_err(store_error)?
    {
        Some(row) if everyone || row.owner_token == ctx.token.id => Ok(row),
        _ => Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("no webhook with id {id:?} (GET /v1/webhooks lists yours)"),
        )),
    }
}

/// Removes subscription `id`: nothing more is delivered (an attempt in
/// flight ends with its answer; no retry follows).
pub async fn delete(core: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    let row = own(core, ctx, id).await?;
    let store = &core.store;
    let run = async {
        webhook_rows::delete(store, id).await.map_err(store_error)?;
        Ok(())
    };
    core.audit
        .run(
            ctx,
            EventKind::WebhookDelete,
            row.workspace.as_deref(),
            json!({ "webhook": id, "url": row.url }),
            run,
            |_| json!({ "webhook": id }),
        )
        .await?;
    core.webhooks.changed();
    Ok(())
}

/// Runs every subscription's deliveries until `stop`: one task each,
/// started and ended as subscriptions are made and removed.
pub async fn run(core: Core, stop: CancellationToken) {
    let mut running: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    loop {
        match webhook_rows::list(&core.store).await {
            Ok(rows) => {
                let ids: HashSet<String> = rows.iter().map(|r| r.id.clone()).collect();
                running.retain(|id, task| {
                    let keep = ids.contains(id) && !task.is_finished();
                    if !keep {
                        task.abort();
                    }
                    keep
                });
                for row in rows {
                    if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(row.id) {
                        let id = slot.key().clone();
                        slot.insert(tokio::spawn(deliver(core.clone(), id, stop.clone())));
                    }
                }
            }
            Err(err) => tracing::error!(%err, "cannot read the webhook subscriptions"),
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = core.webhooks.wait_changed() => {}
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
    for (_, task) in running {
        task.abort();
        let _ = task.await;
    }
}

/// Whose events a subscription may see: its owner token's, while live.
struct Owner {
    token: Token,
    /// Per workspace id: whether the token sees it.
    sees: HashMap<String, bool>,
}

impl Owner {
    async fn sees(&mut self, core: &Core, event: &Event) -> bool {
        let ctx = crate::ops::OpContext::daemon_for(self.token.clone());
        let Some(id) = &event.workspace_id else {
            return ctx.sees_all();
        };
        if let Some(&known) = self.sees.get(id) {
            return known;
        }
        let sees = match core.store.get(id).await {
            Ok(Some(record)) => ctx.sees(&record),
            // Not yet in the store (the first event of its create): the
            // token's own act, or nothing it may see. Not kept: the next
            // event finds the record.
            Ok(None) => {
                return event.actor.as_ref().is_some_and(|a| a.id == self.token.id);
            }
            Err(err) => {
                tracing::warn!(%err, workspace = id, "cannot read a workspace for a webhook");
                return false;
            }
        };
        self.sees.insert(id.clone(), sees);
        sees
    }
}

/// One subscription's deliveries, until it is removed or `stop`.
async fn deliver(core: Core, id: String, stop: CancellationToken) {
    let mut owner: Option<Owner> = None;
    // The receiver is down: the last event was given up on. Each further
    // event is tried once until one gets through, so a receiver that is
    // gone for good does not fall further behind with every event.
    let mut down = false;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let row = match webhook_rows::get(&core.store, &id).await {
            Ok(Some(row)) => row,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(%err, webhook = id, "cannot read a webhook subscription");
                pause(&stop, Duration::from_secs(1)).await;
                continue;
            }
        };
        // A revoked owner's subscription delivers nothing more (a revoked
        // token stays revoked; removing the subscription ends the task).
        let live = match &owner {
            Some(_) => tokens::is_live(&core.store, &row.owner_token).await,
            None => tokens::get(&core.store, &row.owner_token)
                .await
                .map(|info| {
                    let info = info.filter(|info| info.revoked_at.is_none());
                    owner = info.map(|info| Owner {
                        token: Token {
                            id: info.id,
                            name: info.name,
                            role: info.role,
                            scope: info.scope,
                        },
                        sees: HashMap::new(),
                    });
                    owner.is_some()
                }),
        };
        match live {
            Ok(true) => {}
            Ok(false) => {
                pause(&stop, Duration::from_secs(5)).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, webhook = id, "cannot read a webhook's token");
                pause(&stop, Duration::from_secs(1)).await;
                continue;
            }
        }
        let owner = owner.as_mut().expect("set above");
        let page = match events::list(&core.store, row.workspace.as_deref(), row.cursor, PAGE).await
        {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(%err, webhook = id, "cannot read events for a webhook");
                pause(&stop, Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(newest) = page.last().map(|e| e.id) else {
            pause(&stop, POLL).await;
            continue;
        };
        let kinds: Vec<String> = serde_json::from_str(&row.kinds).unwrap_or_default();
        for event in &page {
            let wanted = kinds
                .iter()
                .any(|k| crate::webhooks::matches(k, &event.kind));
            if !wanted || !owner.sees(&core, event).await {
                continue;
            }
            let Some(last) = send_with_retries(&core, &row, event, down, &stop).await else {
                return; // stopped: the cursor stays, the event goes again after a restart
            };
            down = last["ok"] != true;
            if let Err(err) =
                webhook_rows::advance(&core.store, &id, event.id, Some(&last.to_string())).await
            {
                tracing::warn!(%err, webhook = id, "cannot move a webhook's cursor");
            }
        }
        if let Err(err) = webhook_rows::advance(&core.store, &id, newest, None).await {
            tracing::warn!(%err, webhook = id, "cannot move a webhook's cursor");
        }
    }
}

async fn pause(stop: &CancellationToken, wait: Duration) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(wait) => {}
    }
}

/// Delivers `event` to `row`'s URL until a 2xx answer or the retries run
/// out (one try only while the receiver is `down`), each attempt an event;
/// the last outcome as the subscription shows it, or `None` if stopped
/// first.
async fn send_with_retries(
    core: &Core,
    row: &Row,
    event: &Event,
    down: bool,
    stop: &CancellationToken,
) -> Option<Value> {
    let retries: &[Duration] = if down { &[] } else { &RETRY_AFTER };
    let secret = match Secret::parse(&row.secret) {
        Ok(secret) => secret,
        Err(_) => {
            tracing::error!(
                webhook = row.id,
                "a stored webhook secret is unreadable; skipping"
            );
            return Some(json!({ "event": event.id, "ok": false, "error": "unreadable secret" }));
        }
    };
    let message = crate::webhooks::message_id(&row.id, event.id);
    let body = crate::webhooks::body(event);
    for attempt in 1..=retries.len() + 1 {
        let started = Instant::now();
        let outcome = core
            .webhooks
            .attempt(&row.url, &secret, &message, &body)
            .await;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut detail = json!({
            "webhook": row.id, "event": event.id, "kind": event.kind,
            "workspace": event.workspace_id, "attempt": attempt, "ms": ms,
        });
        let (kind, delivered) = match &outcome {
            Ok(status) => {
                detail["status"] = json!(status);
                (EventKind::WebhookDelivered, true)
            }
            Err(failure) => {
                detail["error"] = json!(failure.error);
                if let Some(status) = failure.status {
                    detail["status"] = json!(status);
                }
                match retries.get(attempt - 1) {
                    Some(wait) => detail["retry_in_ms"] = json!(wait.as_millis() as u64),
                    None => {
                        detail["gave_up"] = json!(true);
                        detail["receiver_down"] = json!(down);
                    }
                }
                (EventKind::WebhookFailed, false)
            }
        };
        let outcome_label = if delivered { "ok" } else { "error:delivery" };
        if let Err(err) = core
            .audit
            .note(None, kind, None, detail.clone(), Some(outcome_label))
            .await
        {
            tracing::error!(webhook = row.id, err = %err.message, "cannot record a webhook delivery");
        }
        let mut last = detail;
        last["ok"] = json!(delivered);
        last["at_ms"] = json!(cubicle_runtime::state::now_ms());
        if delivered {
            return Some(last);
        }
        match retries.get(attempt - 1) {
            Some(wait) => {
                tokio::select! {
                    () = stop.cancelled() => return None,
                    removed = removed_within(&core.store, &row.id, *wait) => if removed {
                        return Some(last);
                    },
                }
            }
            None => return Some(last),
        }
    }
    unreachable!("the loop returns on its last attempt")
}

/// Waits `wait`; true as soon as subscription `id` is removed, false
/// when the wait is over and it is still there.
async fn removed_within(store: &cubicle_runtime::state::Store, id: &str, wait: Duration) -> bool {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let step = until.saturating_duration_since(tokio::time::Instant::now());
        if step.is_zero() {
            return false;
        }
        tokio::time::sleep(step.min(Duration::from_secs(1))).await;
        if matches!(webhook_rows::get(store, id).await, Ok(None)) {
            return true;
        }
    }
}
