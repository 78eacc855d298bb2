//! Running commands in a workspace: buffered (`exec`) and streamed
//! (`exec.stream`). Both change the workspace, so both wait for the
//! control lock; both are events with the argv and, for the buffered form,
//! the exit and the sizes and SHA-256 of the output.

use cubicle_image::control::ExecRequest;
use cubicle_runtime::guest_ops::{ExecEvents, ExecOutput, ExecStdin};
use serde_json::{Value, json};

use super::audit::{EventKind, digest};
use super::{OpContext, Permission, access, gates};
use crate::error::OpError;
use crate::ops::Core;

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

/// What the policy sees of a command (its line, the commands it starts and
/// the names of the variables it sets), what an approval is bound to (the
/// door and the whole request, stdin included) and what operators are
/// shown ([`describe`]). A streamed command's stdin comes later, live,
/// and no operator sees it: its door is its own operation, so an approval
/// of a buffered exec never runs as a streamed one.
fn gated(request: &ExecRequest, operation: &'static str) -> gates::Gated {
    let env: Vec<String> = request.env.keys().cloned().collect();
    let mut shown = describe(request);
    if operation == "exec.stream" {
        shown["stdin"] = json!("streamed live by the caller: not shown to the operator");
    }
    gates::Gated {
        operation,
        subject: cubicle_policy::Subject::exec_with_env(
            &request.argv,
            request.command.as_deref(),
            &env,
        ),
        params: serde_json::to_value(request).unwrap_or_default(),
        shown,
        lock: gates::Lock::Change,
    }
}

/// `request` with the placeholders of the secrets workspace `id` was given
/// in its environment ([`super::secrets`]); a variable the caller set
/// itself stays as the caller set it.
async fn with_secrets(
    state: &Core,
    id: &str,
    request: &ExecRequest,
) -> Result<ExecRequest, OpError> {
    let mut request = request.clone();
    for (name, placeholder) in super::secrets::env_of(state, id).await? {
        request.env.entry(name).or_insert(placeholder);
    }
    Ok(request)
}

/// Whether the caller's role may run commands at all: the door asks before it
/// reads the request, so a caller without the role gets 403, never a 400
/// about a request it may not send. The operation checks it again, with
/// the workspace's scope.
pub fn may_run(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::Exec)
}

/// Runs a command to completion.
pub async fn run(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    request: &ExecRequest,
) -> Result<ExecOutput, OpError> {
    let channel = access::guest(state, ctx, id, Permission::Exec).await?;
    access::agent_held_off(state, ctx, id)?;
    let request = &with_secrets(state, id, request).await?;
    gates::check(state, ctx, id, gated(request, "exec")).await?;
    let run = async { channel.exec(request).await.map_err(OpError::from) };
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
    state: &Core,
    ctx: &OpContext,
    id: &str,
    request: &ExecRequest,
) -> Result<(ExecEvents, ExecStdin), OpError> {
    let channel = access::guest(state, ctx, id, Permission::Exec).await?;
    access::agent_held_off(state, ctx, id)?;
    let request = &with_secrets(state, id, request).await?;
    gates::check(state, ctx, id, gated(request, "exec.stream")).await?;
    let run = async { channel.exec_stream(request).await.map_err(OpError::from) };
    let kind = EventKind::ExecStream;
    state
        .audit
        .run(ctx, kind, Some(id), describe(request), run, |_| json!({}))
        .await
}

/// Whether the caller may open a streamed exec on workspace `id`: asked
/// before the WebSocket upgrade, so another caller's workspace is a 404
/// whatever the request looks like.
pub async fn may_stream(state: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    access::workspace(state, ctx, id, Permission::Exec).await?;
    Ok(())
}
