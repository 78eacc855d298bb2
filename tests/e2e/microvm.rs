//! The microvm backend end to end. A full Linux boot to `cubicle-guest`
//! readiness needs hardware virtualization (vmx/svm); on other hosts (PVM,
//! no KVM) the boot test is skipped ([`cubicle_tests::skip`]) and the
//! refusal is tested instead. `CUBICLE_REQUIRE_KVM=1` (CI on a KVM host)
//! turns the skipped boot into a failure.

use std::process::Command;

use cubicle_tests::{Daemon, daemon::bin_dir, guest};

/// Why this host cannot boot a stock Linux guest, if it cannot.
pub(crate) fn no_hardware_virt() -> Option<&'static str> {
    if !std::path::Path::new("/dev/kvm").exists() {
        return Some("no /dev/kvm on this host");
    }
    if std::path::Path::new("/sys/module/kvm_pvm").exists() {
        return Some("/dev/kvm is PVM (software virtualization): stock Linux guests cannot boot");
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.split_whitespace().any(|f| f == "vmx" || f == "svm");
    (!flags).then_some("no vmx/svm in /proc/cpuinfo")
}

#[test]
fn microvm_is_refused_with_a_reason_where_it_cannot_run() {
    let Some(reason) = no_hardware_virt() else {
        return cubicle_tests::skip(
            "this host has hardware virtualization, so microvm is not refused",
        );
    };
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(bin_dir().join("cubicle"))
        .args(["serve", "--listen", "127.0.0.1:0", "--backend", "microvm"])
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "serve --backend microvm started on a host where {reason}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains("microvm backend is not available"), "{last}");
    assert!(
        last.contains("jail backend"),
        "the error must say jail works: {last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microvm_workspace_boots_to_readiness() {
    if let Some(reason) = no_hardware_virt() {
        return cubicle_tests::skip::skip_without_kvm(reason);
    }
    // Hardware virtualization: boot the desktop image's ext4 with the
    // microVM kernel and cubicle-guest as init.
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &["--backend", "microvm"]).unwrap();
    let ws = daemon.create_workspace("{}").await;
    assert_eq!(ws["backend"], "microvm");
    let id = ws["id"].as_str().unwrap();
    // Under emulation the guest's first call to a browser still starting
    // can outlast its 10 s call limit (a 500 naming it): asked again until
    // a guard's worth of time has passed; natively the first answers.
    let deadline =
        std::time::Instant::now() + cubicle_tests::guard(std::time::Duration::from_secs(10));
    let version = loop {
        match guest::http_get(&daemon.channel_socket(id), 9222, "/json/version").await {
            Ok(version) => break version,
            Err(err) if std::time::Instant::now() < deadline => {
                eprintln!("microvm: /json/version: {err:#}; asking again");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            Err(err) => panic!("/json/version: {err:#}"),
        }
    };
    assert!(version.contains("webSocketDebuggerUrl"), "{version}");

    // The user's side of the guest (no network device, no vsock) is
    // asserted in every_door::, which CI's nested part runs.

    // The VMM's own memory beside the guest's RAM, with the desktop up.
    let uid = u32::try_from(ws["host_uid"].as_u64().unwrap()).unwrap();
    if let Some(vmm) = cubicle_tests::procs::of_uid(uid).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with(b"cubicle-vmm"))
    }) {
        let memory_mib = ws["limits"]["memory_mb"].as_u64().unwrap();
        let own = vmm_own_memory(vmm, memory_mib);
        let line = format!(
            "cubicle-bench: microVM with the desktop up: VMM RSS {:.1} MiB, of which guest RAM {:.1} MiB: {:.2} MiB of the VMM's own ({:.2} MiB private, {:.2} MiB anonymous: heap, stacks, buffers); largest: {}\n",
            own.total as f64 / 1024.0,
            own.guest as f64 / 1024.0,
            (own.total - own.guest) as f64 / 1024.0,
            own.private as f64 / 1024.0,
            own.anonymous as f64 / 1024.0,
            own.largest
                .iter()
                .map(|(name, kib)| format!("{name} {kib} KiB"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        use std::io::Write;
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    let (status, _) = daemon
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/workspaces/{id}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 204);
}

/// What a VMM process holds in memory, in KiB, from its smaps.
struct OwnMemory {
    /// RSS of the whole process.
    total: u64,
    /// RSS of its guest RAM: the one anonymous mapping of exactly its size.
    guest: u64,
    /// Private pages outside guest RAM (what no other process shares).
    private: u64,
    /// Anonymous pages outside guest RAM: heap, stacks, buffers.
    anonymous: u64,
    /// The mappings outside guest RAM holding most, by RSS.
    largest: Vec<(String, u64)>,
}

fn vmm_own_memory(pid: i32, memory_mib: u64) -> OwnMemory {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut own = OwnMemory {
        total: 0,
        guest: 0,
        private: 0,
        anonymous: 0,
        largest: Vec::new(),
    };
    let mut by_name = std::collections::BTreeMap::<String, u64>::new();
    let (mut name, mut in_guest) = (String::new(), false);
    for line in smaps.lines() {
        let kib = |field: &str| {
            line.strip_prefix(field)
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        };
        // A mapping's header (`start-end perms offset dev inode [path]`);
        // every other line is `Field: value`.
        if line
            .split_whitespace()
            .next()
            .is_some_and(|f| !f.ends_with(':'))
        {
            name = line
                .split_whitespace()
                .nth(5)
                .unwrap_or("[anon]")
                .to_owned();
        } else if let Some(size) = kib("Size:") {
            in_guest = size == memory_mib * 1024;
        } else if let Some(rss) = kib("Rss:") {
            own.total += rss;
            if in_guest {
                own.guest += rss;
            } else {
                *by_name.entry(name.clone()).or_default() += rss;
            }
        } else if in_guest {
            continue;
        } else if let Some(anonymous) = kib("Anonymous:") {
            own.anonymous += anonymous;
        } else if let Some(private) = kib("Private_Clean:").or_else(|| kib("Private_Dirty:")) {
            own.private += private;
        }
    }
    own.largest = by_name.into_iter().collect();
    own.largest.sort_by_key(|(_, kib)| std::cmp::Reverse(*kib));
    own.largest.truncate(6);
    own
}
