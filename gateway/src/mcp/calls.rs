//! Running each MCP tool through the operations core, like the HTTP
//! handlers (no HTTP round trip): the same permission, scope, control-lock
//! and event rules, the same parsing and error messages.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::FileInfo;
use cubicle_runtime::guest_ops::ExecOutput;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use crate::api::actions::parse_body;
use crate::api::workspaces::view;
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::{self, OpContext};
use crate::wire::exec::ExecBody;
use crate::wire::workspace::CreateWorkspace;

type Args = Map<String, Value>;
type Outcome = Result<CallToolResult, OpError>;

/// Runs tool `name`; `None` if there is no such tool.
pub async fn call(state: &AppState, caller: &OpContext, name: &str, args: Args) -> Option<Outcome> {
    Some(match name {
        "list_workspaces" => list_workspaces(state, caller, args).await,
        "create_workspace" => create_workspace(state, caller, args).await,
        "computer" => computer(state, caller, args).await,
        "exec" => exec(state, caller, args).await,
        "read_file" => read_file(state, caller, args).await,
        "write_file" => write_file(state, caller, args).await,
        "list_files" => list_files(state, caller, args).await,
        "ask_person" => ask_person(state, caller, args).await,
        "clipboard" => clipboard(state, caller, args).await,
        "call_person" => call_person(state, caller, args).await,
        "fill_secret" => fill_secret(state, caller, args).await,
        "snapshot" => snapshot(state, caller, args).await,
        "rollback" => rollback(state, caller, args).await,
        "list_snapshots" => list_snapshots(state, caller, args).await,
        _ => return None,
    })
}

/// A result of one JSON value, as text (for the model) and structured.
fn json_result(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

fn bytes_of(args: &Args) -> Vec<u8> {
    serde_json::to_vec(args).unwrap_or_default()
}

/// Removes and returns the required `workspace` argument.
fn take_workspace(args: &mut Args) -> Result<String, OpError> {
    match args.remove("workspace") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id),
        Some(_) => Err(OpError::bad_request(
            "workspace: must be a workspace id string such as \"ws-...\"",
        )),
        None => Err(OpError::bad_request(
            "workspace: missing: give the id of a workspace (see list_workspaces)",
        )),
    }
}

/// Refuses any argument not in `allowed`, naming it.
fn only(args: &Args, allowed: &[&str]) -> Result<(), OpError> {
    match args.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(OpError::bad_request(format!(
            "unknown argument {key:?}: allowed are {allowed:?}"
        ))),
        None => Ok(()),
    }
}

fn string_arg(args: &Args, name: &str) -> Result<Option<String>, OpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(OpError::bad_request(format!(
            "{name}: must be a string, not {other}"
        ))),
    }
}

fn required_path(args: &Args) -> Result<String, OpError> {
    string_arg(args, "path")?
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            OpError::bad_request(
                "path: missing: give an absolute path inside the workspace, e.g. /home/user/notes.txt",
            )
        })
}

fn number_arg(args: &Args, name: &str) -> Result<Option<u64>, OpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            OpError::bad_request(format!("{name}: {value} is not a non-negative integer"))
        }),
    }
}

async fn list_workspaces(state: &AppState, caller: &OpContext, args: Args) -> Outcome {
    only(&args, &[])?;
    let records = ops::workspaces::list(state, caller).await?;
    let items: Vec<Value> = records.iter().map(view).collect();
    Ok(json_result(json!({ "workspaces": items })))
}

async fn create_workspace(state: &AppState, caller: &OpContext, args: Args) -> Outcome {
    let ask = CreateWorkspace::parse(&bytes_of(&args))?;
    if ask.count.is_some() {
        let made = crate::api::workspaces::created_many(state, caller, ask).await?;
        return Ok(json_result(made));
    }
    let created = ops::workspaces::create(state, caller, ask).await?;
    Ok(json_result(crate::api::workspaces::created_view(
        state, &created,
    )))
}

/// One action (`{"workspace", "action", ...}`) or a batch
/// (`{"workspace", "actions": [...]}`), as `POST .../actions` takes them.
async fn computer(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    let (actions, sent, batch) = parse_body(&bytes_of(&args))?;
    let outcome = ops::actions::run_batch(state, caller, &id, &actions, &sent).await?;
    if let Some((index, err)) = outcome.failed {
        let mut err = err;
        if batch {
            err.message = format!("actions[{index}]: {} ({index} ran)", err.message);
        }
        return Err(err);
    }
    let mut results = outcome.results.into_iter().map(action_result);
    if !batch {
        return Ok(results.next().unwrap_or_else(|| json_result(Value::Null)));
    }
    let mut content = Vec::new();
    for result in results {
        content.extend(result.content);
    }
    Ok(CallToolResult::success(content))
}

/// An action's result: images as MCP image content, anything else as JSON.
fn action_result(result: Value) -> CallToolResult {
    let image = (result["type"] == "image")
        .then(|| Some((result["data"].as_str()?, result["media_type"].as_str()?)))
        .flatten();
    let Some((data, media_type)) = image else {
        return json_result(result);
    };
    let note = format!(
        "{}x{} {media_type}; coordinates of later actions are in this image's space",
        result["width"], result["height"]
    );
    CallToolResult::success(vec![
        ContentBlock::image(data, media_type),
        ContentBlock::text(note),
    ])
}

async fn exec(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    let request = ExecBody::parse(&bytes_of(&args))?;
    let output = ops::exec::run(state, caller, &id, &request).await?;
    Ok(exec_result(&output))
}

/// An exec's outcome: readable text, plus the HTTP API's fields structured.
fn exec_result(output: &ExecOutput) -> CallToolResult {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let exit = &output.exit;
    let status = match (exit.exit_code, exit.signal, exit.timed_out) {
        (_, _, true) => "timed out (killed)".to_owned(),
        (Some(code), _, _) => format!("exit code {code}"),
        (None, Some(signal), _) => format!("killed by signal {signal}"),
        (None, None, _) => "ended".to_owned(),
    };
    let cut = |truncated: bool| if truncated { " (truncated)" } else { "" };
    let text = format!(
        "{status}\n--- stdout{} ---\n{stdout}\n--- stderr{} ---\n{stderr}",
        cut(output.stdout_truncated),
        cut(output.stderr_truncated)
    );
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({
        "exit_code": exit.exit_code,
        "signal": exit.signal,
        "timed_out": exit.timed_out,
        "duration_ms": exit.duration_ms,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": output.stdout_truncated,
        "stderr_truncated": output.stderr_truncated,
    }));
    result
}

async fn read_file(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["path", "offset", "length"])?;
    let path = required_path(&args)?;
    let offset = number_arg(&args, "offset")?.unwrap_or(0);
    let length = number_arg(&args, "length")?;
    let chunk = ops::files::read(state, caller, &id, &path, offset, length).await?;
    let (encoding, content) = match String::from_utf8(chunk.bytes) {
        Ok(text) => ("utf-8", text),
        Err(err) => ("base64", B64.encode(err.as_bytes())),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(content.clone())]);
    result.structured_content = Some(json!({
        "path": path,
        "size": chunk.size,
        "offset": chunk.offset,
        "eof": chunk.eof,
        "encoding": encoding,
        "content": content,
    }));
    Ok(result)
}

async fn write_file(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["path", "content", "content_base64", "mode"])?;
    let path = required_path(&args)?;
    let bytes = content_bytes(&args)?;
    let mode = mode_arg(&args)?;
    let info: FileInfo = ops::files::write(state, caller, &id, &path, &bytes, mode).await?;
    Ok(json_result(json!(info)))
}

/// The bytes to write: `content` (text) or `content_base64`, exactly one.
fn content_bytes(args: &Args) -> Result<Vec<u8>, OpError> {
    match (
        string_arg(args, "content")?,
        string_arg(args, "content_base64")?,
    ) {
        (Some(text), None) => Ok(text.into_bytes()),
        (None, Some(encoded)) => B64
            .decode(encoded.as_bytes())
            .map_err(|e| OpError::bad_request(format!("content_base64: not valid base64: {e}"))),
        _ => Err(OpError::bad_request(
            "content: give exactly one of content (text) or content_base64",
        )),
    }
}

fn mode_arg(args: &Args) -> Result<Option<u32>, OpError> {
    let Some(text) = string_arg(args, "mode")? else {
        return Ok(None);
    };
    u32::from_str_radix(&text, 8)
        .ok()
        .filter(|&mode| mode <= 0o7777)
        .map(Some)
        .ok_or_else(|| {
            OpError::bad_request(format!("mode: {text:?} is not an octal mode like \"0644\""))
        })
}

async fn list_files(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["path"])?;
    let path = required_path(&args)?;
    let listing = ops::files::list(state, caller, &id, &path).await?;
    Ok(json_result(json!(listing)))
}

/// How long `ask_person` waits for the answer unless told.
const ASK_WAIT_DEFAULT: u64 = 60;

/// `{"workspace", "question", "details"?, "wait_seconds"?}`: an approval of
/// operation `ask`, as `POST /v1/workspaces/{id}/approvals` makes it,
/// waited on up to `wait_seconds`.
async fn ask_person(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["question", "details", "wait_seconds"])?;
    ops::approvals::may_ask(caller)?;
    let question = string_arg(&args, "question")?.unwrap_or_default();
    let details = args.get("details").cloned().unwrap_or(Value::Null);
    let wait = number_arg(&args, "wait_seconds")?.unwrap_or(ASK_WAIT_DEFAULT);
    if wait > ops::context::MAX_WAIT.as_secs() {
        return Err(OpError::bad_request(format!(
            "wait_seconds: at most {}",
            ops::context::MAX_WAIT.as_secs()
        )));
    }
    let asked = ops::approvals::Ask {
        question,
        details,
        ttl: None,
    };
    let approval = ops::approvals::ask(state, caller, &id, asked).await?;
    let wait = std::time::Duration::from_secs(wait);
    let approval = ops::approvals::get(state, caller, &approval.id, wait).await?;
    Ok(json_result(json!({
        "approval": approval.id,
        "state": approval.state.as_str(),
        "reason": approval.decision_reason,
        "decided_by": approval.decided_by,
    })))
}

/// `{"workspace", "reason"}`: the call `POST .../handoff` makes.
async fn call_person(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["reason"])?;
    ops::control::may_call(caller)?;
    let reason = string_arg(&args, "reason")?.unwrap_or_default();
    let control = ops::control::call(state, caller, &id, &reason).await?;
    Ok(json_result(crate::control::view(&control, &id)))
}

/// `{"workspace", "name"}`: the snapshot `POST .../snapshot` takes.
async fn snapshot(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    let name = crate::wire::snapshot::NewSnapshot::parse(&bytes_of(&args))?;
    let view = ops::snapshots::take(state, caller, &id, &name).await?;
    Ok(json_result(json!(view)))
}

/// `{"workspace", "snapshot"}`: the rollback `POST .../rollback` makes.
async fn rollback(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    let snapshot = crate::wire::snapshot::Rollback::parse(&bytes_of(&args))?;
    let view = ops::snapshots::roll_back(state, caller, &id, &snapshot).await?;
    Ok(json_result(json!(view)))
}

async fn list_snapshots(state: &AppState, caller: &OpContext, args: Args) -> Outcome {
    only(&args, &[])?;
    let all = ops::snapshots::list(state, caller).await?;
    Ok(json_result(json!({ "snapshots": all })))
}

/// `{"workspace", "text"?}`: sets the clipboard to `text`, or reads it.
async fn clipboard(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    only(&args, &["text"])?;
    ops::clipboard::may_use(caller)?;
    match string_arg(&args, "text")? {
        Some(text) => {
            ops::clipboard::write(state, caller, &id, &text).await?;
            Ok(json_result(json!({ "set": true, "length": text.len() })))
        }
        None => {
            let text = ops::clipboard::read(state, caller, &id).await?;
            Ok(json_result(json!({ "text": text })))
        }
    }
}

/// `{"workspace", "secret", "selector"?}`: the fill `POST .../fill_secret`
/// makes.
async fn fill_secret(state: &AppState, caller: &OpContext, mut args: Args) -> Outcome {
    let id = take_workspace(&mut args)?;
    ops::secret_fill::may_fill(caller)?;
    let fill = crate::wire::secret::FillSecret::parse(&bytes_of(&args))?;
    let filled = ops::secret_fill::fill(state, caller, &id, fill).await?;
    Ok(json_result(json!(filled)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Args {
        match value {
            Value::Object(map) => map,
            _ => Args::new(),
        }
    }

    #[test]
    fn argument_errors_name_the_argument() {
        let err = take_workspace(&mut args(json!({}))).unwrap_err();
        assert!(err.message.starts_with("workspace:"), "{}", err.message);
        let err = take_workspace(&mut args(json!({"workspace": 3}))).unwrap_err();
        assert!(err.message.starts_with("workspace:"), "{}", err.message);
        let err = only(&args(json!({"pth": "/tmp"})), &["path"]).unwrap_err();
        assert!(err.message.contains("pth"), "{}", err.message);
        let err = required_path(&args(json!({"path": 1}))).unwrap_err();
        assert!(err.message.starts_with("path:"), "{}", err.message);
        let err = content_bytes(&args(json!({"content": "a", "content_base64": "YQ=="})));
        assert!(err.unwrap_err().message.starts_with("content:"));
        let err = mode_arg(&args(json!({"mode": "999"}))).unwrap_err();
        assert!(err.message.starts_with("mode:"), "{}", err.message);
        assert_eq!(
            mode_arg(&args(json!({"mode": "0755"}))).unwrap(),
            Some(0o755)
        );
    }

    #[test]
    fn images_become_image_content() {
        let result = action_result(json!({
            "type": "image", "media_type": "image/png", "width": 2, "height": 1, "data": "AAAA"
        }));
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["content"][0]["type"], "image");
        assert_eq!(value["content"][0]["mimeType"], "image/png");
        assert_eq!(value["content"][0]["data"], "AAAA");
        let result = action_result(json!({"ok": true}));
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["content"][0]["type"], "text");
        assert_eq!(value["structuredContent"]["ok"], true);
    }
}
