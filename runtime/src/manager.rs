//! The workspace manager: creates, lists, stops and deletes workspaces, and
//! reconciles the store with the processes that really exist after a restart.
//!
//! Every state change is written to the store before it is returned to a
//! caller, and a workspace is reported `running` only while its processes run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use tokio_util::sync::CancellationToken;

use crate::backend::{
    Backend, BackendError, Exit, UIDS_PER_WORKSPACE, WorkspaceSpec, services_uid_of,
};
use crate::geometry::Geometry;
use crate::lifecycle::{Change, Lifecycle, Publisher};
use crate::limits::{Limits, LimitsError, LimitsPolicy, LimitsRequest, Usage};
use crate::pool::{Pool, PoolStats};
use crate::state::{StateError, Store, WorkspaceRecord, WorkspaceState, now_ms};
use crate::time_limits::TimeLimits;

/// Host uids handed to workspaces start here by default (far from system and
/// subuid ranges).
pub const UID_BASE: u32 = 1_600_000;
const UID_COUNT: u32 = 65_536;
const READY_POLL: Duration = Duration::from_millis(50);
/// How soon a restored VM whose init did not answer yet is asked again.
const IDENTITY_RETRY: Duration = Duration::from_millis(20);
/// Why a workspace of an older version whose uids now overlap another's
/// does not start.
const SHARED_UID: &str = "its host uids overlap another workspace's (it was made by an older Cubicle that gave each workspace one uid; this one needs two): delete it and create it again";
/// Why a workspace may not run with `profile`.
fn profile_refusal(profile: &crate::profiles::Row, refusal: &crate::profiles::Refusal) -> String {
    match refusal {
        crate::profiles::Refusal::NotFound => {
            format!("its browser profile {:?} no longer exists", profile.name)
        }
        crate::profiles::Refusal::InUse(holder) => format!(
            "its browser profile {:?} is in use by running workspace {holder}; stop that one first",
            profile.name
        ),
    }
}

/// How often a running workspace's OOM kill count is looked at (to log it).
const OOM_POLL: Duration = Duration::from_secs(5);

/// What can go wrong with a workspace operation.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("no workspace with id {0:?}")]
    NotFound(String),
    #[error("workspace {id} is {state}: {reason}")]
    Conflict {
        id: String,
        state: &'static str,
        reason: String,
    },
    #[error("workspace {id} could not start: {reason}")]
    StartFailed { id: String, reason: String },
    #[error("no free pair of host uids for a new workspace (all {UID_COUNT} in use)")]
    NoUid,
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// What a caller asks for when creating a workspace.
#[derive(Debug, Clone, Default)]
pub struct CreateRequest {
    pub name: Option<String>,
    pub geometry: Geometry,
    /// The token creating it, recorded as its owner.
    pub owner_token: Option<String>,
    /// Its limits, from [`Manager::resolve_limits`]; `None`: the defaults.
    pub limits: Option<Limits>,
    /// Whether a ready workspace of the warm pool may serve it: only when
    /// the caller asks for nothing the pool's workspaces do not already run
    /// with (geometry and limits are checked here, the rest is the caller's).
    pub from_pool: bool,
    /// The browser profile it runs with (a [`crate::profiles`] id the
    /// caller may use): loaded at every start, saved at every stop.
    pub profile: Option<String>,
    /// The snapshot it starts from (one the caller may use): put in place
    /// once, at its first start, before anyone has its id.
    pub snapshot: Option<crate::snapshots::Row>,
}

/// Settings of the manager.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Workspaces' directories live under `<data_dir>/workspaces/`.
    pub data_dir: PathBuf,
    /// How long a new workspace may take to become ready.
    pub ready_timeout: Duration,
    /// First host uid handed to a workspace; daemons sharing a host need
    /// ranges that do not overlap.
    pub uid_base: u32,
}

/// The owner of every workspace on this host.
pub struct Manager<B: Backend> {
    store: Store,
    backend: B,
    config: ManagerConfig,
    /// Serialises uid allocation.
    alloc: tokio::sync::Mutex<()>,
    /// Host-wide claims on the uids of this daemon's workspaces.
    leases: crate::uid_lease::UidLeases,
    /// One lock per workspace, so two operations on it never interleave.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Cancels the exit watcher of each started workspace.
    watchers: Mutex<HashMap<String, CancellationToken>>,
    shutdown: CancellationToken,
    /// Every lifecycle change, for the gateway.
    lifecycle: Publisher,
    /// Default and largest limits of new workspaces.
    limits_policy: Mutex<LimitsPolicy>,
    /// OOM kills last seen per workspace, to log each new one once.
    oom_seen: Mutex<HashMap<String, u64>>,
    /// Time limits of workspaces that set none of their own.
    time_limits: Mutex<TimeLimits>,
    /// Ready workspaces for creates that ask for nothing special.
    pool: Pool,
}

impl<B: Backend> Manager<B> {
    pub fn new(store: Store, backend: B, config: ManagerConfig) -> Arc<Self> {
        Arc::new(Self {
            store,
            backend,
            config,
            alloc: tokio::sync::Mutex::new(()),
            leases: Default::default(),
            locks: Mutex::new(HashMap::new()),
            watchers: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
            lifecycle: Publisher::default(),
            limits_policy: Mutex::new(LimitsPolicy::for_host()),
            oom_seen: Mutex::new(HashMap::new()),
            time_limits: Mutex::new(TimeLimits::default()),
            pool: Pool::default(),
        })
    }

    /// The default and largest limits of new workspaces (initially
    /// [`LimitsPolicy::for_host`]).
    pub fn limits_policy(&self) -> LimitsPolicy {
        *self.limits_policy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the default and largest limits of new workspaces.
    pub fn set_limits_policy(&self, policy: LimitsPolicy) {
        *self.limits_policy.lock().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// The server's time limits, for workspaces that set none of their own
    /// (initially none).
    pub fn default_time_limits(&self) -> TimeLimits {
        *self.time_limits.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_default_time_limits(&self, limits: TimeLimits) {
        *self.time_limits.lock().unwrap_or_else(|p| p.into_inner()) = limits;
    }

    /// The time limits workspace `id` runs under: its own setting over the
    /// server's defaults.
    pub async fn time_limits(&self, id: &str) -> Result<TimeLimits, ManagerError> {
        let own = crate::time_limits::get(&self.store, id).await?;
        Ok(own.over(self.default_time_limits()))
    }

    /// The limits a create `request` gets under the current policy; an
    /// error names the field and the allowed range (a 400 for the caller).
    pub fn resolve_limits(&self, request: &LimitsRequest) -> Result<Limits, LimitsError> {
        self.limits_policy().resolve(request)
    }

    /// What workspace `id` uses now next to its limits (only the limits
    /// when it does not run). A new OOM kill is logged once.
    pub async fn usage(&self, id: &str) -> Result<Usage, ManagerError> {
        let record = self.get(id).await?;
        if !matches!(
            record.state,
            WorkspaceState::Running | WorkspaceState::Paused
        ) {
            return Ok(Usage::of_limits(&record.limits));
        }
        let usage = self.backend.usage(&self.spec(&record));
        self.note_oom(id, usage.oom_kills);
        Ok(usage)
    }

    /// Logs OOM kills of workspace `id` beyond those already logged.
    fn note_oom(&self, id: &str, kills: u64) {
        let mut seen = self.oom_seen.lock().unwrap_or_else(|p| p.into_inner());
        let before = seen.insert(id.to_owned(), kills).unwrap_or(0);
        if kills > before {
            tracing::warn!(
                workspace = %id,
                oom_kills = kills,
                new = kills - before,
                "the memory limit killed processes of the workspace"
            );
        }
    }

    /// Resolves when `ended` does, looking at the OOM kill count meanwhile.
    async fn until_ended<F>(&self, spec: &WorkspaceSpec, ended: F) -> Option<Exit>
    where
        F: std::future::Future<Output = Option<Exit>>,
    {
        tokio::pin!(ended);
        let mut tick = tokio::time::interval(OOM_POLL);
        loop {
            tokio::select! {
                how = &mut ended => return how,
                _ = tick.tick() => self.note_oom(&spec.id, self.backend.usage(spec).oom_kills),
            }
        }
    }

    /// Follows every lifecycle change from now on.
    pub fn lifecycle(&self) -> tokio::sync::broadcast::Receiver<Lifecycle> {
        self.lifecycle.subscribe()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Where the browser profiles' archives are kept.
    pub fn profile_archives(&self) -> crate::profiles::Archives {
        crate::profiles::Archives::under(&self.config.data_dir)
    }

    /// The backend's view of a stored workspace.
    pub fn spec(&self, record: &WorkspaceRecord) -> WorkspaceSpec {
        WorkspaceSpec {
            id: record.id.clone(),
            geometry: record.geometry,
            host_uid: record.host_uid,
            dir: self.config.data_dir.join("workspaces").join(&record.id),
            top_pid: record.pid,
            limits: record.limits,
        }
    }

    /// Takes the leases on a workspace's two uids (user and services);
    /// false, holding neither, if another daemon has either.
    fn take_uids(&self, host_uid: u32) -> bool {
        if !self.leases.take(host_uid) {
            return false;
        }
        if !self.leases.take(services_uid_of(host_uid)) {
            self.leases.release(host_uid);
            return false;
        }
        true
    }

    /// Whether `record`'s uid pair (user, services) overlaps another
    /// workspace's. Only workspaces made before uids came in pairs can: each
    /// had one uid, and its neighbour's is now its services' uid, so the
    /// two would share a host uid (and so memory, signals, the stop of
    /// each other). Such a workspace is refused a start.
    async fn shares_a_uid(&self, record: &WorkspaceRecord) -> Result<bool, ManagerError> {
        let mine = [record.host_uid, services_uid_of(record.host_uid)];
        Ok(self.store.list().await?.iter().any(|other| {
            other.id != record.id
                && !matches!(
                    other.state,
                    WorkspaceState::Deleted | WorkspaceState::Failed
                )
                && (mine.contains(&other.host_uid)
                    || mine.contains(&services_uid_of(other.host_uid)))
        }))
    }

    /// Gives back the leases on a workspace's two uids.
    fn release_uids(&self, host_uid: u32) {
        self.leases.release(host_uid);
        self.leases.release(services_uid_of(host_uid));
    }

    fn lock_for(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(id.to_owned()).or_default().clone()
    }

    pub async fn list(&self) -> Result<Vec<WorkspaceRecord>, ManagerError> {
        Ok(self.store.list().await?)
    }

    /// A workspace that is not deleted.
    pub async fn get(&self, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        match self.store.get(id).await? {
            Some(record) if record.state != WorkspaceState::Deleted => Ok(record),
            _ => Err(ManagerError::NotFound(id.to_owned())),
        }
    }

    /// A workspace that is running, for callers that need its guest.
    pub async fn running(&self, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        let record = self.get(id).await?;
        if record.state != WorkspaceState::Running {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: "it is not running".into(),
            });
        }
        Ok(record)
    }

    /// Creates a workspace and returns it once it is ready.
    pub async fn create(
        self: &Arc<Self>,
        request: CreateRequest,
    ) -> Result<WorkspaceRecord, ManagerError> {
        self.create_prepared(request, |_| async { Ok(()) }).await
    }

    /// Like [`Manager::create`], with `prepare` run on its record once it
    /// is made and before any process of it starts: what its start reads
    /// (its egress, policy, recording, time limits, kept by the caller) is
    /// in place from its first instant, never patched in while it runs. An
    /// error from `prepare` removes it again (`StartFailed`, the reason).
    pub async fn create_prepared<F, Fut>(
        self: &Arc<Self>,
        request: CreateRequest,
        prepare: F,
    ) -> Result<WorkspaceRecord, ManagerError>
    where
        F: FnOnce(WorkspaceRecord) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let snapshot = request.snapshot.clone();
        let record = self.insert_new(request).await?;
        let lock = self.lock_for(&record.id);
        let _held = lock.lock().await;
        let spec = self.spec(&record);
        if let Err(err) = self.backend.create(&spec) {
            self.discard(&spec, &err.to_string()).await?;
            return Err(err.into());
        }
        if let Err(reason) = prepare(record.clone()).await {
            self.discard(&spec, &reason).await?;
            return Err(ManagerError::StartFailed {
                id: record.id,
                reason,
            });
        }
        // A memory snapshot is the machine itself: the workspace starts
        // from it instead of booting. A disk one is put in after the boot.
        let image = snapshot
            .as_ref()
            .filter(|s| s.kind == crate::snapshots::MEMORY)
            .map(|s| self.snapshot_files().image(s));
        let booted = match self.boot_from(&spec, image.as_ref()).await {
            Ok(()) => match &snapshot {
                Some(snapshot) if image.is_some() => {
                    self.announce_restored(&record.id, snapshot);
                    Ok(())
                }
                Some(snapshot) => {
                    let restored = self.restore(&record.id, snapshot).await;
                    if restored.is_err() {
                        // It is discarded below, not crashed.
                        self.disarm(&record.id);
                    }
                    restored
                }
                None => Ok(()),
            },
            Err(reason) => Err(reason),
        };
        match booted {
            Ok(()) => Ok(self.get(&record.id).await?),
            Err(reason) => {
                self.discard(&spec, &reason).await?;
                Err(ManagerError::StartFailed {
                    id: record.id,
                    reason,
                })
            }
        }
    }

    /// Like [`Manager::create_prepared`], but a request that may be served
    /// from the warm pool ([`CreateRequest::from_pool`]) for the default
    /// geometry and limits takes a ready workspace from it when there is one
    /// (which then gets the request's owner and name, and `prepare` run on
    /// it before it is handed out); true if it was.
    pub async fn create_or_take<F, Fut>(
        self: &Arc<Self>,
        request: CreateRequest,
        prepare: F,
    ) -> Result<(WorkspaceRecord, bool), ManagerError>
    where
        F: FnOnce(WorkspaceRecord) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let default_limits = self.limits_policy().default;
        let matches = request.from_pool
            && request.profile.is_none()
            && request.snapshot.as_ref().map(|s| &s.id) == self.pool.snapshot().as_ref()
            && request.geometry == Geometry::default()
            && request.limits.is_none_or(|l| l == default_limits);
        if matches && self.pool.size() > 0 {
            while let Some(id) = self.pool.take() {
                let taken = match self.store.get(&id).await? {
                    Some(record) if record.state == WorkspaceState::Running => {
                        let name = request.name.clone().unwrap_or_else(|| id.clone());
                        self.store
                            .claim(&id, request.owner_token.as_deref(), &name)
                            .await?
                    }
                    _ => false,
                };
                if taken {
                    tracing::info!(workspace = %id, "workspace taken from the warm pool");
                    let record = self.get(&id).await?;
                    // It runs with the defaults the request asked for; what
                    // `prepare` keeps for it says so before anyone has its id.
                    if let Err(reason) = prepare(record.clone()).await {
                        self.delete(&id).await?;
                        return Err(ManagerError::StartFailed { id, reason });
                    }
                    return Ok((record, true));
                }
                self.pool.untake();
            }
        }
        Ok((self.create_prepared(request, prepare).await?, false))
    }

    /// The warm pool's size, what is ready, hits and misses.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Keeps `size` ready workspaces in the warm pool until `cancel`,
    /// starting one at a time, each with `snapshot` in place if one is
    /// given (the pool then serves only creates from it). First adopts the
    /// pool's workspaces a previous daemon left running, and deletes those
    /// it left stopped and those of another snapshot's pool. Filling stops
    /// when the snapshot is removed.
    pub async fn fill_pool(
        self: Arc<Self>,
        size: usize,
        snapshot: Option<crate::snapshots::Row>,
        cancel: CancellationToken,
    ) {
        let snapshot_id = snapshot.as_ref().map(|s| s.id.clone());
        let name = crate::pool::name_for(snapshot_id.as_deref());
        self.pool.set_snapshot(snapshot_id.clone());
        self.pool.set_size(size);
        if let Ok(records) = self.store.list().await {
            for record in records
                .into_iter()
                .filter(|r| r.owner_token.is_none() && crate::pool::is_pool_name(&r.name))
            {
                if record.state == WorkspaceState::Running && record.name == name {
                    self.pool.put(record.id);
                } else if record.name != name || !record.state.may_have_processes() {
                    let _ = self.delete(&record.id).await;
                }
            }
        }
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if self.pool.wanted() == 0 {
                continue;
            }
            if let Some(id) = &snapshot_id
                && matches!(crate::snapshots::get(&self.store, id).await, Ok(None))
            {
                tracing::warn!(snapshot = %id, "the warm pool's snapshot was removed: its pooled workspaces go, and the pool fills no more");
                self.pool.set_size(0);
                for pooled in self.pool.drain() {
                    let _ = self.delete(&pooled).await;
                }
                continue;
            }
            self.pool.filling(1);
            let request = CreateRequest {
                name: Some(name.clone()),
                snapshot: snapshot.clone(),
                ..CreateRequest::default()
            };
            let made = tokio::select! {
                () = cancel.cancelled() => None,
                made = self.create(request) => Some(made),
            };
            self.pool.filling(-1);
            match made {
                Some(Ok(record)) => self.pool.put(record.id),
                Some(Err(err)) => {
                    self.pool.failed();
                    tracing::warn!(%err, "cannot start a warm-pool workspace");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                None => return,
            }
        }
    }

    async fn insert_new(&self, request: CreateRequest) -> Result<WorkspaceRecord, ManagerError> {
        let _alloc = self.alloc.lock().await;
        // Each workspace holds a pair: its user's uid and its services'.
        let used: Vec<u32> = self
            .store
            .uids_in_use()
            .await?
            .into_iter()
            .flat_map(|uid| [uid, services_uid_of(uid)])
            .collect();
        let base = self.config.uid_base;
        // A uid with processes, or leased by another daemon, is in use by
        // someone this store does not know.
        let free = |uid: u32| {
            !used.contains(&uid)
                && crate::proc_scan::pids_of_uid(uid).is_empty()
                && self.leases.take(uid)
        };
        let host_uid = (base..base.saturating_add(UID_COUNT))
            .step_by(UIDS_PER_WORKSPACE as usize)
            .find(|&uid| {
                let services = services_uid_of(uid);
                if !free(uid) {
                    return false;
                }
                if !free(services) {
                    self.leases.release(uid);
                    return false;
                }
                true
            })
            .ok_or(ManagerError::NoUid)?;
        let mut raw = [0u8; 6];
        rand::rng().fill_bytes(&mut raw);
        let id = format!("ws-{}", hex::encode(raw));
        let now = now_ms();
        let record = WorkspaceRecord {
            name: request.name.clone().unwrap_or_else(|| id.clone()),
            id,
            backend: self.backend.name().to_owned(),
            state: WorkspaceState::Creating,
            geometry: request.geometry,
            host_uid,
            pid: None,
            error: None,
            created_at: now,
            updated_at: now,
            owner_token: request.owner_token.clone(),
            limits: request
                .limits
                .unwrap_or_else(|| self.limits_policy().default),
        };
        self.store.insert(&record).await?;
        if let Some(profile) = &request.profile {
            crate::profiles::attach(&self.store, &record.id, profile).await?;
        }
        self.lifecycle.publish(&record.id, Change::Created);
        Ok(record)
    }

    /// Stops and removes a workspace that never became ready; its row says
    /// why, and nothing else of it is left.
    async fn discard(&self, spec: &WorkspaceSpec, reason: &str) -> Result<(), ManagerError> {
        tracing::warn!(workspace = %spec.id, %reason, "workspace failed to start");
        self.backend.stop(spec).await?;
        self.backend.destroy(spec)?;
        self.store
            .set_state(&spec.id, WorkspaceState::Failed, None, Some(reason))
            .await?;
        crate::profiles::release(&self.store, &spec.id).await?;
        self.release_uids(spec.host_uid);
        let reason = reason.to_owned();
        self.lifecycle.publish(&spec.id, Change::Crashed { reason });
        Ok(())
    }

    /// Starts the workspace's processes and waits until the guest is ready.
    /// On success the store says `running` and an exit watcher is armed.
    async fn boot(self: &Arc<Self>, spec: &WorkspaceSpec) -> Result<(), String> {
        self.boot_from(spec, None).await
    }

    /// Like [`Manager::boot`], or from memory snapshot `image` when one is
    /// given: the machine goes on from the snapshot, and takes a fresh
    /// identity before it is ready ([`Manager::fresh_identity`]).
    async fn boot_from(
        self: &Arc<Self>,
        spec: &WorkspaceSpec,
        image: Option<&crate::snapshots::MemoryImage>,
    ) -> Result<(), String> {
        let profile = self.claim_profile(&spec.id).await?;
        // Off the runtime's threads: a start makes and mounts the disk
        // image, writes cgroups and spawns the shim (tens to hundreds of ms
        // on a busy host), and copying a snapshot's disks takes seconds;
        // meanwhile other requests go on (a warm-pool refill held up the
        // very creates it was refilling for).
        let (this, owned, restore) = (self.clone(), spec.clone(), image.cloned());
        let began = std::time::Instant::now();
        let started = tokio::task::spawn_blocking(move || match &restore {
            Some(image) => this.backend.start_restored(&owned, image),
            None => this.backend.start(&owned),
        })
        .await
        .map_err(|e| format!("the start's thread ended: {e}"))?;
        let (pid, mut exit) = started.map_err(|e| e.to_string())?;
        let start_ms = began.elapsed().as_millis();
        self.store
            .set_state(&spec.id, WorkspaceState::Starting, Some(pid), None)
            .await
            .map_err(|e| e.to_string())?;
        self.lifecycle.publish(&spec.id, Change::Starting);
        // The guest channel answers only from under this top process.
        let started = WorkspaceSpec {
            top_pid: Some(pid),
            ..spec.clone()
        };
        if image.is_some() {
            // First: until then the fork's kernel hands out the same
            // random stream as every other fork of the snapshot.
            self.identity_first(&started, &mut exit).await?;
        }
        self.wait_ready(&started, &mut exit).await?;
        if let Some(profile) = profile {
            self.load_profile(&started, &profile).await?;
        }
        self.store
            .set_state(&spec.id, WorkspaceState::Running, Some(pid), None)
            .await
            .map_err(|e| e.to_string())?;
        self.watch(spec.clone(), async move { exit.await.ok() });
        self.lifecycle.publish(&spec.id, Change::Running);
        // Where a start's time went: the backend's start (disk, cgroups,
        // shim, jail or VM), then the guest's services until ready.
        let ready_ms = began.elapsed().as_millis() - start_ms;
        tracing::info!(workspace = %spec.id, pid, start_ms, ready_ms, "workspace running");
        Ok(())
    }

    /// Claims the profile workspace `id` runs with, if any; the reason
    /// when another running workspace has it.
    async fn claim_profile(&self, id: &str) -> Result<Option<crate::profiles::Row>, String> {
        let cannot = |err: StateError| format!("cannot claim its browser profile: {err}");
        let Some(row) = crate::profiles::of_workspace(&self.store, id)
            .await
            .map_err(cannot)?
        else {
            return Ok(None);
        };
        match crate::profiles::claim(&self.store, &row.id, id)
            .await
            .map_err(cannot)?
        {
            Ok(()) => Ok(Some(row)),
            Err(refusal) => Err(profile_refusal(&row, &refusal)),
        }
    }

    /// Puts the kept archive of `profile` (if it was ever saved) in place
    /// of the new browser's profile; returns once the browser runs on it.
    async fn load_profile(
        &self,
        spec: &WorkspaceSpec,
        profile: &crate::profiles::Row,
    ) -> Result<(), String> {
        let cannot =
            |err: String| format!("cannot load its browser profile {:?}: {err}", profile.name);
        let archives = self.profile_archives();
        let Some(bytes) = archives
            .read(&profile.id)
            .map_err(|e| cannot(e.to_string()))?
        else {
            return Ok(());
        };
        let channel = self.backend.channel(spec);
        channel
            .load_profile(&bytes)
            .await
            .map_err(|e| cannot(e.to_string()))?;
        let change = Change::ProfileLoaded {
            profile: profile.id.clone(),
            size: bytes.len() as u64,
            sha256: crate::guest_ops::sha256_hex(&bytes),
        };
        self.lifecycle.publish(&spec.id, change);
        Ok(())
    }

    /// Saves the browser profile of a running workspace that has one (the
    /// browser is closed for it, the workspace is stopping) and lets the
    /// profile go. A save that fails keeps the archive from before and is
    /// published, never stops the stop.
    async fn save_profile(&self, spec: &WorkspaceSpec) {
        let profile = match crate::profiles::of_workspace(&self.store, &spec.id).await {
            Ok(Some(profile)) if profile.running_in.as_deref() == Some(spec.id.as_str()) => profile,
            Ok(_) => return,
            Err(err) => {
                tracing::warn!(workspace = %spec.id, %err, "cannot look up the workspace's browser profile");
                return;
            }
        };
        let saved = async {
            let bytes = self
                .backend
                .channel(spec)
                .save_profile(true)
                .await
                .map_err(|e| e.to_string())?;
            let sha256 = crate::guest_ops::sha256_hex(&bytes);
            self.profile_archives()
                .write(&profile.id, &bytes)
                .map_err(|e| format!("cannot keep the archive: {e}"))?;
            crate::profiles::saved(&self.store, &profile.id, bytes.len() as u64, &sha256)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((bytes.len() as u64, sha256))
        };
        let change = match saved.await {
            Ok((size, sha256)) => Change::ProfileSaved {
                profile: profile.id.clone(),
                size,
                sha256,
            },
            Err(reason) => {
                tracing::warn!(workspace = %spec.id, profile = %profile.id, %reason, "browser profile not saved");
                Change::ProfileNotSaved {
                    profile: profile.id.clone(),
                    reason,
                }
            }
        };
        self.lifecycle.publish(&spec.id, change);
    }

    async fn wait_ready(
        &self,
        spec: &WorkspaceSpec,
        exit: &mut tokio::sync::oneshot::Receiver<Exit>,
    ) -> Result<(), String> {
        tokio::select! {
            ended = &mut *exit => {
                let how = ended.map(|e| e.before_ready()).unwrap_or_default();
                Err(format!("the workspace's processes ended before it was ready ({how})"))
            }
            ready = self.until_ready(spec) => ready,
        }
    }

    /// Asks the guest for its health until it is ready, one of its services
    /// failed, or the ready timeout passed.
    async fn until_ready(&self, spec: &WorkspaceSpec) -> Result<(), String> {
        let channel = self.backend.channel(spec);
        let deadline = tokio::time::Instant::now() + self.config.ready_timeout;
        loop {
            let last = match channel.health().await {
                Ok(health) if health.ready => return Ok(()),
                Ok(health) => match health.failed {
                    Some(failed) => return Err(failed),
                    None => format!("services: {:?}", health.services),
                },
                Err(err) => err.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "not ready after {:?}; last: {last}",
                    self.config.ready_timeout
                ));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// Arms a watcher that marks the workspace stopped if its processes end
    /// without being asked to.
    fn watch<F>(self: &Arc<Self>, spec: WorkspaceSpec, ended: F)
    where
        F: std::future::Future<Output = Option<Exit>> + Send + 'static,
    {
        let cancel = self.shutdown.child_token();
        self.watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(spec.id.clone(), cancel.clone());
        let manager = self.clone();
        tokio::spawn(async move {
            let how = tokio::select! {
                () = cancel.cancelled() => return,
                how = manager.until_ended(&spec, ended) => how.map(|e| e.description).unwrap_or_default(),
            };
            let lock = manager.lock_for(&spec.id);
            let _held = lock.lock().await;
            if cancel.is_cancelled() {
                return;
            }
            manager.pool.remove(&spec.id);
            let reason = format!("the workspace's processes ended unexpectedly ({how})");
            tracing::warn!(workspace = %spec.id, %reason);
            let _ = manager.backend.stop(&spec).await;
            let _ = manager.backend.clean(&spec);
            let _ = manager
                .store
                .set_state(&spec.id, WorkspaceState::Stopped, None, Some(&reason))
                .await;
            if let Ok(Some(profile)) = crate::profiles::of_workspace(&manager.store, &spec.id).await
            {
                let _ = crate::profiles::release(&manager.store, &spec.id).await;
                let change = Change::ProfileNotSaved {
                    profile: profile.id,
                    reason: "the workspace crashed; its profile is as it was last saved".into(),
                };
                manager.lifecycle.publish(&spec.id, change);
            }
            manager
                .lifecycle
                .publish(&spec.id, Change::Crashed { reason });
        });
    }

    fn disarm(&self, id: &str) {
        if let Some(token) = self
            .watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            token.cancel();
        }
    }

    async fn stop_processes(
        &self,
        spec: &WorkspaceSpec,
        state: WorkspaceState,
    ) -> Result<(), ManagerError> {
        self.disarm(&spec.id);
        self.thaw_for_stop(spec, state).await;
        self.store
            .set_state(&spec.id, WorkspaceState::Stopping, None, None)
            .await?;
        if matches!(state, WorkspaceState::Running | WorkspaceState::Paused) {
            self.save_profile(spec).await;
        }
        self.backend.stop(spec).await?;
        self.backend.clean(spec)?;
        crate::profiles::release(&self.store, &spec.id).await?;
        Ok(())
    }

    /// Stops a workspace, keeping its home.
    pub async fn stop(&self, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        let record = self.get(id).await?;
        let lock = self.lock_for(id);
        let _held = self.try_hold(&lock, &record)?;
        let spec = self.spec(&record);
        self.pool.remove(id);
        self.stop_processes(&spec, record.state).await?;
        self.store
            .set_state(id, WorkspaceState::Stopped, None, None)
            .await?;
        self.lifecycle.publish(id, Change::Stopped { reason: None });
        self.get(id).await
    }

    /// Starts a stopped workspace again and returns it once ready.
    pub async fn start(self: &Arc<Self>, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        let record = self.get(id).await?;
        let lock = self.lock_for(id);
        let _held = self.try_hold(&lock, &record)?;
        if record.state != WorkspaceState::Stopped {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: "only a stopped workspace can be started".into(),
            });
        }
        if self.shares_a_uid(&record).await? {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: SHARED_UID.into(),
            });
        }
        if let Some(profile) = crate::profiles::of_workspace(&self.store, id).await?
            && let Some(holder) = profile.running_in.as_deref().filter(|&h| h != id)
        {
            let refusal = crate::profiles::Refusal::InUse(holder.to_owned());
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: profile_refusal(&profile, &refusal),
            });
        }
        let spec = self.spec(&record);
        if let Err(reason) = self.boot(&spec).await {
            crate::profiles::release(&self.store, id).await?;
            self.backend.stop(&spec).await?;
            self.backend.clean(&spec)?;
            self.store
                .set_state(id, WorkspaceState::Stopped, None, Some(&reason))
                .await?;
            let change = Change::Crashed {
                reason: reason.clone(),
            };
            self.lifecycle.publish(id, change);
            return Err(ManagerError::StartFailed {
                id: id.to_owned(),
                reason,
            });
        }
        self.get(id).await
    }

    /// Stops a workspace and removes everything of it but its row.
    pub async fn delete(&self, id: &str) -> Result<(), ManagerError> {
        let record = self.get(id).await?;
        let lock = self.lock_for(id);
        let _held = self.try_hold(&lock, &record)?;
        let spec = self.spec(&record);
        self.pool.remove(id);
        self.stop_processes(&spec, record.state).await?;
        self.backend.destroy(&spec)?;
        self.store
            .set_state(id, WorkspaceState::Deleted, None, None)
            .await?;
        // The placeholders it held mean nothing any more.
        crate::secret_rows::unbind_workspace(&self.store, id).await?;
        self.release_uids(record.host_uid);
        self.oom_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        self.lifecycle.publish(id, Change::Deleted);
        tracing::info!(workspace = %id, "workspace deleted");
        Ok(())
    }

    /// Where the snapshots' archives are kept.
    pub fn snapshot_files(&self) -> crate::snapshots::Files {
        crate::snapshots::Files::under(&self.config.data_dir)
    }

    /// The running workspace `id` under its lock, for an operation that
    /// talks to its guest (`what` names it in the refusal).
    async fn running_for<'a>(
        &self,
        id: &str,
        lock: &'a Arc<tokio::sync::Mutex<()>>,
        what: &str,
    ) -> Result<(tokio::sync::MutexGuard<'a, ()>, WorkspaceSpec), ManagerError> {
        let record = self.get(id).await?;
        let held = self.try_hold(lock, &record)?;
        // Read again under the lock: a stop may have just ended.
        let record = self.get(id).await?;
        if record.state != WorkspaceState::Running {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: format!("only a running workspace can {what}"),
            });
        }
        Ok((held, self.spec(&record)))
    }

    /// Takes snapshot `snapshot` (an id not yet used) of running workspace
    /// `id`: its files and browser profile (the browser closes for it and
    /// opens again), into [`Manager::snapshot_files`]. Either both archives
    /// are in place or neither is.
    pub async fn take_snapshot(
        &self,
        id: &str,
        snapshot: &str,
    ) -> Result<Result<crate::snapshots::Taken, String>, ManagerError> {
        use crate::snapshots::Taken;
        let lock = self.lock_for(id);
        let (_held, spec) = self.running_for(id, &lock, "be snapshotted").await?;
        let files = self.snapshot_files();
        if self.backend.memory_snapshots() {
            return Ok(self
                .backend
                .snapshot_memory(&spec, &files, snapshot)
                .await
                .map(Taken::Memory)
                .map_err(|err| err.to_string()));
        }
        let channel = self.backend.channel(&spec);
        Ok(crate::snapshots::take(&channel, &files, snapshot)
            .await
            .map(Taken::Disk)
            .map_err(|err| err.to_string()))
    }

    /// Whether this host's snapshots hold the machine's memory.
    pub fn memory_snapshots(&self) -> bool {
        self.backend.memory_snapshots()
    }

    /// Puts `snapshot` back into running workspace `id` in place of its
    /// files and browser profile (what was made after it is removed).
    pub async fn roll_back(
        self: &Arc<Self>,
        id: &str,
        snapshot: &crate::snapshots::Row,
    ) -> Result<Result<(), String>, ManagerError> {
        let lock = self.lock_for(id);
        let (_held, spec) = self.running_for(id, &lock, "be rolled back").await?;
        if snapshot.kind == crate::snapshots::MEMORY {
            return self.roll_back_machine(&spec, snapshot).await;
        }
        let channel = self.backend.channel(&spec);
        Ok(
            crate::snapshots::put(&channel, &self.snapshot_files(), snapshot, true)
                .await
                .map_err(|err| err.to_string()),
        )
    }

    /// Rolls running workspace `spec` (its lock held) back to memory
    /// snapshot `snapshot`: its VM is stopped and a new one restored from
    /// the snapshot over the snapshot's disk. When the restore fails the
    /// workspace is left stopped, saying why (its disk is the snapshot's
    /// only if the copy of it completed).
    async fn roll_back_machine(
        self: &Arc<Self>,
        spec: &WorkspaceSpec,
        snapshot: &crate::snapshots::Row,
    ) -> Result<Result<(), String>, ManagerError> {
        let image = self.snapshot_files().image(snapshot);
        if !self.backend.memory_snapshots() {
            return Ok(Err(format!(
                "snapshot {} holds a microVM's memory; this host runs the {} backend",
                snapshot.id,
                self.backend.name()
            )));
        }
        // Refused while it still runs, for what can be known before.
        if let Err(reason) = image.check_fits(spec.limits.memory_bytes()) {
            return Ok(Err(reason));
        }
        self.stop_processes(spec, WorkspaceState::Running).await?;
        let spec = WorkspaceSpec {
            top_pid: None,
            ..spec.clone()
        };
        if let Err(reason) = self.boot_from(&spec, Some(&image)).await {
            crate::profiles::release(&self.store, &spec.id).await?;
            self.backend.stop(&spec).await?;
            self.backend.clean(&spec)?;
            let reason = format!("the restore failed, so it is stopped: {reason}");
            self.store
                .set_state(&spec.id, WorkspaceState::Stopped, None, Some(&reason))
                .await?;
            self.lifecycle.publish(
                &spec.id,
                Change::Crashed {
                    reason: reason.clone(),
                },
            );
            return Ok(Err(reason));
        }
        self.announce_restored(&spec.id, snapshot);
        Ok(Ok(()))
    }

    /// [`Manager::fresh_identity`] as soon as the restored VM's init
    /// answers: a channel not there yet is asked again; an answer that
    /// refuses, a peer that is not the VMM, the VMM ending or the ready
    /// timeout end it.
    async fn identity_first(
        &self,
        spec: &WorkspaceSpec,
        exit: &mut tokio::sync::oneshot::Receiver<Exit>,
    ) -> Result<(), String> {
        use crate::channel::ChannelError;
        let deadline = tokio::time::Instant::now() + self.config.ready_timeout;
        let attempts = async {
            loop {
                let err = match self.fresh_identity(spec).await {
                    Ok(()) => return Ok(()),
                    Err(
                        err @ (ChannelError::BadReply(_)
                        | ChannelError::WrongPeer { .. }
                        | ChannelError::NotASocket { .. }),
                    ) => return Err(err.to_string()),
                    Err(err) => err,
                };
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!(
                        "not answered within {:?}: {err}",
                        self.config.ready_timeout
                    ));
                }
                tokio::time::sleep(IDENTITY_RETRY).await;
            }
        };
        tokio::select! {
            ended = &mut *exit => {
                let how = ended.map(|e| e.before_ready()).unwrap_or_default();
                Err(format!("the workspace's processes ended before it took its own identity ({how})"))
            }
            done = attempts => done.map_err(|err| format!("cannot give the restored VM its own identity: {err}")),
        }
    }

    /// Gives a VM restored from a memory snapshot its own identity before
    /// it is ready: the kernel's RNG reseeded from the host's randomness,
    /// a new machine id, its own id as hostname, the host's clock.
    async fn fresh_identity(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(), crate::channel::ChannelError> {
        use cubicle_image::identity::{ENTROPY_BYTES, Identity, encode_hex};
        let mut entropy = [0u8; ENTROPY_BYTES];
        let mut machine_id = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut entropy);
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut machine_id);
        let identity = Identity {
            hostname: spec.id.clone(),
            machine_id: encode_hex(&machine_id),
            entropy: encode_hex(&entropy),
            time_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        };
        self.backend.channel(spec).fresh_identity(&identity).await
    }

    /// Tells the gateway that `snapshot` is what workspace `id` now holds.
    fn announce_restored(&self, id: &str, snapshot: &crate::snapshots::Row) {
        self.lifecycle.publish(
            id,
            Change::SnapshotRestored {
                snapshot: snapshot.id.clone(),
                sha256: snapshot.sha256.clone(),
            },
        );
    }

    /// Puts `snapshot` into new workspace `id` after its first boot (its
    /// lock held by the create).
    async fn restore(&self, id: &str, snapshot: &crate::snapshots::Row) -> Result<(), String> {
        let record = self.get(id).await.map_err(|e| e.to_string())?;
        let channel = self.backend.channel(&self.spec(&record));
        crate::snapshots::put(&channel, &self.snapshot_files(), snapshot, false)
            .await
            .map_err(|err| format!("cannot put snapshot {} in place: {err}", snapshot.id))?;
        self.announce_restored(id, snapshot);
        Ok(())
    }

    /// Freezes a running workspace: its processes and memory are kept, it
    /// gets no CPU time until [`Manager::resume`].
    pub async fn pause(&self, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        let record = self.get(id).await?;
        let lock = self.lock_for(id);
        let _held = self.try_hold(&lock, &record)?;
        // Read again under the lock: a stop may have just ended.
        let record = self.get(id).await?;
        if record.state != WorkspaceState::Running {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: "only a running workspace can be paused".into(),
            });
        }
        self.backend.pause(&self.spec(&record)).await?;
        self.store
            .set_state(id, WorkspaceState::Paused, record.pid, None)
            .await?;
        self.lifecycle.publish(id, Change::Paused);
        tracing::info!(workspace = %id, "workspace paused");
        self.get(id).await
    }

    /// Thaws a paused workspace: the same processes continue.
    pub async fn resume(&self, id: &str) -> Result<WorkspaceRecord, ManagerError> {
        let record = self.get(id).await?;
        let lock = self.lock_for(id);
        let _held = self.try_hold(&lock, &record)?;
        let record = self.get(id).await?;
        if record.state != WorkspaceState::Paused {
            return Err(ManagerError::Conflict {
                id: record.id,
                state: record.state.as_str(),
                reason: "only a paused workspace can be resumed".into(),
            });
        }
        self.backend.resume(&self.spec(&record)).await?;
        self.store
            .set_state(id, WorkspaceState::Running, record.pid, None)
            .await?;
        self.lifecycle.publish(id, Change::Resumed);
        tracing::info!(workspace = %id, "workspace resumed");
        self.get(id).await
    }

    /// Thaws a paused workspace before its processes are ended: a frozen
    /// process cannot act on SIGTERM, and under cgroup v1 not even die.
    async fn thaw_for_stop(&self, spec: &WorkspaceSpec, state: WorkspaceState) {
        if state != WorkspaceState::Paused {
            return;
        }
        if let Err(err) = self.backend.resume(spec).await {
            tracing::warn!(workspace = %spec.id, %err, "cannot thaw the paused workspace before stopping it");
        }
    }

    /// Whether an operation on workspace `id` (start, stop, delete, pause,
    /// resume) is running now.
    pub fn busy(&self, id: &str) -> bool {
        self.lock_for(id).try_lock().is_err()
    }

    fn try_hold<'a>(
        &self,
        lock: &'a Arc<tokio::sync::Mutex<()>>,
        record: &WorkspaceRecord,
    ) -> Result<tokio::sync::MutexGuard<'a, ()>, ManagerError> {
        lock.try_lock().map_err(|_| ManagerError::Conflict {
            id: record.id.clone(),
            state: record.state.as_str(),
            reason: "another operation on it is in progress; try again when it ends".into(),
        })
    }

    /// After a daemon start: re-attach workspaces whose processes still run,
    /// and mark the others stopped after cleaning what they left.
    pub async fn reconcile(self: &Arc<Self>) -> Result<(), ManagerError> {
        for record in self.store.list().await? {
            if record.state == WorkspaceState::Failed {
                continue;
            }
            if record.state.may_have_processes() && self.shares_a_uid(&record).await? {
                tracing::error!(workspace = %record.id, uid = record.host_uid, SHARED_UID);
                self.backend.stop(&self.spec(&record)).await?;
                self.store
                    .set_state(&record.id, WorkspaceState::Stopped, None, Some(SHARED_UID))
                    .await?;
                continue;
            }
            if !self.take_uids(record.host_uid) {
                // Its processes, if any, are another daemon's: touch nothing.
                let reason = "its host uid is leased by another Cubicle daemon on this host";
                tracing::error!(workspace = %record.id, uid = record.host_uid, reason);
                self.store
                    .set_state(&record.id, WorkspaceState::Stopped, None, Some(reason))
                    .await?;
                continue;
            }
            let spec = self.spec(&record);
            let alive = record
                .pid
                .is_some_and(|pid| self.backend.is_running(&spec, pid));
            // A workspace paused by the daemon before it went is thawed and
            // judged like a running one (re-attached if it still answers).
            // Still frozen under its shim: it stays paused.
            if alive && record.state == WorkspaceState::Paused {
                self.reattach(spec, record.pid.unwrap_or_default(), false);
                continue;
            }
            let record = if record.state == WorkspaceState::Paused {
                self.thaw_for_stop(&spec, record.state).await;
                if alive {
                    self.store
                        .set_state(&record.id, WorkspaceState::Running, record.pid, None)
                        .await?;
                }
                WorkspaceRecord {
                    state: WorkspaceState::Running,
                    ..record
                }
            } else {
                record
            };
            // Alive and running: followed at once, and judged by whether its
            // guest answers within the ready timeout (one slow answer from a
            // loaded guest is no reason to end it).
            if alive && record.state == WorkspaceState::Running {
                self.reattach(spec, record.pid.unwrap_or_default(), true);
                continue;
            }
            if record.state.may_have_processes() || record.state == WorkspaceState::Stopped {
                self.backend.stop(&spec).await?;
                self.backend.clean(&spec)?;
            }
            if record.state == WorkspaceState::Creating {
                self.backend.destroy(&spec)?;
                let reason = "the daemon stopped while the workspace was being created";
                self.store
                    .set_state(&record.id, WorkspaceState::Failed, None, Some(reason))
                    .await?;
            } else if record.state.may_have_processes() {
                let reason = "its processes were gone when the daemon restarted";
                self.store
                    .set_state(&record.id, WorkspaceState::Stopped, None, Some(reason))
                    .await?;
                tracing::info!(workspace = %record.id, "marked stopped: {reason}");
                let reason = reason.to_owned();
                self.lifecycle
                    .publish(&record.id, Change::Crashed { reason });
            }
        }
        Ok(())
    }

    /// Follows a workspace a previous daemon started, through its shim
    /// (`crate::shim`); without one (a backend that does not use shims),
    /// by polling its top process. With `must_answer`, a guest that does not
    /// report itself ready within the ready timeout ends it too.
    fn reattach(self: &Arc<Self>, spec: WorkspaceSpec, pid: i32, must_answer: bool) {
        tracing::info!(workspace = %spec.id, pid, "re-attached to running workspace");
        let manager = self.clone();
        let poll_spec = spec.clone();
        self.watch(spec, async move {
            let exited = async {
                match crate::shim::attach(&poll_spec, pid).await {
                    Ok(exit) => return exit.await.ok(),
                    Err(why) => {
                        tracing::warn!(workspace = %poll_spec.id, "polling its top process: {why}");
                    }
                }
                while manager.backend.is_running(&poll_spec, pid) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Some(Exit::new("its top process is gone".into()))
            };
            let silent = async {
                if !must_answer {
                    return std::future::pending().await;
                }
                match manager.until_ready(&poll_spec).await {
                    Ok(()) => std::future::pending().await,
                    Err(why) => Some(Exit::new(format!(
                        "its guest did not answer after the daemon restarted: {why}"
                    ))),
                }
            };
            tokio::select! {
                how = exited => how,
                how = silent => how,
            }
        });
    }

    /// Daemon shutdown. Workspaces run under shims of their own and outlive
    /// the daemon: with `stop_workspaces` false they are left running (the
    /// next daemon re-attaches them); with it, every one is stopped and
    /// recorded as stopped.
    pub async fn shutdown(&self, stop_workspaces: bool) {
        self.shutdown.cancel();
        let Ok(records) = self.store.list().await else {
            return;
        };
        if !stop_workspaces {
            let left = records
                .iter()
                .filter(|r| r.state.may_have_processes())
                .count();
            tracing::info!(
                workspaces = left,
                "left running under their shims; the next daemon on this data dir re-attaches them"
            );
            return;
        }
        // All at once: one by one, each stop's grace period adds up (40
        // workspaces took over a minute).
        let stops = records
            .into_iter()
            .filter(|r| r.state.may_have_processes())
            .map(|record| self.stop_for_shutdown(record));
        futures_util::future::join_all(stops).await;
    }

    async fn stop_for_shutdown(&self, record: WorkspaceRecord) {
        let spec = self.spec(&record);
        self.thaw_for_stop(&spec, record.state).await;
        let _ = self.backend.stop(&spec).await;
        let _ = self.backend.clean(&spec);
        let _ = self
            .store
            .set_state(
                &record.id,
                WorkspaceState::Stopped,
                None,
                Some("the daemon shut down"),
            )
            .await;
        let reason = Some("the daemon shut down".to_owned());
        self.lifecycle
            .publish(&record.id, Change::Stopped { reason });
    }
}
