//! Running commands in a workspace: buffered (`exec`) and streamed
//! (`exec.stream`). Both change the workspace, so both wait for the
//! control lock; both are events with the argv and, for the buffered form,
//! the exit and the sizes and SHA-256 of the output.

use cubicle_guest::control::ExecRequest;
use cubicle_runtime::guest_ops::{ExecEvents, ExecOutput, ExecStdin};
use serde_json::{Value, json};

use super::audit::{EventKind, digest};
use super::{OpContext, Permission, access};
use crate::app::AppState;
use crate::error::ApiError;

/// What the event keeps of a request: the command, never stdin or env values.
fn describe(request: &ExecRequest) -> Value {
    json!({
        "argv": request.argv,
        "command": request.command,
        "cwd": request.cwd,
        "env_names": request.env.keys().collect::<Vec<_>>(),
        "timeout_ms": request.timeout_ms,
        "stdin": request.stdin.as_deref().map(|s| digest(s.as_bytes())),
    })
}

/// Runs a command to completion.
pub async fn run(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
    request: &ExecRequest,
) -> Result<ExecOutput, ApiError> {
    let channel = access::guest(state, ctx, id, Permission::Exec).await?;
    access::under_control(state, ctx, id)?;
    let run = async { channel.exec(request).await.map_err(ApiError::from) };
    let summary = |out: &ExecOutput| {
        json!({
            "exit_code": out.exit.exit_code,
            "signal": out.exit.signal,
            "timed_out": out.exit.timed_out,
            "stdout": digest(&out.stdout),
            "stderr": digest(&out.stderr),
        })
    };
    let kind = EventKind::Exec;
    state
        .audit
        .run(ctx, kind, Some(id), describe(request), run, summary)
        .await
}

/// Starts a streamed command; the caller relays its output and stdin.
pub async fn open_stream(
    state: &AppState,
    ctx: &OpContext,
    id: &str,
    request: &ExecRequest,
) -> Result<(ExecEvents, ExecStdin), ApiError> {
    let channel = access::guest(state, ctx, id, Permission::Exec).await?;
    access::under_control(state, ctx, id)?;
    let run = async { channel.exec_stream(request).await.map_err(ApiError::from) };
    let kind = EventKind::ExecStream;
    state
        .audit
        .run(ctx, kind, Some(id), describe(request), run, |_| json!({}))
        .await
}
