//! The microvm backend end to end. A full Linux boot to `cubicle-guest`
//! readiness needs hardware virtualization (vmx/svm); on other hosts (PVM,
//! no KVM) the boot test is skipped ([`cubicle_tests::skip`]) and the
//! refusal is tested instead. `CUBICLE_REQUIRE_KVM=1` (CI on a KVM host)
//! turns the skipped boot into a failure.

use std::process::Command;

use cubicle_tests::{Daemon, daemon::bin_dir, guest};

/// Why this host cannot boot a stock Linux guest, if it cannot.
fn no_hardware_virt() -> Option<&'static str> {
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
    // microVM kernel (built on first use, ~20 minutes) and cubicle-guest as init.
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        data.path(),
        None,
        &["--backend", "microvm", "--ready-timeout", "300"],
    )
    .unwrap();
    let ws = daemon.create_workspace("{}").await;
    assert_eq!(ws["backend"], "microvm");
    let id = ws["id"].as_str().unwrap();
    let version = guest::http_get(&daemon.channel_socket(id), 9222, "/json/version")
        .await
        .unwrap();
    assert!(version.contains("webSocketDebuggerUrl"), "{version}");
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
