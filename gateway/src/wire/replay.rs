//! What the replay API answers: recorded sessions, their segments on the
//! video's timeline, and each event's place on it.

use cubicle_runtime::chain_store::SegmentRow;
use cubicle_runtime::events::Event;
use cubicle_runtime::state::{WorkspaceRecord, WorkspaceState};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A closed video segment: fragmented MP4 (H.264), sealed in the chain.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SegmentView {
    /// Its record's seq in the workspace's chain.
    pub seq: u64,
    pub file: String,
    /// Wall-clock Unix ms of its first frame (its time 0) and of its end.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Where it starts on the replay's timeline (the segments back to back).
    pub offset_ms: i64,
    pub bytes: u64,
    pub sha256: String,
    /// Cut short by a daemon that died; sealed at the next start.
    pub partial: bool,
    /// Where to fetch it.
    pub url: String,
}

/// A recorded session, for the list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordingSummary {
    pub workspace: String,
    pub name: String,
    /// The workspace's state now (`deleted` ones stay listed).
    pub state: String,
    pub segments: usize,
    /// Wall-clock span recorded, Unix ms.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Total video length.
    pub duration_ms: i64,
}

/// `{"recordings": [...]}`, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordingList {
    pub recordings: Vec<RecordingSummary>,
}

/// One event on the replay timeline.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelineEvent {
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    pub kind: String,
    /// `{"id", "name", "role"}`; null when the daemon acted.
    pub actor: Option<Value>,
    pub detail: Value,
    pub outcome: Option<String>,
    pub request_id: Option<String>,
    /// Where it is on the replay's timeline; null if nothing was recorded
    /// at or after it.
    pub video_ms: Option<i64>,
}

/// A recorded session: its segments and its events.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordingView {
    pub recording: RecordingSummary,
    pub segments: Vec<SegmentView>,
    pub events: Vec<TimelineEvent>,
}

/// The segments back to back, each with its place on the timeline.
pub fn segments(workspace: &str, rows: &[SegmentRow]) -> Vec<SegmentView> {
    let mut offset = 0;
    rows.iter()
        .map(|row| {
            let d = &row.detail;
            let start_ms = d["start_ms"].as_i64().unwrap_or(row.at);
            let end_ms = d["end_ms"].as_i64().unwrap_or(row.at).max(start_ms);
            let file = d["file"].as_str().unwrap_or_default().to_owned();
            let view = SegmentView {
                seq: row.seq,
                url: format!("/v1/workspaces/{workspace}/recordings/{file}"),
                file,
                start_ms,
                end_ms,
                offset_ms: offset,
                bytes: d["bytes"].as_u64().unwrap_or(0),
                sha256: d["sha256"].as_str().unwrap_or_default().to_owned(),
                partial: d["partial"].as_bool().unwrap_or(false),
            };
            offset += end_ms - start_ms;
            view
        })
        .collect()
}

/// Where wall-clock time `at` is on the timeline of `segments`: inside the
/// segment that covers it, else at the start of the next one, else (after
/// the last) at the end. `None` only when nothing was recorded.
pub fn video_ms(segments: &[SegmentView], at: i64) -> Option<i64> {
    match segments.iter().find(|s| at < s.end_ms) {
        Some(s) => Some(s.offset_ms + (at - s.start_ms).max(0)),
        None => segments.last().map(|s| s.offset_ms + s.end_ms - s.start_ms),
    }
}

pub fn summary(workspace: &WorkspaceRecord, segments: &[SegmentView]) -> RecordingSummary {
    let state = if workspace.state == WorkspaceState::Deleted {
        "deleted"
    } else {
        workspace.state.as_str()
    };
    RecordingSummary {
        workspace: workspace.id.clone(),
        name: workspace.name.clone(),
        state: state.to_owned(),
        segments: segments.len(),
        start_ms: segments.first().map_or(0, |s| s.start_ms),
        end_ms: segments.last().map_or(0, |s| s.end_ms),
        duration_ms: segments
            .last()
            .map_or(0, |s| s.offset_ms + s.end_ms - s.start_ms),
    }
}

pub fn timeline(segments: &[SegmentView], events: Vec<Event>) -> Vec<TimelineEvent> {
    events
        .into_iter()
        .map(|e| TimelineEvent {
            video_ms: video_ms(segments, e.at),
            id: e.id,
            at: e.at,
            kind: e.kind,
            actor: e.actor.and_then(|a| serde_json::to_value(a).ok()),
            detail: e.detail,
            outcome: e.outcome,
            request_id: e.request_id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_land_on_the_back_to_back_timeline() {
        let row = |seq, start: i64, end: i64| SegmentRow {
            workspace_id: "ws-1".into(),
            seq,
            at: end,
            detail: json!({ "file": format!("s{seq}.mp4"), "start_ms": start, "end_ms": end }),
        };
        // Two runs with a stop between them (10 s .. 20 s unrecorded).
        let segs = segments(
            "ws-1",
            &[
                row(3, 0, 5_000),
                row(9, 5_000, 10_000),
                row(20, 20_000, 21_000),
            ],
        );
        assert_eq!(segs[2].offset_ms, 10_000);
        assert_eq!(video_ms(&segs, 7_500), Some(7_500));
        assert_eq!(
            video_ms(&segs, 15_000),
            Some(10_000),
            "snaps to the next segment"
        );
        assert_eq!(video_ms(&segs, 20_500), Some(10_500));
        assert_eq!(
            video_ms(&segs, 30_000),
            Some(11_000),
            "after the end: the end"
        );
        assert_eq!(video_ms(&[], 30_000), None);
    }
}
