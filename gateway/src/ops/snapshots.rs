//! Workspace snapshots: `POST /v1/workspaces/{id}/snapshot {"name"}` takes
//! one of a running workspace (its user's files in `/home/user` and `/tmp`
//! and its browser profile; the browser closes for a moment and opens
//! again), `POST /v1/workspaces {"from_snapshot": ID, "count": N}` starts N
//! new workspaces from it, `POST /v1/workspaces/{id}/rollback {"snapshot"}`
//! puts one back in place of a running workspace's files and profile.
//!
//! The kind is the host's: `memory` where workspaces are microVMs (the
//! whole machine — RAM, vCPUs, devices, its disk — and every fork goes on
//! from that instant with a fresh identity: see `cubicle_runtime`'s
//! `microvm::snapshot`), `disk` in a jail, whose memory cannot be saved
//! (see [`cubicle_runtime::snapshots`] for why, and what a fork does and
//! does not carry). A snapshot is its maker's: that token lists, uses and
//! removes it, admins list and remove any. Taking, rolling back and removing
//! are the caller's events; putting one into a new workspace is the
//! daemon's, in the new workspace's chain, with the snapshot's digest.

use cubicle_runtime::limits::Limits;
use cubicle_runtime::snapshots::{self, MemoryParts, Row, Taken};
use serde::Serialize;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// Most snapshots one token may keep.
pub const MAX_PER_TOKEN: usize = 50;
/// Most workspaces one create may start from a snapshot.
pub const MAX_FORKS: u32 = 10;

/// A snapshot as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SnapshotView {
    pub id: String,
    pub name: String,
    /// `memory`: a microVM's whole machine (a fork goes on from the
    /// instant it was taken); `disk`: the user's files and the browser
    /// profile, no memory (a fork starts its programs afresh).
    pub kind: String,
    /// The workspace it was taken of (it may be gone since).
    pub workspace_id: String,
    pub backend: String,
    /// The token that made it.
    pub owner_token: String,
    /// The archive of `/home/user` and `/tmp` (gzip'd tar): bytes, SHA-256.
    pub home_size: u64,
    pub home_sha256: String,
    /// The browser profile's archive: bytes, SHA-256.
    pub profile_size: u64,
    pub profile_sha256: String,
    /// SHA-256 naming its parts; every fork's audit chain records it.
    pub sha256: String,
    pub created_at_ms: i64,
    /// A `memory` snapshot's parts (absent for `disk`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineView>,
}

/// The parts of a `memory` snapshot, each named by its SHA-256.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MachineView {
    /// The guest's RAM, bytes: a fork runs with exactly this much.
    pub memory_size: u64,
    /// Bytes of it the guest had written (what the memory file holds).
    pub memory_bytes: u64,
    pub memory_sha256: String,
    /// The VMM's state file (vCPUs, devices, interrupt controllers).
    pub state_sha256: String,
    /// Bytes the guest had written to its root disk.
    pub disk_bytes: u64,
    pub disk_sha256: String,
    pub host_disk_sha256: String,
}

impl From<&MemoryParts> for MachineView {
    fn from(parts: &MemoryParts) -> Self {
        let bytes = |n: i64| u64::try_from(n).unwrap_or_default();
        Self {
            memory_size: bytes(parts.memory_size),
            memory_bytes: bytes(parts.memory_bytes),
            memory_sha256: parts.memory_sha256.clone(),
            state_sha256: parts.state_sha256.clone(),
            disk_bytes: bytes(parts.disk_bytes),
            disk_sha256: parts.disk_sha256.clone(),
            host_disk_sha256: parts.host_disk_sha256.clone(),
        }
    }
}

impl From<&Row> for SnapshotView {
    fn from(row: &Row) -> Self {
        Self {
            id: row.id.clone(),
            name: row.name.clone(),
            kind: row.kind.clone(),
            workspace_id: row.workspace_id.clone(),
            backend: row.backend.clone(),
            owner_token: row.owner_token.clone(),
            home_size: u64::try_from(row.home_size).unwrap_or_default(),
            home_sha256: row.home_sha256.clone(),
            profile_size: u64::try_from(row.profile_size).unwrap_or_default(),
            profile_sha256: row.profile_sha256.clone(),
            sha256: row.sha256.clone(),
            created_at_ms: row.created_at,
            machine: (row.kind == snapshots::MEMORY).then(|| MachineView::from(&row.memory)),
        }
    }
}

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether `ctx` sees and removes every token's snapshots (admins).
fn manages_all(ctx: &OpContext) -> bool {
    super::permission::granted(ctx.token.role, Permission::TokensManage)
}

fn not_found(id: &str) -> OpError {
    OpError::new(
        ErrorKind::NotFound,
        "not_found",
        format!("no snapshot with id {id:?} (GET /v1/snapshots lists yours)"),
    )
}

fn exists(name: &str) -> OpError {
    OpError::new(
        ErrorKind::Conflict,
        "snapshot_exists",
        format!(
            "you already have a snapshot named {name:?}: choose another name, or remove it first (DELETE /v1/snapshots/{{id}})"
        ),
    )
}

/// Snapshot `id` if the caller may use it: its own (an admin: any).
async fn usable(core: &Core, ctx: &OpContext, id: &str) -> Result<Row, OpError> {
    match snapshots::get(&core.store, id).await.map_err(store_error)? {
        Some(row) if manages_all(ctx) || row.owner_token == ctx.token.id => Ok(row),
        _ => Err(not_found(id)),
    }
}

/// The snapshot a create names, checked for the caller.
pub async fn for_create(core: &Core, ctx: &OpContext, id: &str) -> Result<Row, OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    usable(core, ctx, id).await
}

/// Whether a workspace with `limits` can start from `snapshot` on this
/// host: a `memory` snapshot needs microVMs, and runs with exactly the RAM
/// it was taken with (its memory is the machine's).
pub fn fits(core: &Core, snapshot: &Row, limits: &Limits) -> Result<(), OpError> {
    if snapshot.kind != snapshots::MEMORY {
        return Ok(());
    }
    if !core.manager.memory_snapshots() {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "snapshot_kind",
            format!(
                "snapshot {} holds a microVM's memory, and this host runs workspaces in jails, which cannot start from it: use it on a host with the microvm backend",
                snapshot.id
            ),
        ));
    }
    snapshot
        .memory
        .check_ram(&snapshot.id, limits.memory_bytes())
        .map_err(|reason| OpError::bad_request(format!("limits.memory_mb: {reason}")))?;
    Ok(())
}

/// Takes snapshot `name` of running workspace `id` for the caller.
pub async fn take(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    name: &str,
) -> Result<SnapshotView, OpError> {
    let workspace = access::workspace(core, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(core, ctx, id)?;
    let detail = json!({ "name": name });
    let run = async {
        let store = &core.store;
        let name_taken = || async {
            snapshots::find(store, &ctx.token.id, name)
                .await
                .map(|row| row.is_some())
                .map_err(store_error)
        };
        if name_taken().await? {
            return Err(exists(name));
        }
        let rows = snapshots::list(store).await.map_err(store_error)?;
        let theirs = rows
            .iter()
            .filter(|r| r.owner_token == ctx.token.id)
            .count();
        if theirs >= MAX_PER_TOKEN {
            return Err(OpError::new(
                ErrorKind::TooMany,
                "too_many_snapshots",
                format!(
                    "this token keeps {theirs} snapshots, the most one may: remove one (DELETE /v1/snapshots/{{id}})"
                ),
            ));
        }
        let mut raw = [0u8; 6];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut raw);
        let snapshot = format!("snap-{}", hex::encode(raw));
        let taken = core
            .manager
            .take_snapshot(id, &snapshot)
            .await?
            .map_err(|reason| {
                OpError::new(
                    ErrorKind::Unreachable,
                    "snapshot_failed",
                    format!("the snapshot of {id} was not taken (the workspace runs on): {reason}"),
                )
            })?;
        let mut row = Row {
            id: snapshot.clone(),
            owner_token: ctx.token.id.clone(),
            name: name.to_owned(),
            workspace_id: id.to_owned(),
            backend: workspace.backend.clone(),
            kind: snapshots::DISK.into(),
            home_size: 0,
            home_sha256: String::new(),
            profile_size: 0,
            profile_sha256: String::new(),
            sha256: String::new(),
            created_at: cubicle_runtime::state::now_ms(),
            memory: MemoryParts::default(),
        };
        match taken {
            Taken::Disk(archives) => {
                row.home_size = i64::try_from(archives.home_size).unwrap_or(i64::MAX);
                row.profile_size = i64::try_from(archives.profile_size).unwrap_or(i64::MAX);
                row.sha256 = snapshots::digest_of(&archives.home_sha256, &archives.profile_sha256);
                row.home_sha256 = archives.home_sha256;
                row.profile_sha256 = archives.profile_sha256;
            }
            Taken::Memory(parts) => {
                row.kind = snapshots::MEMORY.into();
                row.sha256 = parts.digest();
                row.memory = parts;
            }
        }
        if let Err(err) = snapshots::insert(store, &row).await {
            let _ = core.manager.snapshot_files().remove(&snapshot);
            // Another take of the same name finished first.
            return Err(if name_taken().await? {
                exists(name)
            } else {
                store_error(err)
            });
        }
        Ok(SnapshotView::from(&row))
    };
    core.audit
        .run(
            ctx,
            EventKind::SnapshotCreate,
            Some(id),
            detail,
            run,
            |view| {
                json!({
                    "snapshot": view.id,
                    "kind": view.kind,
                    "sha256": view.sha256,
                    "home_size": view.home_size,
                    "profile_size": view.profile_size,
                    "memory_bytes": view.machine.as_ref().map(|m| m.memory_bytes),
                    "disk_bytes": view.machine.as_ref().map(|m| m.disk_bytes),
                })
            },
        )
        .await
}

/// Puts snapshot `snapshot` back into running workspace `id` in place of
/// its files and browser profile.
pub async fn roll_back(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    snapshot: &str,
) -> Result<SnapshotView, OpError> {
    access::workspace(core, ctx, id, Permission::WorkspacesManage).await?;
    access::lifecycle_held_off(core, ctx, id)?;
    let detail = json!({ "snapshot": snapshot });
    let run = async {
        let row = usable(core, ctx, snapshot).await?;
        core.manager
            .roll_back(id, &row)
            .await?
            .map_err(|reason| {
                OpError::new(
                    ErrorKind::Unreachable,
                    "rollback_failed",
                    format!(
                        "{id} was not rolled back to {snapshot} completely (it runs on; roll back again, or stop it): {reason}"
                    ),
                )
            })?;
        Ok(SnapshotView::from(&row))
    };
    core.audit
        .run(
            ctx,
            EventKind::SnapshotRollback,
            Some(id),
            detail,
            run,
            |view| json!({ "sha256": view.sha256 }),
        )
        .await
}

/// The caller's snapshots (an admin's: everyone's).
pub async fn list(core: &Core, ctx: &OpContext) -> Result<Vec<SnapshotView>, OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let everyone = manages_all(ctx);
    let rows = snapshots::list(&core.store).await.map_err(store_error)?;
    Ok(rows
        .iter()
        .filter(|row| everyone || row.owner_token == ctx.token.id)
        .map(SnapshotView::from)
        .collect())
}

pub async fn get(core: &Core, ctx: &OpContext, id: &str) -> Result<SnapshotView, OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    Ok(SnapshotView::from(&usable(core, ctx, id).await?))
}

/// Removes a snapshot and its archives; workspaces started from it keep
/// what it gave them.
pub async fn delete(core: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let row = usable(core, ctx, id).await?;
    let detail = json!({ "snapshot": row.id, "name": row.name, "sha256": row.sha256 });
    let run = async {
        if !snapshots::delete(&core.store, id)
            .await
            .map_err(store_error)?
        {
            return Err(not_found(id));
        }
        core.manager
            .snapshot_files()
            .remove(id)
            .map_err(|err| OpError::internal(format!("cannot remove the archives: {err}")))
    };
    core.audit
        .run(ctx, EventKind::SnapshotDelete, None, detail, run, |_| {
            json!({})
        })
        .await
}
