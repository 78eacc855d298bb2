//! `cubicle-vmm bench-snapshot`: restoring from a snapshot against a cold
//! boot of the same guest, in the same run. Rows: a cold boot to the
//! guest's first line, a restore to the first byte the copy prints (its
//! vCPUs running), with and without the memory CRC check, ten of each at
//! once (each one's time and the ten's summed PSS: restored copies share
//! the memory file's pages), and how long a snapshot takes for how much
//! memory, full and as a diff. The guest is the snap test guest (any KVM)
//! or, with `--linux`, a kernel with the test init, which can also dirty a
//! given amount of memory first. A benchmark, not a test: it prints
//! numbers and asserts nothing about time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::{BenchError, http_body, ms, self_exe, smaps_rollup};

const SNAP_GUEST: &[u8] = include_bytes!(concat!(env!("CUBICLE_TEST_GUESTS"), "/snap"));
const INITRAMFS: &[u8] = include_bytes!(concat!(env!("CUBICLE_TEST_GUESTS"), "/initramfs.cpio"));

/// Bench flags.
#[derive(Debug, clap::Args)]
pub struct SnapshotBenchArgs {
    /// Runs of each one-at-a-time row.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// VMs started at once in the many-at-once rows.
    #[arg(long, default_value_t = 10)]
    pub forks: usize,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    pub memory_mib: u64,
    /// Use this Linux kernel (PVH vmlinux or bzImage) with the test init.
    #[arg(long)]
    pub linux: Option<PathBuf>,
    /// With --linux: snapshot after dirtying each of these many MiB
    /// (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "0,64")]
    pub dirty_mib: Vec<u64>,
    /// Also print the main rows as one JSON line at the end (what
    /// `cubicle bench` reads).
    #[arg(long)]
    pub json: bool,
}

/// p50 and p95 in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// The main rows, for `--json`.
#[derive(Debug, serde::Serialize)]
struct Summary {
    runs: usize,
    forks: usize,
    cold_boot_ms: Percentiles,
    restore_ms: Percentiles,
    restore_verified_ms: Percentiles,
    cold_boots_at_once_ms: Percentiles,
    restores_at_once_ms: Percentiles,
    cold_pss_bytes: u64,
    restored_pss_bytes: u64,
    snapshot_ms: f64,
    snapshot_memory_bytes: u64,
}

/// What is booted and what the cold boot is timed to.
struct Setup {
    boot: Vec<String>,
    restore_extra: Vec<String>,
    marker: &'static str,
}

fn fail(what: &str) -> impl Fn(String) -> BenchError + '_ {
    move |why| BenchError::Run {
        what: what.into(),
        why,
    }
}

fn setup(args: &SnapshotBenchArgs, dir: &Path, dirty: u64) -> Result<Setup, BenchError> {
    let p = |f: &Path| f.display().to_string();
    let mem = args.memory_mib.to_string();
    if let Some(kernel) = &args.linux {
        let initrd = dir.join("initramfs.cpio");
        std::fs::write(&initrd, INITRAMFS).map_err(BenchError::Scratch)?;
        let cmdline = format!(
            "console=ttyS0 reboot=k panic=1 pci=off acpi=off quiet cubicle_spin=1 cubicle_dirty={dirty}"
        );
        let boot = ["--kernel", &p(kernel), "--initrd", &p(&initrd)];
        let mut boot: Vec<String> = boot.iter().map(|s| s.to_string()).collect();
        boot.extend(["--memory-mib".into(), mem, "--cmdline".into(), cmdline]);
        // With memory to dirty, the snapshot waits until init has.
        let marker = if dirty > 0 {
            "cubicle-init: dirtied"
        } else {
            "cubicle-init: reached init"
        };
        return Ok(Setup {
            boot,
            restore_extra: vec![],
            marker,
        });
    }
    let guest = dir.join("snap-guest");
    std::fs::write(&guest, SNAP_GUEST).map_err(BenchError::Scratch)?;
    let base = dir.join("base.img");
    std::fs::write(&base, vec![0u8; 64 * 1024]).map_err(BenchError::Scratch)?;
    let disk = format!("id=d,path={},ro", p(&base));
    let boot = [
        "--kernel",
        &p(&guest),
        "--memory-mib",
        &mem,
        "--cmdline",
        "console=ttyS0 cubicle.spin",
        "--disk",
        &disk,
    ];
    Ok(Setup {
        boot: boot.iter().map(|s| s.to_string()).collect(),
        restore_extra: vec!["--disk".into(), disk],
        marker: "snap guest: ready",
    })
}

/// Spawns `cubicle-vmm run <args>` with the console on a pipe.
fn spawn(args: &[String]) -> Result<Child, BenchError> {
    Command::new(self_exe())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail("cubicle-vmm")(e.to_string()))
}

/// Reads the child's console until `marker` (any byte when None) and
/// returns when it came; the console keeps draining on a thread after.
fn until(child: &mut Child, marker: Option<&str>, start: Instant) -> Result<Duration, BenchError> {
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| fail("console")("no stdout".into()))?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = out
            .read(&mut buf)
            .map_err(|e| fail("console")(e.to_string()))?;
        if n == 0 {
            let text = String::from_utf8_lossy(&seen).into_owned();
            return Err(fail("guest")(format!("exited before {marker:?}: {text}")));
        }
        seen.extend_from_slice(&buf[..n]);
        let done = marker.is_none_or(|m| String::from_utf8_lossy(&seen).contains(m));
        if done {
            let at = start.elapsed();
            std::thread::spawn(move || while out.read(&mut buf).is_ok_and(|n| n > 0) {});
            return Ok(at);
        }
    }
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn percentiles(mut v: Vec<Duration>) -> Percentiles {
    v.sort();
    let at = |q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    Percentiles {
        p50: at(0.5),
        p95: at(0.95),
    }
}

/// Starts `n` VMs at once, each timed to its marker; returns the times and
/// the summed PSS of all of them once all run.
fn many(
    runs: impl Fn(usize) -> Vec<String>,
    n: usize,
    marker: Option<&str>,
) -> Result<(Vec<Duration>, u64), BenchError> {
    let start = Instant::now();
    let mut children = (0..n)
        .map(|i| spawn(&runs(i)))
        .collect::<Result<Vec<_>, _>>()?;
    // Each console read on its own thread: one read after another would
    // time the later VMs by when the earlier ones were done.
    // A VM that has got there is stopped (SIGSTOP) until all have: its
    // guest would otherwise keep printing and take the CPU from the ones
    // still starting. Its memory stays for the PSS.
    let times = std::thread::scope(|scope| {
        let readers: Vec<_> = children
            .iter_mut()
            .map(|c| {
                scope.spawn(move || {
                    let at = until(c, marker, start);
                    if let Ok(pid) = libc::pid_t::try_from(c.id()) {
                        // SAFETY: signals our own child (a positive pid),
                        // which is not yet reaped.
                        unsafe { libc::kill(pid, libc::SIGSTOP) };
                    }
                    at
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| Err(fail("console")("reader panicked".into())))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let pss = children.iter().map(|c| smaps_rollup(c.id()).1).sum();
    children.into_iter().for_each(kill);
    Ok((times, pss))
}

fn snapshot(api: &Path, state: &Path, memory: &Path, diff: bool) -> Result<(f64, u64), BenchError> {
    let body = format!(
        r#"{{"state_path":"{}","memory_path":"{}","diff":{diff}}}"#,
        state.display(),
        memory.display()
    );
    let api_err = |e: std::io::Error| fail("API")(e.to_string());
    http_body(api, "PUT", "/vm/pause", "").map_err(api_err)?;
    let start = Instant::now();
    let reply = http_body(api, "PUT", "/vm/snapshot", &body).map_err(api_err)?;
    let took = ms(start.elapsed());
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap_or_default();
    let bytes = v["memory_bytes"]
        .as_u64()
        .ok_or_else(|| fail("snapshot")(reply.clone()))?;
    Ok((took, bytes))
}

/// Boots the guest with an API socket, lets it run, snapshots it.
fn take(s: &Setup, dir: &Path, name: &str) -> Result<(PathBuf, PathBuf, f64, u64), BenchError> {
    let api = dir.join(format!("{name}.api"));
    let mut args = s.boot.clone();
    args.extend(["--api-socket".into(), api.display().to_string()]);
    let mut child = spawn(&args)?;
    until(&mut child, Some(s.marker), Instant::now())?;
    std::thread::sleep(Duration::from_millis(50));
    let (state, memory) = (
        dir.join(format!("{name}.state")),
        dir.join(format!("{name}.mem")),
    );
    let (took, bytes) = snapshot(&api, &state, &memory, false)?;
    kill(child);
    Ok((state, memory, took, bytes))
}

fn restore_args(s: &Setup, state: &Path, memory: &Path, verify: bool) -> Vec<String> {
    let mut args = vec![
        "--restore".to_string(),
        state.display().to_string(),
        "--restore-memory".into(),
        memory.display().to_string(),
    ];
    if verify {
        args.push("--verify-memory".into());
    }
    args.extend(s.restore_extra.iter().cloned());
    args
}

/// Runs the bench and prints the results.
pub fn run(args: &SnapshotBenchArgs) -> Result<(), BenchError> {
    let dir = std::env::temp_dir().join(format!("cubicle-vmm-snapbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(BenchError::Scratch)?;
    let result = run_in(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(args: &SnapshotBenchArgs, dir: &Path) -> Result<(), BenchError> {
    let s = setup(args, dir, 0)?;
    let guest = args
        .linux
        .as_ref()
        .map_or("the snap test guest".into(), |k| {
            format!("Linux {} with the test init", k.display())
        });
    println!(
        "guest: {guest}, {} MiB; {} runs one at a time, {} at once",
        args.memory_mib, args.runs, args.forks
    );
    let (state, memory, took, bytes) = take(&s, dir, "base")?;
    let cold = (0..args.runs)
        .map(|_| {
            let start = Instant::now();
            let mut child = spawn(&s.boot)?;
            let at = until(&mut child, Some(s.marker), start);
            kill(child);
            at
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cold = percentiles(cold);
    println!(
        "cold boot → its first line:        p50 {:8.2} ms  p95 {:8.2} ms",
        cold.p50, cold.p95
    );
    let mut restores = Vec::new();
    for verify in [false, true] {
        let times = (0..args.runs)
            .map(|_| {
                let start = Instant::now();
                let mut child = spawn(&restore_args(&s, &state, &memory, verify))?;
                let at = until(&mut child, None, start);
                kill(child);
                at
            })
            .collect::<Result<Vec<_>, _>>()?;
        let r = percentiles(times);
        let how = if verify {
            "with CRC check"
        } else {
            "              "
        };
        println!(
            "restore {how} → guest running: p50 {:8.2} ms  p95 {:8.2} ms  ({:.1}x faster than cold)",
            r.p50,
            r.p95,
            cold.p50 / r.p50
        );
        restores.push(r);
    }
    let (cold_times, cold_pss) = many(|_| s.boot.clone(), args.forks, Some(s.marker))?;
    let (fork_times, fork_pss) = many(
        |_| restore_args(&s, &state, &memory, false),
        args.forks,
        None,
    )?;
    let n = args.forks;
    let (c, f) = (percentiles(cold_times), percentiles(fork_times));
    println!(
        "{n} cold boots at once:              p50 {:8.2} ms  p95 {:8.2} ms",
        c.p50, c.p95
    );
    println!(
        "{n} restores at once:                p50 {:8.2} ms  p95 {:8.2} ms  ({:.1}x faster)",
        f.p50,
        f.p95,
        c.p50 / f.p50
    );
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "PSS of the {n}: restored {:.1} MiB vs cold {:.1} MiB ({:.2}x)",
        mib(fork_pss),
        mib(cold_pss),
        cold_pss as f64 / fork_pss.max(1) as f64
    );
    println!(
        "snapshot (full), {:.1} MiB of memory written: {took:.1} ms",
        mib(bytes)
    );
    let summary = Summary {
        runs: args.runs,
        forks: n,
        cold_boot_ms: cold,
        restore_ms: restores[0],
        restore_verified_ms: restores[1],
        cold_boots_at_once_ms: c,
        restores_at_once_ms: f,
        cold_pss_bytes: cold_pss,
        restored_pss_bytes: fork_pss,
        snapshot_ms: took,
        snapshot_memory_bytes: bytes,
    };
    if args.linux.is_some() {
        for &dirty in args.dirty_mib.iter().filter(|&&d| d > 0) {
            let s = setup(args, dir, dirty)?;
            let (state, memory, took, bytes) = take(&s, dir, &format!("dirty{dirty}"))?;
            let rate = mib(bytes) / (took / 1000.0);
            println!(
                "snapshot (full) after dirtying {dirty} MiB: {:.1} MiB written in {took:.1} ms ({rate:.0} MiB/s)",
                mib(bytes)
            );
            diff_row(&s, dir, &state, &memory, dirty)?;
        }
    } else {
        diff_row(&s, dir, &state, &memory, 0)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary).unwrap_or_default());
    }
    Ok(())
}

/// Restores a snapshot, lets it run a moment, takes a diff.
fn diff_row(
    s: &Setup,
    dir: &Path,
    state: &Path,
    memory: &Path,
    tag: u64,
) -> Result<(), BenchError> {
    let api = dir.join(format!("diff{tag}.api"));
    let mut args = restore_args(s, state, memory, false);
    args.extend(["--api-socket".into(), api.display().to_string()]);
    let mut child = spawn(&args)?;
    until(&mut child, None, Instant::now())?;
    std::thread::sleep(Duration::from_millis(100));
    let (d_state, d_mem) = (
        dir.join(format!("diff{tag}.state")),
        dir.join(format!("diff{tag}.mem")),
    );
    let (took, bytes) = snapshot(&api, &d_state, &d_mem, true)?;
    kill(child);
    println!(
        "snapshot (diff) of a restored copy after 100 ms: {:.2} MiB written in {took:.1} ms",
        bytes as f64 / 1048576.0
    );
    Ok(())
}
