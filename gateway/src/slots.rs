//! What the gateway keeps of each workspace from its create to its delete,
//! in one map: who holds its controls ([`crate::control`]), its last
//! activity and open live views ([`crate::ops::activity`]) and its policy's
//! name once read ([`crate::gates`]). An entry is made on first use and
//! goes, all of it at once, when the lifecycle says the workspace was
//! deleted ([`Slots::remove`]).
//!
//! The one other per-workspace map is the running workspaces' hosts
//! ([`crate::host::Hosts`]): a host lives for one run, and is built and
//! torn down with it. This entry outlives runs (an operator's take-over
//! holds through a stop and a start).
//!
//! The services own what they keep here and how it changes; this module
//! holds the types and the map, and imports none of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cubicle_runtime::state::now_ms;
use cubicle_runtime::tokens::Token;
use serde::Serialize;
use tokio::sync::watch;

/// Who holds a workspace's control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Holder {
    Agent,
    Operator {
        token_id: String,
        name: String,
        role: String,
    },
}

/// The control lock's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub holder: Holder,
    /// Unix milliseconds since when.
    pub since_ms: i64,
    /// The workspace is paused: nobody's input reaches it, the holder's
    /// neither, until it is resumed (set from the lifecycle stream).
    pub paused: bool,
    /// The agent called for a person, who has not taken over yet.
    pub call: Option<Call>,
}

/// An agent's call for a person: it stands until an operator takes over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    /// Why, in the agent's words.
    pub reason: String,
    /// The name of the token that called.
    pub by: String,
    /// Unix milliseconds.
    pub since_ms: i64,
}

impl Default for Control {
    fn default() -> Self {
        Self {
            holder: Holder::Agent,
            since_ms: now_ms(),
            paused: false,
            call: None,
        }
    }
}

impl Control {
    /// Whether `token` is the holder. Whether its role may hold control at
    /// all is the operations' question ([`crate::ops::control::holds`]).
    pub fn is_held_by(&self, token: &Token) -> bool {
        matches!(&self.holder, Holder::Operator { token_id, .. } if *token_id == token.id)
    }
}

/// What the gateway has seen of one workspace's use.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// When it last started running (Unix ms), as the lifecycle said.
    pub started_ms: Option<i64>,
    /// Its last operation by anyone (Unix ms).
    pub active_ms: i64,
    /// Live views open and operations running now.
    pub viewers: usize,
}

/// One workspace's entry.
pub struct Slot {
    /// Its control lock; live views and the control stream follow it.
    pub control: watch::Sender<Control>,
    seen: Mutex<Seen>,
    policy: Mutex<Option<String>>,
}

impl Slot {
    fn new() -> Self {
        Self {
            control: watch::channel(Control::default()).0,
            seen: Mutex::new(Seen {
                started_ms: None,
                active_ms: now_ms(),
                viewers: 0,
            }),
            policy: Mutex::new(None),
        }
    }

    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its policy's name, once read from the store.
    pub fn policy(&self) -> MutexGuard<'_, Option<String>> {
        self.policy.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every workspace's entry, by id.
#[derive(Default)]
pub struct Slots(Mutex<HashMap<String, Arc<Slot>>>);

impl Slots {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Workspace `id`'s entry, made now if it has none.
    pub fn get(&self, id: &str) -> Arc<Slot> {
        self.map()
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Slot::new()))
            .clone()
    }

    /// Workspace `id`'s entry if it has one.
    pub fn find(&self, id: &str) -> Option<Arc<Slot>> {
        self.map().get(id).cloned()
    }

    /// Every entry.
    pub fn all(&self) -> Vec<(String, Arc<Slot>)> {
        self.map()
            .iter()
            .map(|(id, slot)| (id.clone(), slot.clone()))
            .collect()
    }

    /// Workspace `id` was deleted: its entry goes.
    pub fn remove(&self, id: &str) {
        self.map().remove(id);
    }

    /// How many workspaces have an entry.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}
