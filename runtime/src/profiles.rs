//! Named browser profiles kept between workspaces: the `profiles` table
//! and the archives, one file per profile under `<data_dir>/profiles/`.
//!
//! An archive is what a workspace's guest packed (`profile_save`: Chromium's
//! user data directory without caches); the host keeps its bytes and their
//! SHA-256 and hands them to the next workspace's guest, and never unpacks
//! them itself: the workspace that wrote them is not trusted, the one that
//! reads them back is the same owner's.
//!
//! A profile runs in at most one workspace at a time: the workspace claims
//! it when it starts ([`claim`]; another running holder is a conflict) and
//! lets it go when it stops, crashes or is deleted ([`release`]). A holder
//! whose row no longer says it may run counts as gone, so a daemon that
//! died mid-run leaves no profile stuck.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::state::{StateError, Store, now_ms};

/// One profile.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct Row {
    pub id: String,
    pub owner_token: String,
    pub name: String,
    /// The archive's bytes; 0 until it is first saved.
    pub size: i64,
    pub sha256: Option<String>,
    /// The workspace running with it now.
    pub running_in: Option<String>,
    pub created_at: i64,
    pub saved_at: Option<i64>,
}

/// The columns of [`Row`] (a macro: sqlx takes only static query text).
macro_rules! columns {
    () => {
        "id, owner_token, name, size, sha256, running_in, created_at, saved_at"
    };
}

/// Workspace states whose holder still counts.
macro_rules! live_states {
    () => {
        "('creating', 'starting', 'running', 'paused', 'stopping')"
    };
}

pub async fn insert(store: &Store, row: &Row) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO profiles (id, owner_token, name, size, sha256, running_in, created_at, saved_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&row.id)
    .bind(&row.owner_token)
    .bind(&row.name)
    .bind(row.size)
    .bind(&row.sha256)
    .bind(&row.running_in)
    .bind(row.created_at)
    .bind(row.saved_at)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Every profile, oldest first; a holder that no longer runs is left out.
pub async fn list(store: &Store) -> Result<Vec<Row>, StateError> {
    let rows: Vec<Row> = sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM profiles ORDER BY created_at, id"
    ))
    .fetch_all(store.pool())
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(live_holder(store, row).await?);
    }
    Ok(out)
}

pub async fn get(store: &Store, id: &str) -> Result<Option<Row>, StateError> {
    let row = sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM profiles WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(store.pool())
    .await?;
    match row {
        Some(row) => Ok(Some(live_holder(store, row).await?)),
        None => Ok(None),
    }
}

/// The profile `owner` named `name`.
pub async fn find(store: &Store, owner: &str, name: &str) -> Result<Option<Row>, StateError> {
    let id: Option<(String,)> =
        sqlx::query_as("SELECT id FROM profiles WHERE owner_token = ? AND name = ?")
            .bind(owner)
            .bind(name)
            .fetch_optional(store.pool())
            .await?;
    match id {
        Some((id,)) => get(store, &id).await,
        None => Ok(None),
    }
}

async fn live_holder(store: &Store, mut row: Row) -> Result<Row, StateError> {
    if let Some(holder) = &row.running_in {
        let live: Option<(String,)> = sqlx::query_as(concat!(
            "SELECT id FROM workspaces WHERE id = ? AND state IN ",
            live_states!()
        ))
        .bind(holder)
        .fetch_optional(store.pool())
        .await?;
        if live.is_none() {
            row.running_in = None;
        }
    }
    Ok(row)
}

/// Why a profile cannot be taken or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NotFound,
    /// Another workspace runs with it.
    InUse(String),
}

/// Marks profile `id` as running in `workspace`; refused while another
/// workspace that may still run holds it.
pub async fn claim(
    store: &Store,
    id: &str,
    workspace: &str,
) -> Result<Result<(), Refusal>, StateError> {
    let done = sqlx::query(concat!(
        "UPDATE profiles SET running_in = ? WHERE id = ? AND (running_in IS NULL ",
        "OR running_in = ? OR running_in NOT IN (SELECT id FROM workspaces WHERE state IN ",
        live_states!(),
        "))"
    ))
    .bind(workspace)
    .bind(id)
    .bind(workspace)
    .execute(store.pool())
    .await?;
    if done.rows_affected() > 0 {
        return Ok(Ok(()));
    }
    Ok(match get(store, id).await? {
        None => Err(Refusal::NotFound),
        Some(row) => Err(Refusal::InUse(row.running_in.unwrap_or_default())),
    })
}

/// Lets go of whatever profile `workspace` runs with.
pub async fn release(store: &Store, workspace: &str) -> Result<(), StateError> {
    sqlx::query("UPDATE profiles SET running_in = NULL WHERE running_in = ?")
        .bind(workspace)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Records a new archive of profile `id`.
pub async fn saved(store: &Store, id: &str, size: u64, sha256: &str) -> Result<(), StateError> {
    sqlx::query("UPDATE profiles SET size = ?, sha256 = ?, saved_at = ? WHERE id = ?")
        .bind(size as i64)
        .bind(sha256)
        .bind(now_ms())
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Removes profile `id` (its row; the caller removes its archive); refused
/// while a workspace runs with it.
pub async fn delete(store: &Store, id: &str) -> Result<Result<Row, Refusal>, StateError> {
    let Some(row) = get(store, id).await? else {
        return Ok(Err(Refusal::NotFound));
    };
    if let Some(holder) = row.running_in.clone() {
        return Ok(Err(Refusal::InUse(holder)));
    }
    sqlx::query("DELETE FROM profiles WHERE id = ?")
        .bind(id)
        .execute(store.pool())
        .await?;
    sqlx::query("UPDATE workspaces SET profile = NULL WHERE profile = ?")
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(Ok(row))
}

/// Gives workspace `workspace` profile `id` (at its create).
pub async fn attach(store: &Store, workspace: &str, id: &str) -> Result<(), StateError> {
    sqlx::query("UPDATE workspaces SET profile = ? WHERE id = ?")
        .bind(id)
        .bind(workspace)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// The profile workspace `workspace` runs with, if any.
pub async fn of_workspace(store: &Store, workspace: &str) -> Result<Option<Row>, StateError> {
    let id: Option<(Option<String>,)> =
        sqlx::query_as("SELECT profile FROM workspaces WHERE id = ?")
            .bind(workspace)
            .fetch_optional(store.pool())
            .await?;
    match id.and_then(|(id,)| id) {
        Some(id) => get(store, &id).await,
        None => Ok(None),
    }
}

/// Where the archives are kept: `<data_dir>/profiles/<id>.tar.gz`, in a
/// folder only the daemon's user opens.
#[derive(Debug, Clone)]
pub struct Archives {
    dir: PathBuf,
}

impl Archives {
    pub fn under(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("profiles"),
        }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.tar.gz"))
    }

    /// The archive of profile `id`; `None` if it was never saved.
    pub fn read(&self, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path(id)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Replaces the archive of profile `id` whole: written beside it,
    /// synced, then renamed over it, so a crash leaves the old one or the
    /// new one, never a part.
    pub fn write(&self, id: &str, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let temporary = self.dir.join(format!(".{id}.partial"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, self.path(id))?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        match std::fs::remove_file(self.path(id)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{WorkspaceRecord, WorkspaceState};

    fn row(id: &str, name: &str) -> Row {
        Row {
            id: id.into(),
            owner_token: "tok-1".into(),
            name: name.into(),
            size: 0,
            sha256: None,
            running_in: None,
            created_at: 1,
            saved_at: None,
        }
    }

    async fn workspace(store: &Store, id: &str, state: WorkspaceState) {
        let record = WorkspaceRecord {
            id: id.into(),
            name: id.into(),
            backend: "jail".into(),
            state,
            geometry: Default::default(),
            host_uid: 1,
            pid: None,
            error: None,
            created_at: 1,
            updated_at: 1,
            owner_token: Some("tok-1".into()),
            limits: Default::default(),
        };
        store.insert(&record).await.unwrap();
    }

    #[tokio::test]
    async fn a_profile_runs_in_one_workspace_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        insert(&store, &row("prof-1", "work")).await.unwrap();
        assert!(
            insert(&store, &row("prof-2", "work")).await.is_err(),
            "one name per owner"
        );
        workspace(&store, "ws-a", WorkspaceState::Running).await;
        workspace(&store, "ws-b", WorkspaceState::Running).await;
        attach(&store, "ws-a", "prof-1").await.unwrap();
        assert_eq!(
            of_workspace(&store, "ws-a").await.unwrap().unwrap().id,
            "prof-1"
        );
        assert_eq!(claim(&store, "prof-1", "ws-a").await.unwrap(), Ok(()));
        assert_eq!(
            claim(&store, "prof-1", "ws-a").await.unwrap(),
            Ok(()),
            "again: its own"
        );
        assert_eq!(
            claim(&store, "prof-1", "ws-b").await.unwrap(),
            Err(Refusal::InUse("ws-a".into()))
        );
        assert_eq!(
            delete(&store, "prof-1").await.unwrap(),
            Err(Refusal::InUse("ws-a".into()))
        );
        // A holder that stopped without letting go (a daemon died) is gone.
        store
            .set_state("ws-a", WorkspaceState::Stopped, None, None)
            .await
            .unwrap();
        assert_eq!(
            get(&store, "prof-1").await.unwrap().unwrap().running_in,
            None
        );
        assert_eq!(claim(&store, "prof-1", "ws-b").await.unwrap(), Ok(()));
        release(&store, "ws-b").await.unwrap();
        saved(&store, "prof-1", 10, "ab").await.unwrap();
        let found = find(&store, "tok-1", "work").await.unwrap().unwrap();
        assert_eq!((found.size, found.sha256.as_deref()), (10, Some("ab")));
        assert!(delete(&store, "prof-1").await.unwrap().is_ok());
        assert_eq!(of_workspace(&store, "ws-a").await.unwrap(), None);
        assert_eq!(
            claim(&store, "prof-1", "ws-b").await.unwrap(),
            Err(Refusal::NotFound)
        );
    }

    #[test]
    fn an_archive_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let archives = Archives::under(dir.path());
        assert_eq!(archives.read("prof-1").unwrap(), None);
        archives.write("prof-1", b"one").unwrap();
        archives.write("prof-1", b"two").unwrap();
        assert_eq!(
            archives.read("prof-1").unwrap().as_deref(),
            Some(&b"two"[..])
        );
        archives.remove("prof-1").unwrap();
        archives.remove("prof-1").unwrap();
        assert_eq!(archives.read("prof-1").unwrap(), None);
    }
}
