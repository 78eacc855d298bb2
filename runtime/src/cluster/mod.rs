//! The state several hosts share, behind one narrow trait
//! ([`ClusterStore`]) with two stores: SQLite ([`sqlite::SqliteCluster`],
//! the embedded one, on the daemon's own database) and PostgreSQL
//! ([`postgres::PgCluster`], for nodes and edges on many hosts). One
//! contract suite (`tests.rs`) runs against both.
//!
//! What is here is what crosses hosts: the nodes and their epochs, where
//! each workspace is placed and whether it is lost, who holds a
//! workspace's input, approvals, the audit chains, tokens, and the index
//! of each workspace's files by node. A node's own facts of its
//! workspaces (host uids, pids, disks) stay in its local store
//! ([`crate::state::Store`]).
//!
//! Fencing: a node's every start takes a new epoch ([`ClusterStore::register_node`]);
//! its writes carry the [`Lease`] and are refused ([`ClusterError::Fenced`])
//! once the node is down or has started again since. A node that finds
//! itself fenced must stop its workspaces: another decision about them may
//! already have been made.

/// The placement columns, in the stores' row order (a macro so queries stay
/// static strings).
macro_rules! placement_columns {
    () => {
        "id, name, backend, state, owner_token, node, node_epoch, desired, lost_reason, error, \
         created_at, updated_at"
    };
}

pub mod postgres;
mod rows;
pub mod sqlite;
pub mod temp_postgres;
#[cfg(test)]
mod tests;

use std::future::Future;

use serde::Serialize;

pub use crate::approval_rows::ApprovalState;
use crate::events::NewEvent;
use crate::state::WorkspaceState;

/// What can go wrong with the shared store.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot reach the cluster database {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot migrate the cluster database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("cluster database query failed: {0}")]
    Query(#[from] sqlx::Error),
    #[error(transparent)]
    Local(#[from] crate::state::StateError),
    #[error("the audit chain {chain} cannot be continued: {reason}")]
    Chain { chain: String, reason: String },
    #[error(
        "node {node} was fenced: its lease (epoch {epoch}) is no longer current ({why}); \
         it must stop its workspaces and register again"
    )]
    Fenced {
        node: String,
        epoch: i64,
        why: String,
    },
    #[error("node {0} is not registered")]
    UnknownNode(String),
    #[error("workspace {0} is not placed on any node")]
    UnknownWorkspace(String),
    #[error("workspace {id} is placed on node {owner}, not on {node}")]
    NotOwner {
        id: String,
        owner: String,
        node: String,
    },
    #[error("{0}; try again")]
    Contended(String),
    #[error("approval {0} does not exist")]
    UnknownApproval(String),
    #[error("the store holds a row it cannot read ({what}): {value:?}")]
    BadRow { what: &'static str, value: String },
}

/// A stored approval state, or `BadRow`.
fn approval_state(text: &str) -> Result<ApprovalState, ClusterError> {
    ApprovalState::parse(text).ok_or_else(|| ClusterError::BadRow {
        what: "approval state",
        value: text.to_owned(),
    })
}

impl ClusterError {
    /// The database is restarting or out of reach for a moment (a dropped
    /// connection, `57P01`–`57P03`: shutting down, starting up): the same
    /// read may succeed if asked again.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Query(sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut) => true,
            Self::Query(sqlx::Error::Database(err)) => {
                err.code().is_some_and(|code| code.starts_with("57P0"))
            }
            _ => false,
        }
    }

    /// A write of a row that is there already (a token id, an approval id).
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Self::Query(sqlx::Error::Database(err)) if err.is_unique_violation())
    }
}

/// A node as it registers.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    /// Where edges reach it (`host:port`).
    pub address: String,
    /// The backends it can run (`microvm` where KVM works, `jail` always).
    pub backends: Vec<String>,
    /// How many workspaces it may hold.
    pub capacity: u32,
}

/// A node's right to write, for one run of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub node: String,
    pub epoch: i64,
}

/// Up, or declared down (past its heartbeat deadline, or fenced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Up,
    Down,
}

/// A node as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRecord {
    pub name: String,
    pub address: String,
    pub backends: Vec<String>,
    pub capacity: u32,
    pub free: u32,
    pub epoch: i64,
    pub status: NodeStatus,
    /// Unix ms of its last heartbeat (or registration).
    pub heartbeat_at: i64,
    pub down_reason: Option<String>,
}

/// What the workspace's owner asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Desired {
    Running,
    Stopped,
    Deleted,
}

impl Desired {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Deleted => "deleted",
        }
    }

    fn parse(text: &str) -> Result<Self, ClusterError> {
        Ok(match text {
            "running" => Self::Running,
            "stopped" => Self::Stopped,
            "deleted" => Self::Deleted,
            other => {
                return Err(ClusterError::BadRow {
                    what: "desired state",
                    value: other.to_owned(),
                });
            }
        })
    }
}

/// Where a workspace is: a state its node reported, or lost with its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actual {
    State(WorkspaceState),
    /// Its node was declared down; nothing is known of it since, and
    /// nothing restarts it elsewhere by itself.
    Lost,
}

impl Actual {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::State(state) => state.as_str(),
            Self::Lost => "lost",
        }
    }

    fn parse(text: &str) -> Result<Self, ClusterError> {
        match text {
            "lost" => Ok(Self::Lost),
            other => other
                .parse()
                .map(Self::State)
                .map_err(|_| ClusterError::BadRow {
                    what: "workspace state",
                    value: other.to_owned(),
                }),
        }
    }
}

/// A workspace's place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub id: String,
    pub name: String,
    pub backend: String,
    pub owner_token: Option<String>,
    pub node: String,
    pub node_epoch: i64,
    pub desired: Desired,
    pub actual: Actual,
    pub lost_reason: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A workspace its node's death made lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostWorkspace {
    pub id: String,
    pub node: String,
    pub reason: String,
}

/// Taking a workspace's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// `holder` has it now.
    Taken,
    /// Someone else holds it.
    HeldBy(String),
}

/// An approval being asked.
#[derive(Debug, Clone)]
pub struct NewApproval<'a> {
    pub id: &'a str,
    pub workspace: &'a str,
    /// What is approved (a hash of the held operation): only that runs.
    pub digest: &'a str,
    /// The approval as the API shows it (JSON).
    pub record: &'a str,
}

/// How a decision went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// This call decided it.
    Made(ApprovalState),
    /// It was decided before (or expired): the state it has.
    Already(ApprovalState),
}

/// One sealed record of a chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRow {
    pub seq: u64,
    /// Hex SHA-256.
    pub hash: String,
    /// The canonical bytes the hash covers.
    pub sealed: String,
}

/// A token as stored (its secret only as a hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub id: String,
    pub name: String,
    pub role: String,
    pub secret_hash: String,
    /// JSON, as `tokens` keeps it; `None`: every workspace its role allows.
    pub scope: Option<String>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

impl TokenRow {
    /// The token it stores, if it is live at `now` (not revoked, not
    /// expired) and of a role this version knows: what a secret whose hash
    /// found this row may act as.
    pub fn live(self, now: i64) -> Option<crate::tokens::Token> {
        let live = self.revoked_at.is_none() && self.expires_at.is_none_or(|at| at > now);
        Some(crate::tokens::Token {
            role: crate::tokens::Role::parse(&self.role).filter(|_| live)?,
            id: self.id,
            name: self.name,
            scope: crate::tokens::Scope::from_column(self.scope),
        })
    }
}

/// What kind of file an artifact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Checkpoint,
    Recording,
    Quarantine,
}

impl ArtifactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Checkpoint => "checkpoint",
            Self::Recording => "recording",
            Self::Quarantine => "quarantine",
        }
    }
}

/// A file of a workspace's, and the node that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub kind: ArtifactKind,
    pub id: String,
    pub workspace: String,
    pub node: String,
    pub bytes: u64,
    pub sha256: String,
    pub at: i64,
}

/// The shared state's contract: both stores keep every promise written
/// here, and `tests.rs` checks each against both.
///
/// Every method is one transaction: it happens whole or not at all.
pub trait ClusterStore: Send + Sync {
    /// Registers `info` (or updates it) with a new epoch, greater than any
    /// it had, and marks it up. Returns the lease its writes carry.
    fn register_node(
        &self,
        info: &NodeInfo,
        now: i64,
    ) -> impl Future<Output = Result<Lease, ClusterError>> + Send;

    /// Records a heartbeat with the node's free capacity; `Fenced` if the
    /// lease is not the node's current one or the node is down.
    fn heartbeat(
        &self,
        lease: &Lease,
        free: u32,
        now: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Every node, by name.
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeRecord>, ClusterError>> + Send;

    /// Marks down every up node whose last heartbeat is older than
    /// `now - deadline_ms`, and makes each of its workspaces not deleted
    /// `lost` with the reason, each with a `workspace.lost` event in its
    /// audit chain (and a `node.down` in the host chain), in one
    /// transaction. Returns the workspaces it made lost.
    fn sweep(
        &self,
        now: i64,
        deadline_ms: i64,
    ) -> impl Future<Output = Result<Vec<LostWorkspace>, ClusterError>> + Send;

    /// Places a new workspace on the lease's node (`Fenced` if the lease is
    /// stale).
    fn place(
        &self,
        lease: &Lease,
        placement: &Placement,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// The owning node reports where its workspace is. Refused when the
    /// lease is stale (`Fenced`), the workspace is on another node
    /// (`NotOwner`) or it is lost (`Fenced`: its node was declared down).
    fn report(
        &self,
        lease: &Lease,
        id: &str,
        actual: WorkspaceState,
        error: Option<&str>,
        now: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Records what the owner asked for (any edge may).
    fn set_desired(
        &self,
        id: &str,
        desired: Desired,
        now: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    fn placement(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Placement>, ClusterError>> + Send;

    /// Every placement, of one node or of all, oldest first.
    fn placements(
        &self,
        node: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Placement>, ClusterError>> + Send;

    /// Gives `holder` a workspace's input unless someone else holds it
    /// (`force`: take it from them; an operator's take-over).
    fn take_control(
        &self,
        workspace: &str,
        holder: &str,
        force: bool,
        now: i64,
    ) -> impl Future<Output = Result<Control, ClusterError>> + Send;

    /// Hands it back if `holder` holds it; whether it did.
    fn release_control(
        &self,
        workspace: &str,
        holder: &str,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;

    fn control_holder(
        &self,
        workspace: &str,
    ) -> impl Future<Output = Result<Option<String>, ClusterError>> + Send;

    /// Stores a pending approval.
    fn ask(
        &self,
        approval: &NewApproval<'_>,
        now: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Approves or denies a pending approval, once: a second decision (from
    /// any edge) finds it decided.
    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        now: i64,
    ) -> impl Future<Output = Result<Decision, ClusterError>> + Send;

    /// Takes an approved approval's one run, for the operation `digest`:
    /// true once, for the approved digest only; false ever after.
    fn run_once(
        &self,
        id: &str,
        digest: &str,
        now: i64,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;

    fn approval_state(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<ApprovalState>, ClusterError>> + Send;

    /// Appends an event sealed into its cluster chain ([`cluster_chain`]);
    /// the seq is taken under the chain's lock, so writers on any host
    /// never fork a chain. Returns the chain and the seq.
    fn append(
        &self,
        event: &NewEvent<'_>,
    ) -> impl Future<Output = Result<(String, u64), ClusterError>> + Send;

    /// A chain's sealed records after `after_seq`, in order.
    fn chain(
        &self,
        chain: &str,
        after_seq: u64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ChainRow>, ClusterError>> + Send;

    fn put_token(&self, token: &TokenRow) -> impl Future<Output = Result<(), ClusterError>> + Send;

    fn token_by_hash(
        &self,
        secret_hash: &str,
    ) -> impl Future<Output = Result<Option<TokenRow>, ClusterError>> + Send;

    /// Revokes a live token; whether it did.
    fn revoke_token(
        &self,
        id: &str,
        now: i64,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;

    /// Records where a file of a workspace's is (replacing a row of the same
    /// kind and id).
    fn put_artifact(
        &self,
        artifact: &Artifact,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    fn artifacts(
        &self,
        workspace: &str,
        kind: ArtifactKind,
    ) -> impl Future<Output = Result<Vec<Artifact>, ClusterError>> + Send;
}

/// The chain a cluster decision is sealed into: `cluster/<workspace>`, or
/// `cluster/host` for one about no workspace. Apart from the chains each
/// node keeps of its own workspaces (named by the bare id), so that no two
/// writers ever share a chain's name: an auditor gets a workspace's node
/// chain from its node and its cluster chain from the store, each
/// verifiable alone.
pub fn cluster_chain(workspace: Option<&str>) -> String {
    format!(
        "cluster/{}",
        workspace.unwrap_or(cubicle_recorder::audit_chain::HOST_CHAIN)
    )
}

/// `event` as the cluster's record: in its cluster chain, at `at`.
fn cluster_record(event: &NewEvent<'_>, at: i64) -> cubicle_recorder::audit_chain::Record {
    let mut record = crate::events::unsealed(event, at);
    record.chain = cluster_chain(event.workspace_id);
    record
}

/// The `workspace.lost` event's detail, and the host chain's `node.down`.
fn lost_detail(node: &str, reason: &str) -> serde_json::Value {
    serde_json::json!({ "node": node, "reason": reason })
}

/// Why a sweep declared a node down.
fn overdue_reason(heartbeat_at: i64, now: i64, deadline_ms: i64) -> String {
    format!(
        "no heartbeat for {} ms (deadline {deadline_ms} ms)",
        now.saturating_sub(heartbeat_at)
    )
}

fn backends_text(backends: &[String]) -> String {
    backends.join(",")
}

fn backends_list(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .collect()
}

fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}
