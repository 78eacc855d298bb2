//! The MCP server handler: what `initialize`, `tools/list` and `tools/call`
//! answer. `ping` and `notifications/initialized` are the SDK's defaults.

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use super::{McpError, calls, tools};
use crate::app::AppState;
use crate::error::OpError;
use crate::ops::OpContext;

const INSTRUCTIONS: &str = "Cubicle workspaces are isolated Linux desktops (XFCE, Chromium, a shell). \
List or create a workspace, then drive it with `computer` (Anthropic computer-use actions; \
screenshots come back as images), run commands with `exec`, move files with \
`read_file`, `write_file` and `list_files`, read or set the desktop's clipboard with \
`clipboard`, fill a secret into a login form without seeing it with `fill_secret`, ask a \
person to confirm a step with `ask_person`, and call one to take over with `call_person`. \
Save a workspace's files and browser state with `snapshot`, start new workspaces from it with \
`create_workspace` (`from_snapshot`, `count`), go back to it with `rollback`; `list_snapshots` \
lists yours.";

/// How long a tool call a policy holds waits for an operator's decision.
const HELD_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// One MCP server over the gateway's state (the SDK makes one per request).
#[derive(Clone)]
pub struct CubicleMcp {
    state: AppState,
}

impl CubicleMcp {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The caller the auth layer put on the HTTP request.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<OpContext, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<OpContext>())
        .cloned()
        .ok_or(McpError::NoCaller)
}

/// A failed tool call as the agent sees it: the HTTP API's message, flagged.
fn tool_error(err: OpError) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(err.message.clone())]);
    result.structured_content = Some(json!({
        "error": { "code": err.code, "message": err.message, "status": err.kind.status().as_u16() }
    }));
    result
}

impl ServerHandler for CubicleMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cubicle", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut caller =
            caller_of(&context).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let args = request.arguments.unwrap_or_default();
        // A call a policy holds waits for an operator, telling the client
        // it still waits (when it asked for progress), and answers that it
        // is held if nobody decides in time.
        caller.hold.wait = HELD_WAIT;
        let (progress, mut waiting) = tokio::sync::mpsc::channel(4);
        let token = context.meta.get_progress_token();
        if token.is_some() {
            caller.hold.progress = Some(progress);
        }
        let call = calls::call(&self.state, &caller, &request.name, args);
        let outcome = async {
            tokio::pin!(call);
            loop {
                tokio::select! {
                    outcome = &mut call => break outcome,
                    Some(note) = waiting.recv() => {
                        let Some(token) = token.clone() else { continue };
                        let message = format!(
                            "held for an operator's approval ({}); waited {} s",
                            note.approval,
                            note.waited.as_secs()
                        );
                        let param = ProgressNotificationParam::new(token, note.waited.as_secs_f64())
                            .with_message(message);
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
            }
        }
        .await;
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                let err = McpError::UnknownTool(request.name.into_owned());
                return Err(ErrorData::invalid_params(err.to_string(), None));
            }
        };
        Ok(outcome.unwrap_or_else(tool_error).into())
    }
}
