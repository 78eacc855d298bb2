//! One [`WorkspaceHost`] per running workspace: everything the gateway
//! itself holds for it while it runs — its screen session and framebuffer,
//! the gateway's own CDP session (browser contexts for the gates), its
//! recorder and its egress proxy — in one object, in one map.
//!
//! The lifecycle follower (`ops::host`) starts a host's services when the
//! runtime says the workspace runs and ends them all with one
//! [`WorkspaceHost::stop`], in one order, on anything else. The passive
//! parts (the screen and CDP sessions) are made on first use, so an
//! operation that lands between `running` and the follower seeing it is
//! served.
//!
//! Two per-workspace records are not here, on purpose: the control lock
//! (an operator's hold outlives a stop and a daemon restart, so it is kept
//! from create to delete) and the activity clock (touched by the event
//! writer under every operation, which sits below the hosts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cubicle_runtime::channel::GuestChannel;
use cubicle_runtime::egress::WorkspaceProxy;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::browser_context::BrowserSlot;
use crate::screen::{ScreenError, ScreenSession};

/// What the gateway holds for one running workspace.
#[derive(Default)]
pub struct WorkspaceHost {
    /// The RFB session the agent's actions, screenshots and the recorder
    /// share; made on first use.
    screen: Mutex<Option<Arc<ScreenSession>>>,
    /// One connect at a time.
    connecting: tokio::sync::Mutex<()>,
    /// The gateway's own CDP session (what the gates read the browser
    /// context from); made on first use.
    browser: BrowserSlot,
    /// Its recorder, when recording.
    recorder: Mutex<Option<Recorder>>,
    /// Its egress proxy and download guard, while it runs.
    egress: Mutex<Option<EgressLive>>,
    /// Live-view connections to its Xvnc still in their RFB handshake.
    display_turns: DisplayTurns,
}

/// Xvnc counts every connection that has not yet authenticated against its
/// peer's blacklist (threshold 5; every connection comes from the guest
/// channel's one address) and then refuses everyone, the agent included,
/// for 10 s and more. Viewers arriving together (a page reloaded by several
/// operators) would trip it: their handshakes wait their turn instead, a
/// few milliseconds each. The turns are per workspace: a display that
/// stalls its handshakes holds up only its own viewers.
struct DisplayTurns(tokio::sync::Semaphore);

impl Default for DisplayTurns {
    fn default() -> Self {
        Self(tokio::sync::Semaphore::new(2))
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WorkspaceHost {
    /// The live screen session, connecting over `channel` if there is none.
    pub async fn screen(&self, channel: &GuestChannel) -> Result<Arc<ScreenSession>, ScreenError> {
        if let Some(session) = self.live_screen() {
            return Ok(session);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(session) = self.live_screen() {
            return Ok(session);
        }
        let session = ScreenSession::connect(channel).await?;
        *locked(&self.screen) = Some(session.clone());
        Ok(session)
    }

    /// The screen session if one is live, without connecting.
    fn live_screen(&self) -> Option<Arc<ScreenSession>> {
        locked(&self.screen)
            .as_ref()
            .filter(|s| !s.is_closed())
            .cloned()
    }

    /// Ends the screen session (actions in flight on it fail at once).
    pub fn close_screen(&self) {
        if let Some(session) = locked(&self.screen).take() {
            session.close();
        }
    }

    /// The paused workspace's screen session stops asking for updates.
    pub fn set_paused(&self, paused: bool) {
        if let Some(session) = self.live_screen() {
            session.set_paused(paused);
        }
    }

    /// Waits for a turn to connect to its display; hold it until the RFB
    /// handshake is done (Xvnc counts a connection from its accept). `None`
    /// only if the semaphore were closed, which it never is.
    pub async fn display_turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.display_turns.0.acquire().await.ok()
    }

    pub fn browser(&self) -> &BrowserSlot {
        &self.browser
    }

    /// Starts the recorder `start` makes, unless one is recording.
    pub fn start_recorder(&self, start: impl FnOnce() -> Recorder) {
        let mut slot = locked(&self.recorder);
        if slot.as_ref().is_none_or(Recorder::is_finished) {
            *slot = Some(start());
        }
    }

    /// Stops its recorder, if any; returns once its last segment is sealed
    /// (`discard`: thrown away unsealed instead).
    pub async fn stop_recording(&self, id: &str, discard: bool) {
        let recorder = locked(&self.recorder).take();
        if let Some(recorder) = recorder {
            recorder.stop(id, discard).await;
        }
    }

    /// Keeps its egress proxy; one that ran before is ended.
    pub async fn set_egress(&self, live: EgressLive) {
        let previous = locked(&self.egress).replace(live);
        if let Some(previous) = previous {
            previous.stop().await;
        }
    }

    /// Runs `f` on its egress proxy, when one runs.
    pub fn with_egress<T>(&self, f: impl FnOnce(&EgressLive) -> T) -> Option<T> {
        locked(&self.egress).as_ref().map(f)
    }

    /// Ends everything it holds, in one order: the egress proxy first
    /// (downloads in flight go with it, nothing partial kept), then the
    /// recorder (its last segment is sealed from the screen it still has),
    /// then the screen session, then the CDP session.
    pub async fn stop(&self, id: &str) {
        let egress = locked(&self.egress).take();
        if let Some(egress) = egress {
            egress.stop().await;
        }
        self.stop_recording(id, false).await;
        self.close_screen();
        self.browser.close().await;
    }
}

/// The host of every running workspace.
#[derive(Default)]
pub struct Hosts {
    hosts: Mutex<HashMap<String, Arc<WorkspaceHost>>>,
}

impl Hosts {
    /// Workspace `id`'s host, made empty if it has none yet.
    pub fn get(&self, id: &str) -> Arc<WorkspaceHost> {
        locked(&self.hosts)
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    /// Workspace `id`'s host, if it has one.
    pub fn find(&self, id: &str) -> Option<Arc<WorkspaceHost>> {
        locked(&self.hosts).get(id).cloned()
    }

    /// Workspace `id`'s live screen session, connecting over `channel` if
    /// there is none.
    pub async fn screen(
        &self,
        id: &str,
        channel: &GuestChannel,
    ) -> Result<Arc<ScreenSession>, ScreenError> {
        self.get(id).screen(channel).await
    }

    /// Ends workspace `id`'s screen session, if any.
    pub fn close_screen(&self, id: &str) {
        if let Some(host) = self.find(id) {
            host.close_screen();
        }
    }

    /// Ends every screen session (the lifecycle follower fell behind).
    pub fn close_all_screens(&self) {
        for host in self.all() {
            host.close_screen();
        }
    }

    fn all(&self) -> Vec<Arc<WorkspaceHost>> {
        locked(&self.hosts).values().cloned().collect()
    }

    /// Workspace `id` no longer runs: its host goes, everything it held
    /// ended in order.
    pub async fn stop(&self, id: &str) {
        let host = locked(&self.hosts).remove(id);
        if let Some(host) = host {
            host.stop(id).await;
        }
    }

    /// Every host, at daemon shutdown (the workspaces keep running).
    pub async fn stop_all(&self) {
        let all: Vec<(String, Arc<WorkspaceHost>)> = locked(&self.hosts).drain().collect();
        for (id, host) in all {
            host.stop(&id).await;
        }
    }
}

/// A workspace's running recorder.
pub struct Recorder {
    cancel: CancellationToken,
    discard: Arc<std::sync::atomic::AtomicBool>,
    task: JoinHandle<()>,
}

impl Recorder {
    /// The handle of a recording task (`replay::record` makes it): it ends
    /// when `cancel` fires, throwing its open segment away if `discard` is
    /// set by then.
    pub fn new(
        cancel: CancellationToken,
        discard: Arc<std::sync::atomic::AtomicBool>,
        task: JoinHandle<()>,
    ) -> Self {
        Self {
            cancel,
            discard,
            task,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops it; returns once its last segment is sealed. `discard` throws
    /// the open segment away unsealed instead.
    pub async fn stop(self, id: &str, discard: bool) {
        self.discard
            .store(discard, std::sync::atomic::Ordering::SeqCst);
        self.cancel.cancel();
        if let Err(err) = self.task.await {
            tracing::error!(workspace = id, %err, "the recorder task failed");
        }
    }
}

/// One running workspace's proxy (`ops::egress` starts it).
pub struct EgressLive {
    pub proxy: Arc<WorkspaceProxy>,
    pub accept: JoinHandle<()>,
    /// Keeps the workspace's browser from saving downloads itself.
    pub downloads: JoinHandle<()>,
}

impl EgressLive {
    /// Ends the proxy: connections and downloads in flight go with it
    /// (nothing partial is kept).
    pub async fn stop(self) {
        self.accept.abort();
        self.downloads.abort();
        self.proxy.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_host_is_made_on_first_use_and_gone_after_its_stop() {
        let hosts = Hosts::default();
        assert!(hosts.find("ws-a").is_none(), "nothing before first use");
        let host = hosts.get("ws-a");
        assert!(
            Arc::ptr_eq(&host, &hosts.get("ws-a")),
            "one host per workspace"
        );
        hosts.get("ws-b");
        hosts.stop("ws-a").await;
        assert!(hosts.find("ws-a").is_none(), "stopped: its host is gone");
        assert!(
            hosts.find("ws-b").is_some(),
            "another workspace keeps its own"
        );
        assert!(
            !Arc::ptr_eq(&host, &hosts.get("ws-a")),
            "a new run gets a new host, nothing of the old one"
        );
        hosts.stop_all().await;
        assert!(hosts.find("ws-a").is_none() && hosts.find("ws-b").is_none());
    }

    #[tokio::test]
    async fn a_display_that_stalls_its_handshakes_holds_up_only_its_own_viewers() {
        let hosts = Hosts::default();
        let (stalled, other) = (hosts.get("ws-a"), hosts.get("ws-b"));
        // Two viewers of ws-a are stuck in their handshake with its display.
        let _first = stalled.display_turn().await.unwrap();
        let _second = stalled.display_turn().await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(50), stalled.display_turn()).await;
        assert!(third.is_err(), "a third viewer of ws-a waits its turn");
        let elsewhere = tokio::time::timeout(Duration::from_millis(50), other.display_turn()).await;
        assert!(
            matches!(elsewhere, Ok(Some(_))),
            "a viewer of another workspace does not wait for ws-a's display"
        );
    }
}
