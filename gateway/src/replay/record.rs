//! Each running workspace's screen, recorded from the framebuffer the
//! gateway already keeps for it (the same RFB session the agent's actions
//! use: no second session, no tool in the guest).
//!
//! A task samples the framebuffer at most `fps` times a second, only when
//! it changed (plus one frame per keyframe interval when idle), and hands
//! frames to an encoder thread through a small bounded queue: when the
//! encoder falls behind, frames are dropped and counted, never queued
//! without bound and never waited for. Each closed segment comes back and
//! is sealed into the workspace's chain as a `recording.segment` record.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;

use cubicle_recorder::video::{self, ClosedSegment, EncoderStats, Feed, Frame, VideoOptions};
use cubicle_runtime::backend::Backend;
use cubicle_runtime::chain_store;
use cubicle_runtime::state::{WorkspaceState, now_ms};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::manager::Manager;

use super::{Replay, ReplayConfig};
use crate::host::{Hosts, Recorder, WorkspaceHost};
use crate::ops::EventKind;
use crate::ops::audit::Audit;
use crate::screen::ScreenSession;

/// Frames waiting for the encoder; more are dropped.
const QUEUE: usize = 3;
/// A keyframe (and, when idle, a repeated frame) at least this often.
pub const KEYFRAME_EVERY: Duration = Duration::from_secs(2);
/// How long to wait before reconnecting a screen session that ended.
const RECONNECT: Duration = Duration::from_secs(1);

/// What recording needs of the gateway: the runtime (to reach a display),
/// the event writer (its records) and the hosts (a recorder lives in its
/// workspace's host and shares its screen session).
#[derive(Clone)]
pub struct Recording {
    pub manager: Arc<Manager<AnyBackend>>,
    pub audit: Audit,
    pub hosts: Arc<Hosts>,
}

/// What one recording did, for its `recording.stop` record.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    sampled: u64,
    dropped: u64,
}

impl Replay {
    /// Starts recording workspace `id` (it just reached running) into its
    /// host unless recording is off or it already records.
    pub fn start_recording(&self, state: &Recording, id: &str) {
        if !self.config.record || opted_out(&self.config.recordings_of(id)) {
            return;
        }
        let host = state.hosts.get(id);
        host.start_recorder(|| {
            let cancel = CancellationToken::new();
            let discard = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let task = tokio::spawn(record(
                state.clone(),
                self.config.clone(),
                host.clone(),
                id.to_owned(),
                cancel.clone(),
                discard.clone(),
            ));
            Recorder::new(cancel, discard, task)
        });
    }

    /// Turns recording off for workspace `id` for good (it was created with
    /// `record: false`): a recorder already started is stopped and its open
    /// segment thrown away unsealed.
    pub async fn opt_out(&self, state: &Recording, id: &str) -> std::io::Result<()> {
        let dir = self.config.recordings_of(id);
        make_private_dir(&dir)?;
        std::fs::write(dir.join(OFF_MARKER), b"recording off for this workspace\n")?;
        if let Some(host) = state.hosts.find(id) {
            host.stop_recording(id, true).await;
        }
        Ok(())
    }

    /// Seals the segments a dead daemon left open (as `partial`), then
    /// starts recording every running workspace: run once at start.
    pub async fn resume(&self, state: &Recording) {
        let root = self.config.data_dir.join("recordings");
        if let Err(err) = make_private_dir(&root) {
            tracing::error!(%err, "cannot make the recordings folder");
        }
        let workspaces = match std::fs::read_dir(&root) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        for id in workspaces {
            self.seal_orphans(state, &id).await;
        }
        match state.manager.list().await {
            Ok(all) => {
                for ws in all.iter().filter(|ws| ws.state == WorkspaceState::Running) {
                    self.start_recording(state, &ws.id);
                }
            }
            Err(err) => tracing::error!(%err, "cannot list workspaces to resume recording"),
        }
    }

    async fn seal_orphans(&self, state: &Recording, id: &str) {
        let sealed: Vec<Value> = match chain_store::segments(self.store(), Some(id)).await {
            Ok(rows) => rows.into_iter().map(|r| r.detail["file"].clone()).collect(),
            Err(err) => {
                tracing::error!(workspace = id, %err, "cannot read sealed segments");
                return;
            }
        };
        let Ok(entries) = std::fs::read_dir(self.config.recordings_of(id)) else {
            return;
        };
        let mut open: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(video::segment_start)
                    .is_some()
            })
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                !sealed.iter().any(|f| f == name)
            })
            .collect();
        open.sort();
        for path in open {
            match video::orphan(&path) {
                Ok(Some(segment)) => seal(state, id, &segment, 0).await,
                Ok(None) => {}
                Err(err) => tracing::error!(%err, "cannot seal a segment left open"),
            }
        }
    }
}

const OFF_MARKER: &str = "recording-off";

fn opted_out(dir: &Path) -> bool {
    dir.join(OFF_MARKER).exists()
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Seals a closed segment into workspace `id`'s chain.
async fn seal(state: &Recording, id: &str, segment: &ClosedSegment, dropped: u64) {
    let detail = json!({
        "file": segment.file,
        "sha256": hex::encode(segment.sha256),
        "bytes": segment.bytes,
        "start_ms": segment.start_ms,
        "end_ms": segment.end_ms,
        "frames": segment.frames,
        "partial": segment.partial,
        "dropped_frames": dropped,
    });
    let noted = state
        .audit
        .note(None, EventKind::RecordingSegment, Some(id), detail, None)
        .await;
    if let Err(err) = noted {
        tracing::error!(workspace = id, file = segment.file, err = %err.message, "cannot seal a video segment");
    }
}

async fn note(state: &Recording, id: &str, kind: EventKind, detail: Value) {
    if let Err(err) = state.audit.note(None, kind, Some(id), detail, None).await {
        tracing::error!(workspace = id, err = %err.message, "cannot record a recording event");
    }
}

/// The screen session of running workspace `id`, or `None` once it no
/// longer runs or `cancel` fires.
async fn session(
    state: &Recording,
    host: &WorkspaceHost,
    id: &str,
    cancel: &CancellationToken,
) -> Option<Arc<ScreenSession>> {
    loop {
        let record = state.manager.running(id).await.ok()?;
        let channel = state
            .manager
            .backend()
            .channel(&state.manager.spec(&record));
        match host.screen(&channel).await {
            Ok(session) => return Some(session),
            Err(err) => tracing::warn!(workspace = id, %err, "recorder: no screen yet"),
        }
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(RECONNECT) => {}
        }
    }
}

/// The recording of workspace `id`, until `cancel` or until it stops
/// running.
async fn record(
    state: Recording,
    config: ReplayConfig,
    host: Arc<WorkspaceHost>,
    id: String,
    cancel: CancellationToken,
    discard: Arc<std::sync::atomic::AtomicBool>,
) {
    let options = VideoOptions {
        dir: config.recordings_of(&id),
        fps: config.fps,
        segment: config.segment,
        keyframe_every: KEYFRAME_EVERY,
    };
    if let Err(err) = make_private_dir(&options.dir) {
        tracing::error!(workspace = id, %err, "cannot make the recording folder");
        return;
    }
    let (feed, frames) = std::sync::mpsc::sync_channel::<Feed>(QUEUE);
    let (closed_tx, mut closed) = tokio::sync::mpsc::channel::<ClosedSegment>(8);
    let fps = config.fps;
    let encoder = tokio::task::spawn_blocking(move || {
        video::run(options, frames, now_ms, |segment| {
            // The task drains this until the encoder ends.
            let _ = closed_tx.blocking_send(segment);
        })
    });
    note(
        &state,
        &id,
        EventKind::RecordingStart,
        json!({ "fps": fps, "segment_seconds": config.segment.as_secs() }),
    )
    .await;
    let mut counts = Counts::default();
    let mut sampler = Sampler::default();
    'sessions: while let Some(screen) = session(&state, &host, &id, &cancel).await {
        let mut version = screen.version();
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / u64::from(fps.max(1))));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break 'sessions,
                Some(segment) = closed.recv() => seal(&state, &id, &segment, counts.dropped).await,
                _ = tick.tick() => {
                    if screen.is_closed() {
                        break;
                    }
                    let changed = version.has_changed().unwrap_or(false);
                    if !sampler.due(changed, now_ms()) {
                        continue;
                    }
                    version.borrow_and_update();
                    if !sampler.send(&feed, &screen, &mut counts) {
                        break 'sessions;
                    }
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(RECONNECT) => {}
        }
    }
    let discarded = discard.load(std::sync::atomic::Ordering::SeqCst);
    if discarded {
        let feed = feed.clone();
        let _ = tokio::task::spawn_blocking(move || feed.send(Feed::Discard)).await;
    }
    drop(feed);
    while let Some(segment) = closed.recv().await {
        seal(&state, &id, &segment, counts.dropped).await;
    }
    let detail = match encoder.await {
        Ok(Ok(stats)) => stopped(stats, counts, discarded, None),
        Ok(Err(err)) => stopped(
            EncoderStats::default(),
            counts,
            discarded,
            Some(err.to_string()),
        ),
        Err(err) => stopped(
            EncoderStats::default(),
            counts,
            discarded,
            Some(err.to_string()),
        ),
    };
    if let Some(err) = detail.get("error") {
        tracing::error!(workspace = id, %err, "the recording stopped with an error");
    }
    note(&state, &id, EventKind::RecordingStop, detail).await;
}

fn stopped(stats: EncoderStats, counts: Counts, discarded: bool, error: Option<String>) -> Value {
    let mut detail = json!({
        "frames": stats.frames,
        "segments": stats.segments,
        "bytes": stats.bytes,
        "sampled": counts.sampled,
        "dropped_frames": counts.dropped,
        "discarded": discarded,
    });
    if let Some(error) = error {
        detail["error"] = Value::String(error);
    }
    detail
}

/// When to take a frame: on change, at most `fps` a second (the tick), and
/// when a keyframe is due even if nothing changed.
///
/// The encoder makes a frame a keyframe when it comes `KEYFRAME_EVERY` or
/// more after the last keyframe (by `at_ms`); the sampler follows the same
/// rule on the same clock, so that the repeat it takes on a still screen
/// comes 2 s after the last *keyframe*. Counted from the last frame
/// instead, a change shortly before a keyframe was due put the next one
/// almost 4 s away.
#[derive(Default)]
struct Sampler {
    /// `at_ms` of the last frame the encoder makes a keyframe.
    last_key_ms: Option<i64>,
}

impl Sampler {
    /// Whether to take a frame at wall time `now_ms`.
    fn due(&self, changed: bool, now_ms: i64) -> bool {
        let every = KEYFRAME_EVERY.as_millis() as i64;
        // A clock set back counts as due too: never wait it out.
        changed
            || self
                .last_key_ms
                .is_none_or(|key| !(0..every).contains(&(now_ms - key)))
    }

    /// Notes a frame taken at `at_ms`.
    fn taken(&mut self, at_ms: i64) {
        if self.due(false, at_ms) {
            self.last_key_ms = Some(at_ms);
        }
    }

    /// Queues the current screen; false if the encoder is gone.
    fn send(
        &mut self,
        feed: &SyncSender<Feed>,
        screen: &ScreenSession,
        counts: &mut Counts,
    ) -> bool {
        let fb = Arc::unwrap_or_clone(screen.snapshot());
        if fb.width == 0 || fb.height == 0 {
            return true;
        }
        let frame = Frame {
            width: fb.width,
            height: fb.height,
            rgba: fb.rgba,
            at_ms: now_ms(),
        };
        self.taken(frame.at_ms);
        offer(feed, frame, counts)
    }
}

/// Hands `frame` to the encoder without waiting: counted as sampled, and
/// as dropped when the encoder's queue is full. False if the encoder is
/// gone.
fn offer(feed: &SyncSender<Feed>, frame: Frame, counts: &mut Counts) -> bool {
    counts.sampled += 1;
    match feed.try_send(Feed::Frame(frame)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            counts.dropped += 1;
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(at_ms: i64) -> Frame {
        Frame {
            width: 2,
            height: 2,
            rgba: vec![0; 16],
            at_ms,
        }
    }

    #[test]
    fn a_still_screen_is_sampled_again_two_seconds_after_the_last_keyframe() {
        let mut sampler = Sampler::default();
        assert!(sampler.due(false, 10_000), "the first frame");
        sampler.taken(10_000);
        assert!(!sampler.due(false, 10_100), "nothing changed");
        assert!(sampler.due(true, 10_100), "a change");
        // A change 1.75 s in: a frame, not a keyframe; the repeat is still
        // due 2 s after the keyframe, not 2 s after this frame.
        sampler.taken(11_750);
        assert!(!sampler.due(false, 11_999));
        assert!(sampler.due(false, 12_000));
        sampler.taken(12_000);
        assert!(!sampler.due(false, 13_999));
        assert!(sampler.due(false, 14_000));
        // The wall clock set back: due at once rather than after the gap.
        assert!(sampler.due(false, 9_000));
    }

    #[test]
    fn frames_an_encoder_cannot_take_are_dropped_counted_and_reported_at_stop() {
        let (feed, encoder) = std::sync::mpsc::sync_channel(QUEUE);
        let mut counts = Counts::default();
        // The encoder is stuck: the queue fills, then every frame is dropped
        // at once (never waited for).
        for at_ms in 0..QUEUE as i64 + 4 {
            assert!(offer(&feed, frame(at_ms), &mut counts));
        }
        assert_eq!((counts.sampled, counts.dropped), (QUEUE as u64 + 4, 4));
        // It catches up: the queued frames are the first ones, in order, and
        // the next frame goes through again.
        let queued: Vec<i64> = encoder
            .try_iter()
            .map(|f| match f {
                Feed::Frame(f) => f.at_ms,
                Feed::Discard => -1,
            })
            .collect();
        assert_eq!(queued, (0..QUEUE as i64).collect::<Vec<_>>());
        assert!(offer(&feed, frame(99), &mut counts));
        assert_eq!(counts.dropped, 4);
        let stats = EncoderStats {
            frames: QUEUE as u64 + 1,
            segments: 1,
            bytes: 1,
        };
        let detail = stopped(stats, counts, false, None);
        assert_eq!(detail["dropped_frames"], 4, "{detail}");
        assert_eq!(detail["sampled"], QUEUE as u64 + 5, "{detail}");
        // An encoder gone ends the recording.
        drop(encoder);
        assert!(!offer(&feed, frame(100), &mut counts));
    }
}
