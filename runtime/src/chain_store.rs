//! The audit chain as the database keeps it, beside the events it seals:
//! each chain's head, the signed checkpoints, and the sealed records read
//! back in chain order for an export. Sealing itself happens in
//! [`crate::events::append`]; signing is the gateway's (it holds the key).

use cubicle_recorder::audit_chain::{self, Hash, SEGMENT_KIND};
use cubicle_recorder::checkpoint::Checkpoint;
use serde_json::Value;

use crate::state::{StateError, Store, now_ms};

/// The last record of one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub chain: String,
    pub seq: u64,
    pub hash: Hash,
    /// Unix ms of that record.
    pub at: i64,
    /// The last seq a checkpoint signed (0: none yet).
    pub checkpoint_seq: u64,
}

/// One sealed record as stored.
#[derive(Debug, Clone)]
pub struct SealedRow {
    pub seq: u64,
    pub hash: Hash,
    /// The canonical bytes the hash covers.
    pub bytes: String,
}

/// A closed video segment, as its chain record says.
#[derive(Debug, Clone)]
pub struct SegmentRow {
    pub workspace_id: String,
    pub seq: u64,
    pub at: i64,
    pub detail: Value,
}

fn bad_hash(err: audit_chain::ChainError) -> StateError {
    StateError::Query(sqlx::Error::Decode(Box::new(err)))
}

type HeadRow = (String, i64, String, i64, i64);

fn head_from(row: HeadRow) -> Result<Head, StateError> {
    let (chain, seq, hash, at, checkpoint_seq) = row;
    Ok(Head {
        hash: audit_chain::parse_hash("chain head", &hash).map_err(bad_hash)?,
        chain,
        seq: seq as u64,
        at,
        checkpoint_seq: checkpoint_seq as u64,
    })
}

/// The head of `chain`, if it has any record.
pub async fn head(store: &Store, chain: &str) -> Result<Option<Head>, StateError> {
    let row: Option<HeadRow> = sqlx::query_as(
        "SELECT chain, seq, hash, at, checkpoint_seq FROM chain_heads WHERE chain = ?",
    )
    .bind(chain)
    .fetch_optional(store.pool())
    .await?;
    row.map(head_from).transpose()
}

/// Heads with records no checkpoint covers, and either `every_records`
/// of them or a last checkpoint older than `every_ms`.
pub async fn heads_due(
    store: &Store,
    every_records: u64,
    every_ms: i64,
) -> Result<Vec<Head>, StateError> {
    let rows: Vec<HeadRow> = sqlx::query_as(
        "SELECT chain, seq, hash, at, checkpoint_seq FROM chain_heads \
         WHERE seq > checkpoint_seq AND (seq - checkpoint_seq >= ? OR checkpoint_at <= ?)",
    )
    .bind(every_records as i64)
    .bind(now_ms() - every_ms)
    .fetch_all(store.pool())
    .await?;
    rows.into_iter().map(head_from).collect()
}

/// Stores a signed checkpoint and moves its chain's checkpointed seq.
pub async fn insert_checkpoint(
    store: &Store,
    checkpoint: &Checkpoint,
    public_key: &str,
) -> Result<(), StateError> {
    let mut tx = store.pool().begin().await?;
    sqlx::query(
        "INSERT INTO checkpoints (chain, seq, hash, at, public_key, signature) \
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (chain, seq) DO NOTHING",
    )
    .bind(&checkpoint.chain)
    .bind(checkpoint.seq as i64)
    .bind(&checkpoint.hash)
    .bind(checkpoint.at)
    .bind(public_key)
    .bind(&checkpoint.signature)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE chain_heads SET checkpoint_seq = MAX(checkpoint_seq, ?), checkpoint_at = ? \
         WHERE chain = ?",
    )
    .bind(checkpoint.seq as i64)
    .bind(checkpoint.at)
    .bind(&checkpoint.chain)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Every checkpoint of `chain`, oldest first.
pub async fn checkpoints(store: &Store, chain: &str) -> Result<Vec<Checkpoint>, StateError> {
    let rows: Vec<(String, i64, String, i64, String)> = sqlx::query_as(
        "SELECT chain, seq, hash, at, signature FROM checkpoints WHERE chain = ? ORDER BY seq",
    )
    .bind(chain)
    .fetch_all(store.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(chain, seq, hash, at, signature)| Checkpoint {
            chain,
            seq: seq as u64,
            hash,
            at,
            signature,
        })
        .collect())
}

/// The sealed records of `chain` in order, up to seq `upto`.
pub async fn sealed_records(
    store: &Store,
    chain: &str,
    upto: u64,
) -> Result<Vec<SealedRow>, StateError> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT seq, hash, sealed FROM events WHERE chain = ? AND seq <= ? ORDER BY seq",
    )
    .bind(chain)
    .bind(upto as i64)
    .fetch_all(store.pool())
    .await?;
    rows.into_iter()
        .map(|(seq, hash, bytes)| {
            Ok(SealedRow {
                seq: seq as u64,
                hash: audit_chain::parse_hash("stored record hash", &hash).map_err(bad_hash)?,
                bytes,
            })
        })
        .collect()
}

/// The sealed video segments, of one workspace or of all, oldest first.
pub async fn segments(
    store: &Store,
    workspace_id: Option<&str>,
) -> Result<Vec<SegmentRow>, StateError> {
    let rows: Vec<(String, i64, i64, String)> = sqlx::query_as(
        "SELECT chain, seq, at, detail FROM events \
         WHERE kind = ? AND chain IS NOT NULL AND (? IS NULL OR chain = ?) ORDER BY chain, seq",
    )
    .bind(SEGMENT_KIND)
    .bind(workspace_id)
    .bind(workspace_id)
    .fetch_all(store.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(workspace_id, seq, at, detail)| SegmentRow {
            workspace_id,
            seq: seq as u64,
            at,
            detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{self, NewEvent};
    use cubicle_recorder::audit_chain::export_line;
    use cubicle_recorder::bundle::{Bundle, FORMAT, Manifest};
    use cubicle_recorder::checkpoint::AuditKey;
    use serde_json::json;

    #[tokio::test]
    async fn concurrent_appends_make_one_chain_per_workspace_that_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..40 {
            let store = store.clone();
            tasks.spawn(async move {
                let workspace = ["ws-a", "ws-b"][i % 2];
                let event = NewEvent {
                    kind: crate::events::EventKind::Action,
                    workspace_id: Some(workspace),
                    detail: json!({ "i": i, "wait": 0.1 }),
                    ..NewEvent::default()
                };
                events::append(&store, &event).await.unwrap();
            });
        }
        tasks.join_all().await;
        let key = AuditKey::ephemeral();
        for chain in ["ws-a", "ws-b"] {
            let head = head(&store, chain).await.unwrap().unwrap();
            assert_eq!(head.seq, 20);
            let checkpoint = key.sign(chain, head.seq, &head.hash, now_ms());
            insert_checkpoint(&store, &checkpoint, &key.public_hex())
                .await
                .unwrap();
            let rows = sealed_records(&store, chain, head.seq).await.unwrap();
            let lines: String = rows
                .iter()
                .map(|r| export_line(&r.hash, &r.bytes))
                .collect();
            let bundle = Bundle {
                manifest: Manifest {
                    format: FORMAT.into(),
                    chain: chain.into(),
                    workspace: Some(chain.into()),
                    exported_at: now_ms(),
                },
                public_key: key.public_hex(),
                events: lines.into_bytes(),
                checkpoints: serde_json::to_vec(&checkpoints(&store, chain).await.unwrap()[0])
                    .unwrap(),
                segments: Default::default(),
                har: None,
            };
            let report = cubicle_recorder::verify::verify(
                &bundle,
                Some(&key.public_hex()),
                cubicle_recorder::verify::Tail::Signed,
            );
            assert!(report.ok(), "{report:#?}");
            assert_eq!((report.records, report.checkpointed_seq), (20, 20));
        }
        // Nothing is due right after a checkpoint; a 21st record is due
        // once enough records or time pass.
        assert!(heads_due(&store, 1, 60_000).await.unwrap().is_empty());
        let event = NewEvent {
            kind: crate::events::EventKind::Action,
            workspace_id: Some("ws-a"),
            ..NewEvent::default()
        };
        events::append(&store, &event).await.unwrap();
        assert!(heads_due(&store, 2, 60_000).await.unwrap().is_empty());
        let due = heads_due(&store, 1, 60_000).await.unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].chain.as_str(), due[0].seq), ("ws-a", 21));
    }
}
