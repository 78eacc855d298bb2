//! The event table: an append-only record of what people and agents did
//! (control taken and handed back, tokens made and revoked), each with who,
//! in which role, when and on which workspace.
//!
//! [`append`] is the one write path, and it seals: each event becomes the
//! next record of its workspace's hash chain (`cubicle_recorder::audit_chain`;
//! events about no workspace go to the `host` chain), in one transaction
//! with the chain's head, so two appends never fork a chain.

use cubicle_recorder::audit_chain::{self, Record, RecordActor};
use serde::Serialize;
use serde_json::Value;

use crate::state::{StateError, Store, now_ms};
use crate::tokens::Token;

/// Who did something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Actor {
    pub id: String,
    pub name: String,
    pub role: String,
}

impl From<&Token> for Actor {
    fn from(token: &Token) -> Self {
        Self {
            id: token.id.clone(),
            name: token.name.clone(),
            role: token.role.as_str().to_owned(),
        }
    }
}

/// One stored event.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub id: i64,
    /// Unix milliseconds.
    pub at: i64,
    pub kind: String,
    pub workspace_id: Option<String>,
    /// `None` when the daemon itself acted.
    pub actor: Option<Actor>,
    pub detail: Value,
    /// The API request it belongs to, if any.
    pub request_id: Option<String>,
    /// The client's address, if known.
    pub client: Option<String>,
    /// `started`, `ok`, `denied` or `error:<code>`; `None` for events that
    /// only say something happened.
    pub outcome: Option<String>,
}

/// Every kind of event there is: the one list, below every writer (the
/// operations core, the per-workspace services, the CLI), so no writer
/// spells a kind itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventKind {
    #[default]
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
    /// The daemon began serving, and stopped (with what it did with the
    /// workspaces still running).
    DaemonStart,
    DaemonStop,
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
            Self::DaemonStart => "daemon.start",
            Self::DaemonStop => "daemon.stop",
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

/// An event to append.
#[derive(Debug, Clone, Default)]
pub struct NewEvent<'a> {
    pub kind: EventKind,
    pub workspace_id: Option<&'a str>,
    pub actor: Option<&'a Actor>,
    pub detail: Value,
    pub request_id: Option<&'a str>,
    pub client: Option<&'a str>,
    pub outcome: Option<&'a str>,
}

/// Appends an event now; returns its id and time.
pub async fn record(
    store: &Store,
    kind: EventKind,
    workspace_id: Option<&str>,
    actor: Option<&Actor>,
    detail: &Value,
) -> Result<(i64, i64), StateError> {
    let event = NewEvent {
        kind,
        workspace_id,
        actor,
        detail: detail.clone(),
        ..NewEvent::default()
    };
    append(store, &event).await
}

/// Appends run one at a time within the daemon (each reads its chain's
/// head and writes the next); `BEGIN IMMEDIATE` and the unique (chain, seq)
/// index keep other processes on the same database (the CLI) from forking
/// a chain too.
static APPENDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Appends `event` now, sealed into its chain; returns its id and time.
pub async fn append(store: &Store, event: &NewEvent<'_>) -> Result<(i64, i64), StateError> {
    let _one_at_a_time = APPENDING.lock().await;
    let at = now_ms();
    let chain = event.workspace_id.unwrap_or(audit_chain::HOST_CHAIN);
    let actor = event.actor;
    let mut tx = store.pool().begin_with("BEGIN IMMEDIATE").await?;
    let head: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, hash FROM chain_heads WHERE chain = ?")
            .bind(chain)
            .fetch_optional(&mut *tx)
            .await?;
    let (seq, prev) = match head {
        Some((seq, hash)) => (
            seq as u64 + 1,
            audit_chain::parse_hash("chain head", &hash).map_err(unsealable)?,
        ),
        None => (1, audit_chain::genesis(chain)),
    };
    let record = Record {
        v: audit_chain::RECORD_VERSION,
        chain: chain.to_owned(),
        seq,
        prev: String::new(),
        at,
        kind: event.kind.as_str().to_owned(),
        workspace: event.workspace_id.map(str::to_owned),
        actor: actor.map(|a| RecordActor {
            id: a.id.clone(),
            name: a.name.clone(),
            role: a.role.clone(),
        }),
        detail: event.detail.clone(),
        request_id: event.request_id.map(str::to_owned),
        client: event.client.map(str::to_owned),
        outcome: event.outcome.map(str::to_owned),
    };
    let sealed = record.seal(seq, &prev).map_err(unsealable)?;
    let hash = hex::encode(sealed.hash);
    let result = sqlx::query(
        "INSERT INTO events (at, kind, workspace_id, actor_id, actor_name, actor_role, detail, \
         request_id, client, outcome, chain, seq, hash, sealed) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(at)
    .bind(event.kind.as_str())
    .bind(event.workspace_id)
    .bind(actor.map(|a| a.id.as_str()))
    .bind(actor.map(|a| a.name.as_str()))
    .bind(actor.map(|a| a.role.as_str()))
    .bind(event.detail.to_string())
    .bind(event.request_id)
    .bind(event.client)
    .bind(event.outcome)
    .bind(chain)
    .bind(seq as i64)
    .bind(&hash)
    .bind(&sealed.bytes)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO chain_heads (chain, seq, hash, at) VALUES (?, ?, ?, ?) \
         ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, at = excluded.at",
    )
    .bind(chain)
    .bind(seq as i64)
    .bind(&hash)
    .bind(at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((result.last_insert_rowid(), at))
}

/// A chain that cannot be continued: its stored head is unreadable.
fn unsealable(err: audit_chain::ChainError) -> StateError {
    StateError::Query(sqlx::Error::Decode(Box::new(err)))
}

type Row = (
    i64,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn from_row(row: Row) -> Event {
    let (id, at, kind, workspace_id, actor_id, name, role, detail, request_id, client, outcome) =
        row;
    let actor = actor_id.map(|id| Actor {
        id,
        name: name.unwrap_or_default(),
        role: role.unwrap_or_default(),
    });
    Event {
        id,
        at,
        kind,
        workspace_id,
        actor,
        // Written by `record` from a `Value`; an unreadable row shows as text.
        detail: serde_json::from_str(&detail).unwrap_or(Value::String(detail)),
        request_id,
        client,
        outcome,
    }
}

/// Events oldest first, of one workspace or of all, after event `after`.
pub async fn list(
    store: &Store,
    workspace_id: Option<&str>,
    after: i64,
    limit: u32,
) -> Result<Vec<Event>, StateError> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, kind, workspace_id, actor_id, actor_name, actor_role, detail, \
         request_id, client, outcome \
         FROM events WHERE id > ? AND (? IS NULL OR workspace_id = ?) ORDER BY id LIMIT ?",
    )
    .bind(after)
    .bind(workspace_id)
    .bind(workspace_id)
    .bind(i64::from(limit))
    .fetch_all(store.pool())
    .await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// The newest event of kind `a` or `b` with outcome `ok`, per workspace:
/// where a state kept as events (such as who holds control) stands.
pub async fn latest_per_workspace(
    store: &Store,
    a: EventKind,
    b: EventKind,
) -> Result<Vec<Event>, StateError> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, kind, workspace_id, actor_id, actor_name, actor_role, detail, \
         request_id, client, outcome FROM events WHERE id IN \
         (SELECT MAX(id) FROM events WHERE kind IN (?, ?) AND outcome = 'ok' \
          AND workspace_id IS NOT NULL GROUP BY workspace_id) ORDER BY id",
    )
    .bind(a.as_str())
    .bind(b.as_str())
    .fetch_all(store.pool())
    .await?;
    Ok(rows.into_iter().map(from_row).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn events_are_appended_and_filtered_by_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let alice = Actor {
            id: "tok-1".into(),
            name: "alice".into(),
            role: "operator".into(),
        };
        let (first, _) = record(
            &store,
            EventKind::ControlTake,
            Some("ws-a"),
            Some(&alice),
            &json!({}),
        )
        .await
        .unwrap();
        record(
            &store,
            EventKind::TokenRevoke,
            None,
            None,
            &json!({"token": "tok-2"}),
        )
        .await
        .unwrap();
        record(
            &store,
            EventKind::ControlRelease,
            Some("ws-a"),
            Some(&alice),
            &json!({"to": "agent"}),
        )
        .await
        .unwrap();
        let all = list(&store, None, 0, 100).await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].detail["token"], "tok-2");
        assert!(all[1].actor.is_none());
        let ws = list(&store, Some("ws-a"), 0, 100).await.unwrap();
        let kinds: Vec<_> = ws.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["control.take", "control.release"]);
        assert_eq!(ws[0].actor.as_ref(), Some(&alice));
        assert_eq!(
            list(&store, Some("ws-a"), first, 100).await.unwrap().len(),
            1
        );
    }
}
