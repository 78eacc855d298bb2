//! The warm pool: N workspaces started ahead at the default geometry and
//! limits, owned by no one, so that a create asking for nothing else is
//! served at once from a ready desktop (then refilled in the background).
//!
//! A pooled workspace is an ordinary workspace with no owner and the name
//! [`POOL_NAME`]; taking one gives it its owner and name. It was never used,
//! so its home is fresh. After a daemon restart the still-running ones are
//! adopted again and the stopped ones deleted.
//!
//! The pool may be filled from a snapshot instead (`cubicle serve --warm N
//! --warm-snapshot ID`): each pooled workspace then has the snapshot put in
//! place as a fork does, is named [`name_for`] the snapshot, and serves
//! only a create from that snapshot (a plain create starts cold).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Serialize;

/// The name a pooled workspace carries until it is taken.
pub const POOL_NAME: &str = "warm-pool";

/// The name of a pooled workspace started from `snapshot` (or from none).
pub fn name_for(snapshot: Option<&str>) -> String {
    match snapshot {
        Some(id) => format!("{POOL_NAME}.{id}"),
        None => POOL_NAME.to_owned(),
    }
}

/// Whether `name` is a pooled workspace's (from any snapshot or none).
pub fn is_pool_name(name: &str) -> bool {
    name == POOL_NAME || name.starts_with(&format!("{POOL_NAME}.snap-"))
}

/// The pool's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolStats {
    /// How many ready workspaces it keeps.
    pub size: usize,
    /// The snapshot its workspaces start from, if any.
    pub snapshot: Option<String>,
    /// Ready now.
    pub ready: usize,
    /// Being started now.
    pub filling: usize,
    /// Creates served from the pool.
    pub hits: u64,
    /// Creates that matched but found the pool empty.
    pub misses: u64,
    /// Pool workspaces that could not start.
    pub failures: u64,
}

/// Ready workspace ids, oldest first, and the counters.
#[derive(Debug, Default)]
pub struct Pool {
    size: AtomicUsize,
    snapshot: Mutex<Option<String>>,
    ready: Mutex<VecDeque<String>>,
    filling: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    failures: AtomicU64,
}

impl Pool {
    pub fn set_size(&self, size: usize) {
        self.size.store(size, Ordering::Relaxed);
    }

    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Fills the pool from snapshot `id` (or from the image, `None`).
    pub fn set_snapshot(&self, id: Option<String>) {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = id;
    }

    /// The snapshot the pool is filled from, if any.
    pub fn snapshot(&self) -> Option<String> {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, VecDeque<String>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest ready id, counted as a hit; a miss when empty.
    pub fn take(&self) -> Option<String> {
        let id = self.ready().pop_front();
        match &id {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        id
    }

    /// A taken id turned out unusable: not a hit after all.
    pub fn untake(&self) {
        self.hits.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn put(&self, id: String) {
        self.ready().push_back(id);
    }

    /// Every ready id, taken out of the pool (not counted as hits).
    pub fn drain(&self) -> Vec<String> {
        self.ready().drain(..).collect()
    }

    /// Forgets `id` (it stopped, crashed or was deleted while pooled).
    pub fn remove(&self, id: &str) -> bool {
        let mut ready = self.ready();
        let before = ready.len();
        ready.retain(|r| r != id);
        ready.len() != before
    }

    /// How many more to start now.
    pub fn wanted(&self) -> usize {
        let have = self.ready().len() + self.filling.load(Ordering::Relaxed);
        self.size().saturating_sub(have)
    }

    pub fn filling(&self, delta: isize) {
        if delta >= 0 {
            self.filling
                .fetch_add(delta.unsigned_abs(), Ordering::Relaxed);
        } else {
            self.filling
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    pub fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            size: self.size(),
            snapshot: self.snapshot(),
            ready: self.ready().len(),
            filling: self.filling.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_oldest_first_and_counts() {
        let pool = Pool::default();
        pool.set_size(2);
        assert_eq!(pool.wanted(), 2);
        pool.filling(1);
        assert_eq!(pool.wanted(), 1);
        pool.filling(-1);
        pool.put("a".into());
        pool.put("b".into());
        assert_eq!(pool.wanted(), 0);
        assert_eq!(pool.take().as_deref(), Some("a"));
        assert!(pool.remove("b"));
        assert_eq!(pool.take(), None);
        let stats = pool.stats();
        assert_eq!((stats.hits, stats.misses, stats.ready), (1, 1, 0));
    }

    #[test]
    fn pool_names_say_which_snapshot() {
        assert_eq!(name_for(None), "warm-pool");
        assert_eq!(
            name_for(Some("snap-0123456789ab")),
            "warm-pool.snap-0123456789ab"
        );
        assert!(is_pool_name("warm-pool") && is_pool_name("warm-pool.snap-0123456789ab"));
        assert!(!is_pool_name("warm-pool-mine") && !is_pool_name("mine"));
    }
}
