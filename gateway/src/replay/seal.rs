//! Signed checkpoints over the chains' heads: every N records or T seconds
//! (a task the serve loop owns), when a workspace stops, and at export.

use std::sync::Arc;
use std::time::Duration;

use cubicle_recorder::checkpoint::Checkpoint;
use cubicle_runtime::chain_store::{self, Head};
use cubicle_runtime::state::{StateError, now_ms};
use tokio_util::sync::CancellationToken;

use super::Replay;

/// How often the signer looks for heads that are due.
const TICK: Duration = Duration::from_millis(500);

impl Replay {
    /// Signs `head` and stores the checkpoint.
    async fn sign(&self, head: &Head) -> Result<Checkpoint, StateError> {
        let checkpoint = self.key.sign(&head.chain, head.seq, &head.hash, now_ms());
        chain_store::insert_checkpoint(self.store(), &checkpoint, &self.key.public_hex()).await?;
        tracing::debug!(
            chain = head.chain,
            seq = head.seq,
            "audit checkpoint signed"
        );
        Ok(checkpoint)
    }

    /// Signs the head of `chain` now unless a checkpoint already covers
    /// it; returns the seq the chain is signed up to (0: it is empty).
    pub async fn checkpoint(&self, chain: &str) -> Result<u64, StateError> {
        match chain_store::head(self.store(), chain).await? {
            None => Ok(0),
            Some(head) if head.checkpoint_seq >= head.seq => Ok(head.seq),
            Some(head) => Ok(self.sign(&head).await?.seq),
        }
    }

    /// Signs every head that is due.
    pub async fn checkpoint_due(&self) -> Result<usize, StateError> {
        let every_ms = self.config.checkpoint_every.as_millis() as i64;
        self.sign_due(self.config.checkpoint_records, every_ms)
            .await
    }

    /// Signs every head some record of which no checkpoint covers.
    pub async fn checkpoint_all(&self) -> Result<usize, StateError> {
        self.sign_due(1, 0).await
    }

    async fn sign_due(&self, every_records: u64, every_ms: i64) -> Result<usize, StateError> {
        let due = chain_store::heads_due(self.store(), every_records, every_ms).await?;
        for head in &due {
            self.sign(head).await?;
        }
        Ok(due.len())
    }

    /// Signs what is due until `cancel`, then everything left (so a clean
    /// shutdown leaves every chain covered).
    pub async fn run_checkpoints(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    if let Err(err) = self.checkpoint_all().await {
                        tracing::error!(%err, "cannot sign the last audit checkpoints");
                    }
                    return;
                }
                () = tokio::time::sleep(TICK) => {
                    if let Err(err) = self.checkpoint_due().await {
                        tracing::error!(%err, "cannot sign audit checkpoints");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::ReplayConfig;
    use cubicle_runtime::events::{self, NewEvent};
    use cubicle_runtime::state::Store;

    async fn append(store: &Store, ws: &str, n: usize) {
        for _ in 0..n {
            let event = NewEvent {
                kind: crate::ops::audit::EventKind::Action,
                workspace_id: Some(ws),
                ..NewEvent::default()
            };
            events::append(store, &event).await.unwrap();
        }
    }

    async fn signed_up_to(replay: &Replay, ws: &str) -> u64 {
        chain_store::head(replay.store(), ws)
            .await
            .unwrap()
            .expect("the chain has a head")
            .checkpoint_seq
    }

    /// README "Audit": the head of each chain is signed every 100 records
    /// or 10 seconds, whichever comes first.
    #[tokio::test]
    async fn a_chain_is_signed_every_n_records_or_t_seconds_whichever_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
        let config = ReplayConfig::new(dir.path());
        assert_eq!(
            (config.checkpoint_records, config.checkpoint_every),
            (100, Duration::from_secs(10)),
            "the defaults the README states"
        );
        let mut replay = Replay::open(store.clone(), config).unwrap();
        let ws = "ws-0123456789ab";

        // A new chain is signed at the first look.
        append(&store, ws, 1).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 1);
        assert_eq!(signed_up_to(&replay, ws).await, 1);
        // 99 more records within 10 s: not yet...
        append(&store, ws, 99).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 0);
        assert_eq!(signed_up_to(&replay, ws).await, 1);
        // ...the 100th since the last checkpoint is.
        append(&store, ws, 1).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 1);
        assert_eq!(signed_up_to(&replay, ws).await, 101);

        // Time: one record, then nothing for longer than the interval (a
        // short one here; the rule is the same for 10 s).
        replay.config.checkpoint_every = Duration::from_millis(300);
        append(&store, ws, 1).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 0, "too soon");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 1);
        assert_eq!(signed_up_to(&replay, ws).await, 102);
        // Nothing new: nothing to sign, however long it has been.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(replay.checkpoint_due().await.unwrap(), 0);
    }
}
