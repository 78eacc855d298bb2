//! The event log as the core writes it: a typed kind per operation, who,
//! which workspace, a digest of the parameters, the outcome, the request id
//! and the client address.
//!
//! One failure rule: an operation whose event cannot be written does not
//! run. [`Audit::begin`] appends the `started` row before the operation;
//! [`Started::finish`] appends its outcome. Typed text and file contents
//! are never stored in clear: their length and SHA-256 are.

use std::future::Future;

use cubicle_runtime::events::{self, NewEvent};
use cubicle_runtime::state::Store;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::OpContext;
use crate::error::{ErrorKind, OpError};

pub use cubicle_runtime::events::EventKind;

/// Length and SHA-256 of bytes that must not be stored in clear.
pub fn digest(bytes: &[u8]) -> Value {
    json!({ "len": bytes.len(), "sha256": hex::encode(Sha256::digest(bytes)) })
}

/// Writes events for the core, and notes each caller's operation on a
/// workspace as activity (what idle timeouts count, [`super::expiry`]).
#[derive(Clone)]
pub struct Audit {
    store: Store,
    activity: std::sync::Arc<super::activity::Activity>,
}

fn unavailable(err: impl std::fmt::Display) -> OpError {
    OpError::new(
        ErrorKind::Unavailable,
        "audit_unavailable",
        format!("the event log cannot be written, so nothing was done: {err}"),
    )
}

impl Audit {
    /// A writer whose activity no idle timeout reads (a service's own).
    pub fn new(store: Store) -> Self {
        Self {
            store,
            activity: Default::default(),
        }
    }

    /// The core's writer: what it notes is each workspace's activity in
    /// its `slots` entry.
    pub fn over(store: Store, slots: std::sync::Arc<crate::slots::Slots>) -> Self {
        Self {
            store,
            activity: std::sync::Arc::new(super::activity::Activity::over(slots)),
        }
    }

    /// Who used which workspace last.
    pub fn activity(&self) -> &std::sync::Arc<super::activity::Activity> {
        &self.activity
    }

    /// Appends one event that is complete in itself.
    pub async fn note(
        &self,
        ctx: Option<&OpContext>,
        kind: EventKind,
        workspace: Option<&str>,
        detail: Value,
        outcome: Option<&str>,
    ) -> Result<(), OpError> {
        // Reading a workspace's record afterwards is not using it.
        let uses = !matches!(kind, EventKind::EventsRead | EventKind::AuditExport);
        if let (Some(_), Some(id), true) = (ctx, workspace, uses) {
            self.activity.touch(id);
        }
        let actor = ctx.map(OpContext::actor);
        let client = ctx.and_then(|c| c.client).map(|a| a.to_string());
        let event = NewEvent {
            kind,
            workspace_id: workspace,
            actor: actor.as_ref(),
            detail,
            request_id: ctx.map(|c| c.request_id.as_str()),
            client: client.as_deref(),
            outcome,
        };
        events::append(&self.store, &event)
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    /// Appends the `started` row of an operation; the operation runs only
    /// if this succeeded.
    pub async fn begin<'a>(
        &'a self,
        ctx: &'a OpContext,
        kind: EventKind,
        workspace: Option<&'a str>,
        detail: Value,
    ) -> Result<Started<'a>, OpError> {
        self.note(Some(ctx), kind, workspace, detail, Some("started"))
            .await?;
        Ok(Started {
            audit: self,
            ctx,
            kind,
            workspace,
            // The workspace is in use for as long as the operation runs (a
            // long exec or a wait for an approval is not idleness).
            _in_use: workspace.map(|id| self.activity.watch(id)),
        })
    }

    /// Runs `operation` between its `started` row and its outcome row;
    /// `summary` says what the outcome row keeps of a success.
    pub async fn run<T, F>(
        &self,
        ctx: &OpContext,
        kind: EventKind,
        workspace: Option<&str>,
        detail: Value,
        operation: F,
        summary: impl FnOnce(&T) -> Value,
    ) -> Result<T, OpError>
    where
        F: Future<Output = Result<T, OpError>>,
    {
        let started = self.begin(ctx, kind, workspace, detail).await?;
        let result = operation.await;
        started.finish_with(result, summary).await
    }

    /// Like [`Audit::run`], for an operation that only reads (it changes
    /// nothing in the workspace or here, so running it is not yet doing
    /// anything): it runs while its `started` row commits, and its result
    /// is handed out only once that row is written, or dropped if the row
    /// cannot be. What it read never leaves without its event, and the
    /// commit's wait overlaps the work (a screenshot's encoding).
    pub async fn run_read_only<T, F>(
        &self,
        ctx: &OpContext,
        kind: EventKind,
        workspace: Option<&str>,
        detail: Value,
        operation: F,
        summary: impl FnOnce(&T) -> Value,
    ) -> Result<T, OpError>
    where
        F: Future<Output = Result<T, OpError>>,
    {
        let (started, result) = tokio::join!(self.begin(ctx, kind, workspace, detail), operation);
        started?.finish_with(result, summary).await
    }
}

/// An operation whose `started` row is written.
pub struct Started<'a> {
    audit: &'a Audit,
    ctx: &'a OpContext,
    kind: EventKind,
    workspace: Option<&'a str>,
    _in_use: Option<super::activity::Watching>,
}

impl Started<'_> {
    /// Appends the outcome of `result` (what `summary` keeps of a success,
    /// the message of a failure) and hands `result` back.
    async fn finish_with<T>(
        self,
        result: Result<T, OpError>,
        summary: impl FnOnce(&T) -> Value,
    ) -> Result<T, OpError> {
        let detail = match &result {
            Ok(value) => summary(value),
            Err(err) => json!({ "message": err.message }),
        };
        self.finish(&result, detail).await;
        result
    }

    /// Appends the outcome. The operation already ran, so a failure here
    /// cannot undo it: it is logged loudly and the `started` row stands.
    pub async fn finish<T>(self, result: &Result<T, OpError>, detail: Value) {
        let workspace = self.workspace;
        self.finish_on(workspace, result, detail).await;
    }

    /// Like [`Started::finish`], naming the workspace the operation turned
    /// out to be about (a create learns its id only as it runs).
    pub async fn finish_on<T>(
        self,
        workspace: Option<&str>,
        result: &Result<T, OpError>,
        detail: Value,
    ) {
        let outcome = match result {
            Ok(_) => "ok".to_owned(),
            Err(err) if err.kind == ErrorKind::Conflict && err.code == "control_held" => {
                "denied".to_owned()
            }
            Err(err) => format!("error:{}", err.code),
        };
        let noted = self
            .audit
            .note(Some(self.ctx), self.kind, workspace, detail, Some(&outcome))
            .await;
        if let Err(err) = noted {
            tracing::error!(kind = self.kind.as_str(), err = %err.message, "cannot record an outcome");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_read_only_result_leaves_only_with_its_started_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
        let audit = Audit::new(store.clone());
        let ctx = OpContext::host_cli();
        let read = audit
            .run_read_only(
                &ctx,
                EventKind::Screenshot,
                Some("ws-1"),
                json!({}),
                async { Ok::<_, OpError>(7) },
                |n| json!({ "n": n }),
            )
            .await;
        assert_eq!(read.unwrap(), 7);
        let rows = events::list(&store, Some("ws-1"), 0, 10).await.unwrap();
        let outcomes: Vec<_> = rows.iter().map(|e| e.outcome.as_deref()).collect();
        assert_eq!(outcomes, [Some("started"), Some("ok")]);
        assert_eq!(rows[1].detail["n"], 7);

        // No event log: the read ran, but what it read is not handed out.
        sqlx::query("DROP TABLE events")
            .execute(store.pool())
            .await
            .unwrap();
        let ran = std::sync::atomic::AtomicBool::new(false);
        let read = audit
            .run_read_only(
                &ctx,
                EventKind::Screenshot,
                Some("ws-1"),
                json!({}),
                async {
                    ran.store(true, std::sync::atomic::Ordering::Relaxed);
                    Ok::<_, OpError>(7)
                },
                |n| json!({ "n": n }),
            )
            .await;
        assert!(ran.load(std::sync::atomic::Ordering::Relaxed));
        assert_eq!(read.unwrap_err().code, "audit_unavailable");
    }
}
