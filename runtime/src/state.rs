//! The runtime's state in SQLite (WAL), through sqlx with migrations.
//!
//! Every workspace state change is written here before anyone is told of it,
//! so that after a crash the store is never behind what was reported.

use std::path::Path;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::geometry::Geometry;
use crate::limits::Limits;

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot open the state database {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot migrate the state database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("state database query failed: {0}")]
    Query(#[from] sqlx::Error),
    #[error("cannot append the event: {0}")]
    Append(String),
    #[error("the state database holds unreadable limits for workspace {id}: {reason}")]
    BadLimits { id: String, reason: String },
    #[error("the state database holds an unknown workspace state {0:?}")]
    UnknownState(String),
}

/// Where a workspace is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceState {
    /// Its row exists; its directories and processes are being made.
    Creating,
    /// Its processes run; it is not ready yet.
    Starting,
    /// Ready: the desktop and the browser answer.
    Running,
    /// Frozen (jail: its cgroup's freezer; microVM: its vCPUs parked): its
    /// memory is kept, it uses no CPU, and it takes no input until resumed.
    Paused,
    /// Being stopped.
    Stopping,
    /// No process of it runs; its writable layer is kept.
    Stopped,
    /// It could not start; nothing of it is left but this row.
    Failed,
    /// Deleted: nothing of it is left but this row.
    Deleted,
}

impl WorkspaceState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creating => "creating",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
            Self::Deleted => "deleted",
        }
    }

    /// States in which processes of the workspace may exist.
    pub fn may_have_processes(self) -> bool {
        matches!(
            self,
            Self::Creating | Self::Starting | Self::Running | Self::Paused | Self::Stopping
        )
    }
}

impl FromStr for WorkspaceState {
    type Err = StateError;
    fn from_str(text: &str) -> Result<Self, StateError> {
        Ok(match text {
            "creating" => Self::Creating,
            "starting" => Self::Starting,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "failed" => Self::Failed,
            "deleted" => Self::Deleted,
            other => return Err(StateError::UnknownState(other.to_owned())),
        })
    }
}

/// One workspace as stored.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceRecord {
    pub id: String,
    pub name: String,
    pub backend: String,
    pub state: WorkspaceState,
    pub geometry: Geometry,
    /// The unprivileged host uid its processes run as.
    pub host_uid: u32,
    /// The backend's top process on the host, while it runs.
    pub pid: Option<i32>,
    /// Why it failed or stopped unexpectedly, for a human.
    pub error: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
    /// The id of the token that created it (`None`: made before owners were
    /// recorded); agents see only their own workspaces by default.
    pub owner_token: Option<String>,
    /// What it may use (defaults for workspaces made before limits).
    pub limits: Limits,
}

type Row = (
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    i64,
    i64,
    Option<String>,
    Option<String>,
);

/// The workspace columns, in [`Row`] order (a macro so queries stay static strings).
macro_rules! columns {
    () => {
        "id, name, backend, state, width, height, host_uid, pid, error, created_at, updated_at, owner_token, limits"
    };
}

impl TryFrom<Row> for WorkspaceRecord {
    type Error = StateError;
    fn try_from(row: Row) -> Result<Self, StateError> {
        let (
            id,
            name,
            backend,
            state,
            width,
            height,
            uid,
            pid,
            error,
            created,
            updated,
            owner,
            limits,
        ) = row;
        let limits = match limits {
            Some(text) => Limits::from_json(&text).map_err(|e| StateError::BadLimits {
                id: id.clone(),
                reason: e.to_string(),
            })?,
            None => Limits::default(),
        };
        Ok(Self {
            id,
            name,
            backend,
            state: state.parse()?,
            geometry: Geometry {
                width: u32::try_from(width).unwrap_or(0),
                height: u32::try_from(height).unwrap_or(0),
            },
            host_uid: u32::try_from(uid).unwrap_or(0),
            pid: pid.and_then(|p| i32::try_from(p).ok()),
            error,
            created_at: created,
            updated_at: updated,
            owner_token: owner,
            limits,
        })
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The SQLite store.
#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    appender: crate::events::Appender,
}

/// Makes the database file (created empty if missing) and its WAL and
/// shared-memory files, where they exist, readable and writable by the
/// owner only. SQLite creates the `-wal` and `-shm` files with the
/// database file's mode, so they stay private from then on.
fn private_files(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let mut name = path.as_os_str().to_owned();
    let base = name.clone();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        name.clone_from(&base);
        name.push(suffix);
        match std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    Ok(())
}

/// When a commit (an event row, and every other write) is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The write-ahead log is synced at every commit: an event survives a
    /// power cut before its operation runs. About 0.7 ms a commit on this
    /// project's test machine; commits that wait together share one sync.
    #[default]
    Synced,
    /// The log is synced only at SQLite's checkpoints: an event is still in
    /// the log before its operation runs, so a daemon crash, `kill -9` or
    /// upgrade loses none, but a power cut or kernel crash may lose the
    /// last commits (the database and every audit chain stay whole, ending
    /// earlier). SQLite's `synchronous=NORMAL` in WAL mode.
    Process,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it,
    /// every commit synced ([`Durability::Synced`]).
    pub async fn open(path: &Path) -> Result<Self, StateError> {
        Self::open_with(path, Durability::Synced).await
    }

    /// Opens (creating if needed) the database at `path` and migrates it.
    /// The database is private to the daemon (0600): it holds token hashes
    /// and every workspace's owner, and its folder (the data dir) must stay
    /// traversable (0711) for the workspaces' uids to reach their own dirs.
    pub async fn open_with(path: &Path, durability: Durability) -> Result<Self, StateError> {
        private_files(path).map_err(|source| StateError::Open {
            path: path.display().to_string(),
            source: sqlx::Error::Io(source),
        })?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Synced => SqliteSynchronous::Full,
                Durability::Process => SqliteSynchronous::Normal,
            })
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| StateError::Open {
                path: path.display().to_string(),
                source,
            })?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self {
            appender: crate::events::Appender::new(path, durability),
            pool,
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The process's event writer for this database ([`crate::events::append`]).
    pub(crate) fn appender(&self) -> &crate::events::Appender {
        &self.appender
    }

    pub async fn insert(&self, ws: &WorkspaceRecord) -> Result<(), StateError> {
        sqlx::query(concat!(
            "INSERT INTO workspaces (",
            columns!(),
            ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind(&ws.id)
        .bind(&ws.name)
        .bind(&ws.backend)
        .bind(ws.state.as_str())
        .bind(i64::from(ws.geometry.width))
        .bind(i64::from(ws.geometry.height))
        .bind(i64::from(ws.host_uid))
        .bind(ws.pid.map(i64::from))
        .bind(&ws.error)
        .bind(ws.created_at)
        .bind(ws.updated_at)
        .bind(&ws.owner_token)
        .bind(ws.limits.to_json())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Writes a new state (and pid and error) for `id`.
    pub async fn set_state(
        &self,
        id: &str,
        state: WorkspaceState,
        pid: Option<i32>,
        error: Option<&str>,
    ) -> Result<(), StateError> {
        sqlx::query(
            "UPDATE workspaces SET state = ?, pid = ?, error = ?, updated_at = ? WHERE id = ?",
        )
        .bind(state.as_str())
        .bind(pid.map(i64::from))
        .bind(error)
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Gives an unowned workspace (from the warm pool) its owner and name;
    /// false if it already has an owner.
    pub async fn claim(
        &self,
        id: &str,
        owner: Option<&str>,
        name: &str,
    ) -> Result<bool, StateError> {
        let done = sqlx::query(
            "UPDATE workspaces SET owner_token = ?, name = ?, updated_at = ? \
             WHERE id = ? AND owner_token IS NULL",
        )
        .bind(owner)
        .bind(name)
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn get(&self, id: &str) -> Result<Option<WorkspaceRecord>, StateError> {
        let row: Option<Row> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM workspaces WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(WorkspaceRecord::try_from).transpose()
    }

    /// Every workspace not deleted, oldest first.
    pub async fn list(&self) -> Result<Vec<WorkspaceRecord>, StateError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM workspaces WHERE state != 'deleted' ORDER BY created_at, id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(WorkspaceRecord::try_from).collect()
    }

    /// Every workspace ever made, deleted ones included, oldest first.
    pub async fn list_all(&self) -> Result<Vec<WorkspaceRecord>, StateError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM workspaces ORDER BY created_at, id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(WorkspaceRecord::try_from).collect()
    }

    /// Host uids held by workspaces that still have files or processes.
    pub async fn uids_in_use(&self) -> Result<Vec<u32>, StateError> {
        let rows: Vec<(i64,)> = sqlx::query_as(
            "SELECT host_uid FROM workspaces WHERE state NOT IN ('deleted', 'failed')",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(uid,)| u32::try_from(uid).ok())
            .collect())
    }
}

#[cfg(test)]
mod limits_tests {
    use super::*;
    use crate::limits::{LimitsPolicy, LimitsRequest};

    fn record(id: &str, limits: Limits) -> WorkspaceRecord {
        WorkspaceRecord {
            id: id.into(),
            name: id.into(),
            backend: "jail".into(),
            state: WorkspaceState::Stopped,
            geometry: Geometry::default(),
            host_uid: 1_600_001,
            pid: None,
            error: None,
            created_at: 1,
            updated_at: 1,
            owner_token: None,
            limits,
        }
    }

    #[tokio::test]
    async fn every_connection_syncs_as_the_durability_asks() {
        let dir = tempfile::tempdir().unwrap();
        for (durability, want) in [(Durability::Synced, 2), (Durability::Process, 1)] {
            let path = dir.path().join(format!("{durability:?}.db"));
            let store = Store::open_with(&path, durability).await.unwrap();
            // Every connection of the pool, not just the first.
            let mut held = Vec::new();
            for _ in 0..4 {
                let mut conn = store.pool().acquire().await.unwrap();
                let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
                assert_eq!(level, want, "{durability:?}: PRAGMA synchronous");
                let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
                assert_eq!(mode, "wal");
                held.push(conn);
            }
        }
    }

    #[tokio::test]
    async fn limits_persist_and_old_rows_get_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).await.unwrap();
        let request = LimitsRequest {
            memory_mb: Some(512),
            cpus: Some(0.5),
            disk_mb: Some(1024),
            ..Default::default()
        };
        let limits = LimitsPolicy::with_maxima(1 << 40, 2.0, 4096, 1 << 40)
            .resolve(&request)
            .unwrap();
        store.insert(&record("ws-a", limits)).await.unwrap();
        drop(store);
        let store = Store::open(&dir.path().join("state.db")).await.unwrap();
        assert_eq!(store.get("ws-a").await.unwrap().unwrap().limits, limits);
        store.insert(&record("ws-b", limits)).await.unwrap();
        sqlx::query("UPDATE workspaces SET limits = NULL WHERE id = 'ws-b'")
            .execute(store.pool())
            .await
            .unwrap();
        let old = store.get("ws-b").await.unwrap().unwrap();
        assert_eq!(old.limits, Limits::default());
    }
}

#[cfg(test)]
mod file_mode_tests {
    use super::*;

    #[tokio::test]
    async fn the_database_and_its_wal_are_private_to_the_daemon() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cubicle.db");
        // A database left world-readable by an older version is fixed too.
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = Store::open(&path).await.unwrap();
        store.uids_in_use().await.unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let file = dir.path().join(format!("cubicle.db{suffix}"));
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", file.display());
        }
    }
}
