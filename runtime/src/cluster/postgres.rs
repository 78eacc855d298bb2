//! [`ClusterStore`] on PostgreSQL: the store nodes and edges on many hosts
//! share. Its own migrations (`migrations-postgres/`). Every method is one
//! transaction at READ COMMITTED; what must not interleave takes a row lock:
//! an append locks its chain's head row (`FOR UPDATE`) to take the next
//! seq, a node's writes lock its node row (`FOR SHARE`, so a sweep that
//! declares it down waits for them, and they for it), a sweep locks the
//! nodes it declares down.

use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};

use super::rows::{
    ArtifactRow, NodeRow, PlacementRow, TokenRowTuple, artifact, event, lease_verdict, node,
    owner_verdict, placement, token,
};
use super::{
    ApprovalState, Artifact, ArtifactKind, ChainRow, ClusterError, ClusterStore, Control, Decision,
    Desired, Lease, LostWorkspace, NewApproval, NodeInfo, NodeRecord, Placement, TokenRow,
    approval_state, backends_text, cluster_record, lost_detail, overdue_reason,
};
use cubicle_recorder::audit_chain::{self, Record};

use crate::events::{EventKind, NewEvent};
use crate::state::WorkspaceState;

/// The shared state in a PostgreSQL database.
#[derive(Clone)]
pub struct PgCluster {
    pool: PgPool,
}

impl PgCluster {
    /// Connects to `url` (`postgres://…`) and migrates the database.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, ClusterError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url)
            .await
            .map_err(|source| ClusterError::Connect {
                url: redacted(url),
                source,
            })?;
        sqlx::migrate!("./migrations-postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// `url` without its password, for an error message.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user_pass = &url[scheme + 3..at];
            let user = user_pass.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Whether `lease` is its node's current one, inside `tx`; `Fenced` if not.
async fn check_lease(tx: &mut PgConnection, lease: &Lease) -> Result<(), ClusterError> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT epoch, status FROM nodes WHERE name = $1 FOR SHARE")
            .bind(&lease.node)
            .fetch_optional(&mut *tx)
            .await?;
    lease_verdict(lease, row)
}

impl ClusterStore for PgCluster {
    async fn register_node(&self, info: &NodeInfo, now: i64) -> Result<Lease, ClusterError> {
        let mut tx = self.pool.begin().await?;
        let epoch: i64 = sqlx::query_scalar(
            "INSERT INTO nodes (name, address, backends, capacity, free, epoch, status, heartbeat_at) \
             VALUES ($1, $2, $3, $4, $5, 1, 'up', $6) \
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
        append_in(&mut tx, &record).await?;
        tx.commit().await?;
        Ok(Lease {
            node: info.name.clone(),
            epoch,
        })
    }

    async fn heartbeat(&self, lease: &Lease, free: u32, now: i64) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin().await?;
        check_lease(&mut tx, lease).await?;
        sqlx::query("UPDATE nodes SET free = $1, heartbeat_at = $2 WHERE name = $3")
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
        let mut tx = self.pool.begin().await?;
        let overdue: Vec<(String, i64)> = sqlx::query_as(
            "SELECT name, heartbeat_at FROM nodes WHERE status = 'up' AND heartbeat_at < $1 \
             ORDER BY name FOR UPDATE",
        )
        .bind(now - deadline_ms)
        .fetch_all(&mut *tx)
        .await?;
        let mut lost = Vec::new();
        for (name, heartbeat_at) in overdue {
            let reason = overdue_reason(heartbeat_at, now, deadline_ms);
            sqlx::query("UPDATE nodes SET status = 'down', down_reason = $1 WHERE name = $2")
                .bind(&reason)
                .bind(&name)
                .execute(&mut *tx)
                .await?;
            let record = cluster_record(
                &event(EventKind::NodeDown, None, lost_detail(&name, &reason)),
                now,
            );
            append_in(&mut tx, &record).await?;
            let ids: Vec<(String,)> = sqlx::query_as(
                "UPDATE placements SET state = 'lost', lost_reason = $1, updated_at = $2 \
                 WHERE node = $3 AND state NOT IN ('deleted', 'lost') RETURNING id",
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
                append_in(&mut tx, &record).await?;
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
        let mut tx = self.pool.begin().await?;
        check_lease(&mut tx, lease).await?;
        sqlx::query(
            "INSERT INTO placements (id, name, backend, state, owner_token, node, node_epoch, \
             desired, lost_reason, error, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, NULL, $9, $10)",
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
        let mut tx = self.pool.begin().await?;
        check_lease(&mut tx, lease).await?;
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT node, state FROM placements WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        owner_verdict(lease, id, row)?;
        sqlx::query(
            "UPDATE placements SET state = $1, error = $2, node_epoch = $3, updated_at = $4 WHERE id = $5",
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
        let done = sqlx::query("UPDATE placements SET desired = $1, updated_at = $2 WHERE id = $3")
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
            " FROM placements WHERE id = $1"
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
            " FROM placements WHERE ($1 IS NULL OR node = $2) \
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
        // One statement decides, so two edges taking at once cannot both
        // win: the upsert changes the row only for its holder (or by
        // force). If it did not, someone else held it; that holder may let
        // go before we read it, and then we try again.
        for _ in 0..8 {
            let taken: Option<String> = sqlx::query_scalar(
                "INSERT INTO control (workspace, holder, since) VALUES ($1, $2, $3) \
                 ON CONFLICT (workspace) DO UPDATE SET holder = excluded.holder, \
                 since = excluded.since WHERE control.holder = excluded.holder OR $4 \
                 RETURNING holder",
            )
            .bind(workspace)
            .bind(holder)
            .bind(now)
            .bind(force)
            .fetch_optional(&self.pool)
            .await?;
            if taken.is_some() {
                return Ok(Control::Taken);
            }
            let other: Option<String> =
                sqlx::query_scalar("SELECT holder FROM control WHERE workspace = $1")
                    .bind(workspace)
                    .fetch_optional(&self.pool)
                    .await?;
            if let Some(other) = other {
                return Ok(Control::HeldBy(other));
            }
        }
        Err(ClusterError::Contended(format!(
            "control of workspace {workspace} changed hands eight times while {holder} asked for it"
        )))
    }

    async fn release_control(&self, workspace: &str, holder: &str) -> Result<bool, ClusterError> {
        let done = sqlx::query("DELETE FROM control WHERE workspace = $1 AND holder = $2")
            .bind(workspace)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn control_holder(&self, workspace: &str) -> Result<Option<String>, ClusterError> {
        Ok(
            sqlx::query_scalar("SELECT holder FROM control WHERE workspace = $1")
                .bind(workspace)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn ask(&self, a: &NewApproval<'_>, now: i64) -> Result<(), ClusterError> {
        sqlx::query(
            "INSERT INTO approvals (id, workspace, state, record, digest, updated_at) \
             VALUES ($1, $2, 'pending', $3, $4, $5)",
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
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE approvals SET state = $1, decided_by = $2, updated_at = $3 \
             WHERE id = $4 AND state = 'pending'",
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
                sqlx::query_scalar("SELECT state FROM approvals WHERE id = $1")
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
            "UPDATE approvals SET ran_at = $1 \
             WHERE id = $2 AND state = 'approved' AND digest = $3 AND ran_at IS NULL",
        )
        .bind(now)
        .bind(id)
        .bind(digest)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>, ClusterError> {
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM approvals WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        state.as_deref().map(approval_state).transpose()
    }

    async fn append(&self, event: &NewEvent<'_>) -> Result<(String, u64), ClusterError> {
        let record = cluster_record(event, crate::state::now_ms());
        let mut tx = self.pool.begin().await?;
        let seq = append_in(&mut tx, &record).await?;
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
            "SELECT seq, hash, sealed FROM events WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3",
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
             revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
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
             FROM tokens WHERE secret_hash = $1",
        )
        .bind(secret_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(token))
    }

    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool, ClusterError> {
        let done =
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                .bind(now)
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn put_artifact(&self, a: &Artifact) -> Result<(), ClusterError> {
        sqlx::query(
            "INSERT INTO artifacts (kind, id, workspace, node, bytes, sha256, at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
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
             WHERE workspace = $1 AND kind = $2 ORDER BY at, id",
        )
        .bind(workspace)
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| artifact(kind, row)).collect())
    }
}

/// Seals `record` as the next of its chain inside `tx`: takes the chain's
/// head row (made at seq 0, the genesis hash, for a new chain) with
/// `FOR UPDATE`, so every other append to the chain, on any host, waits
/// for this transaction; inserts the record and moves the head.
async fn append_in(tx: &mut PgConnection, record: &Record) -> Result<u64, ClusterError> {
    let chain = record.chain.as_str();
    sqlx::query(
        "INSERT INTO chain_heads (chain, seq, hash, at) VALUES ($1, 0, $2, 0) \
         ON CONFLICT (chain) DO NOTHING",
    )
    .bind(chain)
    .bind(hex::encode(audit_chain::genesis(chain)))
    .execute(&mut *tx)
    .await?;
    let (seq, hash): (i64, String) =
        sqlx::query_as("SELECT seq, hash FROM chain_heads WHERE chain = $1 FOR UPDATE")
            .bind(chain)
            .fetch_one(&mut *tx)
            .await?;
    let unsealable = |reason: String| ClusterError::Chain {
        chain: chain.to_owned(),
        reason,
    };
    let prev =
        audit_chain::parse_hash("chain head", &hash).map_err(|e| unsealable(e.to_string()))?;
    let seq = u64::try_from(seq).map_err(|_| unsealable(format!("its head has seq {seq}")))? + 1;
    let sealed = record
        .clone()
        .seal(seq, &prev)
        .map_err(|e| unsealable(e.to_string()))?;
    let actor = record.actor.as_ref();
    sqlx::query(
        "INSERT INTO events (at, kind, workspace_id, actor_id, actor_name, actor_role, detail, \
         request_id, client, outcome, chain, seq, hash, sealed) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(record.at)
    .bind(&record.kind)
    .bind(&record.workspace)
    .bind(actor.map(|a| a.id.as_str()))
    .bind(actor.map(|a| a.name.as_str()))
    .bind(actor.map(|a| a.role.as_str()))
    .bind(record.detail.to_string())
    .bind(&record.request_id)
    .bind(&record.client)
    .bind(&record.outcome)
    .bind(chain)
    .bind(seq as i64)
    .bind(hex::encode(sealed.hash))
    .bind(&sealed.bytes)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE chain_heads SET seq = $1, hash = $2, at = $3 WHERE chain = $4")
        .bind(seq as i64)
        .bind(hex::encode(sealed.hash))
        .bind(record.at)
        .bind(chain)
        .execute(&mut *tx)
        .await?;
    Ok(seq)
}
