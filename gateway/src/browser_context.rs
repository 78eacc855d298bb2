//! The browser context of screen actions: where a click or a keystroke is
//! about to land, read through the gateway's own CDP session with the
//! workspace's Chromium (one per workspace, opened on first use, dropped
//! when the workspace stops), just before each gated action.
//!
//! What it sees: the active tab (the visible page of the focused window,
//! else the visible one) — its URL, origin and host — and the kind of the
//! focused element: a password field, a payment-card field (`autocomplete`
//! `cc-*`), a file input, a text field (input, textarea, contenteditable),
//! an iframe whose inside it cannot read, something else, or nothing. It
//! descends into open shadow roots and same-origin iframes. It reads the
//! page from an isolated world, so page scripts cannot redefine what it
//! calls.
//!
//! What it cannot see: inside cross-origin iframes (reported as `frame`),
//! closed shadow roots, anything outside Chromium (a terminal, another
//! program: keystrokes there are judged without a browser context), the
//! omnibox and browser UI (typing a URL there is not a navigation it can
//! judge; CDP navigation is judged separately), and where a click lands
//! inside the page (the rule sees the page and focus, not the element under
//! the pointer). A page can change between the read and the action. When
//! the browser does not answer in time the context is "unreadable", and the
//! policy treats every browser rule that would hold or deny as matching.
//!
//! chromiumoxide was the planned client; it is not used because it only
//! connects by URL over TCP, and the workspace's DevTools endpoint is
//! reachable only through the guest channel (a Unix socket and a CONNECT
//! handshake). A listener on the host to bridge it would be a way around
//! the CDP proxy for any local process. The handful of calls needed here
//! (four methods) do not need its generated protocol types either.

use std::collections::HashMap;
use std::time::Duration;

use cubicle_policy::{BrowserContext, Focus};
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::backend::Backend;
use cubicle_runtime::manager::Manager;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::cdp::Browser as BrowserSocket;

/// How long one lookup may take before the context is unreadable.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// Tabs looked at, at most.
const MAX_PAGES: usize = 16;
/// The isolated world's name (shows in DevTools).
const WORLD: &str = "cubicle-policy";

/// Runs in the page's isolated world: what is focused, and whether the
/// page is the one on screen.
const PROBE: &str = r#"(() => {
  let doc = document, e = doc.activeElement;
  for (let depth = 0; depth < 8 && e; depth++) {
    if (e.shadowRoot && e.shadowRoot.activeElement) { e = e.shadowRoot.activeElement; continue; }
    const tag = e.localName;
    if ((tag === 'iframe' || tag === 'frame') && e.contentDocument && e.contentDocument.activeElement) {
      doc = e.contentDocument; e = doc.activeElement; continue;
    }
    break;
  }
  let kind = 'none';
  if (e && e !== doc.body && e !== doc.documentElement) {
    const tag = e.localName;
    const type = tag === 'input' ? String(e.type).toLowerCase() : '';
    const ac = String(e.getAttribute('autocomplete') || '').toLowerCase();
    if (tag === 'iframe' || tag === 'frame') kind = 'frame';
    else if (type === 'password') kind = 'password';
    else if ((tag === 'input' || tag === 'select') && /(^|\s)cc-/.test(ac)) kind = 'credit_card';
    else if (type === 'file') kind = 'file_input';
    else if (tag === 'input' || tag === 'textarea' || e.isContentEditable) kind = 'text';
    else kind = 'other';
  }
  return { visible: document.visibilityState === 'visible', focused: document.hasFocus(), url: location.href, kind };
})()"#;

/// What the browser looked like.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// No browser page on screen (not running, no tab, none visible).
    Absent,
    /// The browser did not answer in time, or answered nonsense (why).
    Unreadable(String),
    /// The tab the action lands in; several when the browser cannot tell
    /// which of them has the keyboard (each is judged, the strictest counts).
    Known(Vec<BrowserContext>),
}

/// One workspace's CDP session.
pub(crate) struct Session {
    socket: BrowserSocket,
    next_id: u64,
    /// targetId → sessionId (flat sessions).
    attached: HashMap<String, String>,
    /// sessionId → the isolated world's execution context.
    worlds: HashMap<String, i64>,
}

/// Where a workspace's host keeps its CDP session (made on first use).
#[derive(Default)]
pub struct BrowserSlot(tokio::sync::Mutex<Option<Session>>);

impl BrowserSlot {
    /// Ends the session (its workspace stopped).
    pub async fn close(&self) {
        *self.0.lock().await = None;
    }
}

/// The active tab and focused element of workspace `id`'s browser, read
/// over the gateway's own CDP session, kept in `slot` (its host's).
pub async fn context(manager: &Manager<AnyBackend>, slot: &BrowserSlot, id: &str) -> Lookup {
    let mut session = slot.0.lock().await;
    let looked = tokio::time::timeout(LOOKUP_TIMEOUT, lookup(manager, id, &mut session)).await;
    match looked {
        Ok(Ok(lookup)) => lookup,
        Ok(Err(LookupError::NoBrowser)) => {
            *session = None;
            Lookup::Absent
        }
        Ok(Err(LookupError::Broken(why))) => {
            *session = None;
            Lookup::Unreadable(why)
        }
        Err(_) => {
            // A half-read answer would confuse the next lookup.
            *session = None;
            Lookup::Unreadable(format!(
                "the browser did not answer within {LOOKUP_TIMEOUT:?}"
            ))
        }
    }
}

pub(crate) enum LookupError {
    /// Nothing listens: no browser running.
    NoBrowser,
    /// It answered, but not as CDP should.
    Broken(String),
}

async fn lookup(
    manager: &Manager<AnyBackend>,
    id: &str,
    slot: &mut Option<Session>,
) -> Result<Lookup, LookupError> {
    open(manager, id, slot).await?.read().await
}

/// The session in `slot`, made first when there is none.
async fn open<'a>(
    manager: &Manager<AnyBackend>,
    id: &str,
    slot: &'a mut Option<Session>,
) -> Result<&'a mut Session, LookupError> {
    if slot.is_none() {
        let record = manager.get(id).await.map_err(|_| LookupError::NoBrowser)?;
        let channel = manager.backend().channel(&manager.spec(&record));
        let socket = crate::cdp::open_browser_endpoint(&channel)
            .await
            .map_err(|e| {
                tracing::debug!(workspace = id, err = %e, "no browser to read a context from");
                LookupError::NoBrowser
            })?;
        *slot = Some(Session {
            socket,
            next_id: 0,
            attached: HashMap::new(),
            worlds: HashMap::new(),
        });
    }
    slot.as_mut()
        .ok_or_else(|| LookupError::Broken("no session".into()))
}

impl BrowserSlot {
    /// Runs `work` on the session (made first when there is none), within
    /// [`LOOKUP_TIMEOUT`]; a session that failed or timed out is dropped,
    /// as a half-read answer would confuse the next caller.
    pub(crate) async fn with<T>(
        &self,
        manager: &Manager<AnyBackend>,
        id: &str,
        work: impl for<'s> FnOnce(
            &'s mut Session,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, LookupError>> + Send + 's>,
        >,
    ) -> Result<T, LookupError> {
        let mut slot = self.0.lock().await;
        let run = async {
            let session = open(manager, id, &mut slot).await?;
            work(session).await
        };
        match tokio::time::timeout(LOOKUP_TIMEOUT, run).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                *slot = None;
                Err(err)
            }
            Err(_) => {
                *slot = None;
                Err(LookupError::Broken(format!(
                    "the browser did not answer within {LOOKUP_TIMEOUT:?}"
                )))
            }
        }
    }
}

impl Session {
    pub(crate) async fn send(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<u64, LookupError> {
        self.next_id += 1;
        let mut call = json!({ "id": self.next_id, "method": method, "params": params });
        if let Some(session) = session {
            call["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(call.to_string()))
            .await
            .map_err(|e| LookupError::Broken(format!("sending {method}: {e}")))?;
        Ok(self.next_id)
    }

    /// The replies to `ids`, in that order (events in between are skipped).
    pub(crate) async fn replies(&mut self, ids: &[u64]) -> Result<Vec<Value>, LookupError> {
        let mut got: HashMap<u64, Value> = HashMap::new();
        while got.len() < ids.len() {
            let message = self
                .socket
                .next()
                .await
                .ok_or_else(|| LookupError::Broken("the browser closed the session".into()))?
                .map_err(|e| LookupError::Broken(e.to_string()))?;
            let Message::Text(text) = message else {
                continue;
            };
            let value: Value =
                serde_json::from_str(&text).map_err(|e| LookupError::Broken(e.to_string()))?;
            if let Some(id) = value["id"].as_u64()
                && ids.contains(&id)
            {
                got.insert(id, value);
            }
        }
        Ok(ids.iter().filter_map(|id| got.remove(id)).collect())
    }

    pub(crate) async fn call(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, LookupError> {
        let id = self.send(method, params, session).await?;
        let mut reply = self.replies(&[id]).await?;
        let reply = reply.pop().unwrap_or_default();
        match reply.get("error") {
            Some(error) => Err(LookupError::Broken(format!("{method}: {error}"))),
            None => Ok(reply["result"].clone()),
        }
    }

    /// The flat session of page `target`, attaching once.
    pub(crate) async fn attach(&mut self, target: &str) -> Result<String, LookupError> {
        if let Some(session) = self.attached.get(target) {
            return Ok(session.clone());
        }
        let result = self
            .call(
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
                None,
            )
            .await?;
        let session = result["sessionId"]
            .as_str()
            .ok_or_else(|| LookupError::Broken("Target.attachToTarget gave no sessionId".into()))?
            .to_owned();
        self.attached.insert(target.to_owned(), session.clone());
        Ok(session)
    }

    /// The isolated world of the page on `session` (its main frame is the target).
    pub(crate) async fn world(&mut self, target: &str, session: &str) -> Result<i64, LookupError> {
        if let Some(&context) = self.worlds.get(session) {
            return Ok(context);
        }
        let result = self
            .call(
                "Page.createIsolatedWorld",
                json!({ "frameId": target, "worldName": WORLD, "grantUniveralAccess": false }),
                Some(session),
            )
            .await?;
        let context = result["executionContextId"].as_i64().ok_or_else(|| {
            LookupError::Broken("Page.createIsolatedWorld gave no context".into())
        })?;
        self.worlds.insert(session.to_owned(), context);
        Ok(context)
    }

    /// Probes each page; the one on screen (focused first) wins.
    /// The browser's tabs (at most [`MAX_PAGES`]), by target id; what was
    /// kept of tabs that closed is forgotten.
    pub(crate) async fn pages(&mut self) -> Result<Vec<String>, LookupError> {
        let targets = self.call("Target.getTargets", json!({}), None).await?;
        let pages: Vec<String> = targets["targetInfos"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["type"] == "page")
            .filter_map(|t| t["targetId"].as_str().map(str::to_owned))
            .take(MAX_PAGES)
            .collect();
        self.attached.retain(|target, _| pages.contains(target));
        let live: Vec<String> = self.attached.values().cloned().collect();
        self.worlds.retain(|session, _| live.contains(session));
        Ok(pages)
    }

    /// Forgets the isolated world of `session` (it went with a navigation).
    pub(crate) fn forget_world(&mut self, session: &str) {
        self.worlds.remove(session);
    }

    async fn read(&mut self) -> Result<Lookup, LookupError> {
        let pages = self.pages().await?;
        let mut probes = Vec::new();
        for target in &pages {
            let session = self.attach(target).await?;
            probes.push((target.clone(), session));
        }
        // The worlds first (each a call of its own), then every probe sent
        // before any answer is read: one round trip for all tabs.
        let mut contexts = Vec::new();
        for (target, session) in &probes {
            contexts.push(self.world(target, session).await?);
        }
        let mut sent = Vec::new();
        for ((_, session), context) in probes.iter().zip(contexts) {
            let params =
                json!({ "expression": PROBE, "contextId": context, "returnByValue": true });
            sent.push(self.send("Runtime.evaluate", params, Some(session)).await?);
        }
        let replies = self.replies(&sent).await?;
        // Every visible tab that says it has the focus (else every visible
        // one): a CDP client's focus emulation (Playwright turns it on) makes
        // several say so, and which window X gives the keys to cannot be read
        // from here; the gate judges each and the strictest counts.
        let (mut focused, mut visible) = (Vec::new(), Vec::new());
        let mut failed = 0;
        for (reply, (_, session)) in replies.iter().zip(&probes) {
            let value = &reply["result"]["result"]["value"];
            if reply.get("error").is_some() || !value.is_object() {
                // The world went with a navigation: made again next time.
                self.worlds.remove(session);
                failed += 1;
                continue;
            }
            if value["visible"] != true {
                continue;
            }
            let url = value["url"].as_str().unwrap_or_default();
            let context =
                BrowserContext::at(url, focus_of(value["kind"].as_str().unwrap_or_default()));
            match value["focused"] == true {
                true => focused.push(context),
                false => visible.push(context),
            }
        }
        let candidates = if focused.is_empty() { visible } else { focused };
        if failed > 0 {
            return Ok(Lookup::Unreadable(format!(
                "{failed} tab(s) changed while they were read"
            )));
        }
        Ok(match candidates.is_empty() {
            true => Lookup::Absent,
            false => Lookup::Known(candidates),
        })
    }
}

fn focus_of(kind: &str) -> Focus {
    match kind {
        "password" => Focus::Password,
        "credit_card" => Focus::CreditCard,
        "file_input" => Focus::FileInput,
        "text" => Focus::Text,
        "frame" => Focus::Frame,
        "none" => Focus::None,
        _ => Focus::Other,
    }
}
