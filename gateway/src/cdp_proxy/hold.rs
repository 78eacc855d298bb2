//! CDP calls the policy judges: each call is a `cdp` subject (method and
//! parameters), and also a `navigate` subject (`Page.navigate`,
//! `Target.createTarget`) or an `upload` (`DOM.setFileInputFiles`); a call
//! tunnelled through `Target.sendMessageToTarget` is judged as itself. A
//! held call is parked on its connection — later calls keep flowing — and
//! is forwarded when an operator approves it, or answered with a CDP error
//! when denied or expired.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use cubicle_policy::Subject;
use cubicle_runtime::state::now_ms;
use serde_json::{Map, Value, json};

use super::inspect::{CdpMessage, Direction, parse};
use super::relay::Gate;
use crate::approvals::Approval;
use crate::ops::gates::{self, Gated, Verdict};

/// Held calls one connection may have parked at once.
pub const MAX_PARKED: usize = 32;

/// A parked call's outcome: its raw text (to forward), id and session (to
/// answer), and the decision (`Err` carries the reason for the client).
pub struct Decided {
    pub text: String,
    pub id: Option<i64>,
    pub session: Option<String>,
    pub result: Result<(), String>,
}

pub type Parked = Pin<Box<dyn Future<Output = Decided> + Send>>;

/// What the policy sees of a call: its main subject, any others, and the
/// parameters as JSON.
pub fn subjects(message: &CdpMessage<'_>) -> (Subject, Vec<Subject>, Value) {
    let method = message.method.as_deref().unwrap_or_default().to_owned();
    let params: Value = message
        .params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null);
    let mut more = Vec::new();
    add_specific(&method, &params, &mut more, 0);
    let main = Subject::Cdp {
        method,
        params: params.clone(),
    };
    (main, more, params)
}

fn add_specific(method: &str, params: &Value, more: &mut Vec<Subject>, depth: usize) {
    let url = params["url"].as_str().map(str::to_owned);
    match method {
        "Page.navigate" | "Target.createTarget" => {
            if let Some(url) = url {
                more.push(Subject::Navigate { url });
            }
        }
        "DOM.setFileInputFiles" => {
            let files = params["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            more.push(Subject::Upload { files });
        }
        "Target.sendMessageToTarget" if depth == 0 => {
            let inner = params["message"].as_str().unwrap_or_default();
            if let Ok(call) = parse(Direction::ToBrowser, inner) {
                let method = call.method.as_deref().unwrap_or_default().to_owned();
                let params: Value = call
                    .params
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or(Value::Null);
                add_specific(&method, &params, more, depth + 1);
                more.push(Subject::Cdp { method, params });
            }
        }
        _ => {}
    }
}

/// A call as the gate sees it: bound to its method and parameters; a call
/// that changes the page is refused to the agent during a take-over, when
/// it is asked and again when its approval lands.
fn gated(message: &CdpMessage<'_>) -> (Gated, Vec<Subject>) {
    let (main, more, params) = subjects(message);
    let method = message.method.as_deref().unwrap_or_default();
    let bound = json!({ "method": method, "params": params });
    let lock = match super::inspect::changes_page(method) {
        true => gates::Lock::Change,
        false => gates::Lock::Read,
    };
    let gated = Gated {
        operation: "cdp",
        subject: main,
        params: bound.clone(),
        shown: bound,
        lock,
    };
    (gated, more)
}

/// The policy's answer to a call: `Ok(None)` to forward it, `Ok(Some)` to
/// park it on this approval, `Err` (the reason) to refuse it.
pub async fn policy(
    gate: &Gate,
    message: &CdpMessage<'_>,
) -> Result<Option<Box<Approval>>, String> {
    let (gated, more) = gated(message);
    match gates::decide_all(&gate.state, &gate.ctx, &gate.workspace, &gated, &more).await {
        Ok(Verdict::Allow) => Ok(None),
        Ok(Verdict::Held(approval)) => Ok(Some(approval)),
        Err(err) => Err(err.message),
    }
}

/// Waits, off the connection's path, for `approval` to be decided (until it
/// expires); on approval it is used up and the call's `text` goes on.
pub fn park(
    gate: &Gate,
    approval: Box<Approval>,
    message: &CdpMessage<'_>,
    text: String,
) -> Parked {
    let (state, ctx) = (gate.state.clone(), gate.ctx.clone());
    let (gated, more) = gated(message);
    let id = message.id;
    let session = message.session_id.as_deref().map(str::to_owned);
    Box::pin(async move {
        let left = u64::try_from(approval.expires_at - now_ms()).unwrap_or(0);
        let wait = Duration::from_millis(left) + Duration::from_secs(1);
        let result = gates::wait(&state, &ctx, &approval, &gated, &more, wait)
            .await
            .map_err(|err| err.message);
        Decided {
            text,
            id,
            session,
            result,
        }
    })
}

/// The CDP error a refused parked call gets.
pub fn error_answer(decided: &Decided, reason: &str) -> String {
    let mut reply = Map::new();
    reply.insert("id".into(), json!(decided.id));
    reply.insert(
        "error".into(),
        json!({ "code": -32000, "message": format!("Cubicle: {reason}") }),
    );
    if let Some(session) = &decided.session {
        reply.insert("sessionId".into(), json!(session));
    }
    Value::Object(reply).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(text: &str) -> (Subject, Vec<Subject>) {
        let message = parse(Direction::ToBrowser, text).unwrap();
        let (main, more, _) = subjects(&message);
        (main, more)
    }

    #[test]
    fn navigation_and_uploads_are_their_own_subjects() {
        let (main, more) =
            judged(r#"{"id":1,"method":"Page.navigate","params":{"url":"https://a.example/"}}"#);
        assert!(matches!(main, Subject::Cdp { ref method, .. } if method == "Page.navigate"));
        assert_eq!(
            more,
            [Subject::Navigate {
                url: "https://a.example/".into()
            }]
        );
        let (_, more) = judged(
            r#"{"id":1,"method":"DOM.setFileInputFiles","params":{"files":["/tmp/a"],"nodeId":3}}"#,
        );
        assert_eq!(
            more,
            [Subject::Upload {
                files: vec!["/tmp/a".into()]
            }]
        );
        let tunnelled = r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"message":"{\"id\":1,\"method\":\"Page.navigate\",\"params\":{\"url\":\"file:///etc/passwd\"}}"}}"#;
        let (_, more) = judged(tunnelled);
        assert_eq!(
            more[0],
            Subject::Navigate {
                url: "file:///etc/passwd".into()
            }
        );
        assert!(matches!(&more[1], Subject::Cdp { method, .. } if method == "Page.navigate"));
        let (_, more) = judged(r#"{"id":1,"method":"Runtime.enable"}"#);
        assert!(more.is_empty());
    }
}
