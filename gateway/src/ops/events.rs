//! Reading the event log: what auditors, operators and admins page through.
//! A scoped caller sees only the events of workspaces it may see.

use std::collections::HashSet;

use cubicle_runtime::events::{self, Event};

use super::{OpContext, Permission, access};
use crate::error::OpError;
use crate::ops::Core;

/// Most events one page returns.
pub const MAX_LIMIT: u32 = 1000;

/// Whether the caller's role may read events at all: doors ask this before they
/// read the request, so a caller without the role gets 403, never a 400
/// about a body it may not send. The operation checks it again, with the
/// workspace's scope.
pub fn may_list(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::EventsRead)
}

/// One page of the log: `limit` events after id `after`, of `workspace`
/// (deleted ones included: their history is what auditors read) or of
/// every workspace the caller may see.
pub async fn list(
    state: &Core,
    ctx: &OpContext,
    workspace: Option<&str>,
    after: i64,
    limit: u32,
) -> Result<Vec<Event>, OpError> {
    ctx.require(Permission::EventsRead)?;
    if limit == 0 || limit > MAX_LIMIT {
        return Err(OpError::bad_request(format!(
            "limit must be 1..={MAX_LIMIT}, got {limit}"
        )));
    }
    if let Some(id) = workspace {
        access::any_workspace(state, ctx, id, Permission::EventsRead).await?;
    }
    let mut events = events::list(&state.store, workspace, after, limit)
        .await
        .map_err(|e| OpError::internal(e.to_string()))?;
    if !ctx.sees_all() {
        let visible: HashSet<String> = state
            .manager
            .store()
            .list_all()
            .await
            .map_err(|e| OpError::internal(e.to_string()))?
            .into_iter()
            .filter(|ws| ctx.sees(ws))
            .map(|ws| ws.id)
            .collect();
        events.retain(|e| {
            e.workspace_id
                .as_ref()
                .is_some_and(|id| visible.contains(id))
        });
    }
    Ok(events)
}
