//! The retention setting: segment files older than `--recording-retention-days`
//! are removed, and each removal is sealed into the workspace's chain as a
//! `recording.expire` record, so a bundle without that file still verifies
//! (with a note) while a file missing for any other reason still fails.

use std::time::Duration;

use cubicle_runtime::chain_store;
use cubicle_runtime::state::{Store, now_ms};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::ReplayConfig;
use crate::ops::EventKind;
use crate::ops::audit::Audit;

/// How often old segments are looked for.
const SWEEP: Duration = Duration::from_secs(60);

/// Removes what ended before `now` less the retention, once; returns how
/// many files.
pub async fn sweep(store: &Store, audit: &Audit, config: &ReplayConfig, now: i64) -> usize {
    let Some(keep) = config.retention else {
        return 0;
    };
    let cutoff = now - keep.as_millis() as i64;
    let rows = match chain_store::segments(store, None).await {
        Ok(rows) => rows,
        Err(err) => {
            tracing::error!(%err, "retention: cannot list sealed segments");
            return 0;
        }
    };
    let mut removed = 0;
    for row in rows {
        let Some(file) = row.detail["file"].as_str() else {
            continue;
        };
        let end = row.detail["end_ms"].as_i64().unwrap_or(row.at);
        let path = config.recordings_of(&row.workspace_id).join(file);
        if end >= cutoff || !cubicle_recorder::bundle::is_segment_name(file) || !path.is_file() {
            continue;
        }
        // Sealed first: no file disappears without a record saying so.
        let detail =
            json!({ "file": file, "sha256": row.detail["sha256"], "segment_seq": row.seq });
        let noted = audit
            .note(
                None,
                EventKind::RecordingExpire,
                Some(&row.workspace_id),
                detail,
                None,
            )
            .await;
        if let Err(err) = noted {
            tracing::error!(file, err = %err.message, "retention: cannot record a removal; kept");
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(err) => tracing::error!(file, %err, "retention: cannot remove a segment"),
        }
    }
    removed
}

/// Sweeps every minute until `cancel`.
pub async fn run(store: Store, audit: Audit, config: ReplayConfig, cancel: CancellationToken) {
    loop {
        sweep(&store, &audit, &config, now_ms()).await;
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SWEEP) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Replay;
    use cubicle_runtime::events::{self, NewEvent};

    #[tokio::test]
    async fn expired_segments_go_with_a_sealed_record_and_the_bundle_still_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cubicle.db")).await.unwrap();
        let mut config = ReplayConfig::new(dir.path());
        config.retention = Some(Duration::from_secs(86_400));
        let ws = "ws-0123456789ab";
        let folder = config.recordings_of(ws);
        std::fs::create_dir_all(&folder).unwrap();
        let day = 86_400_000;
        for (file, end_ms) in [("seg-1.mp4", now_ms() - 2 * day), ("seg-2.mp4", now_ms())] {
            std::fs::write(folder.join(file), file).unwrap();
            let digest = cubicle_recorder::bundle::digest_reader(file.as_bytes()).unwrap();
            let event = NewEvent {
                kind: EventKind::RecordingSegment,
                workspace_id: Some(ws),
                detail: json!({ "file": file, "sha256": hex::encode(digest.sha256), "end_ms": end_ms }),
                ..NewEvent::default()
            };
            events::append(&store, &event).await.unwrap();
        }
        let audit = Audit::new(store.clone());
        assert_eq!(sweep(&store, &audit, &config, now_ms()).await, 1);
        assert!(!folder.join("seg-1.mp4").exists());
        assert!(folder.join("seg-2.mp4").exists(), "a young one stays");
        assert_eq!(sweep(&store, &audit, &config, now_ms()).await, 0, "once");
        let replay = Replay::open(store.clone(), config).unwrap();
        let upto = replay.checkpoint(ws).await.unwrap();
        assert_eq!(upto, 3, "two segments and the removal");
        let report = replay.verify(ws).await.unwrap();
        assert!(report.ok(), "{report:#?}");
        assert_eq!(report.segments, 2);
        assert!(
            report.warnings.iter().any(|w| w.contains("retention")),
            "{report:#?}"
        );
    }
}
