//! Many CDP clients over one pipe: which message goes to whom.
//!
//! Each client has a root session on the pipe (`Target.attachToBrowserTarget`
//! for a browser client, `Target.attachToTarget {flatten}` for a page
//! client). A client's calls without a `sessionId` get its root session;
//! replies and events on its root session lose it again, so the client sees
//! what a WebSocket of its own to Chromium would show. Child sessions
//! (flattened) belong to the client whose session attached them, learnt
//! from `Target.attachedToTarget` events and `Target.attachToTarget` replies;
//! a client may only use sessions it owns. Every call gets a fresh id on the
//! pipe, so clients' ids never collide; the reply gets the client's id back.
//!
//! No I/O here: [`Router`] takes texts and says where texts go.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A client of the multiplexer.
pub type ClientId = u64;

/// A message as read at the top level: each field kept as its raw JSON.
type Fields = BTreeMap<String, Box<RawValue>>;

/// Where a text read from the pipe goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed {
    /// To a client, as is.
    ToClient(ClientId, String),
    /// The reply to a call the multiplexer made itself ([`Router::internal`]):
    /// its result, or the error's message.
    Internal(u64, Result<Value, String>),
    /// The client's root target is gone: close it with this reason.
    Close(ClientId, String),
}

/// What a forwarded call teaches about sessions once answered.
#[derive(Debug)]
enum Learn {
    Nothing,
    /// `result.sessionId` is a new session of the caller.
    Attached,
    /// The session named in the call is gone.
    Detached(String),
}

#[derive(Debug)]
enum Pending {
    Client {
        client: ClientId,
        id: Box<RawValue>,
        learn: Learn,
    },
    Internal,
}

struct Client {
    root: String,
}

/// The routing state of one pipe.
#[derive(Default)]
pub struct Router {
    next_id: u64,
    next_client: ClientId,
    pending: HashMap<u64, Pending>,
    clients: HashMap<ClientId, Client>,
    /// Every session a client owns (its root too) → the client.
    owners: HashMap<String, ClientId>,
}

impl Router {
    /// A call of the multiplexer's own (on `session`, or the pipe's own
    /// connection): its id on the pipe and the text to write.
    pub fn internal(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> (u64, String) {
        let id = self.fresh_id();
        self.pending.insert(id, Pending::Internal);
        let mut call = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            call["sessionId"] = Value::String(session.to_owned());
        }
        (id, call.to_string())
    }

    /// Forgets an internal call whose caller stopped waiting.
    pub fn forget(&mut self, id: u64) {
        self.pending.remove(&id);
    }

    /// A new client whose root session is `root`.
    pub fn add_client(&mut self, root: String) -> ClientId {
        self.next_client += 1;
        let client = self.next_client;
        self.owners.insert(root.clone(), client);
        self.clients.insert(client, Client { root });
        client
    }

    /// Forgets `client` and every session it owned; the text of the call
    /// that detaches its root session (which ends the sessions it attached
    /// and the browser contexts it made), if it was still known.
    pub fn remove_client(&mut self, client: ClientId) -> Option<String> {
        let root = self.clients.remove(&client)?.root;
        self.owners.retain(|_, owner| *owner != client);
        let (_, detach) = self.internal(
            "Target.detachFromTarget",
            json!({ "sessionId": root }),
            None,
        );
        Some(detach)
    }

    /// A text from `client`: the call to write to the pipe, or the CDP
    /// error to answer the client with.
    pub fn on_client_text(&mut self, client: ClientId, text: &str) -> Result<String, String> {
        let Some(root) = self.clients.get(&client).map(|c| c.root.clone()) else {
            return Err(error_reply(None, None, "the client is not connected"));
        };
        let mut fields: Fields = serde_json::from_str(text)
            .map_err(|_| error_reply(None, None, "Message must be a valid JSON object"))?;
        let id = fields
            .remove("id")
            .filter(|id| id.get().parse::<i64>().is_ok())
            .ok_or_else(|| error_reply(None, None, "Message must have integer 'id' property"))?;
        let method = fields
            .get("method")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            .ok_or_else(|| {
                error_reply(
                    Some(&id),
                    None,
                    "Message must have string 'method' property",
                )
            })?;
        let session = match fields.get("sessionId") {
            None => root,
            Some(raw) => {
                let named = serde_json::from_str::<String>(raw.get()).ok();
                match named.filter(|s| self.owners.get(s) == Some(&client)) {
                    Some(session) => session,
                    None => {
                        return Err(error_reply(
                            Some(&id),
                            Some(raw),
                            "Session with given id not found.",
                        ));
                    }
                }
            }
        };
        let learn = match method.as_str() {
            "Target.attachToTarget" | "Target.attachToBrowserTarget" => Learn::Attached,
            "Target.detachFromTarget" => fields
                .get("params")
                .and_then(|raw| serde_json::from_str::<SessionParam>(raw.get()).ok())
                .and_then(|p| p.session_id)
                .map_or(Learn::Nothing, Learn::Detached),
            _ => Learn::Nothing,
        };
        let pipe_id = self.fresh_id();
        fields.insert("id".into(), raw(&pipe_id.to_string()));
        fields.insert("sessionId".into(), raw(&Value::String(session).to_string()));
        self.pending
            .insert(pipe_id, Pending::Client { client, id, learn });
        Ok(serde_json::to_string(&fields).expect("raw JSON fields always serialize"))
    }

    /// A text read from the pipe: where it goes (nowhere, if no client
    /// owns it any more).
    pub fn on_browser_text(&mut self, text: &str) -> Vec<Routed> {
        let Ok(fields) = serde_json::from_str::<Fields>(text) else {
            tracing::warn!(
                len = text.len(),
                "Chromium sent a pipe message that is not a JSON object; dropped"
            );
            return Vec::new();
        };
        let session = fields
            .get("sessionId")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
        match fields.get("id").map(|raw| raw.get().parse::<u64>()) {
            Some(Ok(id)) => self.reply(id, fields, session),
            Some(Err(_)) => Vec::new(),
            None => self.event(fields, session),
        }
    }

    fn reply(&mut self, id: u64, mut fields: Fields, session: Option<String>) -> Vec<Routed> {
        match self.pending.remove(&id) {
            None => Vec::new(),
            Some(Pending::Internal) => {
                let outcome = match (fields.get("result"), fields.get("error")) {
                    (Some(result), _) => {
                        Ok(serde_json::from_str(result.get()).unwrap_or(Value::Null))
                    }
                    (None, Some(error)) => Err(serde_json::from_str::<Value>(error.get())
                        .ok()
                        .and_then(|e| e["message"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| error.get().to_owned())),
                    (None, None) => Ok(Value::Null),
                };
                vec![Routed::Internal(id, outcome)]
            }
            Some(Pending::Client {
                client,
                id: client_id,
                learn,
            }) => {
                if !self.clients.contains_key(&client) {
                    return Vec::new();
                }
                match learn {
                    Learn::Attached => {
                        let attached = fields
                            .get("result")
                            .and_then(|raw| serde_json::from_str::<SessionParam>(raw.get()).ok())
                            .and_then(|r| r.session_id);
                        if let Some(attached) = attached {
                            self.owners.insert(attached, client);
                        }
                    }
                    Learn::Detached(gone) if fields.contains_key("result") => {
                        self.forget_session(&gone);
                    }
                    _ => {}
                }
                fields.insert("id".into(), client_id);
                self.deliver(client, fields, session)
            }
        }
    }

    fn event(&mut self, fields: Fields, session: Option<String>) -> Vec<Routed> {
        let method = fields
            .get("method")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            .unwrap_or_default();
        let named = fields
            .get("params")
            .and_then(|raw| serde_json::from_str::<SessionParam>(raw.get()).ok())
            .and_then(|p| p.session_id);
        let Some(session) = session else {
            // On the pipe's own connection: only a root session ending
            // (its target closed or crashed) matters.
            if method == "Target.detachedFromTarget"
                && let Some(client) = named.and_then(|s| self.root_owner(&s))
            {
                self.clients.remove(&client);
                self.owners.retain(|_, owner| *owner != client);
                return vec![Routed::Close(client, "the target was closed".into())];
            }
            return Vec::new();
        };
        let Some(&client) = self.owners.get(&session) else {
            return Vec::new();
        };
        match (method.as_str(), named) {
            ("Target.attachedToTarget", Some(child)) => {
                self.owners.insert(child, client);
            }
            ("Target.detachedFromTarget", Some(child)) => self.forget_session(&child),
            _ => {}
        }
        self.deliver(client, fields, Some(session))
    }

    /// Forgets a child session (never a client's root).
    fn forget_session(&mut self, session: &str) {
        if self.root_owner(session).is_none() {
            self.owners.remove(session);
        }
    }

    fn root_owner(&self, session: &str) -> Option<ClientId> {
        self.clients
            .iter()
            .find(|(_, c)| c.root == session)
            .map(|(&id, _)| id)
    }

    fn deliver(
        &self,
        client: ClientId,
        mut fields: Fields,
        session: Option<String>,
    ) -> Vec<Routed> {
        let Some(entry) = self.clients.get(&client) else {
            return Vec::new();
        };
        if session.as_deref() == Some(entry.root.as_str()) {
            fields.remove("sessionId");
        }
        let text = serde_json::to_string(&fields).expect("raw JSON fields always serialize");
        vec![Routed::ToClient(client, text)]
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

#[derive(Deserialize)]
struct SessionParam {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("the multiplexer writes valid JSON")
}

/// A CDP error reply, as Chromium words them.
fn error_reply(id: Option<&RawValue>, session: Option<&RawValue>, message: &str) -> String {
    let mut fields = Fields::new();
    if let Some(id) = id {
        fields.insert("id".into(), id.to_owned());
    }
    if let Some(session) = session {
        fields.insert("sessionId".into(), session.to_owned());
    }
    let error = json!({ "code": -32600, "message": message }).to_string();
    fields.insert("error".into(), raw(&error));
    serde_json::to_string(&fields).expect("raw JSON fields always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn to_client(routed: Vec<Routed>) -> (ClientId, Value) {
        match routed.as_slice() {
            [Routed::ToClient(client, text)] => (*client, parsed(text)),
            other => panic!("expected one message to a client, got {other:?}"),
        }
    }

    #[test]
    fn ids_are_rewritten_and_root_sessions_added_and_stripped() {
        let mut router = Router::default();
        let a = router.add_client("RA".into());
        let b = router.add_client("RB".into());
        let call_a = parsed(
            &router
                .on_client_text(a, r#"{"id":1,"method":"Browser.getVersion"}"#)
                .unwrap(),
        );
        let call_b = parsed(
            &router
                .on_client_text(b, r#"{"id":1,"method":"Browser.getVersion"}"#)
                .unwrap(),
        );
        assert_eq!(call_a["sessionId"], "RA");
        assert_eq!(call_b["sessionId"], "RB");
        assert_ne!(
            call_a["id"], call_b["id"],
            "the clients' ids collided on the pipe"
        );
        let reply = json!({"id": call_b["id"], "sessionId": "RB", "result": {"product": "x"}});
        let (client, reply) = to_client(router.on_browser_text(&reply.to_string()));
        assert_eq!(client, b);
        assert_eq!(reply, json!({"id": 1, "result": {"product": "x"}}));
        // Each reply once.
        let again = json!({"id": call_b["id"], "sessionId": "RB", "result": {}});
        assert!(router.on_browser_text(&again.to_string()).is_empty());
    }

    #[test]
    fn child_sessions_are_learnt_and_only_their_owner_may_use_them() {
        let mut router = Router::default();
        let a = router.add_client("RA".into());
        let b = router.add_client("RB".into());
        // Auto-attach on A's browser session.
        let attached = json!({"method": "Target.attachedToTarget", "sessionId": "RA",
            "params": {"sessionId": "CA", "targetInfo": {"targetId": "T"}, "waitingForDebugger": true}});
        let (client, event) = to_client(router.on_browser_text(&attached.to_string()));
        assert_eq!(client, a);
        assert!(event.get("sessionId").is_none(), "{event}");
        // An explicit attach by B.
        let call = parsed(&router.on_client_text(b, r#"{"id":7,"method":"Target.attachToTarget","params":{"targetId":"T","flatten":true}}"#).unwrap());
        let reply = json!({"id": call["id"], "sessionId": "RB", "result": {"sessionId": "CB"}});
        assert_eq!(to_client(router.on_browser_text(&reply.to_string())).0, b);
        // Events on each child go to its owner, with the sessionId kept.
        let event = json!({"method": "Runtime.consoleAPICalled", "sessionId": "CB", "params": {}});
        let (client, event) = to_client(router.on_browser_text(&event.to_string()));
        assert_eq!((client, event["sessionId"].as_str()), (b, Some("CB")));
        // A may use CA, not CB.
        let ok = parsed(
            &router
                .on_client_text(a, r#"{"id":2,"method":"Runtime.enable","sessionId":"CA"}"#)
                .unwrap(),
        );
        assert_eq!(ok["sessionId"], "CA");
        let refused = parsed(
            &router
                .on_client_text(a, r#"{"id":3,"method":"Runtime.enable","sessionId":"CB"}"#)
                .unwrap_err(),
        );
        assert_eq!(refused["id"], 3);
        assert_eq!(
            refused["error"]["message"],
            "Session with given id not found."
        );
        // A detach event forgets the child.
        let detached = json!({"method": "Target.detachedFromTarget", "sessionId": "RA", "params": {"sessionId": "CA"}});
        assert_eq!(
            to_client(router.on_browser_text(&detached.to_string())).0,
            a
        );
        assert!(
            router
                .on_client_text(a, r#"{"id":4,"method":"Runtime.enable","sessionId":"CA"}"#)
                .is_err()
        );
    }

    #[test]
    fn a_client_that_leaves_is_detached_and_gets_nothing_more() {
        let mut router = Router::default();
        let a = router.add_client("RA".into());
        let call = parsed(
            &router
                .on_client_text(a, r#"{"id":1,"method":"Page.enable"}"#)
                .unwrap(),
        );
        let detach = parsed(&router.remove_client(a).unwrap());
        assert_eq!(detach["method"], "Target.detachFromTarget");
        assert_eq!(detach["params"]["sessionId"], "RA");
        assert!(
            detach.get("sessionId").is_none(),
            "sent on the pipe's own connection"
        );
        assert!(router.remove_client(a).is_none());
        let late = json!({"id": call["id"], "sessionId": "RA", "result": {}});
        assert!(router.on_browser_text(&late.to_string()).is_empty());
        let event = json!({"method": "Page.loadEventFired", "sessionId": "RA", "params": {}});
        assert!(router.on_browser_text(&event.to_string()).is_empty());
        // The multiplexer's own detach call is answered to it.
        let answer = json!({"id": detach["id"], "result": {}});
        assert!(matches!(
            router.on_browser_text(&answer.to_string()).as_slice(),
            [Routed::Internal(_, Ok(_))]
        ));
    }

    #[test]
    fn a_page_client_is_closed_when_its_target_goes() {
        let mut router = Router::default();
        let page = router.add_client("RP".into());
        let gone = json!({"method": "Target.detachedFromTarget", "params": {"sessionId": "RP", "targetId": "T"}});
        assert!(
            matches!(router.on_browser_text(&gone.to_string()).as_slice(), [Routed::Close(c, _)] if *c == page)
        );
        assert!(
            router
                .on_client_text(page, r#"{"id":1,"method":"Page.enable"}"#)
                .is_err()
        );
    }

    #[test]
    fn internal_calls_get_their_result_or_error() {
        let mut router = Router::default();
        let (id, text) = router.internal(
            "Target.attachToTarget",
            json!({"targetId": "T", "flatten": true}),
            None,
        );
        assert_eq!(parsed(&text)["id"], id);
        let error = json!({"id": id, "error": {"code": -32602, "message": "No target with given id found"}});
        assert_eq!(
            router.on_browser_text(&error.to_string()),
            vec![Routed::Internal(
                id,
                Err("No target with given id found".into())
            )]
        );
    }

    #[test]
    fn bad_calls_are_answered_not_forwarded() {
        let mut router = Router::default();
        let a = router.add_client("RA".into());
        for bad in [
            "nonsense",
            "[1]",
            r#"{"method":"A.b"}"#,
            r#"{"id":"1","method":"A.b"}"#,
            r#"{"id":1.5,"method":"A.b"}"#,
            r#"{"id":1}"#,
            r#"{"id":1,"method":"A.b","sessionId":7}"#,
            // A raw NUL would end the message early on the pipe.
            "{\"id\":1,\"method\":\"A.b\u{0}\"}",
        ] {
            let answer = router.on_client_text(a, bad);
            assert!(answer.is_err(), "{bad:?} was forwarded: {answer:?}");
            assert!(parsed(&answer.unwrap_err())["error"]["message"].is_string());
        }
        assert!(router.on_browser_text("junk").is_empty());
    }
}
