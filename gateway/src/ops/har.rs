//! A workspace's traffic as the egress proxy saw it, as HAR 1.2, from the
//! event log (`cubicle_recorder::har` makes it, and says what it holds; the
//! audit bundle's `traffic.har` is made by the same code from the sealed
//! chain).

use cubicle_recorder::har;
use cubicle_runtime::events;
use serde_json::{Value, json};

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::OpError;
use crate::ops::Core;

/// Events read per page while the HAR is made.
const PAGE: u32 = 1000;

/// Workspace `id`'s HAR: every request its proxy saw, oldest first. For
/// those who may read the event log (operators, auditors, admins); the
/// export is an event.
pub async fn har(core: &Core, ctx: &OpContext, id: &str) -> Result<Value, OpError> {
    access::any_workspace(core, ctx, id, Permission::EventsRead).await?;
    let store = &core.store;
    let run = async {
        let mut entries = Vec::new();
        let mut after = 0;
        loop {
            let page = events::list(store, Some(id), after, PAGE)
                .await
                .map_err(|e| OpError::internal(e.to_string()))?;
            let Some(last) = page.last() else { break };
            after = last.id;
            entries.extend(
                page.iter()
                    .filter(|e| e.kind == EventKind::EgressRequest.as_str())
                    .filter_map(|e| har::entry(("event", e.id), &e.detail)),
            );
        }
        Ok(har::document(id, entries))
    };
    core.audit
        .run(
            ctx,
            EventKind::EventsRead,
            Some(id),
            json!({ "format": "har" }),
            run,
            |doc: &Value| json!({ "entries": doc["log"]["entries"].as_array().map_or(0, Vec::len) }),
        )
        .await
}
