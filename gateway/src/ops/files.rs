//! Files in a workspace: reads and listings (any caller with
//! `files_read`), writes and deletes (with `files_write`, under the control
//! lock). Each is an event; a write keeps the path, size and SHA-256.

use cubicle_image::control::{DirListing, FileInfo};
use cubicle_runtime::guest_ops::FileChunk;
use serde_json::json;

use super::audit::{EventKind, digest};
use super::{OpContext, Permission, access, gates};
use crate::error::OpError;
use crate::ops::Core;

/// The one spelling of a path that is judged, approved and sent to the
/// guest (`//`, `/./` folded; `..` and relative paths refused with a 400),
/// so the path a rule sees is the path the guest opens. The guest does
/// not follow symbolic links on writes and deletes (it refuses them and
/// names where they lead), so a link cannot take a write past a rule.
fn judged_path(path: &str) -> Result<String, OpError> {
    cubicle_image::control::normalise_path("path", path)
        .map(|clean| clean.display().to_string())
        .map_err(|invalid| {
            // The same answer the guest gives (`bad_path`, `not_absolute`).
            OpError::from(cubicle_runtime::guest_ops::GuestOpError::from(invalid))
        })
}

/// Whether the caller's role may read files at all: the door asks before it
/// reads the request, so a caller without the role gets 403, never a 400
/// about a request it may not send. The operation checks it again, with
/// the workspace's scope.
pub fn may_read(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::FilesRead)
}

/// Whether the caller's role may write or delete files at all: the door asks before it
/// reads the request, so a caller without the role gets 403, never a 400
/// about a request it may not send. The operation checks it again, with
/// the workspace's scope.
pub fn may_write(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::FilesWrite)
}

pub async fn read(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    path: &str,
    offset: u64,
    length: Option<u64>,
) -> Result<FileChunk, OpError> {
    let channel = access::guest(state, ctx, id, Permission::FilesRead).await?;
    let detail = json!({ "path": path, "offset": offset, "length": length });
    let run = async {
        let chunk = channel.read_file(path, offset, length).await?;
        Ok(chunk)
    };
    let summary = |chunk: &FileChunk| json!({ "bytes": chunk.bytes.len(), "size": chunk.size });
    let kind = EventKind::FileRead;
    state
        .audit
        .run(ctx, kind, Some(id), detail, run, summary)
        .await
}

pub async fn list(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    path: &str,
) -> Result<DirListing, OpError> {
    let channel = access::guest(state, ctx, id, Permission::FilesRead).await?;
    let run = async { Ok(channel.list_dir(path).await?) };
    let kind = EventKind::FileList;
    state
        .audit
        .run(ctx, kind, Some(id), json!({ "path": path }), run, |_| {
            json!({})
        })
        .await
}

pub async fn stat(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    path: &str,
) -> Result<FileInfo, OpError> {
    let channel = access::guest(state, ctx, id, Permission::FilesRead).await?;
    let run = async { Ok(channel.stat(path).await?) };
    let detail = json!({ "path": path, "stat": true });
    let kind = EventKind::FileList;
    state
        .audit
        .run(ctx, kind, Some(id), detail, run, |_| json!({}))
        .await
}

pub async fn write(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    path: &str,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<FileInfo, OpError> {
    let channel = access::guest(state, ctx, id, Permission::FilesWrite).await?;
    access::agent_held_off(state, ctx, id)?;
    let path = &judged_path(path)?;
    let detail = json!({ "path": path, "mode": mode, "content": digest(bytes) });
    let gated = gates::Gated {
        operation: "file.write",
        subject: cubicle_policy::Subject::FileWrite {
            path: path.to_owned(),
        },
        params: detail.clone(),
        shown: detail.clone(),
        lock: gates::Lock::Change,
    };
    gates::check(state, ctx, id, gated).await?;
    let run = async { Ok(channel.write_file(path, bytes, mode).await?) };
    let kind = EventKind::FileWrite;
    state
        .audit
        .run(
            ctx,
            kind,
            Some(id),
            detail,
            run,
            |info: &FileInfo| json!({ "mode": info.mode }),
        )
        .await
}

pub async fn delete(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    path: &str,
    recursive: bool,
) -> Result<FileInfo, OpError> {
    let channel = access::guest(state, ctx, id, Permission::FilesWrite).await?;
    access::agent_held_off(state, ctx, id)?;
    let path = &judged_path(path)?;
    let detail = json!({ "path": path, "recursive": recursive });
    let gated = gates::Gated {
        operation: "file.delete",
        subject: cubicle_policy::Subject::FileDelete {
            path: path.to_owned(),
        },
        params: detail.clone(),
        shown: detail.clone(),
        lock: gates::Lock::Change,
    };
    gates::check(state, ctx, id, gated).await?;
    let run = async { Ok(channel.delete(path, recursive).await?) };
    let kind = EventKind::FileDelete;
    state
        .audit
        .run(ctx, kind, Some(id), detail, run, |_| json!({}))
        .await
}
