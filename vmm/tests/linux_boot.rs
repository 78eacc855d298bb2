//! Full Linux boots to init: Debian's stock kernel through the bzImage
//! (Linux boot protocol) entry, the project's kernel (desktop-image/kernel)
//! through the PVH entry. Needs hardware virtualization (vmx/svm): where it
//! is missing they are reported as skipped (`common::skip`), and with
//! `CUBICLE_REQUIRE_KVM=1` they fail. `scripts/nested` runs them here.

mod common;

use std::path::{Path, PathBuf};

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

/// The project's guest kernel (an ELF vmlinux with a PVH note).
fn project_kernel() -> Option<PathBuf> {
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

/// Debian's stock kernel (a bzImage): `CUBICLE_STOCK_KERNEL` (the nested
/// test host sets it to its own kernel), else the newest `/boot/vmlinuz-*`.
fn stock_kernel() -> Option<PathBuf> {
    if let Some(k) = std::env::var_os("CUBICLE_STOCK_KERNEL") {
        return Some(k.into());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Skips for want of a kernel, except inside the nested test host, which
/// always has both (there a missing one is a failure).
fn skip_without_kernel(reason: &str) {
    assert!(
        std::env::var_os("CUBICLE_NESTED").is_none(),
        "inside the nested test host: {reason}"
    );
    skip(reason);
}

/// Boots `kernel` with the test initramfs, whose /init prints a line and
/// restarts the machine: the VM must reach init and end cleanly (exit 0,
/// through the i8042 reset), with no warning from the kernel.
fn boots_to_init_and_restarts(kernel: &Path) {
    let out = run(&[
        "--kernel",
        kernel.to_str().expect("utf-8"),
        "--initrd",
        guest("initramfs.cpio").to_str().expect("utf-8"),
        "--memory-mib",
        "256",
        "--cmdline",
        "console=ttyS0 reboot=k panic=1 pci=off acpi=off",
    ]);
    let serial = stdout(&out);
    assert!(out.status.success(), "{}\n{serial}", stderr(&out));
    assert!(serial.contains("Linux version"), "{serial}");
    assert!(serial.contains("cubicle-init: reached init"), "{serial}");
    assert!(serial.contains("reboot: Restarting system"), "{serial}");
    for trouble in [
        "WARNING:",
        "BUG:",
        "Oops",
        "Kernel panic",
        "XSAVE consistency",
    ] {
        assert!(
            !serial.contains(trouble),
            "the kernel said {trouble}:\n{serial}"
        );
    }
}

#[test]
fn stock_kernel_boots_to_init_through_the_bzimage_entry() {
    if let Err(reason) = hardware_virtualization() {
        return skip_without_kvm(&reason);
    }
    let Some(kernel) = stock_kernel() else {
        return skip_without_kernel(
            "no stock kernel: install linux-image-amd64 or set CUBICLE_STOCK_KERNEL",
        );
    };
    boots_to_init_and_restarts(&kernel);
}

#[test]
fn project_kernel_boots_to_init_through_the_pvh_entry() {
    if let Err(reason) = hardware_virtualization() {
        return skip_without_kvm(&reason);
    }
    let Some(kernel) = project_kernel() else {
        return skip_without_kernel(
            "no guest kernel: run desktop-image/kernel/build.sh or set CUBICLE_VMLINUX",
        );
    };
    boots_to_init_and_restarts(&kernel);
}

/// Linux caught by a snapshot while its init ticks on the kernel's timers
/// (a quarter second each), then restored into a fresh VMM: the copy goes
/// on ticking from where it was and restarts cleanly, which needs the
/// restored LAPIC timer, kvmclock, PIT, PICs and IOAPIC, and the vsock
/// driver's transport reset handled without a kernel warning.
#[test]
fn linux_snapshotted_mid_way_goes_on_ticking_after_a_restore() {
    if let Err(reason) = hardware_virtualization() {
        return skip_without_kvm(&reason);
    }
    let Some(kernel) = project_kernel() else {
        return skip_without_kernel(
            "no guest kernel: run desktop-image/kernel/build.sh or set CUBICLE_VMLINUX",
        );
    };
    let dir = Scratch::new("linux-snapshot");
    let (log, api) = (dir.path("console.log"), dir.path("api.sock"));
    let path = |p: &Path| p.to_str().expect("utf-8").to_string();
    let child = vmm()
        .args(["run", "--kernel", &path(&kernel)])
        .args(["--initrd", &path(&guest("initramfs.cpio"))])
        .args(["--memory-mib", "256"])
        .args([
            "--cmdline",
            "console=ttyS0 reboot=k panic=1 pci=off acpi=off cubicle_ticks=24",
        ])
        .args([
            "--vsock",
            &format!("cid=3,uds={}", path(&dir.path("v.sock"))),
        ])
        .args(["--serial-log", &path(&log), "--api-socket", &path(&api)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn cubicle-vmm");
    let source = KillOnDrop(Some(child));
    // (The console's tty ends lines with \r\n; "tick 3" is no other
    // tick's prefix below 30.)
    wait_for_text(&log, "cubicle-init: tick 3");
    assert_eq!(request(&api, "PUT", "/vm/pause", "").0, 204);
    let (state, memory) = (dir.path("linux.state"), dir.path("linux.mem"));
    let body = snapshot_body(&state, &memory, false);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(status, 200, "{reply}");
    let caught = read_lossy(&log);
    assert_eq!(request(&api, "PUT", "/vm/stop", "").0, 204);
    let out = source.wait();
    assert!(out.status.success(), "{}", stderr(&out));

    let restored_log = dir.path("restored.log");
    let child = vmm()
        .args([
            "run",
            "--restore",
            &path(&state),
            "--restore-memory",
            &path(&memory),
        ])
        .args([
            "--vsock",
            &format!("cid=4,uds={}", path(&dir.path("v2.sock"))),
        ])
        .args(["--serial-log", &path(&restored_log)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the restore");
    let out = wait_output(child);
    let serial = read_lossy(&restored_log);
    assert!(out.status.success(), "{}\n{serial}", stderr(&out));
    assert!(
        !serial.contains("Linux version"),
        "a restore boots nothing: {serial}"
    );
    assert!(
        serial.contains("cubicle-init: tick 24") && serial.contains("cubicle-init: ticked"),
        "the copy ticked on to the end; before the snapshot:\n{caught}\nafter:\n{serial}"
    );
    assert!(serial.contains("reboot: Restarting system"), "{serial}");
    for trouble in ["WARNING:", "BUG:", "Oops", "Kernel panic", "soft lockup"] {
        assert!(
            !serial.contains(trouble),
            "the restored kernel said {trouble}:\n{serial}"
        );
    }
}
