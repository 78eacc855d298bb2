//! What both stores share of reading rows and judging them: the row
//! shapes their queries return, and the verdicts on a lease and on a
//! report, so that the two say the same in the same case.

use super::{
    Actual, Artifact, ArtifactKind, ClusterError, Desired, Lease, NodeRecord, NodeStatus,
    Placement, TokenRow, backends_list, count,
};
use crate::events::{EventKind, NewEvent};

/// A row of `placements`, in `placement_columns!` order.
pub(super) type PlacementRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    i64,
    i64,
);

pub(super) fn placement(row: PlacementRow) -> Result<Placement, ClusterError> {
    let (id, name, backend, state, owner, node, epoch, desired, lost, error, created, updated) =
        row;
    Ok(Placement {
        id,
        name,
        backend,
        owner_token: owner,
        node,
        node_epoch: epoch,
        desired: Desired::parse(&desired)?,
        actual: Actual::parse(&state)?,
        lost_reason: lost,
        error,
        created_at: created,
        updated_at: updated,
    })
}

pub(super) type NodeRow = (
    String,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    i64,
    Option<String>,
);

pub(super) fn node(row: NodeRow) -> Result<NodeRecord, ClusterError> {
    let (name, address, backends, capacity, free, epoch, status, heartbeat_at, down_reason) = row;
    Ok(NodeRecord {
        name,
        address,
        backends: backends_list(&backends),
        capacity: count(capacity),
        free: count(free),
        epoch,
        status: match status.as_str() {
            "up" => NodeStatus::Up,
            "down" => NodeStatus::Down,
            _ => {
                return Err(ClusterError::BadRow {
                    what: "node status",
                    value: status,
                });
            }
        },
        heartbeat_at,
        down_reason,
    })
}

pub(super) type TokenRowTuple = (
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<i64>,
);

pub(super) fn token(row: TokenRowTuple) -> TokenRow {
    let (id, name, role, secret_hash, scope, created_at, expires_at, revoked_at) = row;
    TokenRow {
        id,
        name,
        role,
        secret_hash,
        scope,
        created_at,
        expires_at,
        revoked_at,
    }
}

pub(super) fn event<'a>(
    kind: EventKind,
    workspace: Option<&'a str>,
    detail: serde_json::Value,
) -> NewEvent<'a> {
    NewEvent {
        kind,
        workspace_id: workspace,
        detail,
        ..NewEvent::default()
    }
}

/// A row of `artifacts` (id, workspace, node, bytes, sha256, at).
pub(super) type ArtifactRow = (String, String, String, i64, String, i64);

pub(super) fn artifact(kind: ArtifactKind, row: ArtifactRow) -> Artifact {
    let (id, workspace, node, bytes, sha256, at) = row;
    Artifact {
        kind,
        id,
        workspace,
        node,
        bytes: u64::try_from(bytes).unwrap_or(0),
        sha256,
        at,
    }
}

/// Whether `lease` is its node's current one, given the node's row
/// (epoch, status); `Fenced` (or unknown) if not.
pub(super) fn lease_verdict(lease: &Lease, row: Option<(i64, String)>) -> Result<(), ClusterError> {
    let why = match row {
        None => return Err(ClusterError::UnknownNode(lease.node.clone())),
        Some((epoch, _)) if epoch != lease.epoch => {
            format!("the node registered again, with epoch {epoch}")
        }
        Some((_, status)) if status != "up" => "the node was declared down".to_owned(),
        Some(_) => return Ok(()),
    };
    Err(ClusterError::Fenced {
        node: lease.node.clone(),
        epoch: lease.epoch,
        why,
    })
}

/// Whether the lease's node may report on workspace `id`, given its row
/// (node, state): its own and not lost.
pub(super) fn owner_verdict(
    lease: &Lease,
    id: &str,
    row: Option<(String, String)>,
) -> Result<(), ClusterError> {
    match row {
        None => Err(ClusterError::UnknownWorkspace(id.to_owned())),
        Some((owner, _)) if owner != lease.node => Err(ClusterError::NotOwner {
            id: id.to_owned(),
            owner,
            node: lease.node.clone(),
        }),
        Some((_, state)) if state == "lost" => Err(ClusterError::Fenced {
            node: lease.node.clone(),
            epoch: lease.epoch,
            why: format!("workspace {id} was declared lost"),
        }),
        Some(_) => Ok(()),
    }
}
