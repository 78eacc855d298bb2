//! `cubicle bench`: the whole performance table in one command, each number
//! next to a peer measured in the same run on the same host, printed as a
//! table and written as JSON (to compare across commits).
//!
//! It starts this binary's own `cubicle serve` on a scratch data dir and
//! measures, against:
//!
//! | what | peer |
//! | --- | --- |
//! | create (cold, until ready) | the same desktop started plainly with bubblewrap |
//! | create from a warm pool of two, a refill running beside each create | the cold create |
//! | screenshot PNG/JPEG, screen just changed | the same frame encoded in process with the same encoder and settings (the floor); `xwd -root \| convert png:-` inside the workspace |
//! | screenshot PNG/JPEG, screen unchanged (a cache hit) | `xwd -root \| convert png:-` inside the workspace |
//! | action round trip (`mouse_move`, `left_click`) | the same PointerEvents sent straight to the workspace's Xvnc over a raw RFB session, with Xvnc's receipt (a one-pixel update asked after them) |
//! | the core's cost (`cursor_position`) | `GET /v1/me` |
//! | CDP round trips through the proxy (`Browser.getVersion`, `Runtime.evaluate 1+1` on a page's session) | the same calls straight through the guest channel |
//! | live view: a screen change to a viewer's update, and the frame interval while a page scrolls | an RFB viewer straight to Xvnc, connected at the same time |
//! | exec round trip | the same command straight through the guest channel |
//! | idle memory per workspace: its processes, its shim, and the daemon's growth per workspace | the plain bubblewrap desktop's PSS |
//! | N concurrent creates (failures, p50/p95, wall) | one create alone |
//! | VMM start (`cubicle-vmm bench`) | `qemu -M microvm` on the same test guest |
//! | VM restore from a snapshot, one and ten at once, and the ten's PSS (`cubicle-vmm bench-snapshot`) | cold boots of the same guest |
//!
//! Ratios are peer / Cubicle: above 1, Cubicle is faster (or smaller).
//! Nothing is asserted about time; a part that cannot run here is reported
//! as skipped with the reason. `--compare OLD.json NEW.json` prints two
//! saved runs side by side instead of measuring.

mod check;
mod compare;
mod daemon;
mod live_view;
mod measure;
mod peers;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// Arguments of `cubicle bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Compare two saved runs (`--out` files) row by row instead of
    /// measuring: `--compare old.json new.json`.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Only the rows one workspace measures in about a minute (screenshots
    /// after a change, actions, the core, CDP, exec): what CI runs.
    #[arg(long)]
    pub cheap: bool,
    /// After measuring, fail if a row's ratio to its peer fell below the
    /// baseline's by more than twice the noise the baseline measured (and
    /// at least 20%), in this run and in a second one made only when the
    /// first fell behind.
    #[arg(long, value_name = "BASELINE")]
    pub check: Option<PathBuf>,
    /// Make a baseline (written to `--out`) from three or more saved runs
    /// of this machine instead of measuring: each row's median ratio and
    /// how far the runs strayed from it.
    #[arg(long, num_args = 3.., value_name = "RUN")]
    pub baseline_from: Option<Vec<PathBuf>>,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench.json")]
    pub out: PathBuf,
    /// Samples of each round trip.
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    /// Cold creates (and plain bubblewrap starts) timed one after another.
    #[arg(long, default_value_t = 3)]
    pub creates: usize,
    /// Creates served from a warm pool of two while it refills (a second
    /// daemon with `--warm 2`; 0 skips it).
    #[arg(long, default_value_t = 5)]
    pub pool_creates: usize,
    /// Workspaces created at once for the concurrency row (0 skips it).
    #[arg(long, default_value_t = 10)]
    pub concurrent: usize,
    /// Scratch data dir for the daemon (removed afterwards); a fresh
    /// folder under /var/tmp by default.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// First host uid of the bench's workspaces (apart from a real daemon's).
    #[arg(long, default_value_t = 1_800_000)]
    pub uid_base: u32,
    /// Built images, as for `serve`.
    #[arg(
        long,
        env = "CUBICLE_IMAGE_CACHE",
        default_value = "/var/cache/cubicle"
    )]
    pub image_cache: PathBuf,
    /// An argument for the daemons the bench starts, as `serve` takes it
    /// (repeatable): `--daemon-arg=--durability=process`.
    #[arg(long = "daemon-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub daemon_args: Vec<String>,
    /// Skip `cubicle-vmm bench` and `bench-snapshot` (the VMM's rows).
    #[arg(long)]
    pub no_vmm: bool,
}

/// p50 / p95 of a sample, in its unit.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct Stat {
    pub p50: f64,
    pub p95: f64,
    pub n: usize,
}

impl Stat {
    pub fn of(mut values: Vec<f64>) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |p: usize| values[(values.len() * p / 100).min(values.len() - 1)];
        Some(Self {
            p50: at(50),
            p95: at(95),
            n: values.len(),
        })
    }

    pub fn of_durations(values: &[Duration]) -> Option<Self> {
        Self::of(values.iter().map(|d| d.as_secs_f64() * 1000.0).collect())
    }
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub unit: &'static str,
    pub cubicle: Option<Stat>,
    pub peer: String,
    pub peer_stat: Option<Stat>,
    /// Peer p50 / Cubicle p50.
    pub ratio: Option<f64>,
    /// Anything else worth knowing (failures, sizes, why skipped).
    pub note: String,
}

impl Row {
    pub fn new(
        name: &str,
        unit: &'static str,
        cubicle: Option<Stat>,
        peer: &str,
        peer_stat: Option<Stat>,
    ) -> Self {
        let ratio = match (cubicle, peer_stat) {
            (Some(ours), Some(theirs)) if ours.p50 > 0.0 => Some(theirs.p50 / ours.p50),
            _ => None,
        };
        Self {
            name: name.to_owned(),
            unit,
            cubicle,
            peer: peer.to_owned(),
            peer_stat,
            ratio,
            note: String::new(),
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    pub fn skipped(name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(name, "", None, "", None).note(format!("skipped: {why}"))
    }
}

/// The JSON document.
#[derive(Debug, Serialize)]
struct Report {
    version: &'static str,
    commit: Option<String>,
    host: String,
    started_at_ms: i64,
    rows: Vec<Row>,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some([old, new]) = args.compare.as_deref() {
        return compare::run(old, new);
    }
    if let Some(runs) = &args.baseline_from {
        return check::make(runs, &args.out);
    }
    let started_at_ms = cubicle_runtime::state::now_ms();
    let rows = measure::all(&args).await?;
    print_table(&rows);
    let report = Report {
        version: env!("CARGO_PKG_VERSION"),
        commit: commit(),
        host: host(),
        started_at_ms,
        rows,
    };
    save(&args.out, &report)?;
    let Some(baseline) = &args.check else {
        return Ok(());
    };
    let baseline = check::load_baseline(baseline)?;
    let mut runs = vec![args.out.clone()];
    if check::behind(&baseline, &runs)?.is_empty() {
        return Ok(());
    }
    // One run on a loaded machine can stray past any fair tolerance (CI
    // once measured PNG screenshots 20% under a baseline it met before and
    // after). A regression is in the code, so it shows again: measure once
    // more and fail only the rows behind in both runs.
    println!("bench check: measuring again to tell a regression from a noisy run");
    let again = Report {
        started_at_ms: cubicle_runtime::state::now_ms(),
        rows: measure::all(&args).await?,
        ..report
    };
    print_table(&again.rows);
    let again_path = args.out.with_extension("again.json");
    save(&again_path, &again)?;
    runs.push(again_path);
    let found = check::behind(&baseline, &runs)?;
    if !found.is_empty() {
        anyhow::bail!(
            "{} of {} rows fell behind the baseline in both runs",
            found.len(),
            baseline.rows.len()
        );
    }
    Ok(())
}

fn save(path: &std::path::Path, report: &Report) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(report)? + "\n")?;
    println!("results written to {}", path.display());
    Ok(())
}

fn print_table(rows: &[Row]) {
    let cell = |s: Option<Stat>| match s {
        Some(s) => format!("{:>9.1} {:>9.1}", s.p50, s.p95),
        None => format!("{:>9} {:>9}", "-", "-"),
    };
    println!();
    println!(
        "{:<40} {:>5} {:>19}  {:<34} {:>19} {:>8}",
        "measurement", "unit", "cubicle p50 / p95", "peer", "peer p50 / p95", "peer/us"
    );
    for row in rows {
        let ratio = row
            .ratio
            .map(|r| format!("{r:.2}x"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<40} {:>5} {}  {:<34} {} {:>8}  {}",
            row.name,
            row.unit,
            cell(row.cubicle),
            row.peer,
            cell(row.peer_stat),
            ratio,
            row.note
        );
    }
    println!();
}

/// The source commit, when run from a git checkout.
fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// CPUs, memory and kernel, in one line.
fn host() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpus} CPUs, {:.1} GiB, Linux {}",
        mem as f64 / 1048576.0,
        kernel.trim()
    )
}
