//! One running Chromium's pipe, shared by every client: a task writing
//! calls to it, a task reading replies and events and handing each to its
//! client (through [`Router`]), and the waiters of the multiplexer's own
//! calls. Ends when Chromium closes its end; its clients are closed then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::pipe::{self, ParentEnds, Reader};
use super::router::{ClientId, Routed, Router};

/// Calls waiting to be written to the pipe.
const PIPE_QUEUE: usize = 256;
/// Messages waiting for one client: a client this far behind is closed
/// rather than let it hold up everyone's replies.
pub const CLIENT_QUEUE: usize = 16 * 1024;
/// How long one of the multiplexer's own calls may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What a client is sent.
#[derive(Debug)]
pub enum ToClient {
    Message(String),
    Close(String),
}

#[derive(Default)]
struct Shared {
    router: Router,
    clients: HashMap<ClientId, mpsc::Sender<ToClient>>,
    waiters: HashMap<u64, oneshot::Sender<Result<Value, String>>>,
    closed: bool,
}

/// One Chromium's pipe.
pub struct Link {
    shared: Mutex<Shared>,
    to_pipe: mpsc::Sender<String>,
    /// The browser endpoint's id (`/devtools/browser/<id>`), new per start.
    pub browser_id: String,
}

/// What can go wrong with a call of the multiplexer's own.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("the browser is not running (its DevTools pipe is closed)")]
    Closed,
    #[error("{method} timed out after {CALL_TIMEOUT:?}: the browser is not answering")]
    Timeout { method: String },
    #[error("{method} failed: {message}")]
    Failed { method: String, message: String },
}

impl Link {
    /// Starts serving the pipe `ends`; the tasks are owned by `tasks`.
    pub fn start(ends: ParentEnds, tasks: &mut JoinSet<()>) -> Arc<Self> {
        let (to_pipe, mut queue) = mpsc::channel::<String>(PIPE_QUEUE);
        let link = Arc::new(Self {
            shared: Mutex::new(Shared::default()),
            to_pipe,
            browser_id: random_id(),
        });
        let ParentEnds {
            mut to_browser,
            from_browser,
        } = ends;
        tasks.spawn(async move {
            while let Some(message) = queue.recv().await {
                if let Err(err) = pipe::write(&mut to_browser, &message).await {
                    tracing::info!(%err, "the DevTools pipe closed for writing");
                    return;
                }
            }
        });
        let reading = link.clone();
        tasks.spawn(async move {
            let mut reader = Reader::new(from_browser);
            let ended = loop {
                match reader.next().await {
                    Ok(message) => reading.dispatch(&message),
                    Err(err) => break err,
                }
            };
            tracing::info!(err = %ended, "the DevTools pipe ended; closing its clients");
            reading.close();
        });
        link
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        // Plain data behind the lock; a panic elsewhere leaves it usable.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn is_open(&self) -> bool {
        !self.shared().closed && !self.to_pipe.is_closed()
    }

    fn dispatch(&self, message: &str) {
        let mut shared = self.shared();
        for routed in shared.router.on_browser_text(message) {
            match routed {
                Routed::ToClient(client, text) => {
                    let full = shared
                        .clients
                        .get(&client)
                        .is_some_and(|tx| tx.try_send(ToClient::Message(text)).is_err());
                    if full {
                        tracing::warn!(
                            client,
                            "a CDP client fell {CLIENT_QUEUE} messages behind; closing it"
                        );
                        if let Some(tx) = shared.clients.remove(&client) {
                            let _ = tx
                                .try_send(ToClient::Close("the client fell too far behind".into()));
                        }
                        if let Some(detach) = shared.router.remove_client(client) {
                            let _ = self.to_pipe.try_send(detach);
                        }
                    }
                }
                Routed::Internal(id, outcome) => {
                    if let Some(waiter) = shared.waiters.remove(&id) {
                        let _ = waiter.send(outcome);
                    }
                }
                Routed::Close(client, reason) => {
                    if let Some(tx) = shared.clients.remove(&client) {
                        let _ = tx.try_send(ToClient::Close(reason));
                    }
                }
            }
        }
    }

    fn close(&self) {
        let mut shared = self.shared();
        shared.closed = true;
        for (_, tx) in shared.clients.drain() {
            let _ = tx.try_send(ToClient::Close("the browser closed the connection".into()));
        }
        shared.waiters.clear();
    }

    /// Calls `method` on `session` (or the pipe's own connection) and waits
    /// for its result.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CallError> {
        let (tx, rx) = oneshot::channel();
        let (id, text) = {
            let mut shared = self.shared();
            if shared.closed {
                return Err(CallError::Closed);
            }
            let (id, text) = shared.router.internal(method, params, session);
            shared.waiters.insert(id, tx);
            (id, text)
        };
        let answered = async {
            self.to_pipe
                .send(text)
                .await
                .map_err(|_| CallError::Closed)?;
            rx.await.map_err(|_| CallError::Closed)
        };
        let outcome = tokio::time::timeout(CALL_TIMEOUT, answered).await;
        if !matches!(outcome, Ok(Ok(_))) {
            let mut shared = self.shared();
            shared.waiters.remove(&id);
            shared.router.forget(id);
        }
        match outcome {
            Err(_) => Err(CallError::Timeout {
                method: method.to_owned(),
            }),
            Ok(Err(err)) => Err(err),
            Ok(Ok(Err(message))) => Err(CallError::Failed {
                method: method.to_owned(),
                message,
            }),
            Ok(Ok(Ok(result))) => Ok(result),
        }
    }

    /// A new client on root session `root`: its id and what it is sent.
    pub fn add_client(
        &self,
        root: String,
    ) -> Result<(ClientId, mpsc::Receiver<ToClient>), CallError> {
        let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
        let mut shared = self.shared();
        if shared.closed {
            return Err(CallError::Closed);
        }
        let client = shared.router.add_client(root);
        shared.clients.insert(client, tx);
        Ok((client, rx))
    }

    /// A text from `client`: forwarded, or answered with a CDP error.
    pub async fn on_client_text(&self, client: ClientId, text: &str) -> Result<(), String> {
        let routed = self.shared().router.on_client_text(client, text);
        let call = routed?;
        self.to_pipe.send(call).await.map_err(|_| {
            r#"{"error":{"code":-32000,"message":"the browser closed the connection"}}"#.to_owned()
        })
    }

    /// `client` is gone: its sessions are detached.
    pub async fn remove_client(&self, client: ClientId) {
        let detach = {
            let mut shared = self.shared();
            shared.clients.remove(&client);
            shared.router.remove_client(client)
        };
        if let Some(detach) = detach {
            let _ = self.to_pipe.send(detach).await;
        }
    }
}

/// 32 hex digits from the kernel's random source (Chromium's ids look so).
fn random_id() -> String {
    let mut bytes = [0u8; 16];
    // SAFETY: `bytes` is a valid out buffer of its length.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != 16 {
        // Not a secret (only the host reaches the endpoint); unique is enough.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = nanos.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}
