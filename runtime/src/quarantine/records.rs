//! The records of held downloads (table `downloads`), and their one-way
//! state changes: held → released or held → rejected, each once.

use rand::RngCore;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::scan::Hit;
use crate::state::{StateError, Store, now_ms};

/// Where a download stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DownloadState {
    Held,
    Released,
    Rejected,
}

impl DownloadState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Released => "released",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "held" => Some(Self::Held),
            "released" => Some(Self::Released),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }
}

/// One held download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DownloadRecord {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    /// The cleaned name it is released under.
    pub name: String,
    /// The name the server offered, as it was (at most 1000 characters).
    pub offered_name: String,
    pub size: u64,
    pub sha256: String,
    pub sniffed_type: Option<String>,
    pub claimed_type: Option<String>,
    pub hits: Vec<Hit>,
    pub state: DownloadState,
    /// Why it was released or rejected.
    pub reason: Option<String>,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    /// Token id, or `policy` for an automatic release.
    pub decided_by: Option<String>,
    /// Where it was written in the workspace.
    pub released_path: Option<String>,
}

/// A fresh download id (`dl-` and 16 hex digits, unique across hosts).
pub fn new_id() -> String {
    let mut raw = [0u8; 8];
    rand::rng().fill_bytes(&mut raw);
    format!("dl-{}", hex::encode(raw))
}

macro_rules! columns {
    () => {
        "id, workspace_id, url, name, offered_name, size, sha256, sniffed_type, \
         claimed_type, hits, state, reason, created_at, decided_at, decided_by, released_path"
    };
}

fn corrupt(message: String) -> StateError {
    StateError::Query(sqlx::Error::Decode(message.into()))
}

fn from_row(row: &sqlx::sqlite::SqliteRow) -> Result<DownloadRecord, StateError> {
    let bad = |what: &str| corrupt(format!("downloads: unreadable {what}"));
    let hits: String = row.get("hits");
    let state: String = row.get("state");
    Ok(DownloadRecord {
        id: row.get("id"),
        workspace_id: row.get("workspace_id"),
        url: row.get("url"),
        name: row.get("name"),
        offered_name: row.get("offered_name"),
        size: u64::try_from(row.get::<i64, _>("size")).map_err(|_| bad("size"))?,
        sha256: row.get("sha256"),
        sniffed_type: row.get("sniffed_type"),
        claimed_type: row.get("claimed_type"),
        hits: serde_json::from_str(&hits).map_err(|_| bad("hits"))?,
        state: DownloadState::parse(&state).ok_or_else(|| bad("state"))?,
        reason: row.get("reason"),
        created_at: row.get("created_at"),
        decided_at: row.get("decided_at"),
        decided_by: row.get("decided_by"),
        released_path: row.get("released_path"),
    })
}

pub async fn insert(store: &Store, record: &DownloadRecord) -> Result<(), StateError> {
    let hits = serde_json::to_string(&record.hits)
        .map_err(|e| corrupt(format!("downloads: hits: {e}")))?;
    sqlx::query(concat!(
        "INSERT INTO downloads (",
        columns!(),
        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))
    .bind(&record.id)
    .bind(&record.workspace_id)
    .bind(&record.url)
    .bind(&record.name)
    .bind(&record.offered_name)
    .bind(i64::try_from(record.size).unwrap_or(i64::MAX))
    .bind(&record.sha256)
    .bind(&record.sniffed_type)
    .bind(&record.claimed_type)
    .bind(hits)
    .bind(record.state.as_str())
    .bind(&record.reason)
    .bind(record.created_at)
    .bind(record.decided_at)
    .bind(&record.decided_by)
    .bind(&record.released_path)
    .execute(store.pool())
    .await?;
    Ok(())
}

pub async fn get(store: &Store, id: &str) -> Result<Option<DownloadRecord>, StateError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM downloads WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(store.pool())
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Newest first; of one workspace and/or in one state when given.
pub async fn list(
    store: &Store,
    workspace: Option<&str>,
    state: Option<DownloadState>,
) -> Result<Vec<DownloadRecord>, StateError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM downloads WHERE (? IS NULL OR workspace_id = ?) AND (? IS NULL OR state = ?) \
         ORDER BY created_at DESC, id LIMIT 1000"
    ))
    .bind(workspace)
    .bind(workspace)
    .bind(state.map(DownloadState::as_str))
    .bind(state.map(DownloadState::as_str))
    .fetch_all(store.pool())
    .await?;
    rows.iter().map(from_row).collect()
}

/// Moves a held download to `to` (released or rejected); `false` if it
/// was no longer held (someone decided first).
pub async fn decide(
    store: &Store,
    id: &str,
    to: DownloadState,
    by: &str,
    reason: Option<&str>,
    released_path: Option<&str>,
) -> Result<bool, StateError> {
    let done = sqlx::query(
        "UPDATE downloads SET state = ?, decided_by = ?, decided_at = ?, reason = ?, released_path = ?
         WHERE id = ? AND state = 'held'",
    )
    .bind(to.as_str())
    .bind(by)
    .bind(now_ms())
    .bind(reason)
    .bind(released_path)
    .bind(id)
    .execute(store.pool())
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether a held or released record still refers to `sha256`.
pub async fn content_in_use(store: &Store, sha256: &str) -> Result<bool, StateError> {
    let row = sqlx::query(
        "SELECT COUNT(*) FROM downloads WHERE sha256 = ? AND state IN ('held', 'released')",
    )
    .bind(sha256)
    .fetch_one(store.pool())
    .await?;
    Ok(row.get::<i64, _>(0) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, ws: &str) -> DownloadRecord {
        DownloadRecord {
            id: id.into(),
            workspace_id: ws.into(),
            url: "http://x/a".into(),
            name: "a".into(),
            offered_name: "a".into(),
            size: 1,
            sha256: "ab".repeat(32),
            sniffed_type: None,
            claimed_type: None,
            hits: vec![],
            state: DownloadState::Held,
            reason: None,
            created_at: now_ms(),
            decided_at: None,
            decided_by: None,
            released_path: None,
        }
    }

    #[tokio::test]
    async fn decided_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        insert(&store, &record("dl-1", "ws-1")).await.unwrap();
        insert(&store, &record("dl-2", "ws-2")).await.unwrap();
        assert_eq!(list(&store, Some("ws-1"), None).await.unwrap().len(), 1);
        assert_eq!(
            list(&store, None, Some(DownloadState::Held))
                .await
                .unwrap()
                .len(),
            2
        );
        assert!(
            decide(
                &store,
                "dl-1",
                DownloadState::Rejected,
                "tok-a",
                Some("no"),
                None
            )
            .await
            .unwrap()
        );
        assert!(
            !decide(&store, "dl-1", DownloadState::Released, "tok-b", None, None)
                .await
                .unwrap()
        );
        let one = get(&store, "dl-1").await.unwrap().unwrap();
        assert_eq!(one.state, DownloadState::Rejected);
        assert_eq!(one.decided_by.as_deref(), Some("tok-a"));
        assert!(
            content_in_use(&store, &"ab".repeat(32)).await.unwrap(),
            "dl-2 holds it"
        );
        assert!(get(&store, "dl-9").await.unwrap().is_none());
    }
}
