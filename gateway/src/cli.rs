//! Command-line front: what each `cubicle` subcommand does.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use cubicle_gateway::app::AppState;
use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::backend::{Backend, BackendError};
use cubicle_runtime::events::EventKind;
use cubicle_runtime::host::HostKind;
use cubicle_runtime::image::ImageStore;
use cubicle_runtime::jail::JailBackend;
use cubicle_runtime::manager::{Manager, ManagerConfig};
use cubicle_runtime::microvm::MicrovmConfig;
use cubicle_runtime::state::{Durability, Store};
use cubicle_runtime::tokens::{self, Role};

#[derive(Debug, Parser)]
#[command(
    name = "cubicle",
    version,
    about = "Isolated desktop workspaces for computer-use agents"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway and the runtime (builds the image first if missing).
    Serve(Box<ServeArgs>),
    /// Run one host of a cluster: `serve`, registered in the shared
    /// PostgreSQL store, taking requests routed by the edges.
    Node(Box<NodeArgs>),
    /// Run an edge of a cluster: authenticates, places and routes to the
    /// nodes (stateless: run any number).
    Edge(Box<crate::cluster_cli::EdgeArgs>),
    /// Print a new key pair for edges (private) and nodes (public).
    EdgeKey,
    /// Build the desktop image (cached by recipe hash).
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Tell what this host offers and what is missing.
    Doctor(CommonArgs),
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Serve MCP over stdio, forwarding to a running gateway's /v1/mcp.
    Mcp(McpArgs),
    /// Measure the performance table against peers run alongside, print
    /// it and write it as JSON (starts its own `serve` on a scratch dir).
    Bench(Box<crate::bench::BenchArgs>),
    /// Check exported audit bundles (offline: no daemon, no database).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Workspaces on a running gateway (--url, --token).
    Ws {
        #[command(flatten)]
        remote: crate::remote::Remote,
        #[command(subcommand)]
        command: crate::remote::WsCommand,
    },
    /// Operations held for a person's decision, on a running gateway.
    Approvals {
        #[command(flatten)]
        remote: crate::remote::Remote,
        #[command(subcommand)]
        command: crate::remote::ApprovalsCommand,
    },
    /// Downloads held in quarantine, on a running gateway.
    Downloads {
        #[command(flatten)]
        remote: crate::remote::Remote,
        #[command(subcommand)]
        command: crate::remote::DownloadsCommand,
    },
    /// The event log of a running gateway.
    Events {
        #[command(flatten)]
        remote: crate::remote::Remote,
        #[command(subcommand)]
        command: crate::remote::EventsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Recompute a bundle's hash chain, check every checkpoint signature and
    /// segment hash; name the first bad record; exit nonzero on any failure.
    Verify {
        /// The bundle: the tar file from `GET /v1/workspaces/{id}/audit/export`,
        /// or the folder it was unpacked to.
        bundle: PathBuf,
        /// The public key you trust (hex, or a file holding it, as printed
        /// by `cubicle serve` and served at /v1/audit/key). Without it the
        /// bundle's own key is used, which proves integrity but not origin.
        #[arg(long)]
        key: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Accept records after the last checkpoint, with a note (a chain
        /// read live between two checkpoints). Without it the last record
        /// must be signed, as every export's is.
        #[arg(long)]
        allow_unsigned_tail: bool,
    },
}

#[derive(Debug, clap::Args)]
struct McpArgs {
    /// The gateway's base URL.
    #[arg(long, env = "CUBICLE_URL", default_value = "http://127.0.0.1:7878")]
    url: String,
    /// An agent or operator token.
    #[arg(long, env = "CUBICLE_TOKEN", hide_env_values = true)]
    token: String,
}

#[derive(Debug, Subcommand)]
enum ImageCommand {
    /// Build the root filesystem and its ext4 form.
    Build(CommonArgs),
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Make a token and print its secret once.
    Create {
        #[command(flatten)]
        common: CommonArgs,
        /// admin, agent, operator or auditor.
        #[arg(long)]
        role: String,
        /// A name to recognise it by.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Workspaces it reaches besides its own: `all`, or ids separated by
        /// commas. Default: agents their own only, other roles all.
        #[arg(long)]
        scope: Option<String>,
    },
    /// List tokens (never their secrets).
    List(CommonArgs),
    /// Revoke a token by id; a running daemon closes its connections within a second.
    Revoke {
        #[command(flatten)]
        common: CommonArgs,
        /// The token's id (tok-...), as `token list` shows it.
        id: String,
    },
}

#[derive(Debug, clap::Args)]
struct CommonArgs {
    /// State (SQLite database, workspaces' writable layers).
    #[arg(long, env = "CUBICLE_DATA_DIR", default_value = "/var/lib/cubicle")]
    data_dir: PathBuf,
    /// Built images, keyed by the hash of their recipe.
    #[arg(
        long,
        env = "CUBICLE_IMAGE_CACHE",
        default_value = "/var/cache/cubicle"
    )]
    image_cache: PathBuf,
}

#[derive(Debug, clap::Args)]
struct NodeArgs {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    cluster: crate::cluster_cli::NodeCluster,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "CUBICLE_LISTEN", default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// The operator page's files.
    #[arg(long, env = "CUBICLE_WEB_DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../web"))]
    web_dir: PathBuf,
    /// When an event (and every other write to the database) is durable.
    /// `synced`: the write-ahead log is synced at every commit, so an event
    /// survives a power cut before its operation runs. `process`: synced
    /// only at checkpoints; an event is still written before its operation
    /// runs, so a daemon crash, kill -9 or upgrade loses none, but a power
    /// cut or kernel crash may lose the last ones (the audit chains stay
    /// whole, ending earlier). Each sync costs the action, exec and CDP
    /// call that waits for it (see README, "Benchmarks").
    #[arg(long, env = "CUBICLE_DURABILITY", value_enum, default_value_t = DurabilityArg::Synced)]
    durability: DurabilityArg,
    /// Share identical memory pages between workspaces (the kernel's
    /// same-page merging, KSM): less memory per desktop, at the price of a
    /// known side channel between them (a write's timing tells whether
    /// another holds a page with the same content). For hosts whose
    /// workspaces belong to one tenant; see README, "Shared memory".
    #[arg(long, env = "CUBICLE_SHARE_MEMORY")]
    share_memory: bool,
    /// The policy directory: every NAME.toml in it is a policy (default,
    /// strict and open are shipped there).
    #[arg(long, env = "CUBICLE_POLICY_DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies"))]
    policy_dir: PathBuf,
    /// The policy of workspaces created without one.
    #[arg(long, env = "CUBICLE_DEFAULT_POLICY", default_value = "default")]
    default_policy: String,
    /// A named set of guard rails a create may name (`"template": NAME`),
    /// as `NAME=FILE`: a JSON file with the create body's `egress`,
    /// `policy`, `time_limits`, `record` and `limits` (repeatable). Agents
    /// get the server's defaults, or a template's, or narrower.
    #[arg(long = "template", value_name = "NAME=FILE")]
    templates: Vec<String>,
    /// Let webhooks deliver to loopback, private and link-local addresses
    /// (by default only public ones: a subscription must not reach into the
    /// network the gateway sits in). For a closed network.
    #[arg(long, env = "CUBICLE_WEBHOOKS_TO_PRIVATE_ADDRESSES")]
    webhooks_to_private_addresses: bool,
    /// Xvnc's path inside the image.
    #[arg(long, default_value = "/usr/bin/Xvnc")]
    xvnc: String,
    /// How long a new workspace may take to become ready, in seconds.
    #[arg(long, default_value_t = 120)]
    ready_timeout: u64,
    /// How long a workspace's display may take to finish the RFB handshake
    /// of a live view, in seconds (a display that stalls it is dropped).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    display_handshake_seconds: u64,
    /// First host uid for workspaces (each gets its own unprivileged uid).
    #[arg(long, default_value_t = cubicle_runtime::manager::UID_BASE)]
    uid_base: u32,
    /// Isolation backend: auto, jail or microvm.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Record no workspace's screen (the audit chain is kept regardless).
    #[arg(long, env = "CUBICLE_NO_RECORD")]
    no_record: bool,
    /// Most frames per second a recording takes (only when the screen changed).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=30))]
    record_fps: u32,
    /// Length of one video segment, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(2..=3600))]
    segment_seconds: u64,
    /// Sign an audit checkpoint after this many records of a chain...
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_records: u64,
    /// ...or this many seconds after the last, whichever comes first.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_seconds: u64,
    /// Remove video segments this many days old (each removal is sealed in
    /// the chain); 0 keeps them for ever.
    #[arg(long, default_value_t = 0)]
    recording_retention_days: u64,
    /// Keep this many ready workspaces (default geometry and limits, owned
    /// by no one); a create that asks for nothing else takes one at once and
    /// the pool refills in the background (`GET /v1/pool` counts hits).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=256))]
    warm: u64,
    /// Fill the warm pool from this snapshot (`snap-...`, see `GET
    /// /v1/snapshots`) instead: each pooled workspace has its files and
    /// browser profile in place, and serves a create `{"from_snapshot": ID}`
    /// by a token that may use it (a plain create then starts cold).
    #[arg(long, requires = "warm")]
    warm_snapshot: Option<String>,
    /// Stop (or delete, see --on-expiry) each workspace this many seconds
    /// after it starts, unless its create set its own; 0: no TTL.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    ttl_seconds: u64,
    /// Stop (or delete) a workspace nobody used for this many seconds (no
    /// agent or operator operation, no live view open), unless its create
    /// set its own; 0: no idle timeout.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    idle_timeout_seconds: u64,
    /// What expiry does to workspaces that set nothing else: `stop` (home
    /// kept) or `delete`.
    #[arg(long, default_value = "stop", value_parser = ["stop", "delete"])]
    on_expiry: String,
    /// Egress for workspaces given no policy: `deny` (none) or `allow`
    /// (public addresses, any port; private ranges stay closed).
    #[arg(long, env = "CUBICLE_EGRESS_DEFAULT", default_value = "deny")]
    egress_default: String,
    /// A PEM file of CA certificates the egress proxy trusts for upstream
    /// servers besides the host's store (repeatable).
    #[arg(long)]
    egress_extra_ca: Vec<PathBuf>,
    /// Do not intercept TLS: CONNECT is tunnelled, so URLs are not seen and
    /// downloads over HTTPS are not captured.
    #[arg(long)]
    egress_no_intercept: bool,
    /// Largest download the quarantine takes, in MiB.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65536))]
    quarantine_max_mb: u64,
    /// A folder of extra YARA rules (`.yar`) downloads are scanned with.
    #[arg(long)]
    quarantine_rules: Option<PathBuf>,
    /// Tests only: answer the egress proxy's name lookups from this file
    /// (`name=ip,...;ip,...` per line, successive answers split by `;`).
    #[arg(long, hide = true)]
    egress_test_hosts: Option<PathBuf>,
    /// UNSAFE, for tests only: let egress rules open the host's own
    /// services (its loopback and its own addresses), where the test
    /// origins run. Without it no rule reaches them, whatever it says; the
    /// daemon's own listening port stays closed even with it.
    #[arg(long)]
    egress_allow_host_services: bool,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(*args, None).await,
        Command::Node(args) => serve(args.serve, Some(args.cluster)).await,
        Command::Edge(args) => crate::cluster_cli::edge(*args).await,
        Command::EdgeKey => {
            crate::cluster_cli::edge_key();
            Ok(())
        }
        Command::Image {
            command: ImageCommand::Build(common),
        } => image_build(&common).await,
        Command::Doctor(common) => doctor(&common),
        Command::Token {
            command:
                TokenCommand::Create {
                    common,
                    role,
                    name,
                    scope,
                },
        } => token_create(&common, &role, &name, scope.as_deref()).await,
        Command::Token {
            command: TokenCommand::List(common),
        } => token_list(&common).await,
        Command::Token {
            command: TokenCommand::Revoke { common, id },
        } => token_revoke(&common, &id).await,
        Command::Bench(args) => crate::bench::run(*args).await,
        Command::Ws { remote, command } => Ok(crate::remote::ws(&remote, command).await?),
        Command::Approvals { remote, command } => {
            Ok(crate::remote::approvals(&remote, command).await?)
        }
        Command::Downloads { remote, command } => {
            Ok(crate::remote::downloads(&remote, command).await?)
        }
        Command::Events { remote, command } => Ok(crate::remote::events(&remote, command).await?),
        Command::Mcp(args) => Ok(cubicle_gateway::mcp::stdio::run(&args.url, &args.token).await?),
        Command::Audit {
            command:
                AuditCommand::Verify {
                    bundle,
                    key,
                    json,
                    allow_unsigned_tail,
                },
        } => {
            let tail = if allow_unsigned_tail {
                cubicle_recorder::verify::Tail::MayBeUnsigned
            } else {
                cubicle_recorder::verify::Tail::Signed
            };
            audit_verify(&bundle, key.as_deref(), json, tail)
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A binary built alongside this one (`cubicle-guest`, `cubicle-vmm`).
fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the cubicle binary's path")?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --workspace` (it is part of Cubicle)",
            path.display()
        );
    }
    Ok(path)
}

/// Copies a sibling binary into `<data>/bin`, readable and executable by
/// the workspaces' uids (the build folder may not be).
fn install_binary(data_dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let source = sibling_binary(name)?;
    let bin = data_dir.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
    let target = bin.join(name);
    let partial = bin.join(format!(".{name}.partial"));
    std::fs::copy(&source, &partial).with_context(|| format!("copying {}", source.display()))?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&partial, &target)?;
    Ok(target)
}

fn prepare_data_dir(data_dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for dir in [data_dir.to_owned(), data_dir.join("workspaces")] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Traversable by workspace uids (their own dirs inside are private).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(())
}

/// `serve --durability`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum DurabilityArg {
    Synced,
    Process,
}

async fn open_store(data_dir: &Path) -> anyhow::Result<Store> {
    open_store_with(data_dir, Durability::Synced).await
}

async fn open_store_with(data_dir: &Path, durability: Durability) -> anyhow::Result<Store> {
    prepare_data_dir(data_dir)?;
    Ok(Store::open_with(&data_dir.join("cubicle.db"), durability).await?)
}

async fn ensure_image(common: &CommonArgs) -> anyhow::Result<cubicle_runtime::image::Image> {
    let images = ImageStore::new(common.image_cache.clone());
    let started = Instant::now();
    let image = tokio::task::spawn_blocking(move || images.ensure()).await??;
    tracing::info!(key = %image.key, elapsed = ?started.elapsed(), "desktop image ready");
    Ok(image)
}

/// The backend for this host: `--backend auto` takes the host's default
/// (microvm with hardware virtualization, jail elsewhere); asking for microvm
/// where it cannot run is one clear error naming why and that jail works.
fn choose_backend(
    args: &ServeArgs,
    host: HostKind,
    image: &cubicle_runtime::image::Image,
    guest: &Path,
    shim: &Path,
    egress_trust: Option<PathBuf>,
) -> anyhow::Result<AnyBackend> {
    let requested = (args.backend != "auto").then_some(args.backend.as_str());
    let data_dir = &args.common.data_dir;
    let jail = || {
        let jail = JailBackend::new(
            image.rootfs.clone(),
            guest.to_owned(),
            shim.to_owned(),
            args.xvnc.clone(),
        )?;
        Ok(match &egress_trust {
            Some(dir) => jail.with_egress_trust(dir.clone()),
            None => jail,
        })
    };
    let microvm = || -> Result<MicrovmConfig, BackendError> {
        let unavailable =
            |e: &dyn std::fmt::Display| BackendError::Unavailable("microvm", e.to_string());
        let ext4 = ImageStore::new(args.common.image_cache.clone())
            .ensure_ext4(image, guest)
            .map_err(|e| unavailable(&e))?;
        let vmm = install_binary(data_dir, "cubicle-vmm").map_err(|e| unavailable(&e))?;
        ensure_kernel().map_err(|e| unavailable(&e))?;
        let config = MicrovmConfig::locate(vmm, shim.to_owned(), ext4, data_dir)?;
        Ok(config.with_egress_trust(egress_trust.clone()))
    };
    Ok(AnyBackend::select(requested, host, jail, microvm)?)
}

/// The microVM guest kernel recipe, carried by the binary like the image's.
const KERNEL_BUILD: &str = cubicle_image::recipe::KERNEL_BUILD;
const KERNEL_CONFIG: &str = cubicle_image::recipe::KERNEL_CONFIG;

/// Builds the microVM guest kernel if its cache has none (about 20 minutes
/// on 2 cores; only when the microvm backend is used).
fn ensure_kernel() -> anyhow::Result<()> {
    let search = cubicle_runtime::microvm::kernel::KernelSearch::from_env();
    if cubicle_runtime::microvm::kernel::find(&search).is_ok() {
        return Ok(());
    }
    let recipe = tempfile::tempdir().context("making a folder for the kernel recipe")?;
    std::fs::write(recipe.path().join("build.sh"), KERNEL_BUILD)?;
    std::fs::write(recipe.path().join("microvm.config"), KERNEL_CONFIG)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(250));
    bar.set_message(
        "building the microVM guest kernel (about 20 minutes on 2 cores, cached afterwards)",
    );
    let out = std::process::Command::new("bash")
        .arg(recipe.path().join("build.sh"))
        .output()
        .context("running the kernel build")?;
    bar.finish_and_clear();
    if !out.status.success() {
        let tail = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = tail.lines().rev().take(5).collect();
        bail!(
            "the guest kernel build failed ({}): {}",
            out.status,
            tail.join(" | ")
        );
    }
    Ok(())
}

async fn serve(
    args: ServeArgs,
    cluster: Option<crate::cluster_cli::NodeCluster>,
) -> anyhow::Result<()> {
    cubicle_gateway::vnc::handshake::set_limit(Duration::from_secs(args.display_handshake_seconds));
    let host = HostKind::detect();
    say(host.describe());
    // Before any shim or workspace starts: they inherit the mark.
    let share_memory = args.share_memory;
    if share_memory {
        say(&cubicle_runtime::limits::shared_memory::enable()?);
    }
    let durability = match args.durability {
        DurabilityArg::Synced => Durability::Synced,
        DurabilityArg::Process => Durability::Process,
    };
    let store = open_store_with(&args.common.data_dir, durability).await?;
    let image = ensure_image(&args.common).await?;
    let guest = install_binary(&args.common.data_dir, "cubicle-guest")?;
    // Running shims keep the binary they started from (a new file is
    // renamed over it): an upgrade does not touch them.
    let shim = install_binary(&args.common.data_dir, "cubicle-shim")?;
    if args.uid_base < 100_000 {
        bail!(
            "--uid-base {} is too low: workspace uids must not collide with real users (use 100000 or more)",
            args.uid_base
        );
    }
    let policies = cubicle_policy::PolicySet::load_dir(&args.policy_dir)?;
    // What the gateway keeps of each workspace from create to delete.
    let slots = std::sync::Arc::new(cubicle_gateway::slots::Slots::default());
    let gates = std::sync::Arc::new(cubicle_gateway::gates::Gates::new(
        policies,
        &args.default_policy,
        slots.clone(),
    )?);
    let egress = open_egress(&args, &store, &image, gates.clone())?;
    let backend = choose_backend(&args, host, &image, &guest, &shim, egress.trust_dir.clone())?;
    say(&format!("backend: {}", backend.name()));
    let backend_name = backend.name().to_owned();
    let config = ManagerConfig {
        data_dir: args.common.data_dir.clone(),
        ready_timeout: Duration::from_secs(args.ready_timeout),
        uid_base: args.uid_base,
    };
    let manager = Manager::new(store.clone(), backend, config);
    manager.set_default_time_limits(default_time_limits(&args));
    let replay = open_replay(&args, &store)?;
    let templates = cubicle_gateway::wire::guard_rails::Templates::load(&args.templates)
        .map_err(anyhow::Error::msg)?;
    templates
        .check(&gates.policies, &manager.limits_policy())
        .map_err(anyhow::Error::msg)?;
    if !templates.is_empty() {
        say(&format!("templates: {}", templates.names().join(", ")));
    }
    // Held operations outlive a restart, as workspaces do.
    let kept = gates.approvals.load(&store).await?;
    if kept > 0 {
        say(&format!("approvals: {kept} kept from before the restart"));
    }
    let approvals_writer = gates.approvals.persist_to(store.clone());
    say(&format!(
        "policies: {} (default {})",
        gates.policies.names().join(", "),
        gates.default_policy
    ));
    // Followed from before reconcile, so what it finds dead is recorded.
    let lifecycle = manager.lifecycle();
    manager.reconcile().await?;
    let state = AppState::new(
        cubicle_gateway::ops::Core {
            manager: manager.clone(),
            audit: cubicle_gateway::ops::audit::Audit::over(store.clone(), slots.clone()),
            store,
            hosts: Default::default(),
            control: std::sync::Arc::new(cubicle_gateway::control::Controls::over(slots.clone())),
            slots,
            revocations: Default::default(),
            replay: replay.clone(),
            egress: std::sync::Arc::new(egress.hub),
            gates,
            templates: std::sync::Arc::new(templates),
            webhooks: std::sync::Arc::new(cubicle_gateway::webhooks::Webhooks::new(
                args.webhooks_to_private_addresses,
            )),
        },
        args.web_dir,
    );
    // Who held each workspace's control when the last daemon went.
    let live: std::collections::HashSet<String> =
        manager.list().await?.into_iter().map(|r| r.id).collect();
    let held = state
        .control
        .restore(&state.store, |id| live.contains(id))
        .await?;
    if held > 0 {
        say(&format!(
            "control: {held} workspaces still held by an operator"
        ));
    }
    let state_egress = state.egress.clone();
    let state_hosts = state.hosts.clone();
    let state_gates = state.gates.clone();
    let stop_sweeping = tokio_util::sync::CancellationToken::new();
    let sweeper = tokio::spawn(cubicle_gateway::ops::gates::sweep(
        state.core.clone(),
        stop_sweeping.clone(),
    ));
    let expiry = tokio::spawn(cubicle_gateway::ops::expiry::sweep(
        state.core.clone(),
        stop_sweeping.clone(),
    ));
    let webhooks = tokio::spawn(cubicle_gateway::ops::webhooks::run(
        state.core.clone(),
        stop_sweeping.clone(),
    ));
    let stop_pool = tokio_util::sync::CancellationToken::new();
    let warm_snapshot = match &args.warm_snapshot {
        Some(id) => Some(
            cubicle_runtime::snapshots::get(&state.store, id)
                .await?
                .with_context(|| {
                    format!(
                        "--warm-snapshot: no snapshot {id:?} here (GET /v1/snapshots lists them)"
                    )
                })?,
        ),
        None => None,
    };
    // A memory snapshot's pool runs with its RAM, on a host that can.
    if let Some(snapshot) = &warm_snapshot {
        let defaults = manager.limits_policy().default;
        cubicle_gateway::ops::snapshots::fits(&state.core, snapshot, &defaults).map_err(|err| {
            anyhow::anyhow!(
                "--warm-snapshot {}: the pool's workspaces run with the default limits, and {}",
                snapshot.id,
                err.message
            )
        })?;
    }
    let pool = (args.warm > 0).then(|| {
        match &warm_snapshot {
            Some(snapshot) => say(&format!(
                "warm pool: {} ready workspaces from snapshot {} ({})",
                args.warm, snapshot.id, snapshot.name
            )),
            None => say(&format!("warm pool: {} ready workspaces", args.warm)),
        }
        tokio::spawn(manager.clone().fill_pool(
            args.warm as usize,
            warm_snapshot,
            stop_pool.clone(),
        ))
    });
    let stop_sealing = tokio_util::sync::CancellationToken::new();
    let sealer = tokio::spawn(replay.clone().run_checkpoints(stop_sealing.clone()));
    // Bound before any proxy runs, so that no rule ever reaches it.
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    egress.walls.add_listener(listener.local_addr()?);
    replay.resume(&state.recording()).await;
    cubicle_gateway::ops::egress::resume(&state).await;
    let retention = tokio::spawn(cubicle_gateway::replay::retention::run(
        state.store.clone(),
        state.audit.clone(),
        replay.config.clone(),
        stop_sealing.clone(),
    ));
    let stop_following = tokio_util::sync::CancellationToken::new();
    let follower = tokio::spawn(cubicle_gateway::ops::host::follow(
        state.core.clone(),
        lifecycle,
        stop_following.clone(),
    ));
    // Made only once everything else started: a first start that fails
    // (a bad policy file, a port in use) would otherwise print the token
    // nobody sees again, and the next start would not print one.
    let store = manager.store();
    if !tokens::admin_exists(store).await? {
        let (_, secret) =
            tokens::create(store, "admin", Role::Admin, tokens::Scope::Default).await?;
        say(&format!("admin token (shown once, store it now): {secret}"));
    }
    let shutdown = shutdown_signals()?;
    let address = listener.local_addr()?;
    // A node: registered with a new epoch; fenced, it shuts down stopping
    // every workspace (another decision about them may have been made).
    let stop_membership = tokio_util::sync::CancellationToken::new();
    let (fenced_tx, fenced_rx) = tokio::sync::oneshot::channel();
    let (state, membership) = match &cluster {
        Some(cluster) => {
            let (membership, trust, store) =
                crate::cluster_cli::join(cluster, manager.clone(), &backend_name, address).await?;
            say(&format!(
                "node {} (epoch {}) in the cluster",
                membership.lease.node, membership.lease.epoch
            ));
            let lifecycle = manager.lifecycle();
            let stop = stop_membership.clone();
            let task = tokio::spawn(async move {
                if let Some(fenced) = membership.run(lifecycle, stop).await {
                    let _ = fenced_tx.send(fenced);
                }
            });
            (state.trusting_edges(trust, store), Some(task))
        }
        None => (state, None),
    };
    let shutdown = async move {
        tokio::select! {
            exit = shutdown => exit,
            Ok(why) = fenced_rx => {
                tracing::error!(reason = %why.0, "fenced by the cluster: stopping every workspace");
                Exit::Fenced(why.0)
            }
        }
    };
    // How the host was set up is part of the record: shared memory is a
    // side channel between the workspaces the daemon starts.
    let detail = serde_json::json!({
        "listen": address.to_string(),
        "pid": std::process::id(),
        "share_memory": share_memory,
    });
    cubicle_runtime::events::record(store, EventKind::DaemonStart, None, None, &detail).await?;
    say(&format!("listening on http://{address}"));
    let (exit_tx, exit_rx) = tokio::sync::oneshot::channel();
    cubicle_gateway::listener::serve(
        listener,
        cubicle_gateway::router::router(state),
        async move {
            let _ = exit_tx.send(shutdown.await);
        },
    )
    .await?;
    let exit = exit_rx.await.unwrap_or(Exit::StopWorkspaces);
    let stop_workspaces = exit != Exit::KeepWorkspaces;
    say(match exit {
        Exit::KeepWorkspaces => {
            "shutting down (terminated): sealing recordings; workspaces keep running and are re-attached at the next start"
        }
        Exit::StopWorkspaces => {
            "shutting down (interrupted): sealing recordings, stopping workspaces"
        }
        Exit::Fenced(_) => {
            "shutting down (fenced by the cluster): sealing recordings, stopping workspaces"
        }
    });
    // The stop is on the record before anything stops; the daemon goes
    // down either way, so a store that refuses it is only logged.
    let detail = serde_json::json!({
        "signal": match exit {
            Exit::KeepWorkspaces => "SIGTERM",
            Exit::StopWorkspaces => "SIGINT",
            Exit::Fenced(_) => "fenced",
        },
        "workspaces": if stop_workspaces { "stopped" } else { "kept running" },
    });
    if let Err(err) =
        cubicle_runtime::events::record(store, EventKind::DaemonStop, None, None, &detail).await
    {
        tracing::error!(%err, "the daemon's stop could not be written to the event log");
    }
    stop_pool.cancel();
    if let Some(pool) = pool {
        let _ = pool.await;
    }
    // Every host's egress proxy, recorder (its last segment sealed) and
    // sessions end; the workspaces themselves keep running unless asked.
    state_egress.stop_auto_release();
    state_hosts.stop_all().await;
    manager.shutdown(stop_workspaces).await;
    state_gates.approvals.close();
    let _ = approvals_writer.await;
    stop_following.cancel();
    let _ = follower.await;
    stop_sweeping.cancel();
    let _ = sweeper.await;
    let _ = expiry.await;
    let _ = webhooks.await;
    stop_sealing.cancel();
    let _ = sealer.await;
    let _ = retention.await;
    stop_membership.cancel();
    if let Some(membership) = membership {
        let _ = membership.await;
    }
    if let Exit::Fenced(why) = exit {
        bail!("{why}");
    }
    Ok(())
}

/// Time limits of workspaces that set none of their own.
fn default_time_limits(args: &ServeArgs) -> cubicle_runtime::time_limits::TimeLimits {
    use cubicle_runtime::time_limits::{OnExpiry, TimeLimits};
    let limit = |seconds: u64| (seconds > 0).then(|| Duration::from_secs(seconds));
    let limits = TimeLimits {
        ttl: limit(args.ttl_seconds),
        idle: limit(args.idle_timeout_seconds),
        on_expiry: OnExpiry::parse(&args.on_expiry).unwrap_or_default(),
    };
    if !limits.is_none() {
        say(&format!(
            "time limits: ttl {}s, idle {}s, then {}",
            args.ttl_seconds,
            args.idle_timeout_seconds,
            limits.on_expiry.as_str()
        ));
    }
    limits
}

/// The egress proxy's CA, trust files, quarantine and YARA rules.
fn open_egress(
    args: &ServeArgs,
    store: &Store,
    image: &cubicle_runtime::image::Image,
    gates: std::sync::Arc<cubicle_gateway::gates::Gates>,
) -> anyhow::Result<cubicle_gateway::ops::egress::Opened> {
    use cubicle_gateway::egress::EgressDefault;
    use cubicle_gateway::ops::egress::{self, EgressConfig};
    let bundle = image.rootfs.join("etc/ssl/certs/ca-certificates.crt");
    let config = EgressConfig {
        data_dir: args.common.data_dir.clone(),
        default: EgressDefault::parse(&args.egress_default).map_err(anyhow::Error::msg)?,
        extra_ca: args.egress_extra_ca.clone(),
        intercept: !args.egress_no_intercept,
        quarantine_max_bytes: args.quarantine_max_mb << 20,
        rules_dir: args.quarantine_rules.clone(),
        image_bundle: bundle.exists().then_some(bundle),
        test_hosts: args.egress_test_hosts.clone(),
        allow_host_services: args.egress_allow_host_services,
    };
    let opened = egress::open(&config, store.clone(), gates).map_err(anyhow::Error::msg)?;
    if config.allow_host_services {
        say(
            "egress: UNSAFE --egress-allow-host-services: rules may reach this host's own services (tests only); the gateway's port stays closed",
        );
    }
    say(&format!(
        "egress: default {}, TLS interception {}, {} YARA rules, downloads up to {} MiB",
        args.egress_default,
        if config.intercept { "on" } else { "off" },
        opened.rules,
        args.quarantine_max_mb
    ));
    Ok(opened)
}

fn open_replay(
    args: &ServeArgs,
    store: &Store,
) -> anyhow::Result<std::sync::Arc<cubicle_gateway::replay::Replay>> {
    use cubicle_gateway::replay::{Replay, ReplayConfig};
    let mut config = ReplayConfig::new(&args.common.data_dir);
    config.record = !args.no_record;
    config.fps = args.record_fps;
    config.segment = Duration::from_secs(args.segment_seconds);
    config.checkpoint_records = args.checkpoint_records;
    config.checkpoint_every = Duration::from_secs(args.checkpoint_seconds);
    config.retention = (args.recording_retention_days > 0)
        .then(|| Duration::from_secs(args.recording_retention_days * 86_400));
    let replay = Replay::open(store.clone(), config)?;
    say(&format!("audit public key: {}", replay.key.public_hex()));
    if args.no_record {
        say("recording: off (--no-record)");
    }
    Ok(std::sync::Arc::new(replay))
}

/// `cubicle audit verify`: prints what it checked and the first bad
/// record; an error (so a nonzero exit) on any failure.
fn audit_verify(
    bundle: &Path,
    key: Option<&str>,
    json: bool,
    tail: cubicle_recorder::verify::Tail,
) -> anyhow::Result<()> {
    use cubicle_recorder::bundle::Bundle;
    let key = match key {
        Some(text) if Path::new(text).is_file() => {
            Some(std::fs::read_to_string(text).with_context(|| format!("reading --key {text}"))?)
        }
        other => other.map(str::to_owned),
    };
    let started = Instant::now();
    let bundle = Bundle::open(bundle)?;
    let report = cubicle_recorder::verify::verify(&bundle, key.as_deref(), tail);
    let elapsed = started.elapsed();
    if json {
        say(&serde_json::to_string_pretty(&report)?);
    } else {
        say(&format!(
            "chain {}: {} records, {} checkpoints, {} segments, {} HAR entries checked in {elapsed:.1?}",
            report.chain, report.records, report.checkpoints, report.segments, report.har_entries
        ));
        let whose = if report.key_pinned {
            "the key you gave"
        } else {
            "the bundle's own key (pass --key to check it is your server's)"
        };
        say(&format!("signatures checked with {} ({whose})", report.key));
        for warning in &report.warnings {
            say(&format!("note: {warning}"));
        }
        for failure in &report.failures {
            say(&format!("FAIL: {failure}"));
        }
    }
    match report.first_failure() {
        None => {
            if !json {
                say(&format!(
                    "OK: the chain is intact up to seq {} (signed up to seq {})",
                    report.last_seq, report.checkpointed_seq
                ));
            }
            Ok(())
        }
        Some(first) => bail!("verification failed: {first}"),
    }
}

/// How the daemon was asked to end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Exit {
    /// SIGTERM (a service manager's stop or restart, an upgrade): the
    /// workspaces keep running under their shims.
    KeepWorkspaces,
    /// SIGINT (Ctrl-C at the terminal): the person who started it is done,
    /// so every workspace is stopped (homes kept).
    StopWorkspaces,
    /// A cluster node found itself fenced (why): every workspace is
    /// stopped, and the daemon exits with an error.
    Fenced(String),
}

/// SIGTERM and SIGINT, caught from the moment this is made: made before
/// the daemon says it listens, so a signal sent right after that line is
/// the graceful stop, never the default (an instant death with no record).
fn shutdown_signals() -> anyhow::Result<impl std::future::Future<Output = Exit>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("catching SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("catching SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => Exit::KeepWorkspaces,
            _ = int.recv() => Exit::StopWorkspaces,
        }
    })
}

async fn image_build(common: &CommonArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let image = ensure_image(common).await?;
    say(&format!(
        "rootfs {} ({:.1?})",
        image.rootfs.display(),
        started.elapsed()
    ));
    let guest = sibling_binary("cubicle-guest")?;
    let images = ImageStore::new(common.image_cache.clone());
    let ext4 = tokio::task::spawn_blocking(move || images.ensure_ext4(&image, &guest)).await??;
    say(&format!(
        "ext4 {} ({:.1?})",
        ext4.display(),
        started.elapsed()
    ));
    Ok(())
}

fn doctor(common: &CommonArgs) -> anyhow::Result<()> {
    say(HostKind::detect().describe());
    let mut missing = Vec::new();
    for (tool, package) in [
        ("bwrap", "bubblewrap"),
        ("debootstrap", "debootstrap"),
        ("prlimit", "util-linux"),
        ("setpriv", "util-linux"),
        ("mkfs.ext4", "e2fsprogs"),
        ("debugfs", "e2fsprogs"),
    ] {
        let found = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).exists()))
            .unwrap_or(false);
        say(&format!(
            "{tool:12} {}",
            if found { "ok" } else { "MISSING" }
        ));
        if !found {
            missing.push(package);
        }
    }
    match ImageStore::new(common.image_cache.clone()).find() {
        Some(image) => say(&format!("image        ok ({})", image.rootfs.display())),
        None => say(&format!(
            "image        not built for recipe {} (cubicle image build)",
            ImageStore::recipe_key()
        )),
    }
    if !missing.is_empty() {
        bail!("missing tools: apt-get install {}", missing.join(" "));
    }
    Ok(())
}

async fn token_create(
    common: &CommonArgs,
    role: &str,
    name: &str,
    scope: Option<&str>,
) -> anyhow::Result<()> {
    let role = Role::parse(role)
        .filter(|role| !matches!(role, Role::Viewer | Role::Guest))
        .with_context(|| {
            format!("--role {role:?} is not one of admin, agent, operator, auditor (share links for one workspace: POST /v1/workspaces/ID/share)")
        })?;
    let scope = match scope {
        None => tokens::Scope::Default,
        Some("all") => tokens::Scope::All,
        Some(list) => {
            let ids: Vec<String> = list.split(',').map(|id| id.trim().to_owned()).collect();
            if let Some(bad) = ids.iter().find(|id| !id.starts_with("ws-")) {
                bail!(
                    "--scope: {bad:?} is not a workspace id (ws-...); give `all` or ids separated by commas"
                );
            }
            tokens::Scope::Only(ids)
        }
    };
    let store = open_store(&common.data_dir).await?;
    let new = cubicle_gateway::wire::token::TokenRequest {
        name: name.to_owned(),
        role,
        scope,
    };
    let audit = cubicle_gateway::ops::audit::Audit::new(store.clone());
    let ctx = cubicle_gateway::ops::OpContext::host_cli();
    let (token, secret) = cubicle_gateway::ops::tokens::create(&store, &audit, &ctx, new)
        .await
        .map_err(|e| anyhow::anyhow!(e.message))?;
    say(&format!("{} {} {secret}", token.id, role.as_str()));
    Ok(())
}

async fn token_list(common: &CommonArgs) -> anyhow::Result<()> {
    let store = open_store(&common.data_dir).await?;
    for token in tokens::list(&store).await? {
        let state = match token.revoked_at {
            Some(at) => format!("revoked {}", cubicle_gateway::control::rfc3339(at)),
            None => "live".to_owned(),
        };
        say(&format!(
            "{} {} {} {state}",
            token.id,
            token.role.as_str(),
            token.name
        ));
    }
    Ok(())
}

async fn token_revoke(common: &CommonArgs, id: &str) -> anyhow::Result<()> {
    let store = open_store(&common.data_dir).await?;
    let audit = cubicle_gateway::ops::audit::Audit::new(store.clone());
    let ctx = cubicle_gateway::ops::OpContext::host_cli();
    // A running daemon refuses the token from its next request, and its
    // open connections end within `revocation::POLL` (they re-read it).
    let revoked = cubicle_gateway::ops::tokens::revoke(&store, &audit, &ctx, id, || {})
        .await
        .map_err(|e| anyhow::anyhow!(e.message))?;
    match revoked {
        cubicle_gateway::ops::tokens::Revoked::Now => say(&format!("revoked {id}")),
        cubicle_gateway::ops::tokens::Revoked::Already => {
            say(&format!("{id} was already revoked"));
        }
    }
    Ok(())
}
