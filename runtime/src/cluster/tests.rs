//! The store contract: every promise of [`ClusterStore`], checked against
//! both stores. Each check gets a fresh database and two handles on it (two
//! connection pools: two hosts, as far as the database can tell).
//! PostgreSQL is a real server the test starts (Debian's `postgresql`,
//! `initdb` in a temporary directory); without it the test is skipped and
//! says so.

use cubicle_recorder::audit_chain;
use std::collections::BTreeSet;

use super::*;
use crate::events::{EventKind, NewEvent};
use crate::state::{Store, WorkspaceState};

const DEADLINE: i64 = 10_000;

fn node_info(name: &str, backends: &[&str]) -> NodeInfo {
    NodeInfo {
        name: name.to_owned(),
        address: format!("{name}.test:7000"),
        backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        capacity: 8,
    }
}

fn placed(id: &str, lease: &Lease, at: i64) -> Placement {
    Placement {
        id: id.to_owned(),
        name: id.to_owned(),
        backend: "jail".to_owned(),
        owner_token: Some("tok-agent".to_owned()),
        node: lease.node.clone(),
        node_epoch: lease.epoch,
        desired: Desired::Running,
        actual: Actual::State(WorkspaceState::Creating),
        lost_reason: None,
        error: None,
        created_at: at,
        updated_at: at,
    }
}

fn fenced<T: std::fmt::Debug>(result: Result<T, ClusterError>, what: &str) {
    match result {
        Err(ClusterError::Fenced { .. }) => {}
        other => panic!("{what}: want Fenced, got {other:?}"),
    }
}

/// The records of `chain` as stored, checked link by link from its genesis.
async fn verified_chain<S: ClusterStore>(store: &S, chain: &str) -> Vec<serde_json::Value> {
    let rows = store.chain(chain, 0, 100_000).await.unwrap();
    let mut prev = audit_chain::genesis(chain);
    let mut records = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        assert_eq!(
            row.seq,
            index as u64 + 1,
            "{chain}: seqs are 1, 2, … with no gap"
        );
        let record: serde_json::Value = serde_json::from_str(&row.sealed).unwrap();
        assert_eq!(record["prev"], hex::encode(prev), "{chain} seq {}", row.seq);
        assert_eq!(
            record["seq"], row.seq,
            "{chain}: the sealed bytes hold the seq"
        );
        let hash = audit_chain::link(&prev, row.sealed.as_bytes());
        assert_eq!(row.hash, hex::encode(hash), "{chain} seq {}: hash", row.seq);
        prev = hash;
        records.push(record);
    }
    records
}

async fn nodes_register_with_fresh_epochs<S: ClusterStore>(a: &S, b: &S) {
    let first = a
        .register_node(&node_info("n1", &["jail"]), 1000)
        .await
        .unwrap();
    let again = b
        .register_node(&node_info("n1", &["microvm", "jail"]), 2000)
        .await
        .unwrap();
    assert!(again.epoch > first.epoch, "{again:?} after {first:?}");
    fenced(
        a.heartbeat(&first, 3, 2500).await,
        "a heartbeat of the old run",
    );
    a.heartbeat(&again, 5, 3000).await.unwrap();
    let nodes = b.nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    assert_eq!(node.backends, ["microvm", "jail"]);
    assert_eq!((node.epoch, node.free, node.capacity), (again.epoch, 5, 8));
    assert_eq!((node.status, node.heartbeat_at), (NodeStatus::Up, 3000));
    fenced(
        a.heartbeat(
            &Lease {
                node: "n9".into(),
                epoch: 1,
            },
            1,
            1,
        )
        .await
        .map_err(|e| match e {
            ClusterError::UnknownNode(n) => ClusterError::Fenced {
                node: n,
                epoch: 1,
                why: String::new(),
            },
            other => other,
        }),
        "an unknown node",
    );
    let registered = verified_chain(a, "cluster/host").await;
    let kinds: Vec<&str> = registered
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["node.register", "node.register"]);
}

async fn placements_are_fenced_and_owned<S: ClusterStore>(a: &S, b: &S) {
    let n1 = a
        .register_node(&node_info("n1", &["jail"]), 1000)
        .await
        .unwrap();
    let n2 = a
        .register_node(&node_info("n2", &["jail"]), 1000)
        .await
        .unwrap();
    a.place(&n1, &placed("ws-1", &n1, 1100)).await.unwrap();
    b.place(&n2, &placed("ws-2", &n2, 1200)).await.unwrap();
    b.report(&n1, "ws-1", WorkspaceState::Running, None, 1300)
        .await
        .unwrap();
    match a
        .report(&n2, "ws-1", WorkspaceState::Stopped, None, 1400)
        .await
    {
        Err(ClusterError::NotOwner { owner, .. }) => assert_eq!(owner, "n1"),
        other => panic!("another node's report: {other:?}"),
    }
    match a
        .report(&n1, "ws-9", WorkspaceState::Running, None, 1400)
        .await
    {
        Err(ClusterError::UnknownWorkspace(id)) => assert_eq!(id, "ws-9"),
        other => panic!("an unknown workspace: {other:?}"),
    }
    // n1 starts again: its old run's writes are refused, the new run's
    // adopt its workspace.
    let n1b = a
        .register_node(&node_info("n1", &["jail"]), 1500)
        .await
        .unwrap();
    fenced(
        b.report(&n1, "ws-1", WorkspaceState::Stopped, None, 1600)
            .await,
        "the old run's report",
    );
    fenced(
        b.place(&n1, &placed("ws-3", &n1, 1600)).await,
        "the old run's place",
    );
    b.report(&n1b, "ws-1", WorkspaceState::Running, None, 1700)
        .await
        .unwrap();
    a.set_desired("ws-2", Desired::Stopped, 1800).await.unwrap();
    assert!(matches!(
        a.set_desired("ws-9", Desired::Stopped, 1800).await,
        Err(ClusterError::UnknownWorkspace(_))
    ));
    let ws1 = b.placement("ws-1").await.unwrap().unwrap();
    assert_eq!(ws1.actual, Actual::State(WorkspaceState::Running));
    assert_eq!((ws1.node.as_str(), ws1.node_epoch), ("n1", n1b.epoch));
    assert_eq!(ws1.owner_token.as_deref(), Some("tok-agent"));
    let all: Vec<String> = a
        .placements(None)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(all, ["ws-1", "ws-2"]);
    let on_n2 = a.placements(Some("n2")).await.unwrap();
    assert_eq!(on_n2.len(), 1);
    assert_eq!(on_n2[0].desired, Desired::Stopped);
    assert!(a.placement("ws-9").await.unwrap().is_none());
}

async fn overdue_nodes_go_down_and_their_workspaces_lost<S: ClusterStore>(a: &S, b: &S) {
    let n1 = a
        .register_node(&node_info("n1", &["jail"]), 1000)
        .await
        .unwrap();
    let n2 = a
        .register_node(&node_info("n2", &["jail"]), 1000)
        .await
        .unwrap();
    for (id, lease) in [("ws-a", &n1), ("ws-b", &n1), ("ws-c", &n1), ("ws-d", &n2)] {
        a.place(lease, &placed(id, lease, 1100)).await.unwrap();
    }
    a.report(&n1, "ws-c", WorkspaceState::Deleted, None, 1200)
        .await
        .unwrap();
    // n2 keeps beating; n1 is silent from 1000.
    a.heartbeat(&n2, 7, 9000).await.unwrap();
    assert!(
        b.sweep(1000 + DEADLINE, DEADLINE).await.unwrap().is_empty(),
        "not yet overdue"
    );
    let lost = b.sweep(1001 + DEADLINE, DEADLINE).await.unwrap();
    let ids: Vec<&str> = lost.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ws-a", "ws-b"],
        "the deleted one is not lost; n2's are untouched"
    );
    assert!(
        lost.iter()
            .all(|l| l.node == "n1" && l.reason.contains("no heartbeat"))
    );
    // Two edges sweeping: the second finds nothing more.
    assert!(a.sweep(1002 + DEADLINE, DEADLINE).await.unwrap().is_empty());
    let nodes = a.nodes().await.unwrap();
    assert_eq!(nodes[0].status, NodeStatus::Down);
    assert!(
        nodes[0]
            .down_reason
            .as_deref()
            .unwrap()
            .contains("deadline")
    );
    assert_eq!(nodes[1].status, NodeStatus::Up);
    let ws_a = a.placement("ws-a").await.unwrap().unwrap();
    assert_eq!(ws_a.actual, Actual::Lost);
    assert!(ws_a.lost_reason.unwrap().contains("no heartbeat"));
    let ws_d = a.placement("ws-d").await.unwrap().unwrap();
    assert_eq!(ws_d.actual, Actual::State(WorkspaceState::Creating));
    // The silent run comes back: fenced everywhere.
    fenced(a.heartbeat(&n1, 8, 20_000).await, "a heartbeat after down");
    fenced(
        a.report(&n1, "ws-a", WorkspaceState::Running, None, 20_000)
            .await,
        "a report after down",
    );
    fenced(
        a.place(&n1, &placed("ws-e", &n1, 20_000)).await,
        "a place after down",
    );
    // Registering again is a new run: it may place again, but what was lost
    // stays lost (nothing restarts by itself, and no workspace has two owners).
    let n1b = b
        .register_node(&node_info("n1", &["jail"]), 21_000)
        .await
        .unwrap();
    fenced(
        b.report(&n1b, "ws-a", WorkspaceState::Running, None, 21_000)
            .await,
        "the new run's report of a lost workspace",
    );
    b.place(&n1b, &placed("ws-f", &n1b, 21_000)).await.unwrap();
    assert_eq!(
        a.placement("ws-a").await.unwrap().unwrap().actual,
        Actual::Lost
    );
    // Every loss is in its workspace's chain, and the node's fall in the host's.
    for id in ["ws-a", "ws-b"] {
        let records = verified_chain(a, &format!("cluster/{id}")).await;
        assert_eq!(records.len(), 1, "{id}");
        assert_eq!(records[0]["kind"], "workspace.lost");
        assert_eq!(records[0]["detail"]["node"], "n1");
    }
    let host = verified_chain(a, "cluster/host").await;
    let kinds: Vec<&str> = host.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "node.register",
            "node.register",
            "node.down",
            "node.register"
        ]
    );
}

async fn control_has_one_holder<S: ClusterStore + Clone + 'static>(a: &S, b: &S) {
    assert_eq!(
        a.take_control("ws-1", "operator-a", false, 1)
            .await
            .unwrap(),
        Control::Taken
    );
    assert_eq!(
        b.take_control("ws-1", "agent", false, 2).await.unwrap(),
        Control::HeldBy("operator-a".into())
    );
    assert_eq!(
        a.take_control("ws-1", "operator-a", false, 3)
            .await
            .unwrap(),
        Control::Taken
    );
    assert_eq!(
        b.take_control("ws-1", "operator-b", true, 4).await.unwrap(),
        Control::Taken
    );
    assert!(
        !a.release_control("ws-1", "operator-a").await.unwrap(),
        "not its to release"
    );
    assert_eq!(
        b.control_holder("ws-1").await.unwrap().as_deref(),
        Some("operator-b")
    );
    assert!(a.release_control("ws-1", "operator-b").await.unwrap());
    assert_eq!(b.control_holder("ws-1").await.unwrap(), None);
    // Eight takers at once through two handles: one wins, every other is
    // told who.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let holder = format!("taker-{i}");
            let got = store
                .take_control("ws-2", &holder, false, 10)
                .await
                .unwrap();
            (holder, got)
        }));
    }
    let mut winners = Vec::new();
    let mut told = BTreeSet::new();
    for task in tasks {
        match task.await.unwrap() {
            (holder, Control::Taken) => winners.push(holder),
            (_, Control::HeldBy(other)) => {
                told.insert(other);
            }
        }
    }
    assert_eq!(winners.len(), 1, "one taker wins: {winners:?}");
    assert!(
        told.iter().all(|t| *t == winners[0]),
        "{told:?} vs {winners:?}"
    );
}

async fn approvals_decide_once_and_run_once<S: ClusterStore + Clone + 'static>(a: &S, b: &S) {
    let ask = |id: &'static str| NewApproval {
        id,
        workspace: "ws-1",
        digest: "sha256:op-1",
        record: "{\"action\":\"exec\"}",
    };
    a.ask(&ask("ap-1"), 1).await.unwrap();
    assert_eq!(
        b.approval_state("ap-1").await.unwrap(),
        Some(ApprovalState::Pending)
    );
    assert!(
        !a.run_once("ap-1", "sha256:op-1", 2).await.unwrap(),
        "pending: does not run"
    );
    assert_eq!(
        b.decide("ap-1", true, "operator-b", 3).await.unwrap(),
        Decision::Made(ApprovalState::Approved)
    );
    assert_eq!(
        a.decide("ap-1", false, "operator-a", 4).await.unwrap(),
        Decision::Already(ApprovalState::Approved)
    );
    assert!(
        !a.run_once("ap-1", "sha256:op-2", 5).await.unwrap(),
        "another operation"
    );
    assert!(a.run_once("ap-1", "sha256:op-1", 6).await.unwrap());
    assert!(
        !b.run_once("ap-1", "sha256:op-1", 7).await.unwrap(),
        "it ran once"
    );
    assert!(matches!(
        a.decide("ap-9", true, "x", 8).await,
        Err(ClusterError::UnknownApproval(_))
    ));
    a.ask(&ask("ap-2"), 10).await.unwrap();
    a.decide("ap-2", false, "operator-a", 11).await.unwrap();
    assert!(
        !b.run_once("ap-2", "sha256:op-1", 12).await.unwrap(),
        "denied: never runs"
    );
    // Racing deciders and racing runners, through both handles.
    a.ask(&ask("ap-3"), 20).await.unwrap();
    let mut deciders = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        deciders.push(tokio::spawn(async move {
            store
                .decide("ap-3", i % 3 != 0, &format!("op-{i}"), 21)
                .await
                .unwrap()
        }));
    }
    let mut made = 0;
    for decider in deciders {
        made += usize::from(matches!(decider.await.unwrap(), Decision::Made(_)));
    }
    assert_eq!(made, 1, "one decision is made");
    if a.approval_state("ap-3").await.unwrap() == Some(ApprovalState::Approved) {
        let mut runners = Vec::new();
        for i in 0..8 {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            runners.push(tokio::spawn(async move {
                store.run_once("ap-3", "sha256:op-1", 22).await.unwrap()
            }));
        }
        let mut ran = 0;
        for runner in runners {
            ran += usize::from(runner.await.unwrap());
        }
        assert_eq!(ran, 1, "it runs once");
    }
}

async fn chains_never_fork<S: ClusterStore + Clone + 'static>(a: &S, b: &S) {
    let mut writers = Vec::new();
    for writer in 0..6 {
        let store = if writer % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        };
        writers.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for n in 0..20 {
                let chain = if n % 4 == 0 { "ws-other" } else { "ws-1" };
                let event = NewEvent {
                    kind: EventKind::Action,
                    workspace_id: Some(chain),
                    detail: serde_json::json!({ "writer": writer, "n": n }),
                    ..NewEvent::default()
                };
                let (stored, seq) = store.append(&event).await.unwrap();
                assert_eq!(stored, format!("cluster/{chain}"));
                seqs.push((chain, seq));
            }
            seqs
        }));
    }
    let mut seen = BTreeSet::new();
    for writer in writers {
        for (chain, seq) in writer.await.unwrap() {
            assert!(seen.insert((chain, seq)), "{chain} seq {seq} given twice");
        }
    }
    let ws1 = verified_chain(b, "cluster/ws-1").await;
    let other = verified_chain(a, "cluster/ws-other").await;
    assert_eq!((ws1.len(), other.len()), (90, 30));
    // Each writer's events keep the order it wrote them in.
    for writer in 0..6 {
        let ns: Vec<u64> = ws1
            .iter()
            .filter(|r| r["detail"]["writer"] == writer)
            .map(|r| r["detail"]["n"].as_u64().unwrap())
            .collect();
        assert!(
            ns.windows(2).all(|w| w[0] < w[1]),
            "writer {writer}: {ns:?}"
        );
    }
    assert_eq!(
        a.chain("cluster/ws-1", 88, 10).await.unwrap().len(),
        2,
        "after a seq"
    );
}

async fn tokens_and_artifacts<S: ClusterStore>(a: &S, b: &S) {
    let token = TokenRow {
        id: "tok-1".into(),
        name: "agent one".into(),
        role: "agent".into(),
        secret_hash: "ab".repeat(32),
        scope: Some("{\"workspaces\":[\"ws-1\"]}".into()),
        created_at: 5,
        expires_at: Some(1000),
        revoked_at: None,
    };
    a.put_token(&token).await.unwrap();
    assert!(
        b.put_token(&token).await.is_err(),
        "a token id is made once"
    );
    assert_eq!(
        b.token_by_hash(&"ab".repeat(32)).await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(b.token_by_hash(&"cd".repeat(32)).await.unwrap(), None);
    assert!(b.revoke_token("tok-1", 50).await.unwrap());
    assert!(!a.revoke_token("tok-1", 60).await.unwrap(), "revoked once");
    let revoked = a.token_by_hash(&"ab".repeat(32)).await.unwrap().unwrap();
    assert_eq!(revoked.revoked_at, Some(50));

    let artifact = |kind, id: &str, node: &str, at| Artifact {
        kind,
        id: id.into(),
        workspace: "ws-1".into(),
        node: node.into(),
        bytes: 4096,
        sha256: "ef".repeat(32),
        at,
    };
    a.put_artifact(&artifact(ArtifactKind::Recording, "seg-2", "n1", 20))
        .await
        .unwrap();
    a.put_artifact(&artifact(ArtifactKind::Recording, "seg-1", "n1", 10))
        .await
        .unwrap();
    b.put_artifact(&artifact(ArtifactKind::Checkpoint, "ck-1", "n2", 30))
        .await
        .unwrap();
    b.put_artifact(&artifact(ArtifactKind::Recording, "seg-2", "n2", 40))
        .await
        .unwrap();
    let recordings = b.artifacts("ws-1", ArtifactKind::Recording).await.unwrap();
    let ids: Vec<(&str, &str)> = recordings
        .iter()
        .map(|r| (r.id.as_str(), r.node.as_str()))
        .collect();
    assert_eq!(
        ids,
        [("seg-1", "n1"), ("seg-2", "n2")],
        "replaced, not doubled"
    );
    assert_eq!(
        a.artifacts("ws-1", ArtifactKind::Quarantine).await.unwrap(),
        []
    );
    assert_eq!(
        a.artifacts("ws-1", ArtifactKind::Checkpoint)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Runs every contract check, each on a fresh pair of handles from `open`.
async fn the_contract<S, F, Fut>(mut open: F)
where
    S: ClusterStore + Clone + 'static,
    F: FnMut(&'static str) -> Fut,
    Fut: std::future::Future<Output = (S, S)>,
{
    let (a, b) = open("nodes").await;
    nodes_register_with_fresh_epochs(&a, &b).await;
    let (a, b) = open("placements").await;
    placements_are_fenced_and_owned(&a, &b).await;
    let (a, b) = open("lost").await;
    overdue_nodes_go_down_and_their_workspaces_lost(&a, &b).await;
    let (a, b) = open("control").await;
    control_has_one_holder(&a, &b).await;
    let (a, b) = open("approvals").await;
    approvals_decide_once_and_run_once(&a, &b).await;
    let (a, b) = open("chains").await;
    chains_never_fork(&a, &b).await;
    let (a, b) = open("tokens").await;
    tokens_and_artifacts(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    the_contract(|name| {
        let path = root.join(format!("{name}.db"));
        async move {
            // Two pools on one file: two processes, as SQLite sees it.
            let one = Store::open(&path).await.unwrap();
            let two = Store::open(&path).await.unwrap();
            (
                sqlite::SqliteCluster::new(&one),
                sqlite::SqliteCluster::new(&two),
            )
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_keeps_the_contract() {
    let server = match super::temp_postgres::TempPostgres::start() {
        Ok(server) => server,
        Err(why) => return cubicle_skip::skip(&why),
    };
    let server = &server;
    the_contract(|name| async move {
        let url = server.database(name);
        let one = postgres::PgCluster::connect(&url, 4).await.unwrap();
        let two = postgres::PgCluster::connect(&url, 4).await.unwrap();
        (one, two)
    })
    .await;
}
