//! The event table: an append-only record of what people and agents did
//! (control taken and handed back, tokens made and revoked), each with who,
//! in which role, when and on which workspace.
//!
//! [`append`] is the one write path, and it seals: each event becomes the
//! next record of its workspace's hash chain (`cubicle_recorder::audit_chain`;
//! events about no workspace go to the `host` chain), in one transaction
//! with the chain's head, so two appends never fork a chain.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cubicle_recorder::audit_chain::{self, Hash, Record, RecordActor};
use rusqlite::OptionalExtension;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::state::{Durability, StateError, Store, now_ms};
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
    /// A webhook subscription was made or removed.
    WebhookCreate,
    WebhookDelete,
    /// A webhook delivery was answered 2xx (by the daemon).
    WebhookDelivered,
    /// A webhook delivery failed: retried later, or given up (by the daemon).
    WebhookFailed,
    /// The desktop's clipboard was read or set through the API (its length
    /// and digest, never the text).
    ClipboardRead,
    ClipboardWrite,
    /// An agent called for a person (its reason); it stands until an
    /// operator takes over.
    ControlCall,
    /// A request carrying a secret's placeholder where it may not go was
    /// refused by the egress proxy (by the daemon).
    EgressSecretBlocked,
    /// A host-bound secret was stored, or removed (never its value).
    SecretCreate,
    SecretDelete,
    /// A secret was given to a workspace as a placeholder.
    SecretBind,
    /// A secret's value was filled into a page's field by the gateway
    /// (`fill_secret`: the secret, the page and the field, never the value).
    SecretFill,
    /// A file was handed to a page's file input by the gateway (its name,
    /// SHA-256, size and the page's origin).
    BrowserUpload,
    /// A workspace's browser profile was loaded as it started, saved as it
    /// stopped, or could not be saved (each by the daemon: the profile,
    /// the archive's size and SHA-256, or the reason).
    ProfileLoad,
    ProfileSave,
    ProfileNotSaved,
    /// A kept browser profile was removed.
    ProfileDelete,
    /// A share link was made, revoked, or opened by the person it was
    /// given to (each open of its page).
    ShareCreate,
    ShareRevoke,
    ShareOpen,
    /// A snapshot of a workspace was taken (its files and browser profile,
    /// with their digests), put into a new workspace at its first start
    /// (by the daemon, in the new one's chain: the snapshot's digest),
    /// rolled back to, or removed.
    SnapshotCreate,
    SnapshotRestore,
    SnapshotRollback,
    SnapshotDelete,
    /// Past one host: a node daemon registered (with its new epoch), was
    /// declared down (its heartbeat overdue), and a workspace of a down
    /// node became lost.
    NodeRegister,
    NodeDown,
    WorkspaceLost,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 81] = [
        Self::WorkspaceCreate,
        Self::WorkspaceStart,
        Self::WorkspaceStop,
        Self::WorkspaceDelete,
        Self::WorkspaceRunning,
        Self::WorkspaceCrashed,
        Self::WorkspacePause,
        Self::WorkspaceResume,
        Self::WorkspaceExpire,
        Self::WorkspaceTimeLimits,
        Self::Action,
        Self::Screenshot,
        Self::Exec,
        Self::ExecStream,
        Self::FileRead,
        Self::FileList,
        Self::FileWrite,
        Self::FileDelete,
        Self::CdpOpen,
        Self::CdpMethod,
        Self::CdpClose,
        Self::LiveViewOpen,
        Self::LiveViewClose,
        Self::ControlTake,
        Self::ControlRelease,
        Self::TokenCreate,
        Self::TokenRevoke,
        Self::EventsRead,
        Self::PolicyDeny,
        Self::PolicySwitch,
        Self::ApprovalRequest,
        Self::ApprovalApprove,
        Self::ApprovalDeny,
        Self::ApprovalExpire,
        Self::ApprovalUse,
        Self::ApprovalRefuse,
        Self::RecordingSegment,
        Self::RecordingStart,
        Self::RecordingStop,
        Self::RecordingExpire,
        Self::AuditExport,
        Self::DaemonStart,
        Self::DaemonStop,
        Self::EgressDecision,
        Self::EgressRequest,
        Self::EgressUpstreamRefused,
        Self::EgressClose,
        Self::EgressPolicy,
        Self::DownloadHeld,
        Self::DownloadRefused,
        Self::DownloadList,
        Self::DownloadContent,
        Self::DownloadRelease,
        Self::DownloadReject,
        Self::WebhookCreate,
        Self::WebhookDelete,
        Self::WebhookDelivered,
        Self::WebhookFailed,
        Self::ClipboardRead,
        Self::ClipboardWrite,
        Self::ControlCall,
        Self::EgressSecretBlocked,
        Self::SecretCreate,
        Self::SecretDelete,
        Self::SecretBind,
        Self::SecretFill,
        Self::BrowserUpload,
        Self::ProfileLoad,
        Self::ProfileSave,
        Self::ProfileNotSaved,
        Self::ProfileDelete,
        Self::ShareCreate,
        Self::ShareRevoke,
        Self::ShareOpen,
        Self::SnapshotCreate,
        Self::SnapshotRestore,
        Self::SnapshotRollback,
        Self::SnapshotDelete,
        Self::NodeRegister,
        Self::NodeDown,
        Self::WorkspaceLost,
    ];

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
            Self::WebhookCreate => "webhook.create",
            Self::WebhookDelete => "webhook.delete",
            Self::WebhookDelivered => "webhook.delivered",
            Self::WebhookFailed => "webhook.failed",
            Self::ClipboardRead => "clipboard.read",
            Self::ClipboardWrite => "clipboard.write",
            Self::ControlCall => "control.call",
            Self::EgressSecretBlocked => "egress.secret_blocked",
            Self::SecretCreate => "secret.create",
            Self::SecretDelete => "secret.delete",
            Self::SecretBind => "secret.bind",
            Self::SecretFill => "secret.fill",
            Self::BrowserUpload => "browser.upload",
            Self::ProfileLoad => "profile.load",
            Self::ProfileSave => "profile.save",
            Self::ProfileNotSaved => "profile.not_saved",
            Self::ProfileDelete => "profile.delete",
            Self::ShareCreate => "share.create",
            Self::ShareRevoke => "share.revoke",
            Self::ShareOpen => "share.open",
            Self::SnapshotCreate => "snapshot.create",
            Self::SnapshotRestore => "snapshot.restore",
            Self::SnapshotRollback => "snapshot.rollback",
            Self::SnapshotDelete => "snapshot.delete",
            Self::NodeRegister => "node.register",
            Self::NodeDown => "node.down",
            Self::WorkspaceLost => "workspace.lost",
        }
    }

    /// The kind spelled `text`, if there is one.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
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

/// Appends `event` now, sealed into its chain; returns its id and time
/// once it is committed (no event, no operation: a caller acts only after).
///
/// Appends from every task of the process go to one writer ([`Appender`]),
/// which commits all that are waiting in one transaction: one commit (one
/// sync of the write-ahead log) for many events, of one chain or of many.
/// Each chain's records keep the order their appends were called in.
pub async fn append(store: &Store, event: &NewEvent<'_>) -> Result<(i64, i64), StateError> {
    let record = unsealed(event, now_ms());
    let (reply, written) = oneshot::channel();
    store.appender().send(Job { record, reply }).await?;
    written
        .await
        .map_err(|_| StateError::Append("the event writer stopped before writing it".into()))?
}

/// `event` as its chain's next record will hold it, at `at`, not yet sealed
/// (its seq and previous hash are the writer's to set).
pub(crate) fn unsealed(event: &NewEvent<'_>, at: i64) -> Record {
    Record {
        v: audit_chain::RECORD_VERSION,
        chain: event
            .workspace_id
            .unwrap_or(audit_chain::HOST_CHAIN)
            .to_owned(),
        seq: 0,
        prev: String::new(),
        at,
        kind: event.kind.as_str().to_owned(),
        workspace: event.workspace_id.map(str::to_owned),
        actor: event.actor.map(|a| RecordActor {
            id: a.id.clone(),
            name: a.name.clone(),
            role: a.role.clone(),
        }),
        detail: event.detail.clone(),
        request_id: event.request_id.map(str::to_owned),
        client: event.client.map(str::to_owned),
        outcome: event.outcome.map(str::to_owned),
    }
}

/// The statements of an append, for the writer's connection and for a
/// transaction of the pool's ([`append_in`]) alike.
const READ_HEAD: &str = "SELECT seq, hash FROM chain_heads WHERE chain = ?";
const INSERT_EVENT: &str = "INSERT INTO events (at, kind, workspace_id, actor_id, actor_name, \
     actor_role, detail, request_id, client, outcome, chain, seq, hash, sealed) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const MOVE_HEAD: &str = "INSERT INTO chain_heads (chain, seq, hash, at) VALUES (?, ?, ?, ?) \
     ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, at = excluded.at";

/// Most events one transaction commits.
const MAX_BATCH: usize = 256;

/// How long the writer waits for another connection's write transaction
/// (a CLI command on the same database) before the batch fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One event waiting for the writer, and who waits for it.
struct Job {
    /// Sealed by the writer, which knows the chain's head.
    record: Record,
    reply: oneshot::Sender<Result<(i64, i64), StateError>>,
}

/// The process's event writer: a thread of its own with its own connection
/// to the database, which takes every waiting append and commits them
/// together. Started on first use; it ends when the last [`Store`] holding
/// it is gone.
///
/// A thread and rusqlite rather than a task on the pool: sqlx runs each
/// statement on its connection's worker thread, a hop there and back per
/// statement, and a commit is five statements (begin, read the head,
/// insert, move the head, commit): 0.36 ms an event with no sync at all,
/// most of the operations core's cost per action. Here the whole batch is
/// one hop in and one out.
///
/// Within the process it is the only writer of events, so two appends
/// never read the same head; `BEGIN IMMEDIATE` and the unique (chain, seq)
/// index keep other processes on the same database (the CLI) from forking
/// a chain, and heads are read afresh in each transaction.
#[derive(Clone)]
pub(crate) struct Appender {
    path: Arc<PathBuf>,
    durability: Durability,
    queue: Arc<Mutex<Option<mpsc::Sender<Job>>>>,
}

impl Appender {
    /// The writer of the database at `path` (not started until the first
    /// append), its commits as durable as `durability` says.
    pub(crate) fn new(path: &Path, durability: Durability) -> Self {
        Self {
            path: Arc::new(path.to_owned()),
            durability,
            queue: Arc::default(),
        }
    }

    async fn send(&self, job: Job) -> Result<(), StateError> {
        let queue = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            match &*queue {
                Some(sender) if !sender.is_closed() => sender.clone(),
                _ => {
                    let (sender, jobs) = mpsc::channel(MAX_BATCH * 4);
                    let (path, durability) = (Arc::clone(&self.path), self.durability);
                    std::thread::Builder::new()
                        .name("cubicle-events".into())
                        .spawn(move || write(&path, durability, jobs))
                        .map_err(|err| {
                            StateError::Append(format!("cannot start the event writer: {err}"))
                        })?;
                    *queue = Some(sender.clone());
                    sender
                }
            }
        };
        queue
            .send(job)
            .await
            .map_err(|_| StateError::Append("the event writer stopped".into()))
    }
}

/// The writer thread: batches of what is waiting, in arrival order, until
/// every sender is gone.
fn write(path: &Path, durability: Durability, mut jobs: mpsc::Receiver<Job>) {
    let mut connection = match connect(path, durability) {
        Ok(connection) => Some(connection),
        Err(err) => {
            tracing::error!(%err, path = %path.display(), "cannot open the database to append events");
            None
        }
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(job) = jobs.blocking_recv() {
        batch.push(job);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let committed = match connection.as_mut() {
            Some(connection) => {
                commit(connection, &batch).map_err(|err| format!("{err} (in {})", path.display()))
            }
            None => Err(format!(
                "the database {} could not be opened",
                path.display()
            )),
        };
        match committed {
            Ok(outcomes) => {
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = job.reply.send(outcome);
                }
            }
            Err(why) => {
                tracing::error!(err = %why, events = batch.len(), "cannot append events");
                for job in batch.drain(..) {
                    let _ = job.reply.send(Err(StateError::Append(why.clone())));
                }
            }
        }
    }
}

/// The writer's connection: the database the store opened and migrated
/// (in write-ahead-log mode), synced as `durability` says.
fn connect(path: &Path, durability: Durability) -> rusqlite::Result<rusqlite::Connection> {
    let connection = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Synced => "FULL",
            Durability::Process => "NORMAL",
        },
    )?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    Ok(connection)
}

/// Seals and inserts `batch` in one transaction: each record continues
/// its chain's head as the transaction found it, then as the batch moved
/// it. A record whose chain cannot be continued (an unreadable head) fails
/// alone; anything the database refuses fails the whole batch, unwritten.
fn commit(
    connection: &mut rusqlite::Connection,
    batch: &[Job],
) -> rusqlite::Result<Vec<Result<(i64, i64), StateError>>> {
    let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Per chain the batch wrote to: its new head (seq, hash, time).
    let mut heads: HashMap<&str, (u64, Hash, i64)> = HashMap::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    {
        let mut read_head = tx.prepare_cached(READ_HEAD)?;
        let mut insert = tx.prepare_cached(INSERT_EVENT)?;
        for job in batch {
            let record = &job.record;
            let chain = record.chain.as_str();
            let (seq, prev) = match heads.get(chain) {
                Some(&(seq, hash, _)) => (seq + 1, hash),
                None => {
                    let head: Option<(i64, String)> = read_head
                        .query_row([chain], |row| Ok((row.get(0)?, row.get(1)?)))
                        .optional()?;
                    match next_after(chain, head) {
                        Ok(next) => next,
                        Err(err) => {
                            outcomes.push(Err(unsealable(err)));
                            continue;
                        }
                    }
                }
            };
            let sealed = match record.clone().seal(seq, &prev) {
                Ok(sealed) => sealed,
                Err(err) => {
                    outcomes.push(Err(unsealable(err)));
                    continue;
                }
            };
            let actor = record.actor.as_ref();
            insert.execute(rusqlite::params![
                record.at,
                record.kind,
                record.workspace,
                actor.map(|a| a.id.as_str()),
                actor.map(|a| a.name.as_str()),
                actor.map(|a| a.role.as_str()),
                record.detail.to_string(),
                record.request_id,
                record.client,
                record.outcome,
                record.chain,
                sealed.seq as i64,
                hex::encode(sealed.hash),
                sealed.bytes,
            ])?;
            heads.insert(chain, (seq, sealed.hash, record.at));
            outcomes.push(Ok((tx.last_insert_rowid(), record.at)));
        }
        let mut write_head = tx.prepare_cached(MOVE_HEAD)?;
        for (chain, (seq, hash, at)) in &heads {
            write_head.execute(rusqlite::params![chain, *seq as i64, hex::encode(hash), at])?;
        }
    }
    tx.commit()?;
    Ok(outcomes)
}

/// Seals `record` as the next of its chain inside `tx` (an open write
/// transaction: `BEGIN IMMEDIATE` holds every other writer of the
/// database off until it ends) and moves the head; returns its seq.
pub(crate) async fn append_in(
    tx: &mut sqlx::SqliteConnection,
    record: &Record,
) -> Result<u64, StateError> {
    let chain = record.chain.as_str();
    let head: Option<(i64, String)> = sqlx::query_as(READ_HEAD)
        .bind(chain)
        .fetch_optional(&mut *tx)
        .await?;
    let (seq, prev) = next_after(chain, head).map_err(unsealable)?;
    let sealed = record.clone().seal(seq, &prev).map_err(unsealable)?;
    insert_sealed(&mut *tx, record, &sealed).await?;
    write_head(&mut *tx, chain, seq, &sealed.hash, record.at).await?;
    Ok(seq)
}

/// Inserts a sealed record; returns its event id.
async fn insert_sealed(
    tx: &mut sqlx::SqliteConnection,
    record: &Record,
    sealed: &audit_chain::Sealed,
) -> Result<i64, StateError> {
    let actor = record.actor.as_ref();
    let inserted = sqlx::query(INSERT_EVENT)
        .bind(record.at)
        .bind(&record.kind)
        .bind(&record.workspace)
        .bind(actor.map(|a| a.id.as_str()))
        .bind(actor.map(|a| a.name.as_str()))
        .bind(actor.map(|a| a.role.as_str()))
        .bind(record.detail.to_string())
        .bind(&record.request_id)
        .bind(&record.client)
        .bind(&record.outcome)
        .bind(&record.chain)
        .bind(sealed.seq as i64)
        .bind(hex::encode(sealed.hash))
        .bind(&sealed.bytes)
        .execute(&mut *tx)
        .await?;
    Ok(inserted.last_insert_rowid())
}

/// Moves `chain`'s head to (`seq`, `hash`, `at`).
async fn write_head(
    tx: &mut sqlx::SqliteConnection,
    chain: &str,
    seq: u64,
    hash: &Hash,
    at: i64,
) -> Result<(), StateError> {
    sqlx::query(MOVE_HEAD)
        .bind(chain)
        .bind(seq as i64)
        .bind(hex::encode(hash))
        .bind(at)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The seq and previous hash of `chain`'s next record, from its stored
/// head (seq, hex hash) if it has one; an error if that head is unreadable.
fn next_after(
    chain: &str,
    head: Option<(i64, String)>,
) -> Result<(u64, Hash), audit_chain::ChainError> {
    match head {
        None => Ok((1, audit_chain::genesis(chain))),
        Some((seq, hash)) => {
            audit_chain::parse_hash("chain head", &hash).map(|hash| (seq as u64 + 1, hash))
        }
    }
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
    async fn the_writers_connection_syncs_as_the_durability_asks_and_its_events_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        for (durability, want) in [(Durability::Synced, 2), (Durability::Process, 1)] {
            let path = dir.path().join(format!("{durability:?}.db"));
            let store = Store::open_with(&path, durability).await.unwrap();
            let connection = connect(&path, durability).unwrap();
            let level: i64 = connection
                .query_row("PRAGMA synchronous", [], |row| row.get(0))
                .unwrap();
            assert_eq!(
                level, want,
                "{durability:?}: the writer's PRAGMA synchronous"
            );
            // Written by the writer's connection, read through the pool's.
            let event = NewEvent {
                kind: EventKind::ControlTake,
                workspace_id: Some("ws-writer"),
                ..NewEvent::default()
            };
            let (first, _) = append(&store, &event).await.unwrap();
            let (second, _) = append(&store, &event).await.unwrap();
            assert!(second > first, "ids grow: {first} then {second}");
            let (seq, _): (i64, String) =
                sqlx::query_as("SELECT seq, hash FROM chain_heads WHERE chain = 'ws-writer'")
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
            assert_eq!(seq, 2, "{durability:?}: the head moved with both");
        }
    }

    #[test]
    fn every_kind_is_listed_once_and_parses_back() {
        // Variants number from 0 in order: ALL holds each at its index, and
        // the last one closes it, so a kind added but not listed fails here.
        for (index, kind) in EventKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, index, "{kind:?} is out of place in ALL");
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::ALL.len(), EventKind::WorkspaceLost as usize + 1);
        assert_eq!(EventKind::parse("no.such"), None);
    }

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

    fn event(workspace: &str, i: usize) -> NewEvent<'_> {
        NewEvent {
            kind: EventKind::Action,
            workspace_id: Some(workspace),
            detail: json!({ "i": i }),
            ..NewEvent::default()
        }
    }

    /// The `i`s of `chain`'s records in seq order, and its seqs.
    async fn chain_of(store: &Store, chain: &str) -> (Vec<i64>, Vec<i64>) {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT seq, detail FROM events WHERE chain = ? ORDER BY seq")
                .bind(chain)
                .fetch_all(store.pool())
                .await
                .unwrap();
        let is = rows
            .iter()
            .map(|(_, d)| {
                serde_json::from_str::<Value>(d).unwrap()["i"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        (is, rows.iter().map(|(seq, _)| *seq).collect())
    }

    /// Many writers at once share commits; each chain still holds its
    /// records in the order each writer appended them, seq 1, 2, 3, …
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_at_once_keep_each_chains_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for chain in ["ws-a", "ws-b", "ws-c"] {
            let store = store.clone();
            tasks.spawn(async move {
                for i in 0..60 {
                    append(&store, &event(chain, i)).await.unwrap();
                }
            });
        }
        tasks.join_all().await;
        for chain in ["ws-a", "ws-b", "ws-c"] {
            let (is, seqs) = chain_of(&store, chain).await;
            assert_eq!(is, (0..60).collect::<Vec<_>>(), "{chain}");
            assert_eq!(seqs, (1..=60).collect::<Vec<_>>(), "{chain}");
        }
    }

    /// A chain whose stored head is unreadable refuses its own appends with
    /// a clear error; the appends to other chains around it are written.
    #[tokio::test]
    async fn an_unreadable_head_fails_only_its_own_chain() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        append(&store, &event("ws-bad", 0)).await.unwrap();
        sqlx::query("UPDATE chain_heads SET hash = 'not-hex' WHERE chain = 'ws-bad'")
            .execute(store.pool())
            .await
            .unwrap();
        let (one, two, three) = (event("ws-good", 1), event("ws-bad", 1), event("ws-good", 2));
        let (good, bad, also_good) = tokio::join!(
            append(&store, &one),
            append(&store, &two),
            append(&store, &three),
        );
        let err = bad.unwrap_err().to_string();
        assert!(err.contains("chain head"), "{err}");
        good.unwrap();
        also_good.unwrap();
        assert_eq!(chain_of(&store, "ws-good").await.0, [1, 2]);
        assert_eq!(chain_of(&store, "ws-bad").await.0, [0]);
    }

    /// A store outlives the runtime its first append ran in (a CLI
    /// command's, a test's): the next runtime gets a writer of its own.
    #[test]
    fn the_writer_follows_the_store_into_a_new_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let store = runtime().block_on(async {
            let store = Store::open(&dir.path().join("db")).await.unwrap();
            append(&store, &event("ws-a", 0)).await.unwrap();
            store
        });
        runtime().block_on(async {
            append(&store, &event("ws-a", 1)).await.unwrap();
            assert_eq!(chain_of(&store, "ws-a").await.0, [0, 1]);
        });
    }
}
