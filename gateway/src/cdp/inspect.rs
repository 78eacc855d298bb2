//! The one place every CDP message passes through, in both directions.
//!
//! [`parse`] reads a message into a small [`CdpMessage`] (id, method, params,
//! sessionId) that borrows from the raw text; the raw text is what gets
//! forwarded, so nothing is re-encoded. [`inspect`] decides what happens to
//! it. Today it lets everything through except what the gateway reserves to
//! itself; the policy issue replaces the rule table with the policy
//! evaluator and starts returning [`Verdict::Hold`].

use std::borrow::Cow;

use chromiumoxide_cdp::cdp::browser_protocol::{browser, dom, network, page, storage, target};
use chromiumoxide_cdp::cdp::js_protocol::runtime;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::CdpError;

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the agent's client to Chromium: calls.
    ToBrowser,
    /// From Chromium to the client: replies and events.
    ToClient,
}

/// What [`inspect`] reads of a CDP message.
#[derive(Debug, Deserialize)]
pub struct CdpMessage<'a> {
    #[serde(default)]
    pub id: Option<i64>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "sessionId")]
    pub session_id: Option<Cow<'a, str>>,
}

/// What happens to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it unchanged.
    Allow,
    /// Do not forward it; the client gets a CDP error reply with the reason.
    Deny(String),
    /// Hold it until an operator decides. This is the hook of the policy
    /// issue (confirmation gates); until approvals exist the relay answers
    /// it like [`Verdict::Deny`] with [`HOLD_UNAVAILABLE`].
    Hold(String),
    /// Do not forward it; the gateway answers an empty success itself. For
    /// methods the gateway owns that standard clients send unasked:
    /// Playwright's `connectOverCDP` sends `Browser.setDownloadBehavior`
    /// while connecting and fails if it gets an error back.
    Absorb(String),
}

/// The reason a held message is refused while approvals do not exist.
pub const HOLD_UNAVAILABLE: &str = "held for approval is not available yet";

/// How the gateway treats a method it reserves to itself.
enum Reserved {
    Absorb,
    Deny,
}

/// Methods the client may not send to the browser, and why.
const RESERVED: &[(&str, Reserved, &str)] = &[
    (
        browser::SetDownloadBehaviorParams::IDENTIFIER,
        Reserved::Absorb,
        "downloads are owned by the gateway (quarantine); the call was acknowledged and not applied",
    ),
    (
        // Deprecated, gone from the protocol the types come from, still
        // taken by Chromium.
        "Page.setDownloadBehavior",
        Reserved::Absorb,
        "downloads are owned by the gateway (quarantine); the call was acknowledged and not applied",
    ),
    (
        target::ExposeDevToolsProtocolParams::IDENTIFIER,
        Reserved::Deny,
        "Target.exposeDevToolsProtocol would give page scripts a CDP channel that bypasses the gateway",
    ),
];

/// Methods that send input or change page state, refused (CDP error) while
/// an operator holds the workspace's controls. Reads (DOM queries,
/// screenshots, `Runtime.getProperties`, ...) go on. Named by the
/// protocol's types, so each is a method that exists; and the names that
/// start with one of [`CHANGES_PAGE_PREFIXES`].
pub const CHANGES_PAGE: &[&str] = &[
    runtime::EvaluateParams::IDENTIFIER,
    runtime::CallFunctionOnParams::IDENTIFIER,
    runtime::CompileScriptParams::IDENTIFIER,
    runtime::RunScriptParams::IDENTIFIER,
    runtime::AddBindingParams::IDENTIFIER,
    page::NavigateParams::IDENTIFIER,
    page::NavigateToHistoryEntryParams::IDENTIFIER,
    page::ReloadParams::IDENTIFIER,
    page::StopLoadingParams::IDENTIFIER,
    page::SetDocumentContentParams::IDENTIFIER,
    page::AddScriptToEvaluateOnNewDocumentParams::IDENTIFIER,
    page::CloseParams::IDENTIFIER,
    page::BringToFrontParams::IDENTIFIER,
    page::HandleJavaScriptDialogParams::IDENTIFIER,
    dom::SetAttributeValueParams::IDENTIFIER,
    dom::SetAttributesAsTextParams::IDENTIFIER,
    dom::SetFileInputFilesParams::IDENTIFIER,
    dom::SetNodeNameParams::IDENTIFIER,
    dom::SetNodeValueParams::IDENTIFIER,
    dom::SetOuterHtmlParams::IDENTIFIER,
    dom::RemoveAttributeParams::IDENTIFIER,
    dom::RemoveNodeParams::IDENTIFIER,
    dom::MoveToParams::IDENTIFIER,
    dom::CopyToParams::IDENTIFIER,
    dom::FocusParams::IDENTIFIER,
    dom::UndoParams::IDENTIFIER,
    dom::RedoParams::IDENTIFIER,
    network::SetCookieParams::IDENTIFIER,
    network::SetCookiesParams::IDENTIFIER,
    network::DeleteCookiesParams::IDENTIFIER,
    network::ClearBrowserCookiesParams::IDENTIFIER,
    storage::SetCookiesParams::IDENTIFIER,
    target::CreateTargetParams::IDENTIFIER,
    target::CloseTargetParams::IDENTIFIER,
    target::ActivateTargetParams::IDENTIFIER,
    SEND_MESSAGE_TO_TARGET,
    browser::CloseParams::IDENTIFIER,
    browser::CrashParams::IDENTIFIER,
];

/// Whole domains, and families of methods, that change page state: every
/// method whose name starts with one of these.
pub const CHANGES_PAGE_PREFIXES: &[&str] = &[
    "Input.",
    "Emulation.",
    "Debugger.",
    "Fetch.",
    "CSS.set",
    "Storage.clear",
];

/// Whether `method` sends input or changes page state ([`CHANGES_PAGE`],
/// [`CHANGES_PAGE_PREFIXES`]).
pub fn changes_page(method: &str) -> bool {
    CHANGES_PAGE.contains(&method)
        || CHANGES_PAGE_PREFIXES
            .iter()
            .any(|prefix| method.starts_with(prefix))
}

/// The deprecated tunnel: a whole CDP call as a string. Chromium still
/// takes it; the protocol the generated types come from no longer lists
/// it, so its name and parameters are written here.
pub const SEND_MESSAGE_TO_TARGET: &str = "Target.sendMessageToTarget";

/// The parameters of [`SEND_MESSAGE_TO_TARGET`] that are read: the call.
#[derive(Deserialize)]
pub struct Tunnel<'a> {
    #[serde(borrow)]
    pub message: Cow<'a, str>,
}

/// How deep `Target.sendMessageToTarget` may nest messages.
const MAX_TUNNEL_DEPTH: usize = 2;

/// Reads a message. A client's message must be a JSON object with an
/// integer `id` and a string `method`; the browser's must have one of them.
pub fn parse(direction: Direction, text: &str) -> Result<CdpMessage<'_>, CdpError> {
    let message: CdpMessage<'_> = serde_json::from_str(text)
        .map_err(|e| CdpError::Malformed(format!("not a CDP JSON object: {e}")))?;
    let complete = match direction {
        Direction::ToBrowser => message.id.is_some() && message.method.is_some(),
        Direction::ToClient => message.id.is_some() || message.method.is_some(),
    };
    if !complete {
        return Err(CdpError::Malformed(match direction {
            Direction::ToBrowser => {
                "a CDP call needs an integer \"id\" and a string \"method\"".into()
            }
            Direction::ToClient => {
                "the browser sent a message with neither \"id\" nor \"method\"".into()
            }
        }));
    }
    Ok(message)
}

/// Decides what happens to `message`. Every message of every CDP connection
/// through the gateway comes here.
pub fn inspect(direction: Direction, message: &CdpMessage<'_>) -> Verdict {
    match direction {
        Direction::ToBrowser => inspect_call(message, 0),
        Direction::ToClient => Verdict::Allow,
    }
}

fn inspect_call(message: &CdpMessage<'_>, depth: usize) -> Verdict {
    let Some(method) = message.method.as_deref() else {
        return Verdict::Allow;
    };
    if let Some((_, kind, reason)) = RESERVED.iter().find(|(name, _, _)| *name == method) {
        return match kind {
            Reserved::Absorb => Verdict::Absorb((*reason).to_owned()),
            Reserved::Deny => Verdict::Deny((*reason).to_owned()),
        };
    }
    if method == SEND_MESSAGE_TO_TARGET {
        return inspect_tunnelled(message, depth);
    }
    match super::devtools_guard::refuse(method, message.params) {
        Some(reason) => Verdict::Deny(reason),
        None => Verdict::Allow,
    }
}

/// `Target.sendMessageToTarget` carries a whole CDP call as a string: it is
/// inspected like any other call, so the tunnel is no way around the rules.
fn inspect_tunnelled(message: &CdpMessage<'_>, depth: usize) -> Verdict {
    if depth >= MAX_TUNNEL_DEPTH {
        return Verdict::Deny("Target.sendMessageToTarget nested too deeply".into());
    }
    let inner = message
        .params
        .and_then(|raw| serde_json::from_str::<Tunnel<'_>>(raw.get()).ok());
    let Some(inner) = inner else {
        return Verdict::Deny("Target.sendMessageToTarget needs params.message (a string)".into());
    };
    let Ok(call) = parse(Direction::ToBrowser, &inner.message) else {
        return Verdict::Deny(
            "Target.sendMessageToTarget carries a message that is not a CDP call".into(),
        );
    };
    match inspect_call(&call, depth + 1) {
        Verdict::Allow => Verdict::Allow,
        Verdict::Absorb(reason) | Verdict::Deny(reason) => Verdict::Deny(reason),
        Verdict::Hold(reason) => Verdict::Hold(reason),
    }
}

/// The gateway's own answer to a call it did not forward (`None` for
/// [`Verdict::Allow`]): a CDP error `{"id", "error": {"code": -32000,
/// "message": "Cubicle: <reason>"}}` or an empty result, on the caller's
/// session.
pub fn answer(message: &CdpMessage<'_>, verdict: &Verdict) -> Option<String> {
    let body = match verdict {
        Verdict::Allow => return None,
        Verdict::Deny(reason) => error_body(reason),
        Verdict::Hold(_) => error_body(HOLD_UNAVAILABLE),
        Verdict::Absorb(_) => ("result", json!({})),
    };
    let mut reply = Map::new();
    reply.insert("id".into(), json!(message.id));
    reply.insert(body.0.into(), body.1);
    if let Some(session) = &message.session_id {
        reply.insert("sessionId".into(), Value::String(session.to_string()));
    }
    Some(Value::Object(reply).to_string())
}

fn error_body(reason: &str) -> (&'static str, Value) {
    (
        "error",
        json!({ "code": -32000, "message": format!("Cubicle: {reason}") }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(text: &str) -> Verdict {
        inspect(
            Direction::ToBrowser,
            &parse(Direction::ToBrowser, text).unwrap(),
        )
    }

    #[test]
    fn page_changing_methods_are_listed() {
        for method in [
            "Input.dispatchMouseEvent",
            "Input.insertText",
            "Runtime.evaluate",
            "Page.navigate",
            "DOM.setFileInputFiles",
            "CSS.setStyleTexts",
            "Target.createTarget",
            "Storage.clearDataForOrigin",
            "Storage.clearCookies",
        ] {
            assert!(changes_page(method), "{method}");
        }
        for method in [
            "Runtime.getProperties",
            "DOM.getDocument",
            "Page.captureScreenshot",
            "Browser.getVersion",
            "Inputs.x",
            "Page.navigated",
        ] {
            assert!(!changes_page(method), "{method}");
        }
    }

    #[test]
    fn ordinary_calls_and_events_pass() {
        assert_eq!(
            call(r#"{"id":1,"method":"Browser.getVersion"}"#),
            Verdict::Allow
        );
        assert_eq!(
            call(r#"{"id":2,"method":"Page.navigate","params":{"url":"data:,x"},"sessionId":"S"}"#),
            Verdict::Allow
        );
        let event = r#"{"method":"Page.loadEventFired","params":{"timestamp":1.5}}"#;
        let event = parse(Direction::ToClient, event).unwrap();
        assert_eq!(inspect(Direction::ToClient, &event), Verdict::Allow);
        let reply = parse(Direction::ToClient, r#"{"id":3,"result":{"x":[1,2]}}"#).unwrap();
        assert_eq!(reply.id, Some(3));
    }

    #[test]
    fn reserved_methods_never_reach_the_browser() {
        assert!(matches!(
            call(
                r#"{"id":1,"method":"Browser.setDownloadBehavior","params":{"behavior":"allow"}}"#
            ),
            Verdict::Absorb(_)
        ));
        // An escaped name is the same name.
        assert!(matches!(
            call(r#"{"id":1,"method":"Page.setDownloadBehavio\u0072"}"#),
            Verdict::Absorb(_)
        ));
        assert!(matches!(
            call(r#"{"id":1,"method":"Target.exposeDevToolsProtocol","params":{"targetId":"T"}}"#),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn the_target_tunnel_is_inspected_too() {
        let tunnelled = r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"sessionId":"S","message":"{\"id\":1,\"method\":\"Page.setDownloadBehavior\",\"params\":{\"behavior\":\"allow\"}}"}}"#;
        assert!(matches!(call(tunnelled), Verdict::Deny(_)));
        let fine = r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"message":"{\"id\":1,\"method\":\"Runtime.enable\"}"}}"#;
        assert_eq!(call(fine), Verdict::Allow);
        let junk = r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"message":"junk"}}"#;
        assert!(matches!(call(junk), Verdict::Deny(_)));
    }

    #[test]
    fn malformed_calls_are_refused() {
        for bad in [
            "garbage",
            "[1,2]",
            r#"{"method":"Browser.getVersion"}"#,
            r#"{"id":1}"#,
            r#"{"id":"one","method":"Browser.getVersion"}"#,
            r#"{"id":1,"method":"A.b","method":"Browser.setDownloadBehavior"}"#,
            r#"{"id":1,"method":"A.b"} trailing"#,
        ] {
            assert!(
                matches!(
                    parse(Direction::ToBrowser, bad),
                    Err(CdpError::Malformed(_))
                ),
                "{bad} was accepted"
            );
        }
        assert!(parse(Direction::ToClient, "{}").is_err());
    }

    #[test]
    fn answers_carry_the_id_and_session() {
        let message = parse(
            Direction::ToBrowser,
            r#"{"id":7,"method":"X.y","sessionId":"S1"}"#,
        )
        .unwrap();
        let reply: Value =
            serde_json::from_str(&answer(&message, &Verdict::Deny("no".into())).unwrap()).unwrap();
        assert_eq!(
            reply,
            json!({"id": 7, "sessionId": "S1", "error": {"code": -32000, "message": "Cubicle: no"}})
        );
        let held: Value =
            serde_json::from_str(&answer(&message, &Verdict::Hold("x".into())).unwrap()).unwrap();
        assert_eq!(
            held["error"]["message"],
            format!("Cubicle: {HOLD_UNAVAILABLE}")
        );
        let absorbed: Value =
            serde_json::from_str(&answer(&message, &Verdict::Absorb("x".into())).unwrap()).unwrap();
        assert_eq!(absorbed, json!({"id": 7, "sessionId": "S1", "result": {}}));
        assert_eq!(answer(&message, &Verdict::Allow), None);
    }
}
