//! The desktop's clipboard, read and set through the API (agents,
//! operators, admins: the `clipboard` permission). Both directions ask the
//! workspace's `clipboard` rules with the text; the event keeps its length
//! and SHA-256, never the text.
//!
//! How: `xclip` from the desktop image, run as the desktop's user through
//! the guest channel, on the X selection called CLIPBOARD (what Ctrl+C and
//! Ctrl+V use), as UTF-8. Not the RFB cut-text messages the live view uses:
//! those carry Latin-1 only, and Xvnc tells a client of a change to the
//! clipboard but never what it held before the client connected. The text
//! is the workspace's word either way (any program of the user's can set
//! it): it is shown and judged, never acted on.
//!
//! A set leaves an `xclip` of the user's behind, owning the selection until
//! another program takes it; that is how X clipboards work.

use base64::Engine;
use cubicle_image::control::{ExecRequest, MAX_STDIN};
use cubicle_runtime::channel::GuestChannel;
use serde_json::json;

use super::audit::{EventKind, digest};
use super::{OpContext, Permission, access, gates};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// The most text a clipboard takes or gives through the API.
pub const MAX_TEXT: usize = MAX_STDIN;
/// The image's xclip, by its absolute path (never the user's `PATH`).
const XCLIP: &str = "/usr/bin/xclip";
/// How long one xclip may take (it answers in milliseconds; a desktop
/// whose X server is gone makes it fail, not wait).
const XCLIP_TIMEOUT_MS: u64 = 10_000;
/// How long a set may take to show in the clipboard before it is called
/// taken by another program.
const SET_SEEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the caller's role may use clipboards at all (a 403 before any
/// 400 about the body).
pub fn may_use(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::Clipboard)
}

/// What the desktop's clipboard holds now (`""` when nothing holds it).
pub async fn read(state: &Core, ctx: &OpContext, id: &str) -> Result<String, OpError> {
    let channel = access::guest(state, ctx, id, Permission::Clipboard).await?;
    let run = async {
        let text = current(&channel).await?;
        // Judged by what it holds: a rule may hold a password's way out.
        let gated = gates::Gated {
            operation: "clipboard.read",
            subject: cubicle_policy::Subject::Clipboard { text: text.clone() },
            params: json!({ "direction": "read", "text": digest(text.as_bytes()) }),
            shown: json!({ "direction": "read", "text": text }),
            lock: gates::Lock::Read,
        };
        gates::check(state, ctx, id, gated).await?;
        Ok(text)
    };
    let summary = |text: &String| json!({ "length": text.len(), "text": digest(text.as_bytes()) });
    state
        .audit
        .run(
            ctx,
            EventKind::ClipboardRead,
            Some(id),
            json!({}),
            run,
            summary,
        )
        .await
}

/// Sets the desktop's clipboard to `text`. Refused to the agent while an
/// operator holds the controls.
pub async fn write(state: &Core, ctx: &OpContext, id: &str, text: &str) -> Result<(), OpError> {
    let channel = access::guest(state, ctx, id, Permission::Clipboard).await?;
    access::agent_held_off(state, ctx, id)?;
    if text.len() > MAX_TEXT {
        return Err(OpError::new(
            ErrorKind::TooLarge,
            "too_large",
            format!(
                "text: {} bytes; a clipboard takes at most {MAX_TEXT} through the API",
                text.len()
            ),
        ));
    }
    let detail = json!({ "length": text.len(), "text": digest(text.as_bytes()) });
    let gated = gates::Gated {
        operation: "clipboard.write",
        subject: cubicle_policy::Subject::Clipboard {
            text: text.to_owned(),
        },
        params: json!({ "direction": "write", "text": digest(text.as_bytes()) }),
        shown: json!({ "direction": "write", "text": text }),
        lock: gates::Lock::Change,
    };
    gates::check(state, ctx, id, gated).await?;
    let run = async { set(&channel, text).await };
    state
        .audit
        .run(
            ctx,
            EventKind::ClipboardWrite,
            Some(id),
            detail,
            run,
            |_| json!({}),
        )
        .await
}

async fn current(channel: &GuestChannel) -> Result<String, OpError> {
    let request = ExecRequest {
        argv: vec![
            XCLIP.into(),
            "-selection".into(),
            "clipboard".into(),
            "-out".into(),
        ],
        timeout_ms: XCLIP_TIMEOUT_MS,
        ..ExecRequest::default()
    };
    let out = channel.exec(&request).await?;
    if out.exit.exit_code == Some(0) {
        if out.stdout_truncated {
            return Err(OpError::new(
                ErrorKind::TooLarge,
                "too_large",
                format!("the clipboard holds more than {MAX_TEXT} bytes, more than the API gives"),
            ));
        }
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    // No owner, or one that offers no text: an empty clipboard.
    if said.contains("not available") {
        return Ok(String::new());
    }
    Err(xclip_failed("read", &out.exit, &said))
}

async fn set(channel: &GuestChannel, text: &str) -> Result<(), OpError> {
    // xclip reads the text, takes the selection and forks a child to serve
    // it, which keeps its parent's stdout and stderr: they go to /dev/null,
    // or the exec would wait for the child. So its exit status is all it
    // says, and the clipboard is read back to see the text arrived.
    let request = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("exec {XCLIP} -selection clipboard -in >/dev/null 2>&1"),
        ],
        stdin: Some(base64::engine::general_purpose::STANDARD.encode(text)),
        timeout_ms: XCLIP_TIMEOUT_MS,
        ..ExecRequest::default()
    };
    let out = channel.exec(&request).await?;
    if out.exit.exit_code != Some(0) {
        return Err(xclip_failed("set", &out.exit, ""));
    }
    // xclip's parent exits once it has forked; the child takes the
    // selection, and a loaded X server may not have seen it yet. Nothing
    // announces that to a client outside X, so the clipboard is read until
    // it holds the text, for a bounded time.
    let deadline = tokio::time::Instant::now() + SET_SEEN_WITHIN;
    let mut now = current(channel).await?;
    while now != text && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        now = current(channel).await?;
    }
    if now != text {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "clipboard_changed",
            format!(
                "the desktop's clipboard holds {} bytes, not the {} set: a program in the workspace took it at once; set it again",
                now.len(),
                text.len()
            ),
        ));
    }
    Ok(())
}

fn xclip_failed(what: &str, exit: &cubicle_image::control::ExecExit, said: &str) -> OpError {
    let said: String = said.trim().chars().take(300).collect();
    OpError::new(
        ErrorKind::Unreachable,
        "display_unavailable",
        format!(
            "could not {what} the desktop's clipboard (xclip exited {:?}{}); is the desktop up? GET /v1/workspaces/{{id}} shows its state",
            exit.exit_code,
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said:?}")
            }
        ),
    )
}
