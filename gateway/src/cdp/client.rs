//! The gateway's own CDP client: calls typed by `chromiumoxide_cdp`'s
//! generated protocol (a method's parameters and its reply are Rust types,
//! its name is the type's), sent over a [`Browser`] socket that was opened
//! through the guest channel.
//!
//! chromiumoxide's own `Browser` is not used: it connects by URL over TCP,
//! and the workspace's DevTools is reachable only through the guest channel
//! (a Unix socket and a CONNECT handshake); a listener on the host to
//! bridge it would be a way around the CDP proxy for any local process. Its
//! protocol types work over any transport, so they are what this speaks.

use std::collections::HashMap;

use chromiumoxide_types::{
    CallId, CdpJsonEventMessage, Command, Message, MethodCall, MethodType, Response,
};
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use tokio_tungstenite::tungstenite;

use super::Browser;

/// One CDP connection of the gateway's with a workspace's browser.
pub struct Client {
    socket: Browser,
    next_id: usize,
}

impl Client {
    pub fn new(socket: Browser) -> Self {
        Client { socket, next_id: 0 }
    }

    /// Sends `command`, on page session `session` (flat) or the browser's;
    /// its call id, for [`Client::replies`].
    pub async fn send<C: Command>(
        &mut self,
        command: &C,
        session: Option<&str>,
    ) -> Result<CallId, String> {
        let method = command.identifier();
        self.next_id += 1;
        let params = serde_json::to_value(command)
            .map_err(|e| format!("{method}: its parameters are not JSON: {e}"))?;
        let call = MethodCall {
            id: CallId::new(self.next_id),
            method: method.clone(),
            session_id: session.map(str::to_owned),
            params,
        };
        let text = serde_json::to_string(&call).map_err(|e| format!("{method}: {e}"))?;
        self.socket
            .send(tungstenite::Message::text(text))
            .await
            .map_err(|e| format!("sending {method}: {e}"))?;
        Ok(call.id)
    }

    /// The next message from the browser, a reply or an event; `None` once
    /// the browser closed the connection.
    pub async fn next(&mut self) -> Option<Result<Message, String>> {
        loop {
            let frame = match self.socket.next().await? {
                Ok(tungstenite::Message::Text(text)) => text,
                Ok(tungstenite::Message::Close(_)) => return None,
                Ok(_) => continue,
                Err(e) => return Some(Err(e.to_string())),
            };
            return Some(
                serde_json::from_str::<Message>(&frame)
                    .map_err(|e| format!("the browser sent a message that is not CDP: {e}")),
            );
        }
    }

    /// The replies to `ids`, in that order; events in between are skipped.
    pub async fn replies(&mut self, ids: &[CallId]) -> Result<Vec<Response>, String> {
        let mut got: HashMap<CallId, Response> = HashMap::new();
        while got.len() < ids.len() {
            let message = self
                .next()
                .await
                .ok_or_else(|| "the browser closed the session".to_owned())??;
            if let Message::Response(reply) = message
                && ids.contains(&reply.id)
            {
                got.insert(reply.id, reply);
            }
        }
        Ok(ids.iter().filter_map(|id| got.remove(id)).collect())
    }

    /// Sends `command` and waits for its reply, typed.
    pub async fn call<C: Command + MethodType>(
        &mut self,
        command: &C,
        session: Option<&str>,
    ) -> Result<C::Response, String> {
        let id = self.send(command, session).await?;
        let reply = self.replies(&[id]).await?.pop();
        let reply = reply.ok_or_else(|| format!("{}: no reply", command.identifier()))?;
        reply_of::<C>(reply)
    }
}

/// `reply` as `C`'s result, or the browser's error.
pub fn reply_of<C: Command + MethodType>(reply: Response) -> Result<C::Response, String> {
    let method = C::method_id();
    if let Some(error) = reply.error {
        return Err(format!("{method}: {}", error.message));
    }
    let result = reply.result.unwrap_or_default();
    C::response_from_value(result)
        .map_err(|e| format!("{method}: the reply is not the protocol's: {e}"))
}

/// `event`'s parameters as `E`, when it is that event.
pub fn event_of<E: DeserializeOwned>(
    event: &CdpJsonEventMessage,
    identifier: &str,
) -> Option<Result<E, String>> {
    (event.method == identifier).then(|| {
        serde_json::from_value(event.params.clone())
            .map_err(|e| format!("{identifier}: the event is not the protocol's: {e}"))
    })
}
