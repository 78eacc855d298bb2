//! The `webhooks` table: the gateway's webhook subscriptions and how far
//! each has delivered. The gateway owns what a subscription means; this is
//! only where the rows live.

use crate::state::{StateError, Store};

/// One stored subscription.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Row {
    pub id: String,
    pub owner_token: String,
    pub url: String,
    /// JSON list of event kinds (`kind`, `family.*` or `*`).
    pub kinds: String,
    pub workspace: Option<String>,
    pub secret: String,
    /// The id of the last event dealt with.
    pub cursor: i64,
    pub created_at: i64,
    /// JSON: the last delivery's outcome, if any.
    pub last: Option<String>,
}

macro_rules! columns {
    () => {
        "id, owner_token, url, kinds, workspace, secret, cursor, created_at, last"
    };
}

pub async fn insert(store: &Store, row: &Row) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO webhooks (id, owner_token, url, kinds, workspace, secret, cursor, created_at, last) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&row.id)
    .bind(&row.owner_token)
    .bind(&row.url)
    .bind(&row.kinds)
    .bind(&row.workspace)
    .bind(&row.secret)
    .bind(row.cursor)
    .bind(row.created_at)
    .bind(&row.last)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Every subscription, oldest first.
pub async fn list(store: &Store) -> Result<Vec<Row>, StateError> {
    let rows = sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM webhooks ORDER BY created_at, id"
    ))
    .fetch_all(store.pool())
    .await?;
    Ok(rows)
}

pub async fn get(store: &Store, id: &str) -> Result<Option<Row>, StateError> {
    let row = sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM webhooks WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(store.pool())
    .await?;
    Ok(row)
}

/// Removes subscription `id`; whether it was there.
pub async fn delete(store: &Store, id: &str) -> Result<bool, StateError> {
    let done = sqlx::query("DELETE FROM webhooks WHERE id = ?")
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Moves subscription `id` past event `cursor`, with the outcome of the
/// last delivery (`None` keeps the one it has). Never moves it back.
pub async fn advance(
    store: &Store,
    id: &str,
    cursor: i64,
    last: Option<&str>,
) -> Result<(), StateError> {
    sqlx::query(
        "UPDATE webhooks SET cursor = MAX(cursor, ?), last = COALESCE(?, last) WHERE id = ?",
    )
    .bind(cursor)
    .bind(last)
    .bind(id)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// The newest event's id (0 with none): where a new subscription starts.
pub async fn newest_event(store: &Store) -> Result<i64, StateError> {
    let (id,): (Option<i64>,) = sqlx::query_as("SELECT MAX(id) FROM events")
        .fetch_one(store.pool())
        .await?;
    Ok(id.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> Row {
        Row {
            id: id.into(),
            owner_token: "tok-1".into(),
            url: "https://example.com/hook".into(),
            kinds: "[\"workspace.*\"]".into(),
            workspace: None,
            secret: "whsec_AAAA".into(),
            cursor: 7,
            created_at: 1,
            last: None,
        }
    }

    #[tokio::test]
    async fn rows_are_kept_advanced_only_forward_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).await.unwrap();
        insert(&store, &row("wh-1")).await.unwrap();
        assert!(
            insert(&store, &row("wh-1")).await.is_err(),
            "ids are unique"
        );
        advance(&store, "wh-1", 9, Some("{\"ok\":true}"))
            .await
            .unwrap();
        advance(&store, "wh-1", 8, None).await.unwrap();
        let got = get(&store, "wh-1").await.unwrap().unwrap();
        assert_eq!(got.cursor, 9);
        assert_eq!(got.last.as_deref(), Some("{\"ok\":true}"));
        assert_eq!(list(&store).await.unwrap().len(), 1);
        assert!(delete(&store, "wh-1").await.unwrap());
        assert!(!delete(&store, "wh-1").await.unwrap());
        assert!(get(&store, "wh-1").await.unwrap().is_none());
    }
}
