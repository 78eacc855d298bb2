//! The multi-node rig: one PostgreSQL, two `cubicle edge` replicas and two
//! `cubicle node` daemons (jail backend, a real desktop each), all started
//! here. One workspace is reached through either edge on every kind of
//! door; the control lock holds across edges; a node killed with `kill -9`
//! makes its workspaces `lost` on both edges within the deadline while the
//! other node's stay; a node stopped (`SIGSTOP`) past the deadline is
//! fenced when it wakes: it stops its workspaces and exits, and no
//! workspace has two owners.

use std::time::{Duration, Instant};

use cubicle_runtime::cluster::postgres::PgCluster;
use cubicle_runtime::cluster::temp_postgres::TempPostgres;
use cubicle_runtime::cluster::{Actual, ClusterStore};
use cubicle_tests::cluster::{Edge, edge_keys, node};
use cubicle_tests::netns::Host;
use cubicle_tests::{Daemon, guard, procs};
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A node silent this long is declared down: thirty missed heartbeats, so
/// that a node starved of CPU on a loaded test machine is not taken for
/// dead.
const DEADLINE_MS: u64 = 6000;

/// One rig at a time in this process: each starts several daemons and
/// desktops, and the other end-to-end tests run beside it.
static RIG: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Polls `check` every 50 ms until it gives a value or `limit` passes.
async fn until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + guard(limit);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn token(edge: &Edge, admin: &str, name: &str, role: &str) -> String {
    let body = json!({ "name": name, "role": role }).to_string();
    let (status, made) = edge
        .call(admin, Method::POST, "/v1/tokens", Some(&body))
        .await;
    assert_eq!(status, 201, "{made}");
    made["secret"].as_str().unwrap().to_owned()
}

async fn create(edge: &Edge, agent: &str) -> Value {
    let (status, ws) = edge
        .call(agent, Method::POST, "/v1/workspaces", Some("{}"))
        .await;
    assert_eq!(status, 201, "create through edge {}: {ws}", edge.name);
    assert_eq!(ws["state"], "running", "{ws}");
    ws
}

fn id_and_uid(ws: &Value) -> (String, u32) {
    let id = ws["id"].as_str().unwrap().to_owned();
    (id, u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap())
}

/// The live view's first bytes through `edge`: Xvnc's RFB greeting.
async fn rfb_greeting(edge: &Edge, token: &str, id: &str) -> Vec<u8> {
    let url = format!(
        "{}/v1/workspaces/{id}/vnc?access_token={token}",
        edge.base.replacen("http://", "ws://", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "binary".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    loop {
        match ws.next().await.expect("the live view sends").unwrap() {
            Message::Binary(bytes) => return bytes.to_vec(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("the live view sent {other:?}"),
        }
    }
}

/// `Browser.getVersion` over the workspace's CDP door through `edge`.
async fn cdp_version(edge: &Edge, token: &str, id: &str) -> Value {
    let url = format!(
        "{}/v1/workspaces/{id}/cdp?access_token={token}",
        edge.base.replacen("http://", "ws://", 1)
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let ask = json!({ "id": 1, "method": "Browser.getVersion" }).to_string();
    ws.send(Message::Text(ask.into())).await.unwrap();
    loop {
        if let Message::Text(text) = ws.next().await.expect("CDP answers").unwrap() {
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == 1 {
                return answer;
            }
        }
    }
}

/// A PostgreSQL of the test's own with an empty database `cubicle`, its
/// URL, and the edges' keys; `Err`: why a rig cannot run here.
fn shared_parts() -> Result<(TempPostgres, String, cubicle_tests::cluster::Keys), String> {
    let postgres = TempPostgres::start()?;
    let url = postgres.database("cubicle");
    Ok((postgres, url, edge_keys()))
}

/// The node that holds `id`, from the shared store.
async fn owner(store: &PgCluster, id: &str) -> String {
    store.placement(id).await.unwrap().expect("placed").node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_edges_route_one_workspace_and_a_dead_node_is_lost_on_both() {
    let _one_rig = RIG.lock().await;
    let Ok((_postgres, url, keys)) = shared_parts().map_err(|why| cubicle_tests::skip(&why)) else {
        return;
    };
    let (edge_a, admin) = Edge::start(&url, &keys, "edge-a", DEADLINE_MS).unwrap();
    let admin = admin.expect("the first edge makes the cluster's admin token");
    let (edge_b, again) = Edge::start(&url, &keys, "edge-b", DEADLINE_MS).unwrap();
    assert_eq!(
        again, None,
        "one admin token for the cluster, not one per edge"
    );
    // Each node a host of its own: its own network namespace and address.
    let hosts: Vec<Host> = match (0..3).map(|_| Host::new()).collect() {
        Ok(hosts) => hosts,
        Err(why) => return cubicle_tests::skip(&why),
    };
    let datas: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let start = |i: usize, token: Option<&str>| {
        let name = format!("node-{}", i + 1);
        node(
            Some(&hosts[i]),
            datas[i].path(),
            &url,
            &keys,
            &name,
            token,
            &[],
        )
        .unwrap()
    };
    let mut nodes: Vec<Daemon> = (0..3).map(|i| start(i, None)).collect();
    let index = |name: &str| name.trim_start_matches("node-").parse::<usize>().unwrap() - 1;
    let store = PgCluster::connect(&url, 2).await.unwrap();
    let (status, listed) = edge_b.call(&admin, Method::GET, "/v1/nodes", None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["nodes"].as_array().unwrap().len(), 3, "{listed}");
    // A node takes a caller only from the edges' key: a credential made
    // up by whoever reaches the node's port is refused, and so is none.
    for credential in [Some("eyJ0b2tlbl9pZCI6InRvay1hZG1pbiJ9.AAAA"), None] {
        let mut request = reqwest::Client::new().get(format!("{}/v1/workspaces", nodes[0].base));
        if let Some(credential) = credential {
            request = request.header("x-cubicle-edge", credential);
        }
        let status = request.send().await.unwrap().status();
        assert_eq!(status, 401, "straight to a node with {credential:?}");
    }

    let agent = token(&edge_a, &admin, "agent", "agent").await;
    let operator = token(&edge_b, &admin, "olivia", "operator").await;
    let (id, id_uid) = id_and_uid(&create(&edge_a, &agent).await);
    let first = owner(&store, &id).await;

    // Every kind of door, through the other edge too.
    let (status, ws) = edge_b
        .call(&agent, Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await;
    assert_eq!(
        (status, ws["id"].as_str()),
        (200, Some(id.as_str())),
        "{ws}"
    );
    let exec = json!({ "command": "echo routed" }).to_string();
    let (status, ran) = edge_b
        .call(
            &agent,
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&exec),
        )
        .await;
    assert_eq!(status, 200, "{ran}");
    assert_eq!(ran["stdout"], "routed\n", "{ran}");
    assert_eq!(&rfb_greeting(&edge_a, &agent, &id).await[..4], b"RFB ");
    let version = cdp_version(&edge_b, &agent, &id).await;
    assert!(
        version["result"]["product"]
            .as_str()
            .is_some_and(|p| p.contains("Chrome")),
        "{version}"
    );
    // Another agent is told nothing of it, through either edge.
    let stranger = token(&edge_a, &admin, "stranger", "agent").await;
    let (status, body) = edge_a
        .call(
            &stranger,
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = edge_b
        .call(
            "cubicle_forged",
            Method::GET,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await;
    assert_eq!(status, 401, "{body}");
    // Revoked through one edge, refused at the other.
    let stranger_id = {
        let body = json!({ "name": "short-lived", "role": "agent" }).to_string();
        let (status, made) = edge_b
            .call(&admin, Method::POST, "/v1/tokens", Some(&body))
            .await;
        assert_eq!(status, 201, "{made}");
        (
            made["id"].as_str().unwrap().to_owned(),
            made["secret"].as_str().unwrap().to_owned(),
        )
    };
    let (status, body) = edge_b
        .call(
            &admin,
            Method::DELETE,
            &format!("/v1/tokens/{}", stranger_id.0),
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = edge_a
        .call(&stranger_id.1, Method::GET, "/v1/workspaces", None)
        .await;
    assert_eq!(status, 401, "a revoked token: {body}");

    // The control lock holds across edges: taken through B, the agent's
    // input through A is refused.
    let path = format!("/v1/workspaces/{id}/control/take");
    let (status, taken) = edge_b.call(&operator, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{taken}");
    let click = json!({ "action": "left_click", "x": 10, "y": 10 }).to_string();
    let act = format!("/v1/workspaces/{id}/actions");
    let (status, body) = edge_a.call(&agent, Method::POST, &act, Some(&click)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "control_held", "{body}");
    let path = format!("/v1/workspaces/{id}/control/release");
    let (status, body) = edge_a.call(&operator, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{body}");

    // A second workspace goes to another node once the first one's
    // heartbeat has counted the first (of any two candidates, one is not
    // the first's node, and it has more room).
    until(
        Duration::from_secs(10),
        "node free capacity counted",
        || async {
            let nodes = store.nodes().await.unwrap();
            let busy = nodes.iter().find(|n| n.name == first)?;
            let idle = nodes.iter().find(|n| n.name != first)?;
            (busy.free < idle.free).then_some(())
        },
    )
    .await;
    let (other, other_uid) = id_and_uid(&create(&edge_b, &agent).await);
    let second = owner(&store, &other).await;
    assert_ne!(
        first, second,
        "the second workspace goes to the emptier node"
    );
    // The third node holds nothing: the matrix's bystander.
    let (d, v) = (index(&first), index(&second));
    let bystander = 3 - d - v;
    let [doomed, survivor] = nodes.get_disjoint_mut([d, v]).unwrap();

    // kill -9 of the first workspace's node: lost on both edges within the
    // deadline (and a sweep's tick), the other node's untouched.
    let killed = Instant::now();
    doomed.kill9();
    let mut seen = Vec::new();
    for edge in [&edge_a, &edge_b] {
        let body = until(Duration::from_secs(15), "lost after kill -9", || async {
            let (status, body) = edge
                .call(&agent, Method::GET, &format!("/v1/workspaces/{id}"), None)
                .await;
            (status == 410).then_some(body)
        })
        .await;
        assert_eq!(body["error"]["code"], "workspace_lost", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no heartbeat"),
            "{body}"
        );
        seen.push(killed.elapsed());
    }
    eprintln!(
        "cluster: kill -9 → lost: edge A {} ms, edge B {} ms (deadline {DEADLINE_MS} ms)",
        seen[0].as_millis(),
        seen[1].as_millis()
    );
    for edge in [&edge_a, &edge_b] {
        let (status, body) = edge
            .call(
                &agent,
                Method::GET,
                &format!("/v1/workspaces/{other}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "the other node's workspace: {body}");
    }
    let (status, listed) = edge_a
        .call(&agent, Method::GET, "/v1/workspaces", None)
        .await;
    assert_eq!(status, 200, "{listed}");
    let states: Vec<(String, String)> = listed["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["id"].as_str().unwrap().into(),
                w["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(states.contains(&(id.clone(), "lost".into())), "{listed}");
    assert!(
        states.contains(&(other.clone(), "running".into())),
        "{listed}"
    );
    let chain = store.chain(&format!("cluster/{id}"), 0, 10).await.unwrap();
    assert!(
        chain
            .iter()
            .any(|r| r.sealed.contains("\"workspace.lost\"")),
        "{chain:?}"
    );

    // SIGSTOP past the deadline, then SIGCONT: the survivor is fenced — it
    // finds itself declared down, stops its workspace and exits.
    // SAFETY: signals to our own child's pid.
    unsafe { libc::kill(survivor.pid(), libc::SIGSTOP) };
    until(Duration::from_secs(15), "lost while stopped", || async {
        let placed = store.placement(&other).await.unwrap()?;
        (placed.actual == Actual::Lost).then_some(())
    })
    .await;
    // SAFETY: as above.
    unsafe { libc::kill(survivor.pid(), libc::SIGCONT) };
    let status = survivor
        .wait_exit(guard(Duration::from_secs(120)))
        .expect("a fenced node exits");
    assert!(
        !status.success(),
        "a fenced node exits with an error: {status}"
    );
    let log = survivor.log();
    assert!(log.contains("fenced"), "{log}");
    let placed = store.placement(&other).await.unwrap().unwrap();
    assert_eq!(
        (placed.node.as_str(), placed.actual),
        (second.as_str(), Actual::Lost)
    );
    let (status, body) = edge_b
        .call(
            &agent,
            Method::GET,
            &format!("/v1/workspaces/{other}"),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (410, Some("workspace_lost"))
    );
    // Its processes were killed as it stopped; the kernel reaps them.
    let left = procs::wait_workspace_gone(other_uid, Duration::from_secs(30)).await;
    assert_eq!(left, [0; 0], "the fenced node stopped its workspace");

    // The killed node's workspace ran on under its shim; the node comes
    // back (a new epoch), finds it lost and stops it: nothing of a lost
    // workspace acts on, and nothing restarted it elsewhere.
    assert!(
        !procs::of_workspace(id_uid).is_empty(),
        "a shim outlives its daemon"
    );
    let token = doomed.token.clone();
    *doomed = start(d, Some(&token));
    until(
        Duration::from_secs(60),
        "the lost workspace stopped",
        || async { procs::of_workspace(id_uid).is_empty().then_some(()) },
    )
    .await;
    let placed = store.placement(&id).await.unwrap().unwrap();
    assert_eq!(
        (placed.node.as_str(), placed.actual),
        (first.as_str(), Actual::Lost)
    );
    let (status, body) = edge_a
        .call(&agent, Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (410, Some("workspace_lost"))
    );
    // The bystander saw none of it.
    let ready = reqwest::get(format!("{}/readyz", nodes[bystander].base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "the bystander node stays ready");
    let placed = store
        .placements(Some(&format!("node-{}", bystander + 1)))
        .await
        .unwrap();
    assert!(placed.is_empty(), "{placed:?}");
    drop(nodes);
}

/// A policy that holds one command for an operator.
const HELD: &str = r#"
description = "rig: one command held"
default = "allow"

[[rule]]
id = "held-files"
subject = "exec"
command = ["touch /home/user/held-*"]
decision = "confirm"
reason = "making a held file"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_cross_edges_and_restarts_of_the_node_and_the_database_lose_nothing() {
    let _one_rig = RIG.lock().await;
    let Ok((postgres, url, keys)) = shared_parts().map_err(|why| cubicle_tests::skip(&why)) else {
        return;
    };
    // A deadline longer than a node's restart: it comes back as itself.
    let deadline = 30_000;
    let (edge_a, admin) = Edge::start(&url, &keys, "edge-a", deadline).unwrap();
    let admin = admin.unwrap();
    let (edge_b, _) = Edge::start(&url, &keys, "edge-b", deadline).unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("held.toml"), HELD).unwrap();
    let policy_dir = policies.path().to_str().unwrap().to_owned();
    let extra = ["--policy-dir", &policy_dir, "--default-policy", "held"];
    let data = tempfile::tempdir().unwrap();
    let mut node_1 = node(None, data.path(), &url, &keys, "node-1", None, &extra).unwrap();
    let store = PgCluster::connect(&url, 2).await.unwrap();
    for base in [&node_1.base, &edge_a.base] {
        let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
        assert_eq!(ready.status(), 200, "{base}/readyz");
    }
    let agent = token(&edge_a, &admin, "agent", "agent").await;
    let operator = token(&edge_a, &admin, "olivia", "operator").await;
    let auditor = token(&edge_b, &admin, "audrey", "auditor").await;
    let (id, _) = id_and_uid(&create(&edge_a, &agent).await);
    let exec = format!("/v1/workspaces/{id}/exec");
    let touch = json!({ "command": "touch /home/user/held-one" }).to_string();

    // Asked through A; waited on through A while the database restarts;
    // approved through B; run once.
    let (status, held) = edge_a.call(&agent, Method::POST, &exec, Some(&touch)).await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval"]["id"].as_str().unwrap().to_owned();
    let waiter = {
        let edge = Edge::attach(&edge_a);
        let (agent, approval) = (agent.clone(), approval.clone());
        tokio::spawn(async move {
            let wait = format!("/v1/approvals/{approval}?wait=60");
            edge.call(&agent, Method::GET, &wait, None).await
        })
    };
    let epoch_before = store.nodes().await.unwrap()[0].epoch;
    postgres.restart();
    let store = PgCluster::connect(&url, 2).await.unwrap();
    let (status, listed) = edge_b
        .call(&operator, Method::GET, "/v1/approvals", None)
        .await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == approval)
    );
    let decide = format!("/v1/approvals/{approval}/approve");
    let reason = json!({ "reason": "ok" }).to_string();
    let (status, record) = edge_b
        .call(&operator, Method::POST, &decide, Some(&reason))
        .await;
    assert_eq!(status, 200, "{record}");
    let (status, again) = edge_a
        .call(&operator, Method::POST, &decide, Some(&reason))
        .await;
    assert_eq!(status, 409, "decided once, whichever edge: {again}");
    let (status, waited) = waiter.await.unwrap();
    assert_eq!(
        (status, waited["state"].as_str()),
        (200, Some("approved")),
        "{waited}"
    );
    let (status, ran) = edge_a.call(&agent, Method::POST, &exec, Some(&touch)).await;
    assert_eq!(status, 200, "{ran}");
    let (status, ran_again) = edge_b
        .call(
            &agent,
            Method::POST,
            &format!("{exec}?approval={approval}"),
            Some(&touch),
        )
        .await;
    assert_ne!(
        status, 200,
        "an approval runs its operation once: {ran_again}"
    );
    let nodes = store.nodes().await.unwrap();
    assert_eq!(
        (nodes[0].epoch, nodes[0].status),
        (epoch_before, cubicle_runtime::cluster::NodeStatus::Up),
        "the database's restart fenced nobody"
    );

    // The node restarts (SIGTERM keeps its workspaces): a new epoch, the
    // same workspace, routed as before.
    let token_1 = node_1.token.clone();
    node_1.terminate();
    node_1 = node(
        None,
        data.path(),
        &url,
        &keys,
        "node-1",
        Some(&token_1),
        &extra,
    )
    .unwrap();
    let epoch_after = store.nodes().await.unwrap()[0].epoch;
    assert!(epoch_after > epoch_before);
    until(
        Duration::from_secs(30),
        "the workspace reported under the new epoch",
        || async {
            let placed = store.placement(&id).await.unwrap()?;
            (placed.node_epoch == epoch_after).then_some(placed)
        },
    )
    .await;
    let check = json!({ "command": "test -e /home/user/held-one && echo kept" }).to_string();
    let (status, out) = edge_b.call(&agent, Method::POST, &exec, Some(&check)).await;
    assert_eq!(
        (status, out["stdout"].as_str()),
        (200, Some("kept\n")),
        "{out}"
    );

    // An auditor exports the workspace's chain through an edge; it
    // verifies against the node's key.
    let bundle = edge_b
        .bytes(&auditor, &format!("/v1/workspaces/{id}/audit/export"))
        .await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bundle).unwrap();
    let (status, key) = node_1
        .call(Method::GET, "/v1/audit/key", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{key}");
    let out = std::process::Command::new(cubicle_tests::daemon::bin_dir().join("cubicle"))
        .args(["audit", "verify"])
        .arg(file.path())
        .args(["--key", key["public_key"].as_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    drop(node_1);
}

/// Medians of `runs` round trips of `step`, in milliseconds.
async fn median_ms<F, Fut>(runs: usize, mut step: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        step().await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    samples[runs / 2]
}

/// Transactions PostgreSQL has committed in database `cubicle`, once every
/// backend has flushed its counts (an idle backend flushes within 10 s).
async fn settled_commits(store: &PgCluster) -> i64 {
    let read = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = 'cubicle'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap()
    };
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut last = read().await;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Each read is a transaction of its own.
        let now = read().await;
        if now == last + 1 {
            return now;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_share_the_creates_and_the_edge_hop_is_measured() {
    let _one_rig = RIG.lock().await;
    let Ok((_postgres, url, keys)) = shared_parts().map_err(|why| cubicle_tests::skip(&why)) else {
        return;
    };
    let hosts: Vec<Host> = match (0..3).map(|_| Host::new()).collect() {
        Ok(hosts) => hosts,
        Err(why) => return cubicle_tests::skip(&why),
    };
    // Long heartbeats and deadline: the commit count below is the creates'.
    let (edge, admin) = Edge::start(&url, &keys, "edge-a", 600_000).unwrap();
    let admin = admin.unwrap();
    let slow = ["--heartbeat-ms", "60000"];
    let datas: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<_> = (0..3)
        .map(|i| {
            let name = format!("node-{}", i + 1);
            node(
                Some(&hosts[i]),
                datas[i].path(),
                &url,
                &keys,
                &name,
                None,
                &slow,
            )
            .unwrap()
        })
        .collect();
    let store = PgCluster::connect(&url, 1).await.unwrap();

    // A backend no node runs is refused with the reason.
    let body = json!({ "backend": "microvm" }).to_string();
    let (status, refused) = edge
        .call(&admin, Method::POST, "/v1/workspaces", Some(&body))
        .await;
    assert_eq!(status, 503, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("microvm"),
        "{refused}"
    );

    // One create, alone: its transactions.
    let before = settled_commits(&store).await;
    let (status, ws) = edge
        .call(&admin, Method::POST, "/v1/workspaces", Some("{}"))
        .await;
    assert_eq!(status, 201, "{ws}");
    let after = settled_commits(&store).await;
    // `settled_commits` read once more than `before` did at the end.
    eprintln!(
        "cluster: PostgreSQL transactions per create: {}",
        after - before - 1
    );
    let id = ws["id"].as_str().unwrap().to_owned();
    let holder = owner(&store, &id).await;
    let direct = &nodes[holder.trim_start_matches("node-").parse::<usize>().unwrap() - 1];

    // The edge's hop: an action and a CDP call through the edge and to the
    // node direct, interleaved in one run.
    let action = json!({ "action": "cursor_position" }).to_string();
    let act = format!("/v1/workspaces/{id}/actions");
    let mut through = Vec::new();
    let mut straight = Vec::new();
    for _ in 0..5 {
        through.push(
            median_ms(10, || async {
                let (status, _) = edge.call(&admin, Method::POST, &act, Some(&action)).await;
                assert_eq!(status, 200);
            })
            .await,
        );
        straight.push(
            median_ms(10, || async {
                let (status, _) = direct
                    .call(Method::POST, &act, Some(&action))
                    .await
                    .unwrap();
                assert_eq!(status, 200);
            })
            .await,
        );
    }
    through.sort_by(f64::total_cmp);
    straight.sort_by(f64::total_cmp);
    eprintln!(
        "cluster: action round trip p50 through the edge {:.2} ms, direct {:.2} ms (ratio {:.2})",
        through[2],
        straight[2],
        through[2] / straight[2]
    );
    let cdp_via_edge = cdp_round_trips(&edge.base, &admin, &id).await;
    let cdp_direct = cdp_round_trips(&direct.base, &direct.token, &id).await;
    eprintln!(
        "cluster: CDP round trip p50 through the edge {cdp_via_edge:.2} ms, direct {cdp_direct:.2} ms (ratio {:.2})",
        cdp_via_edge / cdp_direct
    );

    // Three at once through the edge land on three nodes.
    let started = Instant::now();
    let creates: Vec<_> = (0..3)
        .map(|_| {
            let edge = Edge::attach(&edge);
            let admin = admin.clone();
            tokio::spawn(async move {
                edge.call(&admin, Method::POST, "/v1/workspaces", Some("{}"))
                    .await
            })
        })
        .collect();
    let mut spread = std::collections::BTreeMap::new();
    let mut made = vec![id.clone()];
    for create in creates {
        let (status, ws) = create.await.unwrap();
        assert_eq!(status, 201, "{ws}");
        let id = ws["id"].as_str().unwrap().to_owned();
        *spread.entry(owner(&store, &id).await).or_insert(0) += 1;
        made.push(id);
    }
    let three_nodes = started.elapsed();
    eprintln!("cluster: 3 creates at once across the nodes: {spread:?} in {three_nodes:?}");
    assert!(spread.len() >= 2, "the creates spread: {spread:?}");
    // Gone before the next three start: the machine holds four desktops
    // at most here.
    for id in made {
        let path = format!("/v1/workspaces/{id}");
        let (status, body) = edge.call(&admin, Method::DELETE, &path, None).await;
        assert!(status == 200 || status == 204, "{body}");
    }
    // The same three on one node, direct.
    let started = Instant::now();
    let one: Vec<_> = (0..3)
        .map(|_| direct.call(Method::POST, "/v1/workspaces", Some("{}")))
        .collect();
    for made in futures_util::future::join_all(one).await {
        let (status, ws) = made.unwrap();
        assert_eq!(status, 201, "{ws}");
    }
    let one_node = started.elapsed();
    eprintln!(
        "cluster: creates per second, 3 nodes {:.2} vs 1 node {:.2} (this machine's 2 cores are shared by all nodes)",
        3.0 / three_nodes.as_secs_f64(),
        3.0 / one_node.as_secs_f64()
    );
    drop(nodes);
}

/// The median of 50 `Browser.getVersion` round trips on one CDP socket.
async fn cdp_round_trips(base: &str, token: &str, id: &str) -> f64 {
    let url = format!(
        "{}/v1/workspaces/{id}/cdp?access_token={token}",
        base.replacen("http://", "ws://", 1)
    );
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let ws = tokio::sync::Mutex::new(ws);
    let next = std::sync::atomic::AtomicU64::new(0);
    median_ms(50, || async {
        let call = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 100;
        let mut ws = ws.lock().await;
        let ask = json!({ "id": call, "method": "Browser.getVersion" }).to_string();
        ws.send(Message::Text(ask.into())).await.unwrap();
        loop {
            if let Message::Text(text) = ws.next().await.unwrap().unwrap() {
                let answer: Value = serde_json::from_str(&text).unwrap();
                if answer["id"] == call {
                    break;
                }
            }
        }
    })
    .await
}
