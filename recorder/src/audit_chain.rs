//! The hash chain over the event log. Every event is a [`Record`] in the
//! chain of its workspace (events about no workspace go to the chain
//! [`HOST_CHAIN`]): it carries its sequence number in that chain and the
//! hash of the record before it, and its own hash is
//! `SHA-256(previous hash ‖ canonical bytes)`.
//!
//! The canonical bytes are the record as JSON with every object's keys
//! sorted and no whitespace. They are made once, when the event is
//! appended, and stored as they are: verification hashes the stored bytes
//! and never re-encodes them, so no JSON library's number or key-order
//! habits can change a hash later.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The version of the record layout, inside every record.
pub const RECORD_VERSION: u32 = 1;

/// The chain of events that concern no single workspace (tokens, ...).
pub const HOST_CHAIN: &str = "host";

/// The kind of the record a closed video segment enters the chain as.
pub const SEGMENT_KIND: &str = "recording.segment";

/// The kind of the record that says a segment's file was removed by the
/// retention setting (`detail.file`): a bundle may then lack it.
pub const EXPIRE_KIND: &str = "recording.expire";

/// What can go wrong building a record.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("an audit record cannot be encoded as JSON: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("{what} is not a hex SHA-256 (64 hex digits): {value:?}")]
    BadHash { what: &'static str, value: String },
}

/// Who did what a record says (`None` in [`Record::actor`]: the daemon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordActor {
    pub id: String,
    pub name: String,
    pub role: String,
}

/// One event as the chain holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// [`RECORD_VERSION`].
    pub v: u32,
    /// The chain: a workspace id, or [`HOST_CHAIN`].
    pub chain: String,
    /// 1 for a chain's first record, then one more each.
    pub seq: u64,
    /// Hex hash of the record before (for seq 1: [`genesis`] of the chain).
    pub prev: String,
    /// Unix milliseconds (the wall clock; the video's clock too, see
    /// `recording.segment` records' `start_ms`).
    pub at: i64,
    pub kind: String,
    pub workspace: Option<String>,
    pub actor: Option<RecordActor>,
    pub detail: Value,
    pub request_id: Option<String>,
    pub client: Option<String>,
    pub outcome: Option<String>,
}

/// A record with its canonical bytes and its hash, ready to store.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub seq: u64,
    pub prev: Hash,
    pub hash: Hash,
    /// The canonical bytes (UTF-8 JSON), stored and exported as they are.
    pub bytes: String,
}

/// The hash a chain starts from: binds every chain to its name, so a
/// record cannot be moved from one workspace's chain into another's.
pub fn genesis(chain: &str) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(b"cubicle-audit-chain/1\n");
    hasher.update(chain.as_bytes());
    hasher.finalize().into()
}

/// The hash of a record: SHA-256 over the previous hash and its bytes.
pub fn link(prev: &Hash, bytes: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(bytes);
    hasher.finalize().into()
}

/// Parses a hex SHA-256; `what` names it in the error.
pub fn parse_hash(what: &'static str, value: &str) -> Result<Hash, ChainError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(value, &mut out).map_err(|_| ChainError::BadHash {
        what,
        value: value.chars().take(80).collect(),
    })?;
    Ok(out)
}

impl Record {
    /// Sets `seq` and `prev` and makes the canonical bytes and the hash.
    pub fn seal(mut self, seq: u64, prev: &Hash) -> Result<Sealed, ChainError> {
        self.v = RECORD_VERSION;
        self.seq = seq;
        self.prev = hex::encode(prev);
        let value = serde_json::to_value(&self).map_err(ChainError::Encode)?;
        let mut bytes = String::with_capacity(256);
        canonical_json(&value, &mut bytes);
        Ok(Sealed {
            seq,
            prev: *prev,
            hash: link(prev, bytes.as_bytes()),
            bytes,
        })
    }
}

/// JSON with every object's keys sorted (by their UTF-8 bytes) and no
/// whitespace; strings and numbers as serde_json writes them.
pub fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_json(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// One line of an exported `events.jsonl`: the record's hash and its
/// canonical bytes, verbatim.
pub fn export_line(hash: &Hash, bytes: &str) -> String {
    format!(
        "{{\"hash\":\"{}\",\"record\":{bytes}}}\n",
        hex::encode(hash)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(kind: &str, detail: Value) -> Record {
        Record {
            v: 0,
            chain: "ws-1".into(),
            seq: 0,
            prev: String::new(),
            at: 1_700_000_000_000,
            kind: kind.into(),
            workspace: Some("ws-1".into()),
            actor: None,
            detail,
            request_id: None,
            client: None,
            outcome: Some("ok".into()),
        }
    }

    #[test]
    fn canonical_bytes_sort_keys_at_every_level() {
        let mut out = String::new();
        canonical_json(
            &json!({"b": 1, "a": {"z": [1, {"y": 2, "x": "é"}], "c": null}}),
            &mut out,
        );
        assert_eq!(out, r#"{"a":{"c":null,"z":[1,{"x":"é","y":2}]},"b":1}"#);
    }

    #[test]
    fn a_record_links_to_the_one_before() {
        let first = record("exec", json!({"argv": ["ls"]}))
            .seal(1, &genesis("ws-1"))
            .unwrap();
        let second = record("exec", json!({})).seal(2, &first.hash).unwrap();
        assert_eq!(second.prev, first.hash);
        assert_eq!(second.hash, link(&first.hash, second.bytes.as_bytes()));
        let parsed: Record = serde_json::from_str(&second.bytes).unwrap();
        assert_eq!(parsed.seq, 2);
        assert_eq!(parsed.prev, hex::encode(first.hash));
        assert_ne!(genesis("ws-1"), genesis("ws-2"));
    }
}
