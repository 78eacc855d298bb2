//! Downloads held in quarantine: list and read the records (auditors,
//! operators, admins, and agents for their own workspaces), fetch the
//! content (operators and admins only), release into the workspace's
//! `~/Downloads` under the cleaned name and never executable, or reject
//! (the content goes unless another record still holds the same bytes).
//! Each is an event.
//!
//! `~/Downloads` is the workspace's own: a release refuses it when it is a
//! symlink or not a directory (the bytes would land elsewhere than the
//! path reported), and checks after writing that the folder is still a
//! real one and the file there has the bytes' size; the recorded path is
//! then where they are. (The files service follows links as the workspace
//! user, so a workspace that swaps the folder mid-release can steer the
//! bytes to another place it can write — a place its own shell could copy
//! them to anyway; the check then fails the release instead of reporting a
//! wrong path.)

use std::collections::HashMap;
use std::path::PathBuf;

use cubicle_image::control::{ExecRequest, MAX_FILE};
use cubicle_runtime::quarantine::records::{self, DownloadRecord, DownloadState};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// Where released files go in the workspace.
pub const DOWNLOADS_DIR: &str = "/home/user/Downloads";
/// Mode of a released file: never executable.
const RELEASED_MODE: u32 = 0o644;

fn not_found(id: &str) -> OpError {
    OpError::new(
        ErrorKind::NotFound,
        "not_found",
        format!("no download {id}"),
    )
}

fn internal(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether the caller may see downloads of `workspace` (deleted ones too).
async fn sees(state: &Core, ctx: &OpContext, workspace: &str) -> Result<bool, OpError> {
    Ok(
        matches!(state.store.get(workspace).await.map_err(internal)?, Some(record) if ctx.sees(&record)),
    )
}

/// The record `id`, if the caller has `permission` and may see its
/// workspace (else 404, as if it did not exist).
async fn visible(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    permission: Permission,
) -> Result<DownloadRecord, OpError> {
    ctx.require(permission)?;
    let record = records::get(&state.store, id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(id))?;
    if !sees(state, ctx, &record.workspace_id).await? {
        return Err(not_found(id));
    }
    Ok(record)
}

/// The records the caller may see, newest first.
pub async fn list(
    state: &Core,
    ctx: &OpContext,
    workspace: Option<&str>,
    held_state: Option<DownloadState>,
) -> Result<Vec<DownloadRecord>, OpError> {
    ctx.require(Permission::DownloadsRead)?;
    if let Some(ws) = workspace {
        // Outside the caller's scope reads exactly as unknown.
        super::access::any_workspace(state, ctx, ws, Permission::DownloadsRead).await?;
    }
    let detail = json!({ "workspace": workspace, "state": held_state.map(DownloadState::as_str) });
    let run = async {
        let all = records::list(&state.store, workspace, held_state)
            .await
            .map_err(internal)?;
        let mut seen: HashMap<String, bool> = HashMap::new();
        let mut out = Vec::new();
        for record in all {
            let visible = match seen.get(&record.workspace_id) {
                Some(v) => *v,
                None => {
                    let v = sees(state, ctx, &record.workspace_id).await?;
                    seen.insert(record.workspace_id.clone(), v);
                    v
                }
            };
            if visible {
                out.push(record);
            }
        }
        Ok(out)
    };
    state
        .audit
        .run(
            ctx,
            EventKind::DownloadList,
            workspace,
            detail,
            run,
            |list: &Vec<DownloadRecord>| json!({ "count": list.len() }),
        )
        .await
}

pub async fn get(state: &Core, ctx: &OpContext, id: &str) -> Result<DownloadRecord, OpError> {
    visible(state, ctx, id, Permission::DownloadsRead).await
}

/// The file held for `id`, to be served as an attachment.
pub async fn content(
    state: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<(DownloadRecord, PathBuf), OpError> {
    let record = visible(state, ctx, id, Permission::DownloadsContent).await?;
    let path = state
        .egress
        .quarantine()
        .and_then(|q| q.content_path(&record.sha256))
        .filter(|p| p.exists())
        .ok_or_else(|| {
            OpError::new(
                ErrorKind::Gone,
                "content_gone",
                format!(
                    "the content of {id} is no longer kept (it was {})",
                    record.state.as_str()
                ),
            )
        })?;
    let detail = json!({ "download": id, "sha256": record.sha256, "size": record.size });
    let ws = record.workspace_id.clone();
    state
        .audit
        .run(
            ctx,
            EventKind::DownloadContent,
            Some(&ws),
            detail,
            async { Ok(()) },
            |_| json!({}),
        )
        .await?;
    Ok((record, path))
}

fn conflict(record: &DownloadRecord) -> OpError {
    OpError::new(
        ErrorKind::Conflict,
        "already_decided",
        format!(
            "download {} was already {} by {}",
            record.id,
            record.state.as_str(),
            record.decided_by.as_deref().unwrap_or("someone")
        ),
    )
}

/// `name`, or `stem (n).ext`, whichever does not exist yet in the folder.
async fn free_name(
    channel: &cubicle_runtime::channel::GuestChannel,
    name: &str,
) -> Result<String, OpError> {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    for n in 0..100 {
        let candidate = if n == 0 {
            name.to_owned()
        } else {
            format!("{stem} ({n}){ext}")
        };
        let path = format!("{DOWNLOADS_DIR}/{candidate}");
        if channel.stat(&path).await.is_err() {
            return Ok(path);
        }
    }
    Err(OpError::new(
        ErrorKind::Conflict,
        "name_taken",
        format!("{DOWNLOADS_DIR} already has 100 files named like {name}"),
    ))
}

/// Whether the caller's role may release or reject held downloads at all: doors ask this before they
/// read the request, so a caller without the role gets 403, never a 400
/// about a body it may not send. The operation checks it again, with the
/// workspace's scope.
pub fn may_decide(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::DownloadsDecide)
}

/// Writes the file into the workspace and marks it released.
pub async fn release(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    reason: Option<&str>,
) -> Result<DownloadRecord, OpError> {
    let record = visible(state, ctx, id, Permission::DownloadsDecide).await?;
    if record.state != DownloadState::Held {
        return Err(conflict(&record));
    }
    let channel = access::guest(
        state,
        ctx,
        &record.workspace_id,
        Permission::DownloadsDecide,
    )
    .await?;
    super::gates::check(state, ctx, &record.workspace_id, release_gated(&record)).await?;
    let detail = json!({
        "download": id, "name": record.name, "sha256": record.sha256,
        "size": record.size, "hits": record.hits, "reason": reason,
    });
    let ws = record.workspace_id.clone();
    let by = ctx.token.id.clone();
    let run = deliver(state, &channel, &record, &by, reason);
    state
        .audit
        .run(
            ctx,
            EventKind::DownloadRelease,
            Some(&ws),
            detail,
            run,
            |r: &DownloadRecord| json!({ "path": r.released_path }),
        )
        .await
}

/// What the policy judges of a release (`download.release`: the cleaned
/// name and the type sniffed from the bytes, never the one the server
/// claimed) and what an approval of it is bound to (the exact bytes).
fn release_gated(record: &DownloadRecord) -> super::gates::Gated {
    let media_type = record
        .sniffed_type
        .clone()
        .unwrap_or_else(|| "application/octet-stream".into());
    let bound = json!({
        "download": record.id, "name": record.name, "sha256": record.sha256,
        "size": record.size, "media_type": media_type, "hits": record.hits.len(),
    });
    super::gates::Gated {
        operation: "download.release",
        subject: cubicle_policy::Subject::DownloadRelease {
            name: record.name.clone(),
            media_type,
        },
        params: bound.clone(),
        shown: bound,
        lock: super::gates::Lock::Read,
    }
}

/// `~/Downloads` is a directory, not a symlink or anything else (absent is
/// fine before the release: it is made).
async fn downloads_dir_is_real(
    channel: &cubicle_runtime::channel::GuestChannel,
    absent_ok: bool,
) -> Result<(), OpError> {
    use cubicle_image::control::FileKind;
    let refused = |what: String| {
        OpError::new(
            ErrorKind::Conflict,
            "downloads_not_a_folder",
            format!(
                "{DOWNLOADS_DIR} {what}, so a release would not land where it says;                  make it a plain folder in the workspace (rm {DOWNLOADS_DIR}; mkdir {DOWNLOADS_DIR}) and release again"
            ),
        )
    };
    match channel.stat(DOWNLOADS_DIR).await {
        Ok(info) => match info.kind {
            FileKind::Dir => Ok(()),
            FileKind::Symlink => Err(refused(format!(
                "is a symlink (to {})",
                info.link_target.as_deref().unwrap_or("somewhere")
            ))),
            FileKind::File | FileKind::Other => Err(refused("is not a folder".into())),
        },
        Err(_) if absent_ok => Ok(()),
        Err(err) => Err(refused(format!("cannot be read ({err})"))),
    }
}

/// Writes a held download into its workspace's `~/Downloads` (cleaned
/// name, never executable) and marks it released by `by`.
async fn deliver(
    state: &Core,
    channel: &cubicle_runtime::channel::GuestChannel,
    record: &DownloadRecord,
    by: &str,
    reason: Option<&str>,
) -> Result<DownloadRecord, OpError> {
    let source = state
        .egress
        .quarantine()
        .and_then(|q| q.content_path(&record.sha256))
        .ok_or_else(|| internal("the quarantine store is not configured"))?;
    downloads_dir_is_real(channel, true).await?;
    let mkdir = ExecRequest {
        argv: vec!["mkdir".into(), "-p".into(), DOWNLOADS_DIR.into()],
        ..ExecRequest::default()
    };
    let made = channel.exec(&mkdir).await?;
    if made.exit.exit_code != Some(0) {
        return Err(OpError::new(
            ErrorKind::Unreachable,
            "guest_error",
            format!(
                "cannot make {DOWNLOADS_DIR}: {}",
                String::from_utf8_lossy(&made.stderr)
            ),
        ));
    }
    downloads_dir_is_real(channel, false).await?;
    let path = free_name(channel, &record.name).await?;
    // In pieces the guest channel takes: the first makes the file (0644),
    // the rest are appended.
    let mut file = tokio::fs::File::open(&source).await.map_err(internal)?;
    let mut piece = vec![0u8; MAX_FILE as usize];
    let mut first = true;
    loop {
        let mut filled = 0;
        while filled < piece.len() {
            let n = file.read(&mut piece[filled..]).await.map_err(internal)?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if first {
            channel
                .write_file(&path, &piece[..filled], Some(RELEASED_MODE))
                .await?;
            first = false;
        } else if filled > 0 {
            channel.append_file(&path, &piece[..filled]).await?;
        }
        if filled < piece.len() {
            break;
        }
    }
    // Where the bytes are: the folder is still a real one, and the file in
    // it is a regular file of their size.
    downloads_dir_is_real(channel, false).await?;
    let written = channel.stat(&path).await?;
    if written.kind != cubicle_image::control::FileKind::File || written.size != record.size {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "release_not_verified",
            format!(
                "{path} is not the {} bytes released (it is a {:?} of {} bytes): the workspace changed it during the release; the download stays held",
                record.size, written.kind, written.size
            ),
        ));
    }
    if !records::decide(
        &state.store,
        &record.id,
        DownloadState::Released,
        by,
        reason,
        Some(&path),
    )
    .await
    .map_err(internal)?
    {
        let now = records::get(&state.store, &record.id)
            .await
            .map_err(internal)?;
        return Err(conflict(now.as_ref().unwrap_or(record)));
    }
    records::get(&state.store, &record.id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(&record.id))
}

/// Releases `id` without an operator when its workspace's policy lists its
/// sniffed type and no rule matched (an event either way).
pub async fn auto_release(state: &Core, workspace: &str, id: &str) {
    let Ok(Some(record)) = records::get(&state.store, id).await else {
        return;
    };
    let Ok(view) = state.egress.policy_of(workspace).await else {
        return;
    };
    let listed = record
        .sniffed_type
        .as_ref()
        .is_some_and(|t| view.policy.auto_release.iter().any(|a| a == t));
    if record.state != DownloadState::Held || !record.hits.is_empty() || !listed {
        return;
    }
    // The workspace's policy has the last word: only what it allows goes
    // in without a person (a `confirm` or `deny` rule keeps it held).
    let Ok(policy) = state.gates.policy_of(&state.store, workspace).await else {
        return;
    };
    let judged = release_gated(&record);
    let outcome = policy.evaluate(&judged.subject, &cubicle_policy::Context::default());
    if outcome.decision != cubicle_policy::Decision::Allow {
        let detail = json!({ "download": id, "auto": true, "held_by": outcome.rule,
                             "reason": outcome.reason, "media_type": judged.params["media_type"] });
        let noted = state
            .audit
            .note(
                None,
                EventKind::DownloadRelease,
                Some(workspace),
                detail,
                Some("held"),
            )
            .await;
        if let Err(err) = noted {
            tracing::error!(workspace, err = %err.message, "cannot record a held automatic release");
        }
        return;
    }
    let Ok(ws) = state.manager.running(workspace).await else {
        return;
    };
    let channel = cubicle_runtime::backend::Backend::channel(
        state.manager.backend(),
        &state.manager.spec(&ws),
    );
    let reason = "clean, and of a type the workspace's policy releases";
    let result = deliver(state, &channel, &record, "policy", Some(reason)).await;
    let (detail, outcome) = match &result {
        Ok(done) => (
            json!({ "download": id, "name": record.name, "sha256": record.sha256,
                    "auto": true, "path": done.released_path }),
            "ok".to_owned(),
        ),
        Err(err) => (
            json!({ "download": id, "auto": true, "message": err.message }),
            format!("error:{}", err.code),
        ),
    };
    let noted = state
        .audit
        .note(
            None,
            EventKind::DownloadRelease,
            Some(workspace),
            detail,
            Some(&outcome),
        )
        .await;
    if let Err(err) = noted {
        tracing::error!(workspace, err = %err.message, "cannot record an automatic release");
    }
}

/// Marks it rejected; its content goes unless another record keeps it.
pub async fn reject(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    reason: Option<&str>,
) -> Result<DownloadRecord, OpError> {
    let record = visible(state, ctx, id, Permission::DownloadsDecide).await?;
    if record.state != DownloadState::Held {
        return Err(conflict(&record));
    }
    let detail =
        json!({ "download": id, "name": record.name, "sha256": record.sha256, "reason": reason });
    let ws = record.workspace_id.clone();
    let run = async {
        let by = ctx.token.id.as_str();
        if !records::decide(&state.store, id, DownloadState::Rejected, by, reason, None)
            .await
            .map_err(internal)?
        {
            let now = records::get(&state.store, id).await.map_err(internal)?;
            return Err(conflict(now.as_ref().unwrap_or(&record)));
        }
        if let Some(q) = state.egress.quarantine() {
            q.forget_content(&record.sha256).await;
        }
        records::get(&state.store, id)
            .await
            .map_err(internal)?
            .ok_or_else(|| not_found(id))
    };
    state
        .audit
        .run(
            ctx,
            EventKind::DownloadReject,
            Some(&ws),
            detail,
            run,
            |_| json!({}),
        )
        .await
}
