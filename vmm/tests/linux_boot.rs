//! A full Linux boot. Needs hardware virtualization (vmx/svm) and a guest
//! kernel from desktop-image/kernel/build.sh (or CUBICLE_VMLINUX); where
//! either is missing it is reported as skipped (`common::skip`); with
//! `CUBICLE_REQUIRE_KVM=1` a host without hardware virtualization fails it.

mod common;

use std::path::PathBuf;

use common::*;

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
        return skip_without_kvm(&reason);
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
