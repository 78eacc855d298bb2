//! Calls the policy holds ([`crate::ops::cdp`] judges them): a held call
//! is parked on its connection — later calls keep flowing — and is
//! forwarded when an operator approves it, or answered with a CDP error
//! when denied or expired.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value, json};

use crate::approvals::Approval;
use crate::cdp::inspect::CdpMessage;
use crate::ops::cdp::CdpSession;

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

/// Waits, off the connection's path, for `approval` to be decided (until it
/// expires); on approval it is used up and the call's `text` goes on.
pub fn park(
    cdp: &CdpSession,
    approval: Box<Approval>,
    message: &CdpMessage<'_>,
    text: String,
) -> Parked {
    let decision = cdp.wait(approval, message);
    let id = message.id;
    let session = message.session_id.as_deref().map(str::to_owned);
    Box::pin(async move {
        let result = decision.await;
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
