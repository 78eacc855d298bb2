//! Chromium's DevTools over a pipe only, served to the guest channel's CDP
//! port by the supervisor: no URL in the browser can name it.
//!
//! ## The attack this closes
//!
//! Chromium used to serve DevTools on `127.0.0.1:9222` in the browser's own
//! network namespace (kept from the user's processes). But the browser's
//! own pages live in that namespace too: through the gateway's CDP an agent
//! opened a tab on `http://127.0.0.1:9222/json/version`, which was DevTools
//! itself, and that page's script — same origin, so DevTools' origin check
//! let it in — opened `ws://127.0.0.1:9222/devtools/browser/<id>` and had
//! full CDP: no method policy, no reserved methods, no event log. Any way
//! for a page to reach loopback (a redirect, a DNS name resolving to
//! 127.0.0.1, `fetch`, a WebSocket) was the same hole.
//!
//! ## Why a pipe closes it
//!
//! Chromium starts with `--remote-debugging-pipe` and no debugging port:
//! it reads CDP calls from its fd 3 and writes replies and events to its
//! fd 4 ([`pipe`]), pipes that only this supervisor holds (a new pair per
//! start: [`DevTools::pipe_for_start`]). No TCP port, no socket path, no
//! URL: nothing a page, the user, or anyone but the supervisor can open.
//! The guest channel's CDP port (9222) is served here instead, by a small
//! HTTP + WebSocket server ([`server`]) that multiplexes every client over
//! the one pipe ([`router`]): each WebSocket client gets a session of its
//! own (`Target.attachToBrowserTarget` or `Target.attachToTarget`), so it
//! sees what its own connection to Chromium would show, and is detached
//! when it goes. The gateway, through the guest channel, is the only
//! client, so every CDP call of an agent passes its policy and event log.
//!
//! The browser keeps its network namespace (its egress relay is there),
//! and sends even loopback through the egress proxy, which refuses it.

mod http;
mod link;
mod pipe;
mod router;
mod server;

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;

pub use link::CallError;
pub use pipe::ChildEnds;

/// Chromium's flag: DevTools on fds 3 and 4.
pub const CHROMIUM_FLAG: &str = "--remote-debugging-pipe";

/// The DevTools pipe of the running Chromium, if one runs.
#[derive(Default)]
pub struct DevTools {
    current: Mutex<Option<(Arc<link::Link>, JoinSet<()>)>>,
}

impl DevTools {
    fn current(&self) -> MutexGuard<'_, Option<(Arc<link::Link>, JoinSet<()>)>> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new pair of pipes for a Chromium about to start: the child's ends
    /// (install them on its command, drop them once it is spawned). The
    /// previous Chromium's pipe, if any, is let go: its clients are closed.
    pub fn pipe_for_start(&self) -> std::io::Result<ChildEnds> {
        let (parent, child) = pipe::pair()?;
        let mut tasks = JoinSet::new();
        let link = link::Link::start(parent, &mut tasks);
        // Dropping the old set aborts its tasks.
        *self.current() = Some((link, tasks));
        Ok(child)
    }

    /// The open pipe, if Chromium runs.
    fn link(&self) -> Option<Arc<link::Link>> {
        self.current()
            .as_ref()
            .map(|(link, _)| link.clone())
            .filter(|link| link.is_open())
    }

    /// Whether DevTools answers (`Browser.getVersion` over the pipe).
    pub async fn answers(&self) -> bool {
        let Some(link) = self.link() else {
            return false;
        };
        link.call("Browser.getVersion", serde_json::json!({}), None)
            .await
            .is_ok()
    }

    /// Asks the running browser to close the way a person closing its last
    /// window would (`Browser.close`): it writes its cookies and storage
    /// out first, which it does not on SIGTERM. False if no browser runs;
    /// the answer itself may not come (the pipe closes with the browser).
    pub async fn close_browser(&self) -> bool {
        let Some(link) = self.link() else {
            return false;
        };
        let _ = link
            .call("Browser.close", serde_json::json!({}), None)
            .await;
        true
    }

    /// The endpoint of the running browser, for one connection of the
    /// guest channel's CDP port; `Err` (saying why) when none runs.
    pub fn endpoint(&self) -> Result<Endpoint, CallError> {
        self.link().map(Endpoint).ok_or(CallError::Closed)
    }
}

/// The running browser's DevTools, for one connection.
pub struct Endpoint(Arc<link::Link>);

impl Endpoint {
    /// Serves the connection (HTTP discovery or a WebSocket) until it ends.
    pub async fn serve<S>(self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        server::serve(self.0, stream).await;
    }
}

#[cfg(test)]
mod tests;
