//! Pending approvals: operations a policy said `confirm` to, held until an
//! operator decides. Each record carries the exact parameters in canonical
//! form and their SHA-256 ([`binding_hash`]), who asked and when, and an
//! expiry; it is used at most once, and only for parameters with the same
//! hash, by the token that asked. An expired approval is a denied one.
//!
//! This is the store only: who may decide, and the events of every step,
//! are the operations core's ([`crate::ops::gates`], [`crate::ops::approvals`]).
//! Records live in memory and are written to SQLite in order
//! ([`Approvals::persist_to`], [`Approvals::load`]): a held operation
//! outlives a daemon restart, so an operator can still decide it and the
//! agent can still make the approved call. Requests and decisions are
//! written behind; a use is written *before* the operation runs
//! ([`Approvals::consume`] waits for the row), so an approval used once
//! stays used across a `kill -9` of the daemon. An approval is usable
//! until its expiry, never after. The event log is the lasting record.
//! The store is bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cubicle_policy::BrowserContext;
use cubicle_runtime::events::Actor;
use cubicle_runtime::state::Store;
use cubicle_runtime::state::now_ms;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// The most approvals one token may have pending at once.
pub const MAX_PENDING_PER_TOKEN: usize = 64;
/// Decided records are forgotten after this long (the events keep them).
const KEEP_DECIDED_MS: i64 = 3600 * 1000;
/// Records kept at most: the oldest decided ones (and their screenshots)
/// go first.
const MAX_RECORDS: usize = 2048;
/// Changes waiting for a slow stream reader before it misses some.
const CHANGES_BUFFER: usize = 256;

pub use cubicle_runtime::approval_rows::ApprovalState;

/// How far an approval reaches, as the operator chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The held operation (connection), once.
    Once,
    /// Egress only: this connection, and the destination added to the
    /// workspace's allowlist for the workspace's lifetime.
    Workspace,
}

/// One held operation.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Approval {
    pub id: String,
    pub workspace: String,
    /// The operation held (`exec`, `file.write`, `action`, `cdp`, ...).
    pub operation: String,
    /// The exact parameters, as they will run.
    pub params: Value,
    /// SHA-256 of the canonical `{workspace, operation, params}`.
    pub sha256: String,
    pub asked_by: Actor,
    /// Unix milliseconds.
    pub asked_at: i64,
    pub expires_at: i64,
    /// The rule that held it (`policy#rule`) and its reason.
    pub rule: String,
    pub reason: String,
    /// The browser tab and focus a screen action was going to land in.
    pub context: Option<BrowserContext>,
    /// Why the browser could not be read, when it could not (the policy
    /// then holds what a browser rule would hold).
    pub context_error: Option<String>,
    pub state: ApprovalState,
    pub decided_by: Option<Actor>,
    pub decided_at: Option<i64>,
    /// The operator's reason (or why it expired).
    pub decision_reason: Option<String>,
    /// How far an approve reaches (`once` unless the operator chose
    /// `workspace` for an egress destination).
    #[serde(default)]
    pub scope: Option<Scope>,
    /// Whether the approved operation already ran.
    pub used: bool,
    /// Whether a screenshot was taken when it was asked.
    pub has_screenshot: bool,
}

/// What went wrong with an approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval {0}")]
    NotFound(String),
    #[error("approval {id} is already {state}: it cannot be decided again")]
    Decided { id: String, state: &'static str },
    #[error(
        "approval {id} was for different parameters (or another workspace or operation): it cannot run this one; ask again"
    )]
    Mismatch { id: String },
    #[error("approval {id} was asked by another token: only the caller that asked may use it")]
    NotAsker { id: String },
    #[error("approval {id} was already used: an approval runs its operation once")]
    Used { id: String },
    #[error("approval {id} is {state}, not approved")]
    NotApproved { id: String, state: &'static str },
    #[error(
        "approval {id} expired before it was used: an approval is good until its expiry only; ask again"
    )]
    ExpiredUnused { id: String },
    #[error("approval {id} could not be recorded as used ({why}), so it was not used: try again")]
    NotDurable { id: String, why: String },
    #[error(
        "too many pending approvals for this token (at most {MAX_PENDING_PER_TOKEN}): wait for operators to decide"
    )]
    TooMany,
}

/// What a new approval is made of.
pub struct NewApproval {
    pub workspace: String,
    pub operation: String,
    /// [`binding_hash`] of the exact parameters.
    pub sha256: String,
    /// The parameters as operators see them.
    pub shown: Value,
    pub asked_by: Actor,
    pub ttl_ms: i64,
    pub rule: String,
    pub reason: String,
    pub context: Option<BrowserContext>,
    pub context_error: Option<String>,
}

struct Entry {
    record: Approval,
    state: watch::Sender<ApprovalState>,
    screenshot: Option<Arc<Vec<u8>>>,
}

/// The store.
pub struct Approvals {
    entries: Mutex<HashMap<String, Entry>>,
    changes: broadcast::Sender<Approval>,
    /// The writer to SQLite, once [`Approvals::persist_to`] started it.
    persist: Mutex<Option<mpsc::UnboundedSender<Persist>>>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            entries: Mutex::default(),
            changes: broadcast::channel(CHANGES_BUFFER).0,
            persist: Mutex::default(),
        }
    }
}

/// One change for the SQLite writer, with whom to tell once it is written.
enum Persist {
    Record(Box<Approval>, Option<oneshot::Sender<Result<(), String>>>),
    Screenshot(String, Arc<Vec<u8>>),
}

/// JSON with object keys sorted and no spaces: one byte string per value.
pub fn canonical(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The hash an approval is bound to: SHA-256 of the canonical
/// `{"context", "operation", "params", "workspace"}`. Everything that
/// changes the effect is in it: the door's operation (`exec` and
/// `exec.stream` are two), the exact parameters (stdin included, screen
/// actions in screen coordinates) and the browser context the operator
/// was shown, so an approval never runs anything else.
pub fn binding_hash(
    workspace: &str,
    operation: &str,
    params: &Value,
    context: Option<&BrowserContext>,
) -> String {
    let bound = serde_json::json!({
        "workspace": workspace,
        "operation": operation,
        "params": params,
        "context": context,
    });
    hex::encode(Sha256::digest(canonical(&bound).as_bytes()))
}

fn new_id() -> String {
    let bytes: [u8; 10] = rand::random();
    format!("apr-{}", hex::encode(bytes))
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, record: &Approval) {
        self.write_behind(Persist::Record(Box::new(record.clone()), None));
        // Nobody listening is fine.
        let _ = self.changes.send(record.clone());
    }

    fn write_behind(&self, change: Persist) -> bool {
        match &*self.persist.lock().unwrap_or_else(|p| p.into_inner()) {
            // A writer that ended (daemon shutdown) takes nothing more.
            Some(writer) => writer.send(change).is_ok(),
            None => false,
        }
    }

    /// Writes `record` after every change queued before it and waits until
    /// it is in the database. Without a database (unit tests) it is done.
    async fn write_through(&self, record: &Approval) -> Result<(), String> {
        let (done, written) = oneshot::channel();
        let queued = {
            let persist = self.persist.lock().unwrap_or_else(|p| p.into_inner());
            match &*persist {
                None => return Ok(()),
                Some(writer) => writer
                    .send(Persist::Record(Box::new(record.clone()), Some(done)))
                    .is_ok(),
            }
        };
        if !queued {
            return Err("the daemon is shutting down".into());
        }
        written
            .await
            .unwrap_or_else(|_| Err("the database writer ended".into()))
    }

    /// Loads what a previous daemon kept: pending approvals (the sweep
    /// expires those whose time is up, with an event), and decided ones
    /// from the last hour. Call before [`Approvals::persist_to`].
    pub async fn load(&self, store: &Store) -> Result<usize, cubicle_runtime::state::StateError> {
        let since = now_ms() - KEEP_DECIDED_MS;
        let rows = cubicle_runtime::approval_rows::load(store, since, MAX_RECORDS).await?;
        let mut entries = self.lock();
        let mut loaded = 0;
        for row in rows {
            // A row this version cannot read is left out, not fatal: the
            // events keep what happened to it.
            let Ok(record) = serde_json::from_str::<Approval>(&row.record) else {
                tracing::warn!("an approval row cannot be read; left out");
                continue;
            };
            let entry = Entry {
                state: watch::channel(record.state).0,
                screenshot: row.screenshot.map(Arc::new),
                record,
            };
            entries.insert(entry.record.id.clone(), entry);
            loaded += 1;
        }
        Ok(loaded)
    }

    /// Starts writing every change to `store` in the background. The
    /// returned handle ends once [`Approvals::close`] was called and
    /// everything before it is written.
    pub fn persist_to(&self, store: Store) -> tokio::task::JoinHandle<()> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        *self.persist.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        tokio::spawn(async move {
            while let Some(change) = rx.recv().await {
                let (change, done) = match change {
                    Persist::Record(record, done) => (Persist::Record(record, None), done),
                    other => (other, None),
                };
                let written = write(&store, change).await;
                if let Err(err) = &written {
                    tracing::error!(%err, "cannot keep an approval in the database; it will not outlive this daemon");
                }
                if let Some(done) = done {
                    let _ = done.send(written.map_err(|e| e.to_string()));
                }
            }
        })
    }

    /// Stops taking changes for the database (daemon shutdown); the writer
    /// finishes what it has.
    pub fn close(&self) {
        self.persist
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// A new pending approval (its id and timestamps are set here).
    pub fn request(&self, asked: NewApproval) -> Result<Approval, ApprovalError> {
        let NewApproval {
            workspace,
            operation,
            sha256,
            shown: params,
            asked_by,
            ttl_ms,
            rule,
            reason,
            context,
            context_error,
        } = asked;
        let now = now_ms();
        let mut entries = self.lock();
        entries.retain(|_, e| {
            e.record.state == ApprovalState::Pending
                || e.record.decided_at.unwrap_or(now) + KEEP_DECIDED_MS > now
        });
        while entries.len() >= MAX_RECORDS {
            let oldest = entries
                .values()
                .filter(|e| e.record.state != ApprovalState::Pending)
                .min_by_key(|e| e.record.decided_at.unwrap_or(e.record.asked_at))
                .map(|e| e.record.id.clone());
            match oldest {
                Some(id) => entries.remove(&id),
                None => break,
            };
        }
        let pending = entries
            .values()
            .filter(|e| {
                e.record.state == ApprovalState::Pending && e.record.asked_by.id == asked_by.id
            })
            .count();
        if pending >= MAX_PENDING_PER_TOKEN {
            return Err(ApprovalError::TooMany);
        }
        let record = Approval {
            id: new_id(),
            workspace,
            operation,
            sha256,
            params,
            asked_by,
            asked_at: now,
            expires_at: now + ttl_ms,
            rule,
            reason,
            context,
            context_error,
            state: ApprovalState::Pending,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            scope: None,
            used: false,
            has_screenshot: false,
        };
        let entry = Entry {
            record: record.clone(),
            state: watch::channel(ApprovalState::Pending).0,
            screenshot: None,
        };
        entries.insert(record.id.clone(), entry);
        drop(entries);
        self.publish(&record);
        Ok(record)
    }

    /// A pending, or approved and unused, approval that `token` asked for
    /// exactly this `sha256`: asking again waits on it instead of making another.
    pub fn reusable(&self, token: &str, sha256: &str) -> Option<Approval> {
        let now = now_ms();
        self.lock()
            .values()
            .map(|e| &e.record)
            .filter(|r| r.asked_by.id == token && r.sha256 == sha256 && r.expires_at > now)
            .find(|r| {
                r.state == ApprovalState::Pending || (r.state == ApprovalState::Approved && !r.used)
            })
            .cloned()
    }

    pub fn get(&self, id: &str) -> Option<Approval> {
        self.lock().get(id).map(|e| e.record.clone())
    }

    /// Follows approval `id`'s state.
    pub fn watch(&self, id: &str) -> Option<watch::Receiver<ApprovalState>> {
        self.lock().get(id).map(|e| e.state.subscribe())
    }

    pub fn screenshot(&self, id: &str) -> Option<Arc<Vec<u8>>> {
        self.lock().get(id).and_then(|e| e.screenshot.clone())
    }

    pub fn set_screenshot(&self, id: &str, png: Vec<u8>) {
        let record = {
            let mut entries = self.lock();
            let Some(entry) = entries.get_mut(id) else {
                return;
            };
            let png = Arc::new(png);
            entry.screenshot = Some(png.clone());
            entry.record.has_screenshot = true;
            self.write_behind(Persist::Screenshot(id.to_owned(), png));
            entry.record.clone()
        };
        self.publish(&record);
    }

    /// Sets a pending approval's outcome.
    pub fn decide(
        &self,
        id: &str,
        state: ApprovalState,
        by: Option<Actor>,
        reason: String,
    ) -> Result<Approval, ApprovalError> {
        self.decide_scoped(id, state, by, reason, None)
    }

    /// [`Approvals::decide`] with how far an approve reaches.
    pub fn decide_scoped(
        &self,
        id: &str,
        state: ApprovalState,
        by: Option<Actor>,
        reason: String,
        scope: Option<Scope>,
    ) -> Result<Approval, ApprovalError> {
        let record = {
            let mut entries = self.lock();
            let entry = entries
                .get_mut(id)
                .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))?;
            if entry.record.state != ApprovalState::Pending {
                return Err(ApprovalError::Decided {
                    id: id.to_owned(),
                    state: entry.record.state.as_str(),
                });
            }
            entry.record.state = state;
            entry.record.decided_by = by;
            entry.record.decided_at = Some(now_ms());
            entry.record.decision_reason = Some(reason);
            entry.record.scope = scope;
            entry.state.send_replace(state);
            entry.record.clone()
        };
        self.publish(&record);
        Ok(record)
    }

    /// Marks approval `id` used by `token` for parameters hashing to
    /// `sha256`, and waits until that is in the database: the one way an
    /// approved operation gets to run. Refused once it expired. A use that
    /// cannot be written is refused (and the approval stays used: it never
    /// runs twice).
    pub async fn consume(
        &self,
        id: &str,
        token: &str,
        sha256: &str,
    ) -> Result<Approval, ApprovalError> {
        let record = self.mark_used(id, token, sha256, now_ms())?;
        let _ = self.changes.send(record.clone());
        self.write_through(&record)
            .await
            .map_err(|why| ApprovalError::NotDurable {
                id: id.to_owned(),
                why,
            })?;
        Ok(record)
    }

    fn mark_used(
        &self,
        id: &str,
        token: &str,
        sha256: &str,
        now: i64,
    ) -> Result<Approval, ApprovalError> {
        let record = {
            let mut entries = self.lock();
            let entry = entries
                .get_mut(id)
                .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))?;
            let r = &mut entry.record;
            if r.sha256 != sha256 {
                return Err(ApprovalError::Mismatch { id: id.to_owned() });
            }
            if r.asked_by.id != token {
                return Err(ApprovalError::NotAsker { id: id.to_owned() });
            }
            if r.state != ApprovalState::Approved {
                return Err(ApprovalError::NotApproved {
                    id: id.to_owned(),
                    state: r.state.as_str(),
                });
            }
            if r.used {
                return Err(ApprovalError::Used { id: id.to_owned() });
            }
            if now >= r.expires_at {
                return Err(ApprovalError::ExpiredUnused { id: id.to_owned() });
            }
            r.used = true;
            r.clone()
        };
        Ok(record)
    }

    /// Pending approvals whose time is up (to be expired by the caller,
    /// which writes the event).
    pub fn due(&self, now: i64) -> Vec<String> {
        self.lock()
            .values()
            .filter(|e| e.record.state == ApprovalState::Pending && e.record.expires_at <= now)
            .map(|e| e.record.id.clone())
            .collect()
    }

    /// Every record, newest first.
    pub fn list(&self) -> Vec<Approval> {
        let mut all: Vec<Approval> = self.lock().values().map(|e| e.record.clone()).collect();
        all.sort_by(|a, b| b.asked_at.cmp(&a.asked_at).then(b.id.cmp(&a.id)));
        all
    }

    /// Every change from now on (new, decided, used, screenshot added).
    pub fn subscribe(&self) -> broadcast::Receiver<Approval> {
        self.changes.subscribe()
    }

    /// Forgets workspace `id`'s pending approvals (it was deleted): they
    /// expire with that reason.
    pub fn pending_of(&self, workspace: &str) -> Vec<String> {
        self.lock()
            .values()
            .filter(|e| e.record.workspace == workspace && e.record.state == ApprovalState::Pending)
            .map(|e| e.record.id.clone())
            .collect()
    }
}

/// Writes one change; decided rows older than [`KEEP_DECIDED_MS`] go.
async fn write(store: &Store, change: Persist) -> Result<(), cubicle_runtime::state::StateError> {
    use cubicle_runtime::approval_rows;
    match change {
        Persist::Record(record, _) => {
            let json = serde_json::to_string(&record).unwrap_or_default();
            let now = now_ms();
            approval_rows::save(
                store,
                &record.id,
                &record.workspace,
                record.state.as_str(),
                &json,
                now,
                now - KEEP_DECIDED_MS,
            )
            .await
        }
        Persist::Screenshot(id, png) => approval_rows::save_screenshot(store, &id, &png).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn actor(id: &str) -> Actor {
        Actor {
            id: id.into(),
            name: id.into(),
            role: "agent".into(),
        }
    }

    fn new(workspace: &str, params: Value, token: &str, ttl_ms: i64) -> NewApproval {
        NewApproval {
            workspace: workspace.into(),
            operation: "exec".into(),
            sha256: binding_hash(workspace, "exec", &params, None),
            shown: params,
            asked_by: actor(token),
            ttl_ms,
            rule: "p#r".into(),
            reason: "why".into(),
            context: None,
            context_error: None,
        }
    }

    #[test]
    fn canonical_form_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": "é"}});
        let b = json!({"a": {"x": "é", "y": [1, {"c": 3, "d": 2}]}, "b": 1});
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"x":"é","y":[1,{"c":3,"d":2}]},"b":1}"#
        );
        let argv = json!({"argv": ["ls"]});
        assert_ne!(
            binding_hash("ws-1", "exec", &argv, None),
            binding_hash("ws-2", "exec", &argv, None)
        );
        // The door and the page the operator saw are part of it.
        assert_ne!(
            binding_hash("ws-1", "exec", &argv, None),
            binding_hash("ws-1", "exec.stream", &argv, None)
        );
        let page = BrowserContext::at("https://a.example/", cubicle_policy::Focus::Password);
        let other = BrowserContext::at("https://b.example/", cubicle_policy::Focus::Password);
        assert_ne!(
            binding_hash("ws-1", "action", &argv, Some(&page)),
            binding_hash("ws-1", "action", &argv, Some(&other))
        );
    }

    #[tokio::test]
    async fn approved_once_for_the_same_parameters_by_the_asker() {
        let store = Approvals::default();
        let params = json!({"argv": ["sudo", "true"]});
        let asked = store
            .request(new("ws-1", params.clone(), "tok-a", 60_000))
            .unwrap();
        let hash = asked.sha256.clone();
        assert_eq!(store.reusable("tok-a", &hash).unwrap().id, asked.id);
        assert!(matches!(
            store.consume(&asked.id, "tok-a", &hash).await,
            Err(ApprovalError::NotApproved { .. })
        ));
        store
            .decide(
                &asked.id,
                ApprovalState::Approved,
                Some(actor("tok-op")),
                "ok".into(),
            )
            .unwrap();
        assert!(matches!(
            store.decide(&asked.id, ApprovalState::Denied, None, "late".into()),
            Err(ApprovalError::Decided { .. })
        ));
        let other = binding_hash(
            "ws-1",
            "exec",
            &json!({"argv": ["sudo", "rm", "-rf", "/"]}),
            None,
        );
        assert!(matches!(
            store.consume(&asked.id, "tok-a", &other).await,
            Err(ApprovalError::Mismatch { .. })
        ));
        assert!(matches!(
            store.consume(&asked.id, "tok-b", &hash).await,
            Err(ApprovalError::NotAsker { .. })
        ));
        store.consume(&asked.id, "tok-a", &hash).await.unwrap();
        assert!(matches!(
            store.consume(&asked.id, "tok-a", &hash).await,
            Err(ApprovalError::Used { .. })
        ));
        assert!(store.reusable("tok-a", &hash).is_none());
    }

    #[test]
    fn an_approval_is_not_used_after_its_expiry() {
        let store = Approvals::default();
        let asked = store
            .request(new("ws-1", json!(["sudo"]), "tok-a", 60_000))
            .unwrap();
        store
            .decide(&asked.id, ApprovalState::Approved, None, "ok".into())
            .unwrap();
        let late = asked.expires_at;
        assert!(matches!(
            store.mark_used(&asked.id, "tok-a", &asked.sha256, late),
            Err(ApprovalError::ExpiredUnused { .. })
        ));
        store
            .mark_used(&asked.id, "tok-a", &asked.sha256, late - 1)
            .unwrap();
    }

    /// A use is in the database before `consume` returns, after the
    /// changes queued before it (so a late "approved" row cannot undo it).
    #[tokio::test]
    async fn a_use_is_written_before_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let db = Store::open(&dir.path().join("a.db")).await.unwrap();
        let store = Approvals::default();
        let writer = store.persist_to(db.clone());
        let asked = store
            .request(new("ws-1", json!(["sudo"]), "tok-a", 60_000))
            .unwrap();
        store
            .decide(&asked.id, ApprovalState::Approved, None, "ok".into())
            .unwrap();
        store
            .consume(&asked.id, "tok-a", &asked.sha256)
            .await
            .unwrap();
        // Read back by a new store, as a daemon started after a kill -9 would.
        let reread = Approvals::default();
        reread.load(&db).await.unwrap();
        let record = reread.get(&asked.id).unwrap();
        assert!(record.used, "{record:?}");
        store.close();
        writer.await.unwrap();
    }

    #[test]
    fn due_and_bounded() {
        let store = Approvals::default();
        let a = store.request(new("ws-1", json!(1), "t", 0)).unwrap();
        assert_eq!(store.due(now_ms()), std::slice::from_ref(&a.id));
        for i in 1..MAX_PENDING_PER_TOKEN {
            store.request(new("ws-1", json!(i), "t", 60_000)).unwrap();
        }
        assert_eq!(
            store
                .request(new("ws-1", json!("x"), "t", 60_000))
                .unwrap_err(),
            ApprovalError::TooMany
        );
    }
}
