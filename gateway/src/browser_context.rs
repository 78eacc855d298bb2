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
//! It speaks CDP typed by `chromiumoxide_cdp` ([`crate::cdp::client`]).

use std::collections::HashMap;
use std::time::Duration;

use chromiumoxide_cdp::cdp::browser_protocol::page::{CreateIsolatedWorldParams, FrameId};
use chromiumoxide_cdp::cdp::browser_protocol::target::{AttachToTargetParams, GetTargetsParams};
use chromiumoxide_cdp::cdp::js_protocol::runtime::{EvaluateParams, ExecutionContextId};
use chromiumoxide_types::{CallId, Command, MethodType, Response};
use cubicle_policy::{BrowserContext, Focus};
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::backend::Backend;
use cubicle_runtime::manager::Manager;

use crate::cdp::client::{self, Client};

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
    client: Client,
    /// targetId → sessionId (flat sessions).
    attached: HashMap<String, String>,
    /// sessionId → the isolated world's execution context.
    worlds: HashMap<String, ExecutionContextId>,
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
            client: Client::new(socket),
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
    /// Sends `command` on page session `session` (else the browser's);
    /// its call id, for [`Session::replies`].
    pub(crate) async fn send<C: Command>(
        &mut self,
        command: &C,
        session: Option<&str>,
    ) -> Result<CallId, LookupError> {
        self.client
            .send(command, session)
            .await
            .map_err(LookupError::Broken)
    }

    /// The replies to `ids`, in that order (events in between are skipped).
    pub(crate) async fn replies(&mut self, ids: &[CallId]) -> Result<Vec<Response>, LookupError> {
        self.client.replies(ids).await.map_err(LookupError::Broken)
    }

    /// Sends `command` and waits for its typed reply.
    pub(crate) async fn call<C: Command + MethodType>(
        &mut self,
        command: &C,
        session: Option<&str>,
    ) -> Result<C::Response, LookupError> {
        self.client
            .call(command, session)
            .await
            .map_err(LookupError::Broken)
    }

    /// The flat session of page `target`, attaching once.
    pub(crate) async fn attach(&mut self, target: &str) -> Result<String, LookupError> {
        if let Some(session) = self.attached.get(target) {
            return Ok(session.clone());
        }
        let mut attach = AttachToTargetParams::new(target.to_owned());
        attach.flatten = Some(true);
        let session: String = self.call(&attach, None).await?.session_id.into();
        self.attached.insert(target.to_owned(), session.clone());
        Ok(session)
    }

    /// The isolated world of the page on `session` (its main frame is the target).
    pub(crate) async fn world(
        &mut self,
        target: &str,
        session: &str,
    ) -> Result<ExecutionContextId, LookupError> {
        if let Some(&context) = self.worlds.get(session) {
            return Ok(context);
        }
        let mut create = CreateIsolatedWorldParams::new(FrameId::new(target));
        create.world_name = Some(WORLD.to_owned());
        create.grant_univeral_access = Some(false);
        let context = self
            .call(&create, Some(session))
            .await?
            .execution_context_id;
        self.worlds.insert(session.to_owned(), context);
        Ok(context)
    }

    /// The browser's tabs (at most [`MAX_PAGES`]), by target id; what was
    /// kept of tabs that closed is forgotten.
    pub(crate) async fn pages(&mut self) -> Result<Vec<String>, LookupError> {
        let targets = self.call(&GetTargetsParams::default(), None).await?;
        let pages: Vec<String> = targets
            .target_infos
            .into_iter()
            .filter(|t| t.r#type == "page")
            .map(|t| t.target_id.into())
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
            let mut probe = EvaluateParams::new(PROBE);
            probe.context_id = Some(context);
            probe.return_by_value = Some(true);
            sent.push(self.send(&probe, Some(session)).await?);
        }
        let replies = self.replies(&sent).await?;
        // Every visible tab that says it has the focus (else every visible
        // one): a CDP client's focus emulation (Playwright turns it on) makes
        // several say so, and which window X gives the keys to cannot be read
        // from here; the gate judges each and the strictest counts.
        let (mut focused, mut visible) = (Vec::new(), Vec::new());
        let mut failed = 0;
        for (reply, (_, session)) in replies.into_iter().zip(&probes) {
            let answer = client::reply_of::<EvaluateParams>(reply).ok();
            let value = answer
                .filter(|answer| answer.exception_details.is_none())
                .and_then(|answer| answer.result.value)
                .unwrap_or_default();
            if !value.is_object() {
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
