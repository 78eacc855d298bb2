//! The tools `tools/list` offers, each with a JSON Schema of its arguments.
//! The schemas describe; the checks that count are the HTTP API's own
//! ([`super::calls`]), so a bad argument gets the same message either way.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

/// Every tool, in the order `tools/list` gives them.
pub fn all() -> Vec<Tool> {
    vec![
        tool(
            "list_workspaces",
            "List the workspaces (isolated Linux desktops) and their state.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
        tool(
            "create_workspace",
            "Create a workspace and wait until its desktop and browser answer; returns it with its id.",
            create_schema(),
        ),
        tool(
            "computer",
            "Use a workspace's screen, mouse and keyboard with one Anthropic computer-use action \
             (screenshot, left_click, type, key, scroll, zoom, ...). Screenshots and zooms come \
             back as images; coordinates are screen pixels, or those of your last scaled screenshot.",
            computer_schema(),
        ),
        tool(
            "exec",
            "Run a command in a workspace as its user (HOME=/home/user, DISPLAY=:0); returns the \
             exit code, stdout and stderr.",
            exec_schema(),
        ),
        tool(
            "read_file",
            "Read a file inside a workspace (text, or base64 when not UTF-8); at most 16 MiB per call.",
            path_schema(json!({
                "offset": { "type": "integer", "minimum": 0, "description": "First byte to read." },
                "length": { "type": "integer", "minimum": 0, "description": "Most bytes to read." },
            })),
        ),
        tool(
            "write_file",
            "Create or replace a file inside a workspace (only /home/user and /tmp are writable).",
            write_schema(),
        ),
        tool(
            "list_files",
            "List a directory inside a workspace.",
            path_schema(json!({})),
        ),
        tool(
            "ask_person",
            "Ask a person watching the workspace to confirm a step before you take it (a payment, \
             a download, a message sent on someone's behalf). Waits up to wait_seconds (default \
             60) for the answer: state approved, denied (with the person's reason), pending or \
             expired. Asking the same question again waits on, or reads the answer of, the same \
             request. Go on only if approved.",
            ask_schema(),
        ),
        tool(
            "call_person",
            "Call a person to take over the workspace's screen (a login, a captcha, a decision \
             you should not make): the operator page shows the workspace as waiting with your \
             reason and webhooks fire. Returns at once; the call stands until an operator takes \
             over. Your input is refused while they hold control; go on when they hand back.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace(),
                    "reason": { "type": "string", "minLength": 1, "maxLength": 1000,
                        "description": "What the person should do, in words they read." },
                },
                "required": ["workspace", "reason"],
                "additionalProperties": false,
            }),
        ),
        tool(
            "clipboard",
            "Read the desktop's clipboard (what Ctrl+V would paste), or set it when text is given \
             (then Ctrl+V in the workspace pastes it). UTF-8 text, at most 1 MiB.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace(),
                    "text": { "type": "string", "maxLength": 1048576,
                        "description": "Set the clipboard to this; leave out to read it." },
                },
                "required": ["workspace"],
                "additionalProperties": false,
            }),
        ),
        tool(
            "fill_secret",
            "Fill a secret the workspace was given (a password, a one-time code) into a field of \
             the page on screen, without seeing it: the gateway puts the value in itself. Only into \
             a password field or an input with an autocomplete token, on an https page of one of \
             the secret's hosts; a person may have to approve first. Then submit the form as usual.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace(),
                    "secret": { "type": "string", "maxLength": 64,
                        "description": "The secret's id (sec-...) or the placeholder the workspace holds for it." },
                    "selector": { "type": "string", "minLength": 1, "maxLength": 1024,
                        "description": "A CSS selector of the field; leave out to fill the focused field." },
                },
                "required": ["workspace", "secret"],
                "additionalProperties": false,
            }),
        ),
        tool(
            "snapshot",
            "Save a running workspace's state as a named snapshot to start from later: its files \
             in /home/user and /tmp and its browser profile (cookies, logins, open tabs); not its \
             memory. The browser closes for a moment and opens again. Start new workspaces from it \
             with create_workspace {from_snapshot, count}, or go back to it with rollback.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace(),
                    "name": { "type": "string", "minLength": 1, "maxLength": 64,
                        "pattern": "^[A-Za-z0-9._-]+$",
                        "description": "Unique among your snapshots." },
                },
                "required": ["workspace", "name"],
                "additionalProperties": false,
            }),
        ),
        tool(
            "rollback",
            "Put a snapshot back in place of a running workspace's files and browser profile, \
             when a step went wrong: what was made since the snapshot is gone.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace(),
                    "snapshot": { "type": "string", "description": "The snapshot id (snap-...), from list_snapshots." },
                },
                "required": ["workspace", "snapshot"],
                "additionalProperties": false,
            }),
        ),
        tool(
            "list_snapshots",
            "List your snapshots: id, name, the workspace each was taken of, when, and what it holds.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
    ]
}

fn ask_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "workspace": { "type": "string", "description": "The workspace id (ws-...)." },
            "question": { "type": "string", "minLength": 1, "maxLength": 1000,
                "description": "The step, in words a person decides on." },
            "details": { "type": "object", "description": "What the person should see of it (at most 16 KiB of JSON)." },
            "wait_seconds": { "type": "integer", "minimum": 0, "maximum": 300,
                "description": "How long to wait for the answer in this call (default 60)." },
        },
        "required": ["workspace", "question"],
        "additionalProperties": false,
    })
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn workspace() -> Value {
    json!({ "type": "string", "description": "The workspace id (ws-...), from list_workspaces." })
}

fn create_schema() -> Value {
    crate::wire::input_schema::<crate::wire::workspace::CreateWorkspace>(false)
}

fn computer_schema() -> Value {
    let point = json!({
        "type": "array", "items": { "type": "integer" }, "minItems": 2, "maxItems": 2
    });
    json!({
        "type": "object",
        "properties": {
            "workspace": workspace(),
            // The parser's own list: the schema cannot drift from it.
            "action": { "type": "string", "enum": crate::actions::parse::ANTHROPIC },
            "coordinate": point.clone(),
            "start_coordinate": point,
            "text": {
                "type": "string",
                "description": "Text to type, xdotool-style keys for key/hold_key (\"ctrl+shift+t\", \"Return\"), or modifiers held while clicking or scrolling."
            },
            "duration": { "type": "number", "minimum": 0, "maximum": 60, "description": "Seconds (wait, hold_key)." },
            "scroll_direction": { "type": "string", "enum": ["up", "down", "left", "right"] },
            "scroll_amount": { "type": "integer", "minimum": 1, "maximum": 100 },
            "region": {
                "type": "array", "items": { "type": "integer" }, "minItems": 4, "maxItems": 4,
                "description": "zoom: [x0, y0, x1, y1]."
            },
            "format": { "type": "string", "enum": ["png", "jpeg"] },
            "quality": { "type": "integer", "minimum": 1, "maximum": 100 },
            "width": { "type": "integer", "minimum": 16, "maximum": 7680, "description": "Scale the screenshot to this width (with height)." },
            "height": { "type": "integer", "minimum": 16, "maximum": 7680 }
        },
        "required": ["workspace", "action"]
    })
}

fn exec_schema() -> Value {
    crate::wire::input_schema::<crate::wire::exec::ExecBody>(true)
}

fn path_schema(extra: Value) -> Value {
    let mut properties = json!({
        "workspace": workspace(),
        "path": { "type": "string", "description": "Absolute path inside the workspace." },
    });
    if let (Some(target), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["workspace", "path"],
        "additionalProperties": false
    })
}

fn write_schema() -> Value {
    path_schema(json!({
        "content": { "type": "string", "description": "The file's text." },
        "content_base64": { "type": "string", "description": "The file's bytes, base64 (instead of content)." },
        "mode": { "type": "string", "pattern": "^[0-7]{3,4}$", "description": "Octal mode, e.g. \"0644\"." },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every action the `computer` tool offers is one the parser knows
    /// (it may still want fields: never "unknown action"), and the
    /// parser's names are all offered.
    #[test]
    fn the_computer_tool_offers_exactly_the_actions_the_parser_takes() {
        let schema = computer_schema();
        let offered: Vec<&str> = schema["properties"]["action"]["enum"]
            .as_array()
            .expect("an enum of names")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(offered, crate::actions::parse::ANTHROPIC);
        for name in &offered {
            if let Err(err) = crate::actions::parse_action(&json!({ "action": name })) {
                assert!(
                    !err.message.starts_with("unknown action"),
                    "{name} is offered but not parsed: {err}"
                );
            }
        }
        let unknown = crate::actions::parse_action(&json!({"action": "teleport"}))
            .expect_err("control: a name the parser does not know");
        assert!(unknown.message.starts_with("unknown action"), "{unknown}");
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        let tools = all();
        assert_eq!(tools.len(), 14);
        for tool in tools {
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert!(
                tool.input_schema.contains_key("properties"),
                "{}",
                tool.name
            );
        }
    }
}
