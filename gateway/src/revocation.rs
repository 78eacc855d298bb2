//! Closing what a revoked token has open. Every long-lived connection (live
//! view, control event stream) holds a [`RevocationWatch`] for its token and
//! ends when it fires: at once when the token is revoked through the API (the
//! registry cancels it), and within [`POLL`] when it is revoked by another
//! process (`cubicle token revoke` writes only the database).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use cubicle_runtime::state::Store;
use cubicle_runtime::tokens;
use tokio_util::sync::CancellationToken;

/// How often an open connection re-reads its token's state.
pub const POLL: Duration = Duration::from_millis(400);

#[derive(Default)]
struct Inner {
    live: HashMap<String, CancellationToken>,
    revoked: HashSet<String>,
}

/// One cancellation token per token id with open connections.
#[derive(Default)]
pub struct Revocations {
    inner: Mutex<Inner>,
}

impl Revocations {
    /// A watch for a connection made with token `token_id`.
    pub fn watch(&self, store: Store, token_id: &str) -> RevocationWatch {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let cancel = if inner.revoked.contains(token_id) {
            // Revoked between the request's check and now.
            let cancel = CancellationToken::new();
            cancel.cancel();
            cancel
        } else {
            inner.live.entry(token_id.to_owned()).or_default().clone()
        };
        RevocationWatch {
            cancel,
            store,
            token_id: token_id.to_owned(),
        }
    }

    /// Ends every connection of token `token_id` (already revoked in the store).
    pub fn revoke(&self, token_id: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.revoked.insert(token_id.to_owned());
        if let Some(cancel) = inner.live.remove(token_id) {
            cancel.cancel();
        }
    }
}

/// Fires when one connection's token is revoked.
pub struct RevocationWatch {
    cancel: CancellationToken,
    store: Store,
    token_id: String,
}

impl RevocationWatch {
    /// Resolves once the token is revoked. A database error is not taken
    /// as revocation (the connection stays; the next poll decides).
    pub async fn revoked(&self) {
        loop {
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = tokio::time::sleep(POLL) => {
                    if let Ok(false) = tokens::is_live(&self.store, &self.token_id).await {
                        return;
                    }
                }
            }
        }
    }
}
