//! The workspace's Chromium saves no download itself: everything a page can
//! make it download reaches the workspace only through the egress proxy and
//! the quarantine. A download the proxy let through as a page (or one made
//! in the page, from a `blob:` or `data:` URL, which never crosses the
//! proxy) is denied by the browser.
//!
//! How: the gateway's own CDP session with the browser (the same endpoint
//! as [`crate::browser_context`], a session of its own that lives as long
//! as the browser) sends `Browser.setDownloadBehavior` `deny` for the
//! default browser context and for every context that appears
//! (`Target.setDiscoverTargets`), with download events on; each download
//! the browser starts and denies is a `download.refused` event. Chromium
//! resets the behaviour when the session that set it closes, so the
//! session is kept open, and made again (and the behaviour set again)
//! whenever the browser restarts. Clients of the gateway's CDP proxy cannot
//! change it: `Browser.setDownloadBehavior` and `Page.setDownloadBehavior`
//! are reserved there ([`crate::cdp_proxy::inspect`]).
//!
//! Not done: keeping `blob:`/`data:` downloads in the quarantine. The
//! browser runs as the workspace's user, so any folder it could save them
//! in is one the workspace can read; they are refused instead.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide_cdp::cdp::browser_protocol::browser::{
    BrowserContextId, EventDownloadWillBegin, SetDownloadBehaviorBehavior,
    SetDownloadBehaviorParams,
};
use chromiumoxide_cdp::cdp::browser_protocol::target::{
    EventTargetCreated, SetDiscoverTargetsParams,
};
use chromiumoxide_types::Message;
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::backend::Backend;
use cubicle_runtime::manager::Manager;
use serde_json::json;

use crate::cdp::client::{self, Client};

use crate::ops::EventKind;
use crate::ops::audit::Audit;

/// Longest wait between two tries to reach a browser that is not up.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Keeps workspace `id`'s browser from saving downloads, for as long as
/// the task runs (its owner aborts it when the workspace stops).
pub async fn guard(manager: Arc<Manager<AnyBackend>>, audit: Audit, id: String) {
    let mut wait = Duration::from_millis(100);
    loop {
        match session(&manager, &audit, &id).await {
            Ok(()) => wait = Duration::from_millis(100), // the browser went; wait for the next
            Err(err) => {
                tracing::debug!(workspace = id, %err, "no browser to guard downloads of yet");
            }
        }
        // A browser that is starting or restarting: try again soon.
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_RETRY);
    }
}

/// Asks the browser to deny downloads in browser context `context` (the
/// default one when `None`), with download events on.
fn deny(context: Option<BrowserContextId>) -> SetDownloadBehaviorParams {
    let mut deny = SetDownloadBehaviorParams::new(SetDownloadBehaviorBehavior::Deny);
    deny.browser_context_id = context;
    deny.events_enabled = Some(true);
    deny
}

/// One browser's life: set the behaviour, then follow its events until it
/// closes. `Err`: no browser, or it refused the behaviour.
async fn session(manager: &Manager<AnyBackend>, audit: &Audit, id: &str) -> Result<(), String> {
    let record = manager.get(id).await.map_err(|e| e.to_string())?;
    let channel = manager.backend().channel(&manager.spec(&record));
    let socket = crate::cdp::open_browser_endpoint(&channel)
        .await
        .map_err(|e| e.to_string())?;
    let mut client = Client::new(socket);
    let mut asked = HashSet::new();
    asked.insert(client.send(&deny(None), None).await?);
    client
        .send(&SetDiscoverTargetsParams::new(true), None)
        .await?;
    let mut contexts: HashSet<BrowserContextId> = HashSet::new();
    while let Some(message) = client.next().await {
        let event = match message? {
            Message::Response(reply) => {
                if asked.contains(&reply.id)
                    && let Some(error) = reply.error
                {
                    return Err(format!(
                        "the browser refused to deny downloads: {}",
                        error.message
                    ));
                }
                continue;
            }
            Message::Event(event) => event,
        };
        if let Some(created) =
            client::event_of::<EventTargetCreated>(&event, EventTargetCreated::IDENTIFIER)
        {
            // A context whose targets cannot be read might save downloads:
            // the session ends and is made again.
            let context = created?.target_info.browser_context_id;
            if let Some(context) = context
                && contexts.insert(context.clone())
            {
                asked.insert(client.send(&deny(Some(context)), None).await?);
            }
        } else if let Some(begun) =
            client::event_of::<EventDownloadWillBegin>(&event, EventDownloadWillBegin::IDENTIFIER)
        {
            let Ok(begun) = begun else {
                continue;
            };
            let url: String = begun.url.chars().take(2000).collect();
            let detail = json!({
                "url": url,
                "name": begun.suggested_filename,
                "reason": "the browser's own download was denied: downloads reach the workspace only through the quarantine",
                "by": "browser",
            });
            let noted = audit
                .note(
                    None,
                    EventKind::DownloadRefused,
                    Some(id),
                    detail,
                    Some("denied"),
                )
                .await;
            if let Err(err) = noted {
                tracing::error!(workspace = id, err = %err.message, "cannot record a denied browser download");
            }
        }
    }
    Ok(())
}
