//! Which policy each workspace runs under, by name (the policies
//! themselves live in the gateway's policy directory). A workspace without a
//! row runs under the server's default policy.

use sqlx::Row;

use crate::state::{StateError, Store, now_ms};

/// The policy name recorded for `workspace`, if one was.
pub async fn get(store: &Store, workspace: &str) -> Result<Option<String>, StateError> {
    let row = sqlx::query("SELECT policy FROM workspace_policies WHERE workspace_id = ?")
        .bind(workspace)
        .fetch_optional(store.pool())
        .await?;
    Ok(row.map(|r| r.get::<String, _>(0)))
}

/// Records `policy` for `workspace`, set by token `by`.
pub async fn set(
    store: &Store,
    workspace: &str,
    policy: &str,
    by: Option<&str>,
) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO workspace_policies (workspace_id, policy, set_at, set_by) VALUES (?, ?, ?, ?)
         ON CONFLICT (workspace_id) DO UPDATE SET policy = excluded.policy, set_at = excluded.set_at, set_by = excluded.set_by",
    )
    .bind(workspace)
    .bind(policy)
    .bind(now_ms())
    .bind(by)
    .execute(store.pool())
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn set_get_switch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        assert_eq!(get(&store, "ws-1").await.unwrap(), None);
        set(&store, "ws-1", "default", Some("tok-a")).await.unwrap();
        set(&store, "ws-1", "strict", None).await.unwrap();
        assert_eq!(
            get(&store, "ws-1").await.unwrap().as_deref(),
            Some("strict")
        );
    }
}
