//! The browser as operations: who may open a CDP session on a workspace,
//! and each call on it. A call that changes the page is refused to the
//! agent while an operator holds control; every call is an event
//! (`cdp.method`, outcome `ok` or `denied`) before it goes on; and the
//! policy judges each one: a `cdp` subject (method and parameters), and
//! also a `navigate` subject (`Page.navigate`, `Target.createTarget`) or an
//! `upload` (`DOM.setFileInputFiles`); a call tunnelled through
//! `Target.sendMessageToTarget` is judged as itself. The door
//! ([`crate::cdp_proxy`]) parses and relays; it decides nothing.

use std::future::Future;
use std::time::Duration;

use chromiumoxide_cdp::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide_cdp::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide_cdp::cdp::browser_protocol::target::CreateTargetParams;
use cubicle_policy::Subject;
use cubicle_runtime::channel::GuestChannel;
use cubicle_runtime::state::now_ms;
use serde::Deserialize;
use serde_json::{Value, json};

use super::gates::{self, Gated, Verdict};
use super::{EventKind, OpContext, Permission, access};
use crate::approvals::Approval;
use crate::cdp::inspect::{self, CdpMessage, Direction, parse};
use crate::error::OpError;
use crate::ops::Core;

/// The guest channel of running workspace `id`, if the caller may use its
/// browser.
pub async fn may_use_browser(
    state: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<GuestChannel, OpError> {
    access::guest(state, ctx, id, Permission::Browser).await
}

/// One open CDP connection: who it belongs to and which workspace.
pub struct CdpSession {
    pub state: Core,
    pub ctx: OpContext,
    pub workspace: String,
}

/// What becomes of one call.
pub enum Call {
    /// It goes to the browser.
    Forward,
    /// It is answered with this reason as a CDP error.
    Refuse(String),
    /// It waits for an operator (see [`CdpSession::wait`]).
    Hold(Box<Approval>),
}

impl CdpSession {
    /// Judges one call the inspector let through: the control lock and
    /// its event, then the policy.
    pub async fn call(&self, message: &CdpMessage<'_>) -> Call {
        let method = message.method.as_deref().unwrap_or_default();
        let held = inspect::changes_page(method)
            .then(|| access::agent_held_off(&self.state, &self.ctx, &self.workspace).err())
            .flatten();
        let outcome = if held.is_some() { "denied" } else { "ok" };
        let noted = self
            .state
            .audit
            .note(
                Some(&self.ctx),
                EventKind::CdpMethod,
                Some(&self.workspace),
                json!({ "method": method }),
                Some(outcome),
            )
            .await;
        match (held, noted) {
            (Some(held), _) => return Call::Refuse(held.message),
            (None, Err(err)) => return Call::Refuse(err.message),
            (None, Ok(())) => {}
        }
        let (gated, more) = match gated(message) {
            Ok(gated) => gated,
            Err(reason) => return Call::Refuse(reason),
        };
        match gates::decide_all(&self.state, &self.ctx, &self.workspace, &gated, &more).await {
            Ok(Verdict::Allow) => Call::Forward,
            Ok(Verdict::Held(approval)) => Call::Hold(approval),
            Err(err) => Call::Refuse(err.message),
        }
    }

    /// Waits for held `message`'s `approval` to be decided (until it
    /// expires): `Ok` once approved and used up, else the reason.
    pub fn wait(
        &self,
        approval: Box<Approval>,
        message: &CdpMessage<'_>,
    ) -> impl Future<Output = Result<(), String>> + Send + 'static {
        let (state, ctx) = (self.state.clone(), self.ctx.clone());
        let judged = gated(message);
        async move {
            let (gated, more) = judged?;
            let left = u64::try_from(approval.expires_at - now_ms()).unwrap_or(0);
            let wait = Duration::from_millis(left) + Duration::from_secs(1);
            gates::wait(&state, &ctx, &approval, &gated, &more, wait)
                .await
                .map_err(|err| err.message)
        }
    }
}

/// What the policy sees of a call: its main subject, any others, and the
/// parameters as JSON. A call that has a subject of its own (a navigation,
/// an upload) is read as the protocol's type for its method; one whose
/// parameters do not read as that type is refused (why), since what it
/// would do cannot be judged.
pub fn subjects(message: &CdpMessage<'_>) -> Result<(Subject, Vec<Subject>, Value), String> {
    let method = message.method.as_deref().unwrap_or_default().to_owned();
    let params: Value = message
        .params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null);
    let mut more = Vec::new();
    add_specific(&method, &params, &mut more, 0)?;
    let main = Subject::Cdp {
        method,
        params: params.clone(),
    };
    Ok((main, more, params))
}

/// `params` read as `P`, the parameters of `method`.
fn typed<'v, P: Deserialize<'v>>(method: &str, params: &'v Value) -> Result<P, String> {
    P::deserialize(params).map_err(|e| {
        format!("{method}: the parameters are not the protocol's ({e}); the gateway judges only calls it can read")
    })
}

fn add_specific(
    method: &str,
    params: &Value,
    more: &mut Vec<Subject>,
    depth: usize,
) -> Result<(), String> {
    match method {
        NavigateParams::IDENTIFIER => {
            let navigate: NavigateParams = typed(method, params)?;
            more.push(Subject::Navigate { url: navigate.url });
        }
        CreateTargetParams::IDENTIFIER => {
            let create: CreateTargetParams = typed(method, params)?;
            more.push(Subject::Navigate { url: create.url });
        }
        SetFileInputFilesParams::IDENTIFIER => {
            let files = typed::<SetFileInputFilesParams>(method, params)?.files;
            more.push(Subject::Upload { files });
        }
        inspect::SEND_MESSAGE_TO_TARGET if depth == 0 => {
            let tunnel: inspect::Tunnel<'_> = typed(method, params)?;
            let call = parse(Direction::ToBrowser, &tunnel.message).map_err(|e| e.to_string())?;
            let method = call.method.as_deref().unwrap_or_default().to_owned();
            let params: Value = call
                .params
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or(Value::Null);
            add_specific(&method, &params, more, depth + 1)?;
            more.push(Subject::Cdp { method, params });
        }
        _ => {}
    }
    Ok(())
}

/// A call as the gate sees it: bound to its method and parameters; a call
/// that changes the page is refused to the agent during a take-over, when
/// it is asked and again when its approval lands.
fn gated(message: &CdpMessage<'_>) -> Result<(Gated, Vec<Subject>), String> {
    let (main, more, params) = subjects(message)?;
    let method = message.method.as_deref().unwrap_or_default();
    let bound = json!({ "method": method, "params": params });
    let lock = match inspect::changes_page(method) {
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
    Ok((gated, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(text: &str) -> (Subject, Vec<Subject>) {
        let message = parse(Direction::ToBrowser, text).unwrap();
        let (main, more, _) = subjects(&message).unwrap();
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

    #[test]
    fn a_call_whose_subject_cannot_be_read_is_refused() {
        for text in [
            r#"{"id":1,"method":"Page.navigate"}"#,
            r#"{"id":1,"method":"Page.navigate","params":{"url":7}}"#,
            r#"{"id":1,"method":"Page.navigate","params":{"url":"https://a.example/","transitionType":"teleport"}}"#,
            r#"{"id":1,"method":"Target.createTarget","params":{"newWindow":true}}"#,
            r#"{"id":1,"method":"DOM.setFileInputFiles","params":{"files":"/tmp/a"}}"#,
            r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"message":"{\"id\":1,\"method\":\"Page.navigate\",\"params\":{}}"}}"#,
        ] {
            let message = parse(Direction::ToBrowser, text).unwrap();
            let refused = subjects(&message).err();
            assert!(
                refused
                    .as_deref()
                    .is_some_and(|why| why.contains("not the protocol's")),
                "{text}: {refused:?}"
            );
        }
    }
}
