//! README "Audit": the daemon signs the head of each chain "every 100
//! records or 10 seconds, when a workspace stops, and at each export". The
//! cadence and the export are proven elsewhere (`gateway/src/replay/seal.rs`,
//! `gateway/tests/doors.rs`); this is the stop, on a real daemon whose
//! cadence is set so long that only the stop can sign: what the agent did
//! before the stop is covered by a checkpoint right after it.

use std::time::Duration;

use cubicle_tests::Daemon;
use reqwest::Method;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

/// The chain's head seq and the last seq a checkpoint signed, read from the
/// daemon's database (read only).
async fn head_and_signed(db: &mut SqliteConnection, chain: &str) -> (i64, i64) {
    let head: (i64,) = sqlx::query_as("SELECT seq FROM chain_heads WHERE chain = ?")
        .bind(chain)
        .fetch_one(&mut *db)
        .await
        .unwrap();
    let signed: (Option<i64>,) = sqlx::query_as("SELECT MAX(seq) FROM checkpoints WHERE chain = ?")
        .bind(chain)
        .fetch_one(&mut *db)
        .await
        .unwrap();
    (head.0, signed.0.unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signs_the_chain_up_to_what_happened_before_it() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        data.path(),
        None,
        &[
            "--checkpoint-records",
            "100000",
            "--checkpoint-seconds",
            "3600",
        ],
    )
    .unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();
    // A new chain is signed at the signer's first look (it has no
    // checkpoint to be "10 s after"): let that happen, then act.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..5 {
        let (status, body) = daemon
            .call(
                Method::POST,
                &format!("/v1/workspaces/{id}/actions"),
                Some(r#"{"action":"mouse_move","coordinate":[20,20]}"#),
            )
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let mut db = SqliteConnectOptions::new()
        .filename(data.path().join("cubicle.db"))
        .read_only(true)
        .connect()
        .await
        .unwrap();
    let (head, signed) = head_and_signed(&mut db, &id).await;
    assert!(
        signed < head,
        "control: with this cadence the actions are not signed yet ({signed} of {head})"
    );

    let (status, body) = daemon
        .call(Method::POST, &format!("/v1/workspaces/{id}/stop"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let deadline = tokio::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(10));
    loop {
        let (_, signed) = head_and_signed(&mut db, &id).await;
        if signed >= head {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "10 s after the stop the chain is signed up to {signed}, not {head}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
