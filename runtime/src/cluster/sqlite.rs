//! [`ClusterStore`] on the daemon's own SQLite database: the embedded store,
//! for one host (a node and an edge in one box) and the contract's second
//! implementation. Every write is one `BEGIN IMMEDIATE` transaction, which
//! holds every other writer of the file off until it ends: that is the
//! chains' lock here (and the event writer of `events` takes the same).

use sqlx::SqlitePool;

use super::rows::{
    ArtifactRow, NodeRow, PlacementRow, TokenRowTuple, artifact, event, lease_verdict, node,
    owner_verdict, placement, token,
};
use super::{
    ApprovalState, Artifact, ArtifactKind, ChainRow, ClusterError, ClusterStore, Control, Decision,
    Desired, Lease, LostWorkspace, NewApproval, NodeInfo, NodeRecord, Placement, TokenRow,
    approval_state, backends_text, cluster_record, lost_detail, overdue_reason,
};
use crate::events::{self, EventKind, NewEvent};
use crate::state::{Store, WorkspaceState};

/// The shared state in the local store's database.
#[derive(Clone)]
pub struct SqliteCluster {
    pool: SqlitePool,
}

impl SqliteCluster {
    /// On `store`'s database (its migrations made the tables).
    pub fn new(store: &Store) -> Self {
        Self {
            pool: store.pool().clone(),
        }
    }
}

/// Whether `lease` is its node's current one, inside `tx`; `Fenced` if not.
async fn check_lease(tx: &mut sqlx::SqliteConnection, lease: &Lease) -> Result<(), ClusterError> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT epoch, status FROM nodes WHERE name = ?")
            .bind(&lease.node)
            .fetch_optional(&mut *tx)
            .await?;
    lease_verdict(lease, row)
}

impl ClusterStore for SqliteCluster {
    async fn register_node(&self, info: &NodeInfo, now: i64) -> Result<Lease, ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let epoch: i64 = sqlx::query_scalar(
            "INSERT INTO nodes (name, address, backends, capacity, free, epoch, status, heartbeat_at) \
             VALUES (?, ?, ?, ?, ?, 1, 'up', ?) \
             ON CONFLICT (name) DO UPDATE SET address = excluded.address, \
             backends = excluded.backends, capacity = excluded.capacity, free = excluded.free, \
             epoch = nodes.epoch + 1, status = 'up', heartbeat_at = excluded.heartbeat_at, \
             down_reason = NULL \
             RETURNING epoch",
        )
        .bind(&info.name)
        .bind(&info.address)
        .bind(backends_text(&info.backends))
        .bind(i64::from(info.capacity))
        .bind(i64::from(info.capacity))
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let detail = serde_json::json!({
            "node": info.name, "epoch": epoch, "address": info.address,
            "backends": info.backends, "capacity": info.capacity,
        });
        let record = cluster_record(&event(EventKind::NodeRegister, None, detail), now);
        events::append_in(&mut tx, &record).await?;
        tx.commit().await?;
        Ok(Lease {
            node: info.name.clone(),
            epoch,
        })
    }

    async fn heartbeat(&self, lease: &Lease, free: u32, now: i64) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        check_lease(&mut tx, lease).await?;
        sqlx::query("UPDATE nodes SET free = ?, heartbeat_at = ? WHERE name = ?")
            .bind(i64::from(free))
            .bind(now)
            .bind(&lease.node)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>, ClusterError> {
        let rows: Vec<NodeRow> = sqlx::query_as(
            "SELECT name, address, backends, capacity, free, epoch, status, heartbeat_at, \
             down_reason FROM nodes ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(node).collect()
    }

    async fn sweep(&self, now: i64, deadline_ms: i64) -> Result<Vec<LostWorkspace>, ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let overdue: Vec<(String, i64)> = sqlx::query_as(
            "SELECT name, heartbeat_at FROM nodes WHERE status = 'up' AND heartbeat_at < ? \
             ORDER BY name",
        )
        .bind(now - deadline_ms)
        .fetch_all(&mut *tx)
        .await?;
        let mut lost = Vec::new();
        for (name, heartbeat_at) in overdue {
            let reason = overdue_reason(heartbeat_at, now, deadline_ms);
            sqlx::query("UPDATE nodes SET status = 'down', down_reason = ? WHERE name = ?")
                .bind(&reason)
                .bind(&name)
                .execute(&mut *tx)
                .await?;
            let record = cluster_record(
                &event(EventKind::NodeDown, None, lost_detail(&name, &reason)),
                now,
            );
            events::append_in(&mut tx, &record).await?;
            let ids: Vec<(String,)> = sqlx::query_as(
                "UPDATE placements SET state = 'lost', lost_reason = ?, updated_at = ? \
                 WHERE node = ? AND state NOT IN ('deleted', 'lost') RETURNING id",
            )
            .bind(&reason)
            .bind(now)
            .bind(&name)
            .fetch_all(&mut *tx)
            .await?;
            let mut ids: Vec<String> = ids.into_iter().map(|(id,)| id).collect();
            ids.sort();
            for id in ids {
                let detail = lost_detail(&name, &reason);
                let record =
                    cluster_record(&event(EventKind::WorkspaceLost, Some(&id), detail), now);
                events::append_in(&mut tx, &record).await?;
                lost.push(LostWorkspace {
                    id,
                    node: name.clone(),
                    reason: reason.clone(),
                });
            }
        }
        tx.commit().await?;
        Ok(lost)
    }

    async fn place(&self, lease: &Lease, p: &Placement) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        check_lease(&mut tx, lease).await?;
        sqlx::query(
            "INSERT INTO placements (id, name, backend, state, owner_token, node, node_epoch, \
             desired, lost_reason, error, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)",
        )
        .bind(&p.id)
        .bind(&p.name)
        .bind(&p.backend)
        .bind(p.actual.as_str())
        .bind(&p.owner_token)
        .bind(&lease.node)
        .bind(lease.epoch)
        .bind(p.desired.as_str())
        .bind(p.created_at)
        .bind(p.updated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn report(
        &self,
        lease: &Lease,
        id: &str,
        actual: WorkspaceState,
        error: Option<&str>,
        now: i64,
    ) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        check_lease(&mut tx, lease).await?;
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT node, state FROM placements WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        owner_verdict(lease, id, row)?;
        sqlx::query(
            "UPDATE placements SET state = ?, error = ?, node_epoch = ?, updated_at = ? WHERE id = ?",
        )
        .bind(actual.as_str())
        .bind(error)
        .bind(lease.epoch)
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_desired(&self, id: &str, desired: Desired, now: i64) -> Result<(), ClusterError> {
        let done = sqlx::query("UPDATE placements SET desired = ?, updated_at = ? WHERE id = ?")
            .bind(desired.as_str())
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(ClusterError::UnknownWorkspace(id.to_owned()));
        }
        Ok(())
    }

    async fn placement(&self, id: &str) -> Result<Option<Placement>, ClusterError> {
        let row: Option<PlacementRow> = sqlx::query_as(concat!(
            "SELECT ",
            placement_columns!(),
            " FROM placements WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(placement).transpose()
    }

    async fn placements(&self, node: Option<&str>) -> Result<Vec<Placement>, ClusterError> {
        let rows: Vec<PlacementRow> = sqlx::query_as(concat!(
            "SELECT ",
            placement_columns!(),
            " FROM placements WHERE (? IS NULL OR node = ?) \
             ORDER BY created_at, id"
        ))
        .bind(node)
        .bind(node)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(placement).collect()
    }

    async fn take_control(
        &self,
        workspace: &str,
        holder: &str,
        force: bool,
        now: i64,
    ) -> Result<Control, ClusterError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let current: Option<(String,)> =
            sqlx::query_as("SELECT holder FROM control WHERE workspace = ?")
                .bind(workspace)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some((other,)) = current
            && other != holder
            && !force
        {
            return Ok(Control::HeldBy(other));
        }
        sqlx::query(
            "INSERT INTO control (workspace, holder, since) VALUES (?, ?, ?) \
             ON CONFLICT (workspace) DO UPDATE SET holder = excluded.holder, since = excluded.since",
        )
        .bind(workspace)
        .bind(holder)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Control::Taken)
    }

    async fn release_control(&self, workspace: &str, holder: &str) -> Result<bool, ClusterError> {
        let done = sqlx::query("DELETE FROM control WHERE workspace = ? AND holder = ?")
            .bind(workspace)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn control_holder(&self, workspace: &str) -> Result<Option<String>, ClusterError> {
        Ok(
            sqlx::query_scalar("SELECT holder FROM control WHERE workspace = ?")
                .bind(workspace)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn ask(&self, a: &NewApproval<'_>, now: i64) -> Result<(), ClusterError> {
        sqlx::query(
            "INSERT INTO approvals (id, workspace, state, record, digest, updated_at) \
             VALUES (?, ?, 'pending', ?, ?, ?)",
        )
        .bind(a.id)
        .bind(a.workspace)
        .bind(a.record)
        .bind(a.digest)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        now: i64,
    ) -> Result<Decision, ClusterError> {
        let state = if approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let done = sqlx::query(
            "UPDATE approvals SET state = ?, decided_by = ?, updated_at = ? \
             WHERE id = ? AND state = 'pending'",
        )
        .bind(state.as_str())
        .bind(by)
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let decision = if done.rows_affected() == 1 {
            Decision::Made(state)
        } else {
            let current: Option<String> =
                sqlx::query_scalar("SELECT state FROM approvals WHERE id = ?")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let current = current.ok_or_else(|| ClusterError::UnknownApproval(id.to_owned()))?;
            Decision::Already(approval_state(&current)?)
        };
        tx.commit().await?;
        Ok(decision)
    }

    async fn run_once(&self, id: &str, digest: &str, now: i64) -> Result<bool, ClusterError> {
        let done = sqlx::query(
            "UPDATE approvals SET ran_at = ? \
             WHERE id = ? AND state = 'approved' AND digest = ? AND ran_at IS NULL",
        )
        .bind(now)
        .bind(id)
        .bind(digest)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>, ClusterError> {
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM approvals WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        state.as_deref().map(approval_state).transpose()
    }

    async fn append(&self, event: &NewEvent<'_>) -> Result<(String, u64), ClusterError> {
        let record = cluster_record(event, crate::state::now_ms());
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let seq = events::append_in(&mut tx, &record).await?;
        tx.commit().await?;
        Ok((record.chain, seq))
    }

    async fn chain(
        &self,
        chain: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<ChainRow>, ClusterError> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, hash, sealed FROM events WHERE chain = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(chain)
        .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(seq, hash, sealed)| ChainRow {
                seq: u64::try_from(seq).unwrap_or(0),
                hash,
                sealed,
            })
            .collect())
    }

    async fn put_token(&self, t: &TokenRow) -> Result<(), ClusterError> {
        sqlx::query(
            "INSERT INTO tokens (id, name, role, secret_hash, scope, created_at, expires_at, \
             revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&t.id)
        .bind(&t.name)
        .bind(&t.role)
        .bind(&t.secret_hash)
        .bind(&t.scope)
        .bind(t.created_at)
        .bind(t.expires_at)
        .bind(t.revoked_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token_by_hash(&self, secret_hash: &str) -> Result<Option<TokenRow>, ClusterError> {
        let row: Option<TokenRowTuple> = sqlx::query_as(
            "SELECT id, name, role, secret_hash, scope, created_at, expires_at, revoked_at \
             FROM tokens WHERE secret_hash = ?",
        )
        .bind(secret_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(token))
    }

    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool, ClusterError> {
        let done =
            sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(now)
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn put_artifact(&self, a: &Artifact) -> Result<(), ClusterError> {
        sqlx::query(
            "INSERT INTO artifacts (kind, id, workspace, node, bytes, sha256, at) \
             VALUES (?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (kind, id) DO UPDATE SET workspace = excluded.workspace, \
             node = excluded.node, bytes = excluded.bytes, sha256 = excluded.sha256, at = excluded.at",
        )
        .bind(a.kind.as_str())
        .bind(&a.id)
        .bind(&a.workspace)
        .bind(&a.node)
        .bind(i64::try_from(a.bytes).unwrap_or(i64::MAX))
        .bind(&a.sha256)
        .bind(a.at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn artifacts(
        &self,
        workspace: &str,
        kind: ArtifactKind,
    ) -> Result<Vec<Artifact>, ClusterError> {
        let rows: Vec<ArtifactRow> = sqlx::query_as(
            "SELECT id, workspace, node, bytes, sha256, at FROM artifacts \
             WHERE workspace = ? AND kind = ? ORDER BY at, id",
        )
        .bind(workspace)
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| artifact(kind, row)).collect())
    }
}
