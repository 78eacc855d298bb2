//! Signed checkpoints: an Ed25519 signature over a chain's head (its
//! name, the sequence number and hash of its last record, and when). A
//! checkpoint is what a re-hashed chain cannot fake without the key, and
//! what tells a verifier how long the chain was when it was signed.
//!
//! The key is made at the daemon's first start, kept in a file only root
//! reads (0600), and its public half is printed at start, served by the
//! API and copied into every exported bundle.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::audit_chain::Hash;

/// What can go wrong with the signing key or a checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot read or write the audit signing key {path}: {source}")]
    KeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the audit signing key {path} is not 64 hex digits: restore it from a backup (a new key cannot sign for old checkpoints)"
    )]
    KeyUnreadable { path: PathBuf },
    #[error("{0:?} is not an Ed25519 public key (64 hex digits)")]
    PublicKey(String),
    #[error("the signature is not 128 hex digits")]
    SignatureFormat,
    #[error("the signature does not match the checkpoint (altered, or signed by another key)")]
    BadSignature,
}

/// A signed statement: chain `chain` had `seq` records, the last with hash
/// `hash`, at time `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub chain: String,
    pub seq: u64,
    /// Hex SHA-256 of record `seq`.
    pub hash: String,
    /// Unix milliseconds.
    pub at: i64,
    /// Hex Ed25519 signature over [`message`].
    pub signature: String,
}

/// The bytes a checkpoint's signature covers.
pub fn message(chain: &str, seq: u64, hash: &str, at: i64) -> Vec<u8> {
    format!("cubicle-audit-checkpoint/1\n{chain}\n{seq}\n{hash}\n{at}\n").into_bytes()
}

impl Checkpoint {
    /// Checks the signature with `key`.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), CheckpointError> {
        let mut raw = [0u8; 64];
        hex::decode_to_slice(&self.signature, &mut raw)
            .map_err(|_| CheckpointError::SignatureFormat)?;
        let signature = Signature::from_bytes(&raw);
        key.verify(
            &message(&self.chain, self.seq, &self.hash, self.at),
            &signature,
        )
        .map_err(|_| CheckpointError::BadSignature)
    }
}

/// Parses a hex Ed25519 public key (surrounding whitespace allowed).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, CheckpointError> {
    let text = text.trim();
    let mut raw = [0u8; 32];
    hex::decode_to_slice(text, &mut raw)
        .map_err(|_| CheckpointError::PublicKey(text.chars().take(80).collect()))?;
    VerifyingKey::from_bytes(&raw).map_err(|_| CheckpointError::PublicKey(text.to_owned()))
}

/// The daemon's checkpoint signing key.
pub struct AuditKey {
    signing: SigningKey,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({})", self.public_hex())
    }
}

impl AuditKey {
    /// Loads the key at `path`, or makes one there (0600, never replacing a
    /// file that exists). A public copy goes next to it as `<path>.pub`.
    pub fn load_or_create(path: &Path) -> Result<Self, CheckpointError> {
        let file_error = |source| CheckpointError::KeyFile {
            path: path.to_owned(),
            source,
        };
        let key = match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut seed = [0u8; 32];
                hex::decode_to_slice(text.trim(), &mut seed).map_err(|_| {
                    CheckpointError::KeyUnreadable {
                        path: path.to_owned(),
                    }
                })?;
                Self {
                    signing: SigningKey::from_bytes(&seed),
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(file_error)?;
                }
                let seed: [u8; 32] = rand::random();
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(file_error)?;
                file.write_all(format!("{}\n", hex::encode(seed)).as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(file_error)?;
                Self {
                    signing: SigningKey::from_bytes(&seed),
                }
            }
            Err(err) => return Err(file_error(err)),
        };
        let public = path.with_extension("pub");
        std::fs::write(&public, format!("{}\n", key.public_hex())).map_err(|source| {
            CheckpointError::KeyFile {
                path: public,
                source,
            }
        })?;
        Ok(key)
    }

    /// A key that lives only in memory (tests, benchmarks).
    pub fn ephemeral() -> Self {
        Self {
            signing: SigningKey::from_bytes(&rand::random()),
        }
    }

    pub fn public(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    /// The public key as 64 hex digits.
    pub fn public_hex(&self) -> String {
        hex::encode(self.public().as_bytes())
    }

    /// Signs the head of chain `chain`.
    pub fn sign(&self, chain: &str, seq: u64, hash: &Hash, at: i64) -> Checkpoint {
        let hash = hex::encode(hash);
        let signature = self.signing.sign(&message(chain, seq, &hash, at));
        Checkpoint {
            chain: chain.to_owned(),
            seq,
            hash,
            at,
            signature: hex::encode(signature.to_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_signs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit/signing.key");
        let key = AuditKey::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = AuditKey::load_or_create(&path).unwrap();
        assert_eq!(key.public_hex(), again.public_hex());
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        let public = parse_public_key(&public).unwrap();
        let checkpoint = key.sign("ws-1", 3, &[7; 32], 1000);
        checkpoint.verify(&public).unwrap();
        let mut altered = checkpoint.clone();
        altered.seq = 4;
        assert!(matches!(
            altered.verify(&public),
            Err(CheckpointError::BadSignature)
        ));
        assert!(matches!(
            checkpoint.verify(&AuditKey::ephemeral().public()),
            Err(CheckpointError::BadSignature)
        ));
    }
}
