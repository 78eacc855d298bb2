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
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Auditor => "auditor",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "admin" => Self::Admin,
            "agent" => Self::Agent,
            "operator" => Self::Operator,
            "auditor" => Self::Auditor,
            _ => return None,
        })
    }
}

/// A token as stored (never with its secret).
#[derive(Debug, Clone, Serialize)]
pub struct Token {
    pub id: String,
    pub name: String,
    pub role: Role,
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Makes a token; returns it and its secret, which is not kept anywhere.
pub async fn create(store: &Store, name: &str, role: Role) -> Result<(Token, String), StateError> {
    let token = Token {
        id: format!("tok-{}", random_hex(6)),
        name: name.to_owned(),
        role,
    };
    let secret = format!("{PREFIX}{}", random_hex(32));
    sqlx::query(
        "INSERT INTO tokens (id, name, role, secret_hash, created_at) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&token.id)
    .bind(&token.name)
    .bind(role.as_str())
    .bind(hash(&secret))
    .bind(now_ms())
    .execute(store.pool())
    .await?;
    Ok((token, secret))
}

/// The live (not revoked) token whose secret is `secret`.
pub async fn verify(store: &Store, secret: &str) -> Result<Option<Token>, StateError> {
    if !secret.starts_with(PREFIX) {
        return Ok(None);
    }
    let row: Option<(String, String, String)> = sqlx::query_as(
        "SELECT id, name, role FROM tokens WHERE secret_hash = ? AND revoked_at IS NULL",
    )
    .bind(hash(secret))
    .fetch_optional(store.pool())
    .await?;
    Ok(row.and_then(|(id, name, role)| {
        Some(Token {
            id,
            name,
            role: Role::parse(&role)?,
        })
    }))
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
        let (token, secret) = create(&store, "first", Role::Admin).await.unwrap();
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
}
