//! `cubicle-vmm bench`: the same PVH test guest under this VMM and under
//! QEMU's microvm machine, timed from process start to the first serial
//! byte and to process exit, several runs each, min and median, with the
//! ratio QEMU / ours (above 1 means we are faster). Then the VMM's own
//! memory overhead for an idle 128 MiB guest, from the metrics API.
//! A benchmark, not a test: it prints numbers and asserts nothing about time.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The PVH guest (boots under both VMMs), embedded so the bench runs anywhere.
const PVH_GUEST: &[u8] = include_bytes!(concat!(env!("CUBICLE_TEST_GUESTS"), "/pvh"));
/// The Linux boot tests' initramfs: `/init` prints a line and restarts.
const INITRAMFS: &[u8] = include_bytes!(concat!(env!("CUBICLE_TEST_GUESTS"), "/initramfs.cpio"));
/// What that init prints first.
const INIT_SAYS: &str = "cubicle-init: reached init";
/// The 64-bit guest that idles on `cubicle.idle`, for the memory measurement.
const IDLE_GUEST: &[u8] = include_bytes!(concat!(env!("CUBICLE_TEST_GUESTS"), "/hello"));

/// Bench flags.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Runs per VMM.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Guest memory in MiB (both VMMs, and the overhead measurement).
    #[arg(long, default_value_t = 128)]
    pub memory_mib: u64,
    /// QEMU binary.
    #[arg(long, default_value = "qemu-system-x86_64")]
    pub qemu: String,
    /// Skip QEMU (measure only this VMM).
    #[arg(long)]
    pub no_qemu: bool,
    /// Boot this Linux kernel (bzImage or PVH vmlinux) with a one-line
    /// init instead of the test guest, and time start → init's first byte.
    #[arg(long)]
    pub linux: Option<PathBuf>,
}

/// Errors that stop the bench.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Scratch files could not be written.
    #[error("cannot prepare the bench's scratch directory")]
    Scratch(#[source] std::io::Error),
    /// A VMM could not be run.
    #[error("cannot run {what}: {why}")]
    Run {
        /// Which VMM.
        what: String,
        /// What went wrong.
        why: String,
    },
}

struct Sample {
    /// To the first byte of the guest's marker (the PVH guest's first
    /// serial byte; with `--linux`, init's first byte).
    first_byte: Duration,
    exit: Duration,
}

/// What one series boots, and what marks the moment timed.
struct Guest {
    marker: &'static str,
}

/// Runs the benchmark and prints the results.
pub fn run(args: &BenchArgs) -> Result<(), BenchError> {
    let dir = std::env::temp_dir().join(format!("cubicle-vmm-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(BenchError::Scratch)?;
    let result = run_in(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(args: &BenchArgs, dir: &Path) -> Result<(), BenchError> {
    if let Some(kernel) = &args.linux {
        return linux(args, dir, kernel);
    }
    let pvh = dir.join("pvh-guest");
    std::fs::write(&pvh, PVH_GUEST).map_err(BenchError::Scratch)?;
    let mem = args.memory_mib.to_string();
    let pvh_guest = Guest {
        marker: "pvh guest: hello",
    };
    let ours = series("cubicle-vmm", &pvh_guest, args.runs, || {
        let mut c = Command::new(self_exe());
        c.args(["run", "--memory-mib", &mem, "--kernel"]).arg(&pvh);
        c
    })?;
    println!(
        "guest: PVH test guest, {} MiB, {} runs each",
        args.memory_mib, args.runs
    );
    print_series("cubicle-vmm", &ours);
    if !args.no_qemu {
        let qemu = series("qemu microvm", &pvh_guest, args.runs, || {
            qemu_command(&args.qemu, &mem, &pvh)
        })?;
        print_series("qemu microvm", &qemu);
        print_ratio(&ours, &qemu);
    }
    memory_overhead(args, dir)
}

/// A Linux kernel with the one-line init under both VMMs: the same kernel,
/// initramfs, memory and command line (but the reset: the i8042 here,
/// a triple fault in QEMU's microvm, which has no i8042).
fn linux(args: &BenchArgs, dir: &Path, kernel: &Path) -> Result<(), BenchError> {
    let initrd = dir.join("initramfs.cpio");
    std::fs::write(&initrd, INITRAMFS).map_err(BenchError::Scratch)?;
    let mem = args.memory_mib.to_string();
    let cmdline =
        |reboot: &str| format!("console=ttyS0 reboot={reboot} panic=1 pci=off acpi=off quiet");
    let init = Guest { marker: INIT_SAYS };
    let ours = series("cubicle-vmm", &init, args.runs, || {
        let mut c = Command::new(self_exe());
        c.args(["run", "--memory-mib", &mem, "--cmdline", &cmdline("k")])
            .arg("--kernel")
            .arg(kernel)
            .arg("--initrd")
            .arg(&initrd);
        c
    })?;
    println!(
        "guest: Linux {} with a one-line init, {} MiB, {} runs each; timed to init's first byte",
        kernel.display(),
        args.memory_mib,
        args.runs
    );
    print_series("cubicle-vmm", &ours);
    if !args.no_qemu {
        let qemu = series("qemu microvm", &init, args.runs, || {
            let mut c = qemu_command(&args.qemu, &mem, kernel);
            c.arg("-initrd")
                .arg(&initrd)
                .args(["-append", &cmdline("t")]);
            c
        })?;
        print_series("qemu microvm", &qemu);
        print_ratio(&ours, &qemu);
    }
    Ok(())
}

pub(crate) fn self_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("cubicle-vmm"))
}

fn qemu_command(qemu: &str, mem: &str, guest: &Path) -> Command {
    let mut c = Command::new(qemu);
    c.args([
        "-M",
        "microvm",
        "-enable-kvm",
        "-cpu",
        "host,-arch-capabilities",
        "-m",
        mem,
    ])
    .args([
        "-nodefaults",
        "-no-user-config",
        "-nographic",
        "-no-reboot",
        "-serial",
        "stdio",
    ])
    .args([
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-kernel",
    ])
    .arg(guest);
    c
}

fn series(
    what: &str,
    guest: &Guest,
    runs: usize,
    command: impl Fn() -> Command,
) -> Result<Vec<Sample>, BenchError> {
    (0..runs.max(1))
        .map(|_| time_one(what, guest, command()))
        .collect()
}

/// Start → the first byte of the guest's marker on stdout (the serial
/// console) → process exit.
fn time_one(what: &str, guest: &Guest, mut command: Command) -> Result<Sample, BenchError> {
    let fail = |why: String| BenchError::Run {
        what: what.into(),
        why,
    };
    let start = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let mut buf = [0u8; 256];
    let mut first_byte = None;
    let mut text = Vec::new();
    loop {
        let n = out.read(&mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
        if first_byte.is_none() && String::from_utf8_lossy(&text).contains(guest.marker) {
            first_byte = Some(start.elapsed());
        }
    }
    child.wait().map_err(|e| fail(e.to_string()))?;
    let exit = start.elapsed();
    let Some(first_byte) = first_byte else {
        let text = String::from_utf8_lossy(&text);
        let skip = text.chars().count().saturating_sub(2000);
        let tail: String = text.chars().skip(skip).collect();
        return Err(fail(format!(
            "the guest never printed {:?}; its console ended: {tail:?}",
            guest.marker
        )));
    };
    Ok(Sample { first_byte, exit })
}

fn min_median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2])
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print_series(what: &str, s: &[Sample]) {
    let (fmin, fmed) = min_median(s.iter().map(|x| x.first_byte).collect());
    let (emin, emed) = min_median(s.iter().map(|x| x.exit).collect());
    println!(
        "{what:>13}: first serial byte min {:7.2} ms  median {:7.2} ms | exit min {:7.2} ms  median {:7.2} ms",
        ms(fmin),
        ms(fmed),
        ms(emin),
        ms(emed)
    );
}

fn print_ratio(ours: &[Sample], qemu: &[Sample]) {
    let med = |s: &[Sample], f: fn(&Sample) -> Duration| min_median(s.iter().map(f).collect()).1;
    let first = ms(med(qemu, |s| s.first_byte)) / ms(med(ours, |s| s.first_byte));
    let exit = ms(med(qemu, |s| s.exit)) / ms(med(ours, |s| s.exit));
    println!(
        "        ratio: qemu/cubicle-vmm (median) first byte {first:.2}x, exit {exit:.2}x (above 1: we are faster)"
    );
}

/// Starts an idle guest with the API, reads the metrics, stops it.
fn memory_overhead(args: &BenchArgs, dir: &Path) -> Result<(), BenchError> {
    let fail = |why: String| BenchError::Run {
        what: "memory measurement".into(),
        why,
    };
    let guest = dir.join("idle-guest");
    std::fs::write(&guest, IDLE_GUEST).map_err(BenchError::Scratch)?;
    let socket = dir.join("api.sock");
    let mut child = Command::new(self_exe())
        .args([
            "run",
            "--memory-mib",
            &args.memory_mib.to_string(),
            "--cmdline",
            "console=ttyS0 cubicle.idle",
        ])
        .arg("--kernel")
        .arg(&guest)
        .arg("--api-socket")
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("cmdline=") {
        let n = out.read(&mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            return Err(fail("the guest exited before idling".into()));
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let metrics = http(&socket, "GET", "/vm/metrics").map_err(|e| fail(e.to_string()))?;
    let outside = smaps_rollup(child.id());
    let _ = http(&socket, "PUT", "/vm/stop");
    let _ = child.wait();
    print_memory(&metrics, outside, args.memory_mib);
    Ok(())
}

fn http(socket: &Path, method: &str, path: &str) -> std::io::Result<String> {
    http_body(socket, method, path, "")
}

/// One request with a body to a VMM's API; the reply's body.
pub(crate) fn http_body(
    socket: &Path,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// (Rss, Pss) in bytes of a process, read from outside it.
pub(crate) fn smaps_rollup(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |k| k * 1024)
    };
    (field("Rss:"), field("Pss:"))
}

fn print_memory(metrics: &str, outside: (u64, u64), mib: u64) {
    let v: serde_json::Value = serde_json::from_str(metrics).unwrap_or_default();
    let m = &v["memory"];
    let get = |k: &str| m[k].as_u64().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    println!(
        "memory, idle {mib} MiB guest: process RSS {:.2} MiB, PSS {:.2} MiB; guest RAM touched {:.2} MiB",
        get("process_rss_bytes"),
        get("process_pss_bytes"),
        get("guest_resident_bytes")
    );
    println!(
        "  VMM overhead (outside guest RAM): RSS {:.2} MiB, PSS {:.2} MiB (goal <= 5 MiB); from outside: RSS {:.2} MiB, PSS {:.2} MiB",
        get("overhead_rss_bytes"),
        get("overhead_pss_bytes"),
        outside.0 as f64 / 1048576.0,
        outside.1 as f64 / 1048576.0
    );
}
