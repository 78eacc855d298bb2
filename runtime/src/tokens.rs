//! API tokens: a random secret shown once, stored only as its SHA-256 hash.

use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::state::{StateError, Store, now_ms};

/// Every token secret starts with this, so a leaked one is easy to spot.
pub const PREFIX: &str = "cubicle_";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    Agent,
    Operator,
    Auditor,
    /// A share link's, view mode: watches one workspace's screen.
    Viewer,
    /// A share link's, control mode: watches, and may take control.
    Guest,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Auditor => "auditor",
            Self::Viewer => "viewer",
            Self::Guest => "guest",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "admin" => Self::Admin,
            "agent" => Self::Agent,
            "operator" => Self::Operator,
            "auditor" => Self::Auditor,
            "viewer" => Self::Viewer,
            "guest" => Self::Guest,
            _ => return None,
        })
    }
}

/// Which workspaces a token reaches, besides the ones it created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The role's default: agents reach only the workspaces they created;
    /// operators, auditors and admins reach every workspace.
    #[default]
    Default,
    /// Every workspace.
    All,
    /// These workspaces (and, as always, the ones the token created).
    Only(Vec<String>),
}

impl Scope {
    /// How the scope is stored: NULL, `*`, or a JSON list of ids.
    pub fn to_column(&self) -> Option<String> {
        match self {
            Self::Default => None,
            Self::All => Some("*".into()),
            Self::Only(ids) => Some(serde_json::Value::from(ids.clone()).to_string()),
        }
    }

    /// Reads a stored scope; a value this version cannot read reaches
    /// nothing beyond the token's own workspaces (fails closed).
    pub fn from_column(column: Option<String>) -> Self {
        match column.as_deref() {
            None => Self::Default,
            Some("*") => Self::All,
            Some(text) => Self::Only(serde_json::from_str(text).unwrap_or_default()),
        }
    }
}

/// A token as stored (never with its secret).
#[derive(Debug, Clone, Serialize)]
pub struct Token {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub scope: Scope,
}

pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A new token id (`tok-` and 12 hex digits).
pub fn new_id() -> String {
    format!("tok-{}", random_hex(6))
}

/// A new token secret ([`PREFIX`] and 64 hex digits).
pub fn new_secret() -> String {
    format!("{PREFIX}{}", random_hex(32))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Makes a token; returns it and its secret, which is not kept anywhere.
pub async fn create(
    store: &Store,
    name: &str,
    role: Role,
    scope: Scope,
) -> Result<(Token, String), StateError> {
    let token = Token {
        id: new_id(),
        name: name.to_owned(),
        role,
        scope,
    };
    let secret = new_secret();
    insert(store, &token, &secret, None, None).await?;
    Ok((token, secret))
}

/// Stores `token` under its secret's hash; a share link's with its end and
/// workspace.
async fn insert(
    store: &Store,
    token: &Token,
    secret: &str,
    expires_at: Option<i64>,
    share_of: Option<&str>,
) -> Result<(), StateError> {
    sqlx::query(
        "INSERT INTO tokens (id, name, role, secret_hash, created_at, scope, expires_at, share_of) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&token.id)
    .bind(&token.name)
    .bind(token.role.as_str())
    .bind(hash(secret))
    .bind(now_ms())
    .bind(token.scope.to_column())
    .bind(expires_at)
    .bind(share_of)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// The live (not revoked, not expired) token whose secret is `secret`.
pub async fn verify(store: &Store, secret: &str) -> Result<Option<Token>, StateError> {
    if !secret.starts_with(PREFIX) {
        return Ok(None);
    }
    let row: Option<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT id, name, role, scope FROM tokens WHERE secret_hash = ? AND revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > ?)",
    )
    .bind(hash(secret))
    .bind(now_ms())
    .fetch_optional(store.pool())
    .await?;
    Ok(row.and_then(|(id, name, role, scope)| {
        Some(Token {
            id,
            name,
            role: Role::parse(&role)?,
            scope: Scope::from_column(scope),
        })
    }))
}

/// A token as listed (never with its secret or hash).
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub scope: Scope,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds; `None` while the token is live.
    pub revoked_at: Option<i64>,
}

/// A `tokens` row as listed: id, name, role, scope, created, revoked.
type TokenRow = (String, String, String, Option<String>, i64, Option<i64>);

/// Every token ever made, oldest first (revoked ones included).
pub async fn list(store: &Store) -> Result<Vec<TokenInfo>, StateError> {
    let rows: Vec<TokenRow> = sqlx::query_as(
        "SELECT id, name, role, scope, created_at, revoked_at FROM tokens ORDER BY created_at, id",
    )
    .fetch_all(store.pool())
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, name, role, scope, created_at, revoked_at)| {
            Some(TokenInfo {
                id,
                name,
                role: Role::parse(&role)?,
                scope: Scope::from_column(scope),
                created_at,
                revoked_at,
            })
        })
        .collect())
}

/// The token with id `id`, live or revoked.
pub async fn get(store: &Store, id: &str) -> Result<Option<TokenInfo>, StateError> {
    Ok(list(store).await?.into_iter().find(|t| t.id == id))
}

/// Revokes token `id`; true if it was live (false: unknown or already revoked).
pub async fn revoke(store: &Store, id: &str) -> Result<bool, StateError> {
    let done = sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
        .bind(now_ms())
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether token `id` exists, is not revoked and has not expired.
pub async fn is_live(store: &Store, id: &str) -> Result<bool, StateError> {
    let row: Option<(i64,)> = sqlx::query_as(
        "SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > ?)",
    )
    .bind(id)
    .bind(now_ms())
    .fetch_optional(store.pool())
    .await?;
    Ok(row.is_some())
}

/// Every share link's secret starts with this (and so with [`PREFIX`]).
pub const SHARE_PREFIX: &str = "cubicle_share_";

/// A share link as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    pub id: String,
    pub workspace: String,
    /// [`Role::Viewer`] or [`Role::Guest`].
    pub role: Role,
    pub name: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

/// Makes a share link to `workspace`: a token of `role` (viewer or guest)
/// reaching only it, until `expires_at`; returns it and its secret.
pub async fn create_share(
    store: &Store,
    workspace: &str,
    role: Role,
    name: &str,
    expires_at: i64,
) -> Result<(Token, String), StateError> {
    let token = Token {
        id: new_id(),
        name: name.to_owned(),
        role,
        scope: Scope::Only(vec![workspace.to_owned()]),
    };
    let secret = format!("{SHARE_PREFIX}{}", random_hex(32));
    insert(store, &token, &secret, Some(expires_at), Some(workspace)).await?;
    Ok((token, secret))
}

type ShareRow = (String, String, String, String, i64, i64, Option<i64>);

fn share_of_row(
    (id, workspace, role, name, created_at, expires_at, revoked_at): ShareRow,
) -> Option<Share> {
    Some(Share {
        id,
        workspace,
        role: Role::parse(&role)?,
        name,
        created_at,
        expires_at,
        revoked_at,
    })
}

/// The share links of `workspace`, revoked and expired ones included,
/// oldest first.
pub async fn shares_of(store: &Store, workspace: &str) -> Result<Vec<Share>, StateError> {
    let rows: Vec<ShareRow> = sqlx::query_as(
        "SELECT id, share_of, role, name, created_at, expires_at, revoked_at FROM tokens \
         WHERE share_of = ? ORDER BY created_at, id",
    )
    .bind(workspace)
    .fetch_all(store.pool())
    .await?;
    Ok(rows.into_iter().filter_map(share_of_row).collect())
}

/// The share link whose secret is `secret`, live or not: what a refusal
/// of a dead link says (revoked, or expired).
pub async fn share_by_secret(store: &Store, secret: &str) -> Result<Option<Share>, StateError> {
    if !secret.starts_with(SHARE_PREFIX) {
        return Ok(None);
    }
    let row: Option<ShareRow> = sqlx::query_as(
        "SELECT id, share_of, role, name, created_at, expires_at, revoked_at FROM tokens \
         WHERE secret_hash = ? AND share_of IS NOT NULL",
    )
    .bind(hash(secret))
    .fetch_optional(store.pool())
    .await?;
    Ok(row.and_then(share_of_row))
}

/// How many live admin tokens there are.
pub async fn live_admins(store: &Store) -> Result<i64, StateError> {
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM tokens WHERE role = 'admin' AND revoked_at IS NULL")
            .fetch_one(store.pool())
            .await?;
    Ok(count)
}

/// Whether any admin token was ever made (the first start makes one).
pub async fn admin_exists(store: &Store) -> Result<bool, StateError> {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tokens WHERE role = 'admin'")
        .fetch_one(store.pool())
        .await?;
    Ok(count > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn secret_verifies_and_is_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        assert!(!admin_exists(&store).await.unwrap());
        let (token, secret) = create(&store, "first", Role::Admin, Scope::Default)
            .await
            .unwrap();
        assert!(admin_exists(&store).await.unwrap());
        let found = verify(&store, &secret).await.unwrap().unwrap();
        assert_eq!(found.id, token.id);
        assert_eq!(found.role, Role::Admin);
        assert!(verify(&store, "cubicle_wrong").await.unwrap().is_none());
        assert!(verify(&store, "").await.unwrap().is_none());
        let (stored,): (String,) = sqlx::query_as("SELECT secret_hash FROM tokens")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_ne!(stored, secret);
        assert!(!stored.contains(&secret[PREFIX.len()..]));
    }

    #[tokio::test]
    async fn revoked_tokens_stop_verifying_and_stay_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let (admin, _) = create(&store, "root", Role::Admin, Scope::Default)
            .await
            .unwrap();
        let (op, secret) = create(&store, "alice", Role::Operator, Scope::All)
            .await
            .unwrap();
        assert!(is_live(&store, &op.id).await.unwrap());
        assert_eq!(live_admins(&store).await.unwrap(), 1);
        assert!(revoke(&store, &op.id).await.unwrap());
        assert!(
            !revoke(&store, &op.id).await.unwrap(),
            "second revoke is a no-op"
        );
        assert!(!revoke(&store, "tok-none").await.unwrap());
        assert!(verify(&store, &secret).await.unwrap().is_none());
        assert!(!is_live(&store, &op.id).await.unwrap());
        let listed = list(&store).await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].id, admin.id);
        assert!(listed[0].revoked_at.is_none());
        assert!(listed[1].revoked_at.is_some());
        assert_eq!(
            get(&store, &op.id).await.unwrap().unwrap().role,
            Role::Operator
        );
    }
}
