//! Each workspace's egress policy in the state database (table
//! `egress_policies`). A workspace without a row runs under the server's
//! default.

use sqlx::Row;

use super::policy::EgressPolicyDoc;
use crate::state::{StateError, Store, now_ms};

/// The policy recorded for `workspace`, if one was.
pub async fn get(store: &Store, workspace: &str) -> Result<Option<EgressPolicyDoc>, StateError> {
    let row = sqlx::query("SELECT policy FROM egress_policies WHERE workspace_id = ?")
        .bind(workspace)
        .fetch_optional(store.pool())
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.get(0);
    serde_json::from_str(&text).map(Some).map_err(|e| {
        StateError::Query(sqlx::Error::Decode(
            format!("egress policy of {workspace}: {e}").into(),
        ))
    })
}

/// Records `doc` for `workspace`, set by token `by`.
pub async fn set(
    store: &Store,
    workspace: &str,
    doc: &EgressPolicyDoc,
    by: Option<&str>,
) -> Result<(), StateError> {
    let text = serde_json::to_string(doc)
        .map_err(|e| StateError::Query(sqlx::Error::Decode(e.to_string().into())))?;
    sqlx::query(
        "INSERT INTO egress_policies (workspace_id, policy, set_at, set_by) VALUES (?, ?, ?, ?)
         ON CONFLICT (workspace_id) DO UPDATE SET policy = excluded.policy, set_at = excluded.set_at, set_by = excluded.set_by",
    )
    .bind(workspace)
    .bind(text)
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
    async fn set_get_replace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        assert_eq!(get(&store, "ws-1").await.unwrap(), None);
        let mut doc = EgressPolicyDoc {
            allow: vec!["example.org".into()],
            ..Default::default()
        };
        set(&store, "ws-1", &doc, Some("tok-a")).await.unwrap();
        doc.allow.push("*.example.com:443".into());
        set(&store, "ws-1", &doc, None).await.unwrap();
        assert_eq!(get(&store, "ws-1").await.unwrap(), Some(doc));
    }
}
