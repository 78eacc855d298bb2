//! A node's membership in the cluster: registered with a new epoch at every
//! start, a heartbeat with its free capacity every interval, and each of its
//! workspaces' placement and state written as its lifecycle moves. When the
//! store says the node was fenced (declared down, or started again
//! elsewhere under its name), the node must stop: [`run`] returns why, and
//! the daemon shuts down stopping every workspace. A workspace the store
//! says is lost is stopped here as soon as this node sees it (it may have
//! been given up on; nothing of it may go on acting).

use std::sync::Arc;
use std::time::Duration;

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::cluster::postgres::PgCluster;
use cubicle_runtime::cluster::{
    Actual, ClusterError, ClusterStore, Desired, Lease, NodeInfo, Placement,
};
use cubicle_runtime::lifecycle::Lifecycle;
use cubicle_runtime::manager::Manager;
use cubicle_runtime::state::{WorkspaceRecord, WorkspaceState, now_ms};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// One node's membership.
pub struct Membership {
    pub store: PgCluster,
    pub lease: Lease,
    pub capacity: u32,
    pub interval: Duration,
    pub manager: Arc<Manager<AnyBackend>>,
}

/// Registers `info` and returns the membership of this run of the node.
pub async fn join(
    store: PgCluster,
    info: &NodeInfo,
    interval: Duration,
    manager: Arc<Manager<AnyBackend>>,
) -> Result<Membership, ClusterError> {
    let lease = store.register_node(info, now_ms()).await?;
    Ok(Membership {
        store,
        lease,
        capacity: info.capacity,
        interval,
        manager,
    })
}

/// Why the node must stop.
#[derive(Debug)]
pub struct Fenced(pub String);

impl Membership {
    /// Heartbeats and reports until `stop` (`None`) or until fenced.
    pub async fn run(
        self,
        mut lifecycle: tokio::sync::broadcast::Receiver<Lifecycle>,
        stop: CancellationToken,
    ) -> Option<Fenced> {
        if let Err(fenced) = self.sync_all().await {
            return Some(fenced);
        }
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let outcome = tokio::select! {
                _ = stop.cancelled() => return None,
                _ = tick.tick() => self.beat().await,
                change = lifecycle.recv() => match change {
                    Ok(change) => self.sync(&change.workspace).await,
                    Err(RecvError::Lagged(_)) => self.sync_all().await,
                    Err(RecvError::Closed) => return None,
                },
            };
            if let Err(fenced) = outcome {
                return Some(fenced);
            }
        }
    }

    async fn beat(&self) -> Result<(), Fenced> {
        let live = match self.manager.list().await {
            Ok(records) => records
                .iter()
                .filter(|r| r.state.may_have_processes())
                .count(),
            Err(err) => {
                tracing::error!(%err, "cannot count this node's workspaces");
                return Ok(());
            }
        };
        let free = self
            .capacity
            .saturating_sub(u32::try_from(live).unwrap_or(u32::MAX));
        self.checked(self.store.heartbeat(&self.lease, free, now_ms()).await)
    }

    /// A store error: fenced ends the node; anything else (the database
    /// restarting) is logged and tried again at the next beat or change.
    fn checked(&self, result: Result<(), ClusterError>) -> Result<(), Fenced> {
        match result {
            Ok(()) => Ok(()),
            Err(err @ ClusterError::Fenced { .. }) => Err(Fenced(err.to_string())),
            Err(err) => {
                tracing::error!(%err, node = %self.lease.node, "the cluster store refused a write");
                Ok(())
            }
        }
    }

    async fn sync_all(&self) -> Result<(), Fenced> {
        let records = match self.manager.list().await {
            Ok(records) => records,
            Err(err) => {
                tracing::error!(%err, "cannot list this node's workspaces");
                return Ok(());
            }
        };
        for record in records {
            self.sync_record(&record).await?;
        }
        Ok(())
    }

    async fn sync(&self, id: &str) -> Result<(), Fenced> {
        match self.manager.get(id).await {
            Ok(record) => self.sync_record(&record).await,
            Err(_) => Ok(()),
        }
    }

    /// Writes where `record` is; stops it if the store says it is lost.
    async fn sync_record(&self, record: &WorkspaceRecord) -> Result<(), Fenced> {
        let placed = match self.store.placement(&record.id).await {
            Ok(placed) => placed,
            Err(err) => return self.checked(Err(err)),
        };
        let now = now_ms();
        match placed {
            None if record.state == WorkspaceState::Deleted => Ok(()),
            None => {
                let placement = Placement {
                    id: record.id.clone(),
                    name: record.name.clone(),
                    backend: record.backend.clone(),
                    owner_token: record.owner_token.clone(),
                    node: self.lease.node.clone(),
                    node_epoch: self.lease.epoch,
                    desired: Desired::Running,
                    actual: Actual::State(record.state),
                    lost_reason: None,
                    error: record.error.clone(),
                    created_at: record.created_at,
                    updated_at: now,
                };
                self.checked(self.store.place(&self.lease, &placement).await)
            }
            Some(placed) if placed.node != self.lease.node => {
                tracing::error!(
                    workspace = %record.id, owner = %placed.node,
                    "a workspace here is placed on another node: stopping it"
                );
                self.stop_here(&record.id).await;
                Ok(())
            }
            Some(placed) if placed.actual == Actual::Lost => {
                self.stop_here(&record.id).await;
                Ok(())
            }
            Some(placed)
                if placed.actual == Actual::State(record.state)
                    && placed.node_epoch == self.lease.epoch =>
            {
                Ok(())
            }
            Some(_) => {
                let reported = self
                    .store
                    .report(
                        &self.lease,
                        &record.id,
                        record.state,
                        record.error.as_deref(),
                        now,
                    )
                    .await;
                self.checked(reported)
            }
        }
    }

    /// Stops a workspace the cluster gave up on (lost, or another node's).
    async fn stop_here(&self, id: &str) {
        let record = self.manager.get(id).await;
        if record.is_ok_and(|r| r.state.may_have_processes()) {
            tracing::warn!(workspace = %id, "the cluster declared this workspace lost: stopping it");
            if let Err(err) = self.manager.stop(id).await {
                tracing::error!(%err, workspace = %id, "cannot stop a lost workspace");
            }
        }
    }
}
