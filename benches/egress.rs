//! The egress proxy's cost, each against a peer measured in the same run:
//!
//! - throughput of a large download (default 200 MiB, seven of each way,
//!   the three ways in turn round by round) inside a workspace
//!   through `127.0.0.1:3128` → reverse channel → host proxy, with TLS
//!   intercepted and passed through, against curl on the host straight to
//!   the same origin;
//! - the CPU each takes per GiB: curl's own, the daemon's, and the rest of
//!   the workspace's cgroup (its egress relay);
//! - added latency of a small HTTPS GET (p50 of 100, a new connection
//!   each): through the proxy (intercepted, passed through) against direct;
//! - the time from the last byte of a 50 MiB download to its quarantine
//!   record with scan results (the proxy streams it to disk, hashes it,
//!   sniffs it and runs the YARA rules before answering).
//!
//! The origin runs on the host's loopback with its own test CA. Prints a
//! table; asserts nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-egress [-- MIB [DAEMON ARG...]]

use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::origin::{self, TestPki};
use reqwest::Method;
use serde_json::json;

async fn exec(daemon: &Daemon, id: &str, command: &str) -> anyhow::Result<String> {
    let body = json!({"command": command, "timeout_ms": 600_000}).to_string();
    let (status, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body),
        )
        .await?;
    anyhow::ensure!(status == 200, "{command}: {status} {out}");
    Ok(out["stdout"].as_str().unwrap_or_default().to_owned())
}

/// A shell line on the host (not blocking the runtime the origins run on).
async fn host(command: &str) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("bash")
        .args(["-c", command])
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `time_total size` lines of curl's `-w` into (seconds, bytes).
fn timings(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

/// The CPU seconds of the children of a shell that ran `times` last (its
/// second line: children's user and system time, `0m0.512s 0m0.300s`).
fn children_cpu(text: &str) -> f64 {
    let seconds = |field: &str| -> Option<f64> {
        let (minutes, rest) = field.split_once('m')?;
        Some(minutes.parse::<f64>().ok()? * 60.0 + rest.strip_suffix('s')?.parse::<f64>().ok()?)
    };
    text.lines()
        .last()
        .and_then(|line| {
            let mut fields = line.split_whitespace();
            Some(seconds(fields.next()?)? + seconds(fields.next()?)?)
        })
        .unwrap_or(f64::NAN)
}

/// The CPU time of every thread of process `pid` so far, in seconds.
fn process_cpu(pid: i32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return f64::NAN;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

fn mib_s((secs, bytes): &(f64, f64)) -> f64 {
    bytes / secs / 1048576.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn range(values: &[f64]) -> (f64, f64) {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (low, high)
}

fn p50_ms(runs: &[(f64, f64)]) -> f64 {
    median(runs.iter().map(|(secs, _)| *secs).collect()) * 1000.0
}

const FORMAT: &str = "-w '%{time_total} %{size_download}\\n'";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let pki = TestPki::new(&["origin.test", "127.0.0.1"]);
    let https = origin::serve(Some(pki.server.clone())).await;
    let http = origin::serve(None).await;
    let data = tempfile::tempdir()?;
    let ca = data.path().join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem)?;
    let hosts = data.path().join("hosts");
    std::fs::write(&hosts, "origin.test=127.0.0.1\n")?;
    let state = data.path().join("state");
    std::fs::create_dir(&state)?;
    // Arguments after the size go to the daemon (`--durability=process`).
    let daemon_args: Vec<String> = std::env::args().skip(2).collect();
    let mut args = vec![
        "--egress-extra-ca",
        ca.to_str().unwrap_or_default(),
        // The origins run on the host's loopback.
        "--egress-allow-host-services",
        "--egress-test-hosts",
        hosts.to_str().unwrap_or_default(),
        "--quarantine-max-mb",
        "1024",
        "--no-record",
    ];
    args.extend(daemon_args.iter().map(String::as_str));
    let daemon = Daemon::start(&state, None, &args)?;
    let allow = json!([
        format!("origin.test:{http},{https}"),
        format!("127.0.0.1/32:{http},{https}")
    ]);
    let ws = daemon
        .create_workspace(&json!({"name": "bench-egress", "egress": {"allow": allow}}).to_string())
        .await;
    let id = ws["id"].as_str().unwrap_or_default().to_owned();
    let set_passthrough = |on: bool| {
        let body = if on {
            json!({"allow": allow, "passthrough": ["origin.test"]})
        } else {
            json!({"allow": allow})
        }
        .to_string();
        let path = format!("/v1/workspaces/{id}/egress");
        let daemon = &daemon;
        async move {
            let (status, out) = daemon.call(Method::PUT, &path, Some(&body)).await?;
            anyhow::ensure!(status == 200, "{out}");
            anyhow::Ok(())
        }
    };
    let bytes = mib << 20;
    let big = format!("https://origin.test:{https}/bytes?n={bytes}");
    let direct_big = format!("https://127.0.0.1:{https}/bytes?n={bytes}");
    let small = format!("https://origin.test:{https}/");
    let direct_small = format!("https://127.0.0.1:{https}/");
    // curl inside the workspace verifies the proxy's leaf against the whole
    // system bundle (parsing it costs curl ~30 ms here, per process); the
    // direct peer gets a bundle of the same size, plus the origin's CA, so
    // the difference is the proxy's, not curl's CA loading.
    let bundle = data.path().join("bundle.pem");
    let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    std::fs::write(&bundle, format!("{system}\n{}", pki.ca_pem))?;
    let cacert = bundle.display();
    let repeat = |n: usize, line: String| format!("for i in $(seq {n}); do {line}; done");

    eprintln!("bench-egress: workspace {id} ready");
    // Warm both paths once.
    exec(&daemon, &id, &format!("curl -sS -o /dev/null {small}")).await?;
    host(&format!(
        "curl -sS -o /dev/null --cacert {cacert} {direct_small}"
    ))
    .await?;
    eprintln!("bench-egress: warm");

    // The three ways in turn, round by round, so that what else the
    // machine does falls on all three alike (measured one way after the
    // other, direct alone ranged 1.0-1.9 GB/s over four runs here).
    let rounds = 7;
    println!(
        "egress benchmark: {mib} MiB download x{rounds} each way, 100 small GETs, 50 MiB quarantine (same run, interleaved)"
    );
    let (mut direct, mut tunnelled, mut intercepted) = (Vec::new(), Vec::new(), Vec::new());
    // CPU seconds per GiB: curl's own (`times` after it), the daemon's
    // (all its threads), and the rest of the workspace's cgroup (its
    // egress relay; the exec's shell is in it too).
    let cpu = |label: &'static str| (label, Vec::new(), Vec::new(), Vec::new());
    let mut costs = [cpu("direct"), cpu("passthrough"), cpu("intercepted")];
    let cgroup = cubicle_tests::cgroup::cpu_file(&id);
    let gib = bytes as f64 / f64::from(1u32 << 30);
    for _ in 0..rounds {
        let out = host(&format!(
            "curl -sS -o /dev/null {FORMAT} --cacert {cacert} {direct_big}; times"
        ))
        .await?;
        direct.extend(timings(&out));
        costs[0].1.push(children_cpu(&out) / gib);
        for (way, samples) in [(1, &mut tunnelled), (2, &mut intercepted)] {
            set_passthrough(way == 1).await?;
            let flags = if way == 1 { "-k " } else { "" };
            let daemon_before = process_cpu(daemon.pid());
            let cgroup_before = cgroup.as_deref().map(cubicle_tests::cgroup::cpu_usec);
            let out = exec(
                &daemon,
                &id,
                &format!("curl -sS {flags}-o /dev/null {FORMAT} {big}; times"),
            )
            .await?;
            let curl = children_cpu(&out);
            let daemon_cpu = process_cpu(daemon.pid()) - daemon_before;
            let rest = cgroup
                .as_deref()
                .zip(cgroup_before)
                .map_or(f64::NAN, |(file, before)| {
                    (cubicle_tests::cgroup::cpu_usec(file) - before) as f64 / 1e6 - curl
                });
            samples.extend(timings(&out));
            costs[way].1.push(curl / gib);
            costs[way].2.push(daemon_cpu / gib);
            costs[way].3.push(rest / gib);
        }
    }
    let ratios = |proxied: &[(f64, f64)]| -> Vec<f64> {
        direct
            .iter()
            .zip(proxied)
            .map(|(d, p)| mib_s(p) / mib_s(d))
            .collect()
    };
    let (direct_bw, tunnel_bw, inter_bw) = (
        median(direct.iter().map(mib_s).collect()),
        median(tunnelled.iter().map(mib_s).collect()),
        median(intercepted.iter().map(mib_s).collect()),
    );
    println!(
        "throughput (median of {rounds}), MiB/s; ratio: median of each round's, with the range:"
    );
    println!("  direct on the host    {direct_bw:8.1}");
    for (name, bw, proxied) in [
        ("passthrough", tunnel_bw, &tunnelled),
        ("intercepted", inter_bw, &intercepted),
    ] {
        let ratios = ratios(proxied);
        let (low, high) = range(&ratios);
        println!(
            "  proxy, {name}    {bw:8.1}   ({:.2} of direct, {low:.2}-{high:.2})",
            median(ratios.clone())
        );
    }

    println!(
        "CPU seconds per GiB (median of {rounds}): curl / the daemon / the rest of the workspace"
    );
    let shown = |values: Vec<f64>| {
        if values.is_empty() {
            "     -".to_owned()
        } else {
            format!("{:6.2}", median(values))
        }
    };
    for (label, curl, daemon_cpu, rest) in costs {
        println!(
            "  {label:12} {} / {} / {}",
            shown(curl),
            shown(daemon_cpu),
            shown(rest)
        );
    }

    // Small GETs: blocks of ten of each way in turn.
    let (blocks, block) = (10, 10);
    let (mut unverified, mut passthrough_small, mut verified, mut intercepted_small) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Each proxied row against the same curl on the host: passthrough
    // verifies nothing inside (-k: the workspace does not trust the test
    // origin's CA), intercepted verifies the proxy's leaf with the bundle.
    let unverified_flags = "-k".to_owned();
    let verified_flags = format!("--cacert {cacert}");
    for _ in 0..blocks {
        for (passthrough, host_flags, inside_flags, on_host, inside) in [
            (
                true,
                &unverified_flags,
                "-k ",
                &mut unverified,
                &mut passthrough_small,
            ),
            (
                false,
                &verified_flags,
                "",
                &mut verified,
                &mut intercepted_small,
            ),
        ] {
            on_host.extend(timings(
                &host(&repeat(
                    block,
                    format!("curl -sS {host_flags} -o /dev/null {FORMAT} {direct_small}"),
                ))
                .await?,
            ));
            set_passthrough(passthrough).await?;
            inside.extend(timings(
                &exec(
                    &daemon,
                    &id,
                    &repeat(
                        block,
                        format!("curl -sS {inside_flags}-o /dev/null {FORMAT} {small}"),
                    ),
                )
                .await?,
            ));
        }
    }
    let n = blocks * block;
    let (k, d, t, i) = (
        p50_ms(&unverified),
        p50_ms(&verified),
        p50_ms(&passthrough_small),
        p50_ms(&intercepted_small),
    );
    println!("small HTTPS GET, new connection each, p50 ms (n={n}):");
    println!("  direct on the host, -k            {k:8.2}");
    println!(
        "  proxy, passthrough, -k            {t:8.2}   (+{:.2} ms, x{:.1})",
        t - k,
        t / k
    );
    println!("  direct on the host, full bundle   {d:8.2}");
    println!(
        "  proxy, intercepted, full bundle   {i:8.2}   (+{:.2} ms, x{:.1})",
        i - d,
        i / d
    );

    // Last byte → quarantine record with scan results. The proxy answers
    // curl only once the record is written (after hashing, sniffing and
    // scanning), so curl's end, on the same host clock, bounds it.
    let size = 50u64 << 20;
    let mut samples = Vec::new();
    for _ in 0..3 {
        let url = format!("https://origin.test:{https}/bytes?n={size}&download=1");
        let started = std::time::SystemTime::now();
        let out = exec(
            &daemon,
            &id,
            &format!(
                "curl -sS -o /dev/null -D - '{url}' | grep -i x-cubicle-download; date +%s.%N"
            ),
        )
        .await?;
        let held = out.lines().next().unwrap_or_default().to_owned();
        anyhow::ensure!(
            held.to_ascii_lowercase().starts_with("x-cubicle-download"),
            "not held: {out}"
        );
        let answered: f64 = out.lines().last().unwrap_or_default().trim().parse()?;
        let last = origin::last_byte()
            .filter(|t| *t > started)
            .ok_or_else(|| anyhow::anyhow!("no last byte"))?;
        let last = last.duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
        let id = held.split(':').nth(1).unwrap_or_default().trim().to_owned();
        let (status, record) = daemon
            .call(Method::GET, &format!("/v1/downloads/{id}"), None)
            .await?;
        anyhow::ensure!(status == 200 && record["size"] == size, "{record}");
        samples.push(Duration::from_secs_f64((answered - last).max(0.0)));
    }
    samples.sort();
    println!(
        "50 MiB download, origin's last byte → held answer (record with scan results written): median {:.0} ms (runs: {:?})",
        samples[samples.len() / 2].as_secs_f64() * 1000.0,
        samples
            .iter()
            .map(|s| (s.as_secs_f64() * 1000.0).round())
            .collect::<Vec<_>>()
    );
    Ok(())
}
