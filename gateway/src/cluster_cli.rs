//! `cubicle node`, `cubicle edge` and `cubicle edge-key`: the commands of a
//! cluster (see `cubicle_gateway::cluster`). A node is `serve` with a
//! membership; an edge is its own small daemon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use cubicle_gateway::cluster::credential::{EdgeSigner, EdgeTrust};
use cubicle_gateway::cluster::edge::{self, Edge};
use cubicle_gateway::cluster::membership::{self, Membership};
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::cluster::NodeInfo;
use cubicle_runtime::cluster::postgres::PgCluster;
use cubicle_runtime::manager::Manager;

/// What makes `serve` a node.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeCluster {
    /// The shared store (`postgres://user:password@host/db`).
    #[arg(long, env = "CUBICLE_CLUSTER_URL")]
    pub cluster_url: String,
    /// This node's name in the cluster (unique; a restart keeps it).
    #[arg(long, env = "CUBICLE_NODE_NAME")]
    pub node_name: String,
    /// The address edges reach this node at (default: the listening one).
    #[arg(long, env = "CUBICLE_ADVERTISE")]
    pub advertise: Option<String>,
    /// The edges' public key (hex; `cubicle edge-key` makes a pair).
    #[arg(long, env = "CUBICLE_EDGE_PUBLIC_KEY")]
    pub edge_public_key: String,
    /// How many workspaces this node takes.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub capacity: u32,
    /// How often it tells the store it is alive, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub heartbeat_ms: u64,
}

/// Registers the node; its membership (to run), the edges' key and the store.
pub async fn join(
    cluster: &NodeCluster,
    manager: Arc<Manager<AnyBackend>>,
    backend: &str,
    listening: SocketAddr,
) -> anyhow::Result<(Membership, EdgeTrust, PgCluster)> {
    let trust = EdgeTrust::from_hex(&cluster.edge_public_key).context("--edge-public-key")?;
    let address = match &cluster.advertise {
        Some(address) => address.clone(),
        None if listening.ip().is_unspecified() => bail!(
            "--advertise is needed: this node listens on {listening}, which edges cannot dial"
        ),
        None => listening.to_string(),
    };
    let store = PgCluster::connect(&cluster.cluster_url, 4).await?;
    let info = NodeInfo {
        name: cluster.node_name.clone(),
        address,
        backends: vec![backend.to_owned()],
        capacity: cluster.capacity,
    };
    let membership = membership::join(
        store.clone(),
        &info,
        Duration::from_millis(cluster.heartbeat_ms),
        manager,
    )
    .await?;
    Ok((membership, trust, store))
}

#[derive(Debug, clap::Args)]
pub struct EdgeArgs {
    /// The shared store (`postgres://user:password@host/db`).
    #[arg(long, env = "CUBICLE_CLUSTER_URL")]
    cluster_url: String,
    /// Address to listen on.
    #[arg(long, env = "CUBICLE_LISTEN", default_value = "127.0.0.1:7879")]
    listen: SocketAddr,
    /// The edges' private key (hex; `cubicle edge-key` makes a pair).
    #[arg(long, env = "CUBICLE_EDGE_KEY", hide_env_values = true)]
    edge_key: String,
    /// This edge's name (in its credentials, for the nodes' logs).
    #[arg(long, env = "CUBICLE_EDGE_NAME", default_value = "edge")]
    name: String,
    /// A node silent this long (milliseconds) is declared down and its
    /// workspaces lost.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(200..=3_600_000))]
    deadline_ms: u64,
}

/// Runs an edge until SIGINT or SIGTERM.
pub async fn edge(args: EdgeArgs) -> anyhow::Result<()> {
    let signer = EdgeSigner::from_hex(&args.edge_key, &args.name).context("--edge-key")?;
    let store = PgCluster::connect(&args.cluster_url, 8).await?;
    if let Some(secret) = edge::first_admin(&store).await? {
        println!("admin token (shown once, store it now): {secret}");
    }
    let edge = Arc::new(Edge {
        store,
        client: cubicle_gateway::cluster::proxy::client(),
        signer,
        deadline: Duration::from_millis(args.deadline_ms),
        in_flight: Default::default(),
    });
    let stop = tokio_util::sync::CancellationToken::new();
    let sweeper = tokio::spawn(edge::sweep(edge.clone(), stop.clone()));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    println!(
        "edge {} listening on http://{}",
        args.name,
        listener.local_addr()?
    );
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("catching SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("catching SIGINT")?;
    cubicle_gateway::listener::serve(listener, edge::router(edge), async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
    .await?;
    stop.cancel();
    let _ = sweeper.await;
    Ok(())
}

/// Prints a new edge key pair.
pub fn edge_key() {
    let private = EdgeSigner::generate_hex();
    let public = EdgeSigner::from_hex(&private, "")
        .expect("a generated key is 32 bytes of hex")
        .public_hex();
    println!("CUBICLE_EDGE_KEY={private}");
    println!("CUBICLE_EDGE_PUBLIC_KEY={public}");
}
