//! Uploads into the browser: a file from the caller (the request's body)
//! or a released download, handed to a page's `<input type=file>` by the
//! gateway's own CDP session (`DOM.setFileInputFiles`).
//!
//! The order: the caller may use the browser and is not held off by a
//! take-over; the file is the caller's bytes (scanned by the quarantine's
//! scanner, archives looked into: a hit refuses it with the rule) or a
//! download of this workspace that was released (scanned when it came in,
//! released by a person or the policy); the tab on screen has the file
//! input the selector (or the focus) names; the policy's `upload` rules
//! judge the file's name (the shipped default confirms, strict denies);
//! then the file is kept in the guest where only the browser's id can read
//! it ([`cubicle_runtime::guest_ops`] `stage_upload`), and the input gets
//! it, after the tab is checked again at the host judged. The event
//! (`browser.upload`) names the file's SHA-256, size, sniffed type and the
//! page's origin.
//!
//! What it cannot stop: the page's scripts read the file once it is
//! chosen, as they would a person's; what they do with it is the egress
//! policy's to judge.

use cubicle_policy::{BrowserContext, Focus, Subject};
use cubicle_runtime::quarantine::records::{self, DownloadState};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::audit::EventKind;
use super::{OpContext, Permission, access, gates};
use crate::browser_fill::{self, FillError, Want};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// Where the file comes from.
#[derive(Debug)]
pub enum Source {
    /// The caller's bytes, under this name.
    Bytes { name: String, bytes: Vec<u8> },
    /// A released download of the workspace, by id (`dl-…`).
    Download(String),
}

/// What was handed to the page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Uploaded {
    /// The file's name as the page sees it.
    pub name: String,
    pub sha256: String,
    pub size: u64,
    /// The type sniffed from the bytes.
    pub sniffed_type: String,
    /// The page's URL and origin when it got the file.
    pub url: String,
    pub origin: String,
}

/// Whether the caller's role may use the browser (a 403 before any 400).
pub fn may_upload(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::Browser)
}

/// Hands `source` to the file input `selector` (or the focused one) of
/// workspace `id`'s page on screen.
pub async fn upload(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    source: Source,
    selector: Option<&str>,
) -> Result<Uploaded, OpError> {
    let channel = access::guest(core, ctx, id, Permission::Browser).await?;
    access::agent_held_off(core, ctx, id)?;
    let (name, bytes, sniffed_type, from) = match source {
        Source::Bytes { name, bytes } => {
            let name = cubicle_runtime::quarantine::names::clean(&name);
            let (sniffed, hits) = examine(core, &bytes).await?;
            if let Some(hit) = hits.first() {
                return Err(OpError::new(
                    ErrorKind::Forbidden,
                    "upload_flagged",
                    format!(
                        "the file was refused: the quarantine's scan matched rule {} ({} rule(s) in all); it is not handed to the page",
                        hit.rule,
                        hits.len()
                    ),
                ));
            }
            (name, bytes, sniffed, json!("caller"))
        }
        Source::Download(download) => {
            let (name, bytes, sniffed) = released(core, id, &download).await?;
            (name, bytes, sniffed, json!({ "download": download }))
        }
    };
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let host = core.hosts.get(id);
    let found = browser_fill::find(&core.manager, host.browser(), id, Want::File, selector)
        .await
        .map_err(refused)?;
    let origin = BrowserContext::at(&found.url, Focus::FileInput).origin;
    let judged = json!({
        "name": name, "sha256": sha256, "size": bytes.len(), "sniffed_type": sniffed_type,
        "from": from, "selector": selector, "url": found.url, "origin": origin,
    });
    let gated = gates::Gated {
        operation: "browser.upload",
        subject: Subject::Upload {
            files: vec![name.clone()],
        },
        params: judged.clone(),
        shown: judged.clone(),
        lock: gates::Lock::Change,
    };
    gates::check(core, ctx, id, gated).await?;
    let run = async {
        let staged = channel.stage_upload(&name, &bytes).await?;
        browser_fill::set_file(
            &core.manager,
            host.browser(),
            id,
            &found,
            selector,
            &staged.name,
        )
        .await
        .map_err(refused)
    };
    core.audit
        .run(ctx, EventKind::BrowserUpload, Some(id), judged, run, |_| {
            json!({})
        })
        .await?;
    Ok(Uploaded {
        name,
        size: bytes.len() as u64,
        sha256,
        sniffed_type,
        url: found.url,
        origin,
    })
}

/// The quarantine's verdict on the caller's bytes: the sniffed type, hits.
async fn examine(
    core: &Core,
    bytes: &[u8],
) -> Result<(String, Vec<cubicle_runtime::quarantine::Hit>), OpError> {
    let quarantine = core.egress.quarantine().ok_or_else(|| {
        OpError::new(
            ErrorKind::Unavailable,
            "no_quarantine",
            "this gateway runs without the quarantine, which must scan an upload first",
        )
    })?;
    quarantine
        .examine(bytes)
        .await
        .map_err(|err| OpError::internal(format!("scanning the upload failed: {err}")))
}

/// Released download `download` of workspace `id`: its name, bytes and
/// sniffed type.
async fn released(
    core: &Core,
    id: &str,
    download: &str,
) -> Result<(String, Vec<u8>, String), OpError> {
    let store = core.egress.quarantine().map(|q| q.store().clone());
    let record = match &store {
        Some(store) => records::get(store, download)
            .await
            .map_err(|err| OpError::internal(err.to_string()))?,
        None => None,
    };
    let Some(record) = record.filter(|r| r.workspace_id == id) else {
        return Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("download: no download {download:?} of workspace {id}"),
        ));
    };
    if record.state != DownloadState::Released {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "download_not_released",
            format!(
                "download {download} is {}: only a released download goes to a page (POST /v1/downloads/{download}/release)",
                record.state.as_str()
            ),
        ));
    }
    let path = core
        .egress
        .quarantine()
        .and_then(|q| q.content_path(&record.sha256))
        .ok_or_else(|| gone(download))?;
    let bytes = tokio::fs::read(&path).await.map_err(|_| gone(download))?;
    if bytes.len() as u64 > cubicle_image::control::MAX_FILE {
        return Err(OpError::new(
            ErrorKind::TooLarge,
            "too_large",
            format!(
                "download {download} is {} bytes; an upload is at most {}",
                bytes.len(),
                cubicle_image::control::MAX_FILE
            ),
        ));
    }
    let sniffed = record.sniffed_type.unwrap_or_default();
    Ok((record.name, bytes, sniffed))
}

fn gone(download: &str) -> OpError {
    OpError::new(
        ErrorKind::Gone,
        "content_gone",
        format!("the content of download {download} is no longer kept"),
    )
}

fn refused(err: FillError) -> OpError {
    err.into_op(
        "upload_refused",
        "not uploaded",
        "no browser tab is on screen: open the page with the file input first",
    )
}
