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

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::backend::Backend;
use cubicle_runtime::manager::Manager;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

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

/// The gateway's download session with one browser.
struct Session {
    socket: crate::cdp::Browser,
    next_id: u64,
}

impl Session {
    async fn send(&mut self, method: &str, params: Value) -> Result<u64, String> {
        self.next_id += 1;
        let call = json!({ "id": self.next_id, "method": method, "params": params });
        self.socket
            .send(Message::text(call.to_string()))
            .await
            .map_err(|e| format!("sending {method}: {e}"))?;
        Ok(self.next_id)
    }

    async fn deny(&mut self, context: Option<&str>) -> Result<u64, String> {
        let mut params = json!({ "behavior": "deny", "eventsEnabled": true });
        if let Some(context) = context {
            params["browserContextId"] = json!(context);
        }
        self.send("Browser.setDownloadBehavior", params).await
    }
}

/// One browser's life: set the behaviour, then follow its events until it
/// closes. `Err`: no browser, or it refused the behaviour.
async fn session(manager: &Manager<AnyBackend>, audit: &Audit, id: &str) -> Result<(), String> {
    let record = manager.get(id).await.map_err(|e| e.to_string())?;
    let channel = manager.backend().channel(&manager.spec(&record));
    let socket = crate::cdp::open_browser_endpoint(&channel)
        .await
        .map_err(|e| e.to_string())?;
    let mut session = Session { socket, next_id: 0 };
    let mut asked = HashSet::new();
    asked.insert(session.deny(None).await?);
    session
        .send("Target.setDiscoverTargets", json!({ "discover": true }))
        .await?;
    let mut contexts: HashSet<String> = HashSet::new();
    while let Some(message) = session.socket.next().await {
        let text = match message {
            Ok(Message::Text(text)) => text,
            Ok(_) => continue,
            Err(_) => break,
        };
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let Some(reply) = value["id"].as_u64()
            && asked.contains(&reply)
        {
            if let Some(error) = value.get("error") {
                return Err(format!("the browser refused to deny downloads: {error}"));
            }
            continue;
        }
        match value["method"].as_str() {
            Some("Target.targetCreated") => {
                let context = value["params"]["targetInfo"]["browserContextId"].as_str();
                if let Some(context) = context
                    && contexts.insert(context.to_owned())
                {
                    asked.insert(session.deny(Some(context)).await?);
                }
            }
            Some("Browser.downloadWillBegin") => {
                let params = &value["params"];
                let url: String = params["url"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(2000)
                    .collect();
                let detail = json!({
                    "url": url,
                    "name": params["suggestedFilename"],
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
            _ => {}
        }
    }
    Ok(())
}
