//! The egress proxy's cost, each against a peer measured in the same run:
//!
//! - throughput of one large download (default 200 MiB) inside a workspace
//!   through `127.0.0.1:3128` → reverse channel → host proxy, with TLS
//!   intercepted and passed through, against curl on the host straight to
//!   the same origin;
//! - added latency of a small HTTPS GET (p50 of 100, a new connection
//!   each): through the proxy (intercepted, passed through) against direct;
//! - the time from the last byte of a 50 MiB download to its quarantine
//!   record with scan results (the proxy streams it to disk, hashes it,
//!   sniffs it and runs the YARA rules before answering).
//!
//! The origin runs on the host's loopback with its own test CA. Prints a
//! table; asserts nothing about time.
//!
//!     cargo run -p cubicle-tests --bin bench-egress [-- MIB]

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

fn best_mib_s(runs: &[(f64, f64)]) -> f64 {
    runs.iter()
        .map(|(secs, bytes)| bytes / secs / 1048576.0)
        .fold(0.0, f64::max)
}

fn p50_ms(runs: &[(f64, f64)]) -> f64 {
    let mut secs: Vec<f64> = runs.iter().map(|(s, _)| *s).collect();
    secs.sort_by(f64::total_cmp);
    secs.get(secs.len() / 2).copied().unwrap_or(f64::NAN) * 1000.0
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
    let daemon = Daemon::start(
        &state,
        None,
        &[
            "--egress-extra-ca",
            ca.to_str().unwrap_or_default(),
            // The origins run on the host's loopback.
            "--egress-allow-host-services",
            "--egress-test-hosts",
            hosts.to_str().unwrap_or_default(),
            "--quarantine-max-mb",
            "1024",
            "--no-record",
        ],
    )?;
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
    let runs = 3;
    let repeat = |n: usize, line: String| format!("for i in $(seq {n}); do {line}; done");

    eprintln!("bench-egress: workspace {id} ready");
    // Warm both paths once.
    exec(&daemon, &id, &format!("curl -sS -o /dev/null {small}")).await?;
    host(&format!(
        "curl -sS -o /dev/null --cacert {cacert} {direct_small}"
    ))
    .await?;
    eprintln!("bench-egress: warm");

    println!("egress benchmark: {mib} MiB download, 100 small GETs, 50 MiB quarantine (same run)");
    let direct = timings(
        &host(&repeat(
            runs,
            format!("curl -sS -o /dev/null {FORMAT} --cacert {cacert} {direct_big}"),
        ))
        .await?,
    );
    eprintln!("bench-egress: direct done");
    let intercepted = timings(
        &exec(
            &daemon,
            &id,
            &repeat(runs, format!("curl -sS -o /dev/null {FORMAT} {big}")),
        )
        .await?,
    );
    set_passthrough(true).await?;
    let tunnelled = timings(
        &exec(
            &daemon,
            &id,
            &repeat(runs, format!("curl -sS -k -o /dev/null {FORMAT} {big}")),
        )
        .await?,
    );
    let direct_bw = best_mib_s(&direct);
    let inter_bw = best_mib_s(&intercepted);
    let tunnel_bw = best_mib_s(&tunnelled);
    println!("throughput (best of {runs}), MiB/s:");
    println!("  direct on the host    {direct_bw:8.1}");
    println!(
        "  proxy, passthrough    {tunnel_bw:8.1}   ({:.2} of direct)",
        tunnel_bw / direct_bw
    );
    println!(
        "  proxy, intercepted    {inter_bw:8.1}   ({:.2} of direct)",
        inter_bw / direct_bw
    );

    let n = 100;
    let passthrough_small = timings(
        &exec(
            &daemon,
            &id,
            &repeat(n, format!("curl -sS -k -o /dev/null {FORMAT} {small}")),
        )
        .await?,
    );
    set_passthrough(false).await?;
    let intercepted_small = timings(
        &exec(
            &daemon,
            &id,
            &repeat(n, format!("curl -sS -o /dev/null {FORMAT} {small}")),
        )
        .await?,
    );
    // Each proxied row against the same curl on the host: passthrough
    // verifies nothing inside (-k: the workspace does not trust the test
    // origin's CA), intercepted verifies the proxy's leaf with the bundle.
    let direct_unverified = timings(
        &host(&repeat(
            n,
            format!("curl -sS -k -o /dev/null {FORMAT} {direct_small}"),
        ))
        .await?,
    );
    let direct_small = timings(
        &host(&repeat(
            n,
            format!("curl -sS -o /dev/null {FORMAT} --cacert {cacert} {direct_small}"),
        ))
        .await?,
    );
    let (k, d, t, i) = (
        p50_ms(&direct_unverified),
        p50_ms(&direct_small),
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
