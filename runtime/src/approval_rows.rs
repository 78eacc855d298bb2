//! The `approvals` table: the gateway's pending and recently decided
//! approvals, kept so that a held operation outlives a daemon restart. The
//! gateway owns what a record means (it is stored as its JSON); this is
//! only where the rows live.

use serde::{Deserialize, Serialize};

use crate::state::{StateError, Store};

/// Where an approval stands (the gateway's records and the cluster store
/// spell it alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    /// Nobody decided in time: the same as denied, with that reason.
    Expired,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    /// The state spelled `text`, if there is one.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Expired]
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

/// One stored approval: its JSON and its screenshot (PNG), if any.
pub struct Row {
    pub record: String,
    pub screenshot: Option<Vec<u8>>,
}

/// Inserts or replaces approval `id`; decided rows last changed before
/// `drop_decided_before` (Unix ms) are removed.
pub async fn save(
    store: &Store,
    id: &str,
    workspace: &str,
    state: &str,
    record: &str,
    now: i64,
    drop_decided_before: i64,
) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO approvals (id, workspace, state, record, updated_at) VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT(id) DO UPDATE SET state = excluded.state, record = excluded.record, \
         updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(workspace)
    .bind(state)
    .bind(record)
    .bind(now)
    .execute(store.pool())
    .await?;
    sqlx::query("DELETE FROM approvals WHERE state != 'pending' AND updated_at < ?")
        .bind(drop_decided_before)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Keeps the screenshot taken when approval `id` was asked.
pub async fn save_screenshot(store: &Store, id: &str, png: &[u8]) -> Result<(), StateError> {
    sqlx::query("UPDATE approvals SET screenshot = ? WHERE id = ?")
        .bind(png)
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Pending approvals, and decided ones changed since `since` (Unix ms),
/// newest first, at most `limit`.
pub async fn load(store: &Store, since: i64, limit: usize) -> Result<Vec<Row>, StateError> {
    let rows: Vec<(String, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT record, screenshot FROM approvals \
         WHERE state = 'pending' OR updated_at >= ? ORDER BY updated_at DESC LIMIT ?",
    )
    .bind(since)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(store.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(record, screenshot)| Row { record, screenshot })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rows_are_replaced_kept_with_their_screenshot_and_old_decided_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).await.unwrap();
        save(&store, "ap-1", "ws-1", "pending", "{\"v\":1}", 1000, 0)
            .await
            .unwrap();
        save_screenshot(&store, "ap-1", b"png").await.unwrap();
        save(&store, "ap-1", "ws-1", "approved", "{\"v\":2}", 2000, 0)
            .await
            .unwrap();
        save(&store, "ap-2", "ws-1", "denied", "{\"v\":3}", 3000, 0)
            .await
            .unwrap();
        let rows = load(&store, 0, 10).await.unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].record, "{\"v\":3}");
        assert_eq!(rows[1].record, "{\"v\":2}");
        assert_eq!(rows[1].screenshot.as_deref(), Some(&b"png"[..]));
        // Only decided rows changed since 2500, and every pending one.
        save(&store, "ap-3", "ws-1", "pending", "{\"v\":4}", 100, 0)
            .await
            .unwrap();
        let rows = load(&store, 2500, 10).await.unwrap();
        let records: Vec<&str> = rows.iter().map(|r| r.record.as_str()).collect();
        assert_eq!(records, ["{\"v\":3}", "{\"v\":4}"]);
        // A save drops decided rows older than it says.
        save(&store, "ap-4", "ws-1", "pending", "{}", 4000, 2500)
            .await
            .unwrap();
        let rows = load(&store, 0, 10).await.unwrap();
        assert_eq!(rows.len(), 3, "ap-1 (decided at 2000) is gone");
    }
}
