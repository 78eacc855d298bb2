//! The event log as the core writes it: a typed kind per operation, who,
//! which workspace, a digest of the parameters, the outcome, the request id
//! and the client address.
//!
//! One failure rule: an operation whose event cannot be written does not
//! run. [`Audit::begin`] appends the `started` row before the operation;
//! [`Started::finish`] appends its outcome. Typed text and file contents
//! are never stored in clear: their length and SHA-256 are.

use std::future::Future;

use axum::http::StatusCode;
use cubicle_runtime::events::{self, NewEvent};
use cubicle_runtime::state::Store;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::OpContext;
use crate::error::ApiError;

/// Every kind of event the gateway writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    WorkspaceCreate,
    WorkspaceStart,
    WorkspaceStop,
    WorkspaceDelete,
    /// The runtime saw it reach running (after a create or start).
    WorkspaceRunning,
    /// Its processes ended without being asked to, or it never became ready.
    WorkspaceCrashed,
    /// Frozen (memory kept, no CPU) and thawed again.
    WorkspacePause,
    WorkspaceResume,
    /// Its TTL or idle timeout ran out (by the daemon): stopped or deleted.
    WorkspaceExpire,
    /// Its own time limits were set (at create).
    WorkspaceTimeLimits,
    Action,
    Screenshot,
    Exec,
    ExecStream,
    FileRead,
    FileList,
    FileWrite,
    FileDelete,
    CdpOpen,
    CdpMethod,
    CdpClose,
    LiveViewOpen,
    LiveViewClose,
    ControlTake,
    ControlRelease,
    TokenCreate,
    TokenRevoke,
    EventsRead,
    /// A policy refused an operation.
    PolicyDeny,
    /// An operator or admin switched a workspace's policy.
    PolicySwitch,
    /// A policy held an operation for an operator (a pending approval).
    ApprovalRequest,
    ApprovalApprove,
    ApprovalDeny,
    /// Nobody decided in time (the daemon): denied.
    ApprovalExpire,
    /// An approved operation ran, using its approval up.
    ApprovalUse,
    /// An approval was presented for other parameters, by another token,
    /// or again.
    ApprovalRefuse,
    /// A closed video segment, sealed with its SHA-256 (by the daemon).
    RecordingSegment,
    /// A recording began or ended (by the daemon).
    RecordingStart,
    RecordingStop,
    /// A segment's file removed by the retention setting (by the daemon).
    RecordingExpire,
    /// A workspace's audit record left the daemon as a bundle.
    AuditExport,
    /// The egress proxy allowed or refused a destination (by the daemon).
    EgressDecision,
    /// One HTTP request the egress proxy saw, with its status.
    EgressRequest,
    /// An upstream's TLS certificate was refused.
    EgressUpstreamRefused,
    /// An egress connection ended: bytes each way, duration.
    EgressClose,
    /// A workspace's egress policy was set (at create) or changed.
    EgressPolicy,
    /// A download went to quarantine (by the daemon).
    DownloadHeld,
    /// A download was refused (over the cap, disk full); nothing kept.
    DownloadRefused,
    DownloadList,
    /// A held download's content was fetched.
    DownloadContent,
    DownloadRelease,
    DownloadReject,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkspaceCreate => "workspace.create",
            Self::WorkspaceStart => "workspace.start",
            Self::WorkspaceStop => "workspace.stop",
            Self::WorkspaceDelete => "workspace.delete",
            Self::WorkspaceRunning => "workspace.running",
            Self::WorkspaceCrashed => "workspace.crashed",
            Self::WorkspacePause => "workspace.pause",
            Self::WorkspaceResume => "workspace.resume",
            Self::WorkspaceExpire => "workspace.expire",
            Self::WorkspaceTimeLimits => "workspace.time_limits",
            Self::Action => "action",
            Self::Screenshot => "screenshot",
            Self::Exec => "exec",
            Self::ExecStream => "exec.stream",
            Self::FileRead => "file.read",
            Self::FileList => "file.list",
            Self::FileWrite => "file.write",
            Self::FileDelete => "file.delete",
            Self::CdpOpen => "cdp.open",
            Self::CdpMethod => "cdp.method",
            Self::CdpClose => "cdp.close",
            Self::LiveViewOpen => "live_view.open",
            Self::LiveViewClose => "live_view.close",
            Self::ControlTake => "control.take",
            Self::ControlRelease => "control.release",
            Self::TokenCreate => "token.create",
            Self::TokenRevoke => "token.revoke",
            Self::EventsRead => "events.read",
            Self::PolicyDeny => "policy.deny",
            Self::PolicySwitch => "policy.switch",
            Self::ApprovalRequest => "approval.request",
            Self::ApprovalApprove => "approval.approve",
            Self::ApprovalDeny => "approval.deny",
            Self::ApprovalExpire => "approval.expire",
            Self::ApprovalUse => "approval.use",
            Self::ApprovalRefuse => "approval.refuse",
            Self::RecordingSegment => cubicle_recorder::audit_chain::SEGMENT_KIND,
            Self::RecordingStart => "recording.start",
            Self::RecordingStop => "recording.stop",
            Self::RecordingExpire => cubicle_recorder::audit_chain::EXPIRE_KIND,
            Self::AuditExport => "audit.export",
            Self::EgressDecision => "egress.decision",
            Self::EgressRequest => "egress.request",
            Self::EgressUpstreamRefused => "egress.upstream_refused",
            Self::EgressClose => "egress.close",
            Self::EgressPolicy => "egress.policy",
            Self::DownloadHeld => "download.held",
            Self::DownloadRefused => "download.refused",
            Self::DownloadList => "download.list",
            Self::DownloadContent => "download.content",
            Self::DownloadRelease => "download.release",
            Self::DownloadReject => "download.reject",
        }
    }
}

/// Length and SHA-256 of bytes that must not be stored in clear.
pub fn digest(bytes: &[u8]) -> Value {
    json!({ "len": bytes.len(), "sha256": hex::encode(Sha256::digest(bytes)) })
}

/// Writes events for the core, and notes each caller's operation on a
/// workspace as activity (what idle timeouts count, [`super::expiry`]).
#[derive(Clone)]
pub struct Audit {
    store: Store,
    activity: std::sync::Arc<super::expiry::Activity>,
}

fn unavailable(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "audit_unavailable",
        format!("the event log cannot be written, so nothing was done: {err}"),
    )
}

impl Audit {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            activity: Default::default(),
        }
    }

    /// Who used which workspace last.
    pub fn activity(&self) -> &std::sync::Arc<super::expiry::Activity> {
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
    ) -> Result<(), ApiError> {
        // Reading a workspace's record afterwards is not using it.
        let uses = !matches!(kind, EventKind::EventsRead | EventKind::AuditExport);
        if let (Some(_), Some(id), true) = (ctx, workspace, uses) {
            self.activity.touch(id);
        }
        let actor = ctx.map(OpContext::actor);
        let client = ctx.and_then(|c| c.client).map(|a| a.to_string());
        let event = NewEvent {
            kind: kind.as_str(),
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
    ) -> Result<Started<'a>, ApiError> {
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
    ) -> Result<T, ApiError>
    where
        F: Future<Output = Result<T, ApiError>>,
    {
        let started = self.begin(ctx, kind, workspace, detail).await?;
        let result = operation.await;
        let detail = match &result {
            Ok(value) => summary(value),
            Err(err) => json!({ "message": err.message }),
        };
        started.finish(&result, detail).await;
        result
    }
}

/// An operation whose `started` row is written.
pub struct Started<'a> {
    audit: &'a Audit,
    ctx: &'a OpContext,
    kind: EventKind,
    workspace: Option<&'a str>,
    _in_use: Option<super::expiry::Watching>,
}

impl Started<'_> {
    /// Appends the outcome. The operation already ran, so a failure here
    /// cannot undo it: it is logged loudly and the `started` row stands.
    pub async fn finish<T>(self, result: &Result<T, ApiError>, detail: Value) {
        let workspace = self.workspace;
        self.finish_on(workspace, result, detail).await;
    }

    /// Like [`Started::finish`], naming the workspace the operation turned
    /// out to be about (a create learns its id only as it runs).
    pub async fn finish_on<T>(
        self,
        workspace: Option<&str>,
        result: &Result<T, ApiError>,
        detail: Value,
    ) {
        let outcome = match result {
            Ok(_) => "ok".to_owned(),
            Err(err) if err.status == StatusCode::CONFLICT && err.code == "control_held" => {
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
