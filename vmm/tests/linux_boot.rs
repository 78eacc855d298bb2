//! A full Linux boot. Needs hardware virtualization (vmx/svm) and a guest
//! kernel from desktop-image/kernel/build.sh (or CUBICLE_VMLINUX); where
//! either is missing it prints exactly one line `skipped: <reason>`.

mod common;

use std::io::Write;
use std::path::PathBuf;

use common::*;

fn skip(reason: &str) {
    // Written past libtest's capture so the line is always visible.
    let _ = writeln!(std::io::stderr().lock(), "skipped: {reason}");
    // And counted as skipped, not passed, by scripts/test (the protocol of
    // cubicle_tests::skip, which this crate does not depend on).
    if let Some(path) = std::env::var_os("CUBICLE_SKIP_LOG") {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut log| writeln!(log, "cubicle-skip: linux_boots_to_init: {reason}"));
        if let Err(err) = written {
            let path = PathBuf::from(path);
            panic!(
                "cannot append to the skip log {} (CUBICLE_SKIP_LOG): {err}",
                path.display()
            );
        }
    }
}

fn hardware_virtualization() -> Result<(), String> {
    if std::path::Path::new("/sys/module/kvm_pvm").exists() {
        return Err(
            "/dev/kvm is PVM (software virtualization): stock Linux kernels cannot boot".into(),
        );
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    if !flags.split_whitespace().any(|f| f == "vmx" || f == "svm") {
        return Err("no vmx/svm in /proc/cpuinfo: no hardware virtualization".into());
    }
    if !kvm_available() {
        return Err("/dev/kvm is not usable".into());
    }
    Ok(())
}

fn kernel() -> Option<PathBuf> {
    if let Some(k) = std::env::var_os("CUBICLE_VMLINUX") {
        return Some(k.into());
    }
    let cache = std::env::var_os("CUBICLE_KERNEL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/cubicle/kernel")
        });
    let entries = std::fs::read_dir(cache).ok()?;
    entries
        .filter_map(|e| Some(e.ok()?.path().join("vmlinux")))
        .find(|p| p.exists())
}

#[test]
fn linux_boots_to_init() {
    if let Err(reason) = hardware_virtualization() {
        return skip(&reason);
    }
    let Some(vmlinux) = kernel() else {
        return skip("no guest kernel: run desktop-image/kernel/build.sh or set CUBICLE_VMLINUX");
    };
    // No root filesystem: the kernel boots all the way to mounting root,
    // panics, and with panic=1 reboot=k resets through the i8042.
    let out = run(&[
        "--kernel",
        vmlinux.to_str().expect("utf-8"),
        "--memory-mib",
        "256",
        "--cmdline",
        "console=ttyS0 reboot=k panic=1 pci=off",
    ]);
    let serial = stdout(&out);
    assert!(out.status.success(), "{}\n{serial}", stderr(&out));
    assert!(serial.contains("Linux version"), "{serial}");
    assert!(
        serial.contains("Kernel panic") || serial.contains("Run /init"),
        "{serial}"
    );
}
