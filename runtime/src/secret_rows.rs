//! The `secrets` and `secret_bindings` tables: host-bound secrets and the
//! workspaces given them. The gateway owns what they mean (who may see and
//! give one, what the proxy does with it); this is only where the rows
//! live.

use crate::state::{StateError, Store};

/// One stored secret, its value included.
#[derive(Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Row {
    pub id: String,
    pub owner_token: String,
    pub name: String,
    pub value: String,
    /// JSON list of lowercase host names.
    pub hosts: String,
    /// Whether the value goes into request bodies too, not only headers.
    pub body: bool,
    pub created_at: i64,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("id", &self.id)
            .field("owner_token", &self.owner_token)
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

/// A secret given to a workspace.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Binding {
    pub workspace: String,
    pub secret: String,
    pub placeholder: String,
    pub env: Option<String>,
    pub path: Option<String>,
    pub created_at: i64,
}

pub async fn insert(store: &Store, row: &Row) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO secrets (id, owner_token, name, value, hosts, body, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&row.id)
    .bind(&row.owner_token)
    .bind(&row.name)
    .bind(&row.value)
    .bind(&row.hosts)
    .bind(row.body)
    .bind(row.created_at)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Every secret, oldest first.
pub async fn list(store: &Store) -> Result<Vec<Row>, StateError> {
    let rows = sqlx::query_as(
        "SELECT id, owner_token, name, value, hosts, body, created_at FROM secrets \
         ORDER BY created_at, id",
    )
    .fetch_all(store.pool())
    .await?;
    Ok(rows)
}

pub async fn get(store: &Store, id: &str) -> Result<Option<Row>, StateError> {
    let row = sqlx::query_as(
        "SELECT id, owner_token, name, value, hosts, body, created_at FROM secrets \
         WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(store.pool())
    .await?;
    Ok(row)
}

/// Removes secret `id` and every binding of it; the workspaces it was
/// given to, or `None` when there was no such secret.
pub async fn delete(store: &Store, id: &str) -> Result<Option<Vec<String>>, StateError> {
    let mut tx = store.pool().begin().await?;
    let bound: Vec<(String,)> =
        sqlx::query_as("SELECT workspace FROM secret_bindings WHERE secret = ?")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
    let done = sqlx::query("DELETE FROM secrets WHERE id = ?")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok((done.rows_affected() > 0).then(|| bound.into_iter().map(|(w,)| w).collect()))
}

/// Gives a secret to a workspace; `false` when it already had it.
pub async fn bind(store: &Store, binding: &Binding) -> Result<bool, StateError> {
    let done = sqlx::query(
        "INSERT INTO secret_bindings (workspace, secret, placeholder, env, path, created_at) \
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, secret) DO NOTHING",
    )
    .bind(&binding.workspace)
    .bind(&binding.secret)
    .bind(&binding.placeholder)
    .bind(&binding.env)
    .bind(&binding.path)
    .bind(binding.created_at)
    .execute(store.pool())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The secrets given to `workspace`, with their rows, oldest first.
pub async fn of_workspace(
    store: &Store,
    workspace: &str,
) -> Result<Vec<(Binding, Row)>, StateError> {
    let bindings: Vec<Binding> = sqlx::query_as(
        "SELECT workspace, secret, placeholder, env, path, created_at FROM secret_bindings \
         WHERE workspace = ? ORDER BY created_at, secret",
    )
    .bind(workspace)
    .fetch_all(store.pool())
    .await?;
    let mut out = Vec::with_capacity(bindings.len());
    for binding in bindings {
        if let Some(row) = get(store, &binding.secret).await? {
            out.push((binding, row));
        }
    }
    Ok(out)
}

/// Forgets what `workspace` was given (it is deleted).
pub async fn unbind_workspace(store: &Store, workspace: &str) -> Result<(), StateError> {
    sqlx::query("DELETE FROM secret_bindings WHERE workspace = ?")
        .bind(workspace)
        .execute(store.pool())
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> Row {
        Row {
            id: id.into(),
            owner_token: "tok-1".into(),
            name: "github".into(),
            value: "ghp_value".into(),
            hosts: "[\"api.github.com\"]".into(),
            body: id == "sec-2",
            created_at: 1,
        }
    }

    fn binding(workspace: &str, secret: &str, placeholder: &str) -> Binding {
        Binding {
            workspace: workspace.into(),
            secret: secret.into(),
            placeholder: placeholder.into(),
            env: Some("GITHUB_TOKEN".into()),
            path: None,
            created_at: 2,
        }
    }

    #[tokio::test]
    async fn secrets_bind_list_and_go_with_their_bindings() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        insert(&store, &row("sec-1")).await.unwrap();
        insert(&store, &row("sec-2")).await.unwrap();
        assert!(bind(&store, &binding("ws-a", "sec-1", "p1")).await.unwrap());
        assert!(!bind(&store, &binding("ws-a", "sec-1", "p9")).await.unwrap());
        assert!(bind(&store, &binding("ws-b", "sec-1", "p2")).await.unwrap());
        assert!(bind(&store, &binding("ws-a", "sec-2", "p3")).await.unwrap());
        // A placeholder is one workspace's and one secret's.
        assert!(bind(&store, &binding("ws-c", "sec-2", "p3")).await.is_err());
        let a = of_workspace(&store, "ws-a").await.unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].0.placeholder, "p1");
        assert_eq!(a[0].1.value, "ghp_value");
        assert!(!a[0].1.body && a[1].1.body, "each keeps where it may go");
        let mut gone = delete(&store, "sec-1").await.unwrap().unwrap();
        gone.sort();
        assert_eq!(gone, ["ws-a", "ws-b"]);
        assert_eq!(of_workspace(&store, "ws-a").await.unwrap().len(), 1);
        assert!(of_workspace(&store, "ws-b").await.unwrap().is_empty());
        assert_eq!(delete(&store, "sec-1").await.unwrap(), None);
        unbind_workspace(&store, "ws-a").await.unwrap();
        assert!(of_workspace(&store, "ws-a").await.unwrap().is_empty());
        assert!(!format!("{:?}", list(&store).await.unwrap()).contains("ghp_value"));
    }
}
