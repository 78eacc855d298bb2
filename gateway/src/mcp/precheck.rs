//! A look at each JSON-RPC message before the SDK parses it, for the one
//! mistake the SDK reports misleadingly: `tools/call` params that are not
//! `{"name": string, "arguments"?: object}` come back from it as "method
//! not found". Here they get `-32602 invalid params` saying what is wrong.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// JSON-RPC's code for bad params.
const INVALID_PARAMS: i64 = -32602;

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ToolCall<'a> {
    name: Option<Value>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The JSON-RPC error to answer instead of passing `body` on, if any.
pub fn check(body: &[u8]) -> Option<Value> {
    // Anything that is not one plain request is the SDK's to judge.
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    if envelope.method != Some("tools/call") {
        return None;
    }
    let id: Value = serde_json::from_str(envelope.id?.get()).ok()?;
    let problem = problem(envelope.params)?;
    Some(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": INVALID_PARAMS,
            "message": format!("tools/call params: {problem}; send {{\"name\": <tool>, \"arguments\": {{...}}}} (see tools/list)"),
        },
    }))
}

fn problem(params: Option<&RawValue>) -> Option<String> {
    let Some(params) = params else {
        return Some("missing".into());
    };
    let Ok(call) = serde_json::from_str::<ToolCall>(params.get()) else {
        return Some("must be an object".into());
    };
    match call.name {
        Some(Value::String(_)) => {}
        Some(other) => return Some(format!("name must be a string, not {other}")),
        None => return Some("name is missing".into()),
    }
    let arguments = call
        .arguments
        .map(|raw| raw.get().trim_start().bytes().next());
    match arguments {
        None | Some(Some(b'{' | b'n')) => None,
        Some(_) => Some("arguments must be an object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> Option<String> {
        check(body.as_bytes()).map(|e| e["error"]["message"].as_str().unwrap().to_owned())
    }

    #[test]
    fn bad_tool_calls_say_what_is_wrong() {
        let call = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{params}}}"#)
        };
        assert!(message(&call("{}")).unwrap().contains("name is missing"));
        assert!(
            message(&call(r#"{"name":1}"#))
                .unwrap()
                .contains("name must be")
        );
        let args = message(&call(r#"{"name":"exec","arguments":[1]}"#)).unwrap();
        assert!(args.contains("arguments must be an object"), "{args}");
        assert!(message(&call("[]")).unwrap().contains("must be an object"));
        assert_eq!(
            message(&call(r#"{"name":"exec","arguments":{"a":1}}"#)),
            None
        );
        assert_eq!(message(&call(r#"{"name":"exec","arguments":null}"#)), None);
        assert_eq!(message(&call(r#"{"name":"exec"}"#)), None);
        let error = check(call("{}").as_bytes()).unwrap();
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(3), json!(-32602))
        );
        assert_eq!(message(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(message("{nope"), None);
    }
}
