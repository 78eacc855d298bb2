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
