//! The microvm backend's walls, with the VMM's own `blkfill` test guest as
//! the workspace (it boots in milliseconds even under emulation): the VMM
//! runs jailed in the workspace's cgroup, its overlay on the size-capped
//! disk, so a guest that fills its disk gets I/O errors while the host
//! gives up no more than the limit and the VMM keeps serving; a start that
//! fails names the stage and leaves nothing behind.
//!
//! Needs root and hardware virtualization: on a PVM host the backend is
//! unavailable and the tests say they are skipped (`CUBICLE_REQUIRE_KVM=1`
//! fails them); `scripts/nested` gives them an L1 with SVM. Needs
//! `cubicle-vmm` and its test guests built in the same target dir
//! (`cargo build -p cubicle-vmm --tests`).

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cubicle_runtime::backend::{Backend, WorkspaceSpec};
use cubicle_runtime::host::HostKind;
use cubicle_runtime::limits::cgroup::Hierarchy;
use cubicle_runtime::limits::{LimitsPolicy, LimitsRequest};
use cubicle_runtime::microvm::layer::Layer;
use cubicle_runtime::microvm::{self, MicrovmBackend, MicrovmConfig, VMM_OVERHEAD};

const SHIM: &str = env!("CARGO_BIN_EXE_cubicle-shim");
const MIB: u64 = 1024 * 1024;
/// A group of the test's own for its KVM node (the host's /dev/kvm may be
/// root's alone, and no VMM may hold group root).
const KVM_GID: u32 = 65533;

/// A bounded wait: ten times longer inside `scripts/nested` (emulated CPU).
fn guard(secs: u64) -> Duration {
    let nested = std::env::var_os("CUBICLE_NESTED").is_some();
    Duration::from_secs(if nested { secs * 10 } else { secs })
}

/// Whether the test can run here; says why not otherwise.
fn runnable() -> bool {
    if !cubicle_skip::is_root() {
        cubicle_skip::skip("needs root: cgroups, the disk's loop mount and the VMM's jail");
        return false;
    }
    if let Err(err) = microvm::check_host(HostKind::detect()) {
        cubicle_skip::skip_without_kvm(&err.to_string());
        return false;
    }
    true
}

/// `target/<profile>`: this test binary is in its `deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary in target/<profile>/deps")
        .to_owned()
}

/// A test guest built by cubicle-vmm's build script (the newest build).
fn test_guest(name: &str) -> PathBuf {
    let builds = target_dir().join("build");
    let found = std::fs::read_dir(&builds)
        .expect("target build dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("cubicle-vmm-"))
        .map(|e| e.path().join("out").join(name))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.unwrap_or_else(|| {
        panic!(
            "no {name} test guest under {}: cargo build -p cubicle-vmm --tests",
            builds.display()
        )
    })
}

static NEXT_RIG: AtomicU32 = AtomicU32::new(0);

struct Rig {
    _tmp: tempfile::TempDir,
    backend: MicrovmBackend,
    spec: WorkspaceSpec,
    kernel: PathBuf,
}

/// A backend on the `blkfill` guest over a 256 MiB base, and a workspace
/// of 256 MiB RAM, 1 CPU and a 64 MiB disk.
fn rig(name: &str) -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let kernel = shared.join("vmlinux");
    std::fs::copy(test_guest("blkfill"), &kernel).unwrap();
    std::fs::set_permissions(&kernel, std::fs::Permissions::from_mode(0o644)).unwrap();
    let base = shared.join("base.ext4");
    std::fs::File::create(&base)
        .unwrap()
        .set_len(256 * MIB)
        .unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o644)).unwrap();
    let kvm = shared.join("kvm");
    mknod_kvm(&kvm);
    let mut config = MicrovmConfig::new(
        target_dir().join("cubicle-vmm"),
        SHIM.into(),
        kernel.clone(),
        base,
    );
    config.kvm_device = kvm;
    let backend = MicrovmBackend::new(config).expect("the microvm backend on this host");
    let policy = LimitsPolicy::with_maxima(1 << 40, 64.0, 1 << 20, 1 << 40);
    let limits = policy
        .resolve(&LimitsRequest {
            memory_mb: Some(256),
            cpus: Some(1.0),
            pids: Some(64),
            disk_mb: Some(64),
            ..Default::default()
        })
        .unwrap();
    let spec = WorkspaceSpec {
        id: format!("{name}-{}", std::process::id()),
        geometry: Default::default(),
        // A uid pair of its own per rig: tests run side by side, and ending
        // one workspace ends every process of its uid.
        host_uid: 1_690_000
            + std::process::id() % 1000 * 8
            + NEXT_RIG.fetch_add(2, Ordering::Relaxed),
        dir: tmp.path().join("ws"),
        top_pid: None,
        limits,
    };
    Rig {
        _tmp: tmp,
        backend,
        spec,
        kernel,
    }
}

/// A node of the KVM device (10:232), group [`KVM_GID`], mode 0660.
fn mknod_kvm(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and integer arguments.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o660, libc::makedev(10, 232)) };
    assert_eq!(made, 0, "mknod {}", std::io::Error::last_os_error());
    chown(path, Some(0), Some(KVM_GID)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).unwrap();
}

/// Polls until the console holds `text` (a bounded guard, not a timing);
/// `None` at once if the VMM (`pid`) is gone.
fn wait_for_text(layer: &Layer, pid: i32, text: &str) -> Option<String> {
    let path = layer.serial_log();
    let deadline = Instant::now() + guard(60);
    loop {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now.contains(text) {
            return Some(now);
        }
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return None;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {text:?}: {now}",
            path.display(),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_field(pid: i32, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn mounted_under(dir: &Path) -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.display().to_string();
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&dir))
        .map(str::to_owned)
        .collect()
}

/// The memory limit written in the workspace's cgroup.
fn cgroup_memory_limit(id: &str) -> Option<u64> {
    let cgroup = Hierarchy::detect().ok()?.workspace(id);
    cgroup.dirs().iter().find_map(|dir| {
        ["memory.max", "memory.limit_in_bytes"]
            .iter()
            .find_map(|f| {
                std::fs::read_to_string(dir.join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
    })
}

#[tokio::test]
async fn a_guest_that_fills_its_disk_gets_io_errors_the_host_stays_bounded_and_the_vmm_serves() {
    if !runnable() {
        return;
    }
    let Rig {
        _tmp,
        backend,
        mut spec,
        ..
    } = rig("mvm-fill");
    let layer = Layer::of(&spec);
    backend.create(&spec).unwrap();
    let (pid, exited) = backend.start(&spec).expect("start");
    spec.top_pid = Some(pid);

    let Some(serial) = wait_for_text(&layer, pid, "blkfill: idle") else {
        let how = exited.await.map(|e| e.description).unwrap_or_default();
        panic!("the VMM ended before the guest was idle: {how}");
    };
    println!("guest: {}", serial.trim().replace('\n', " | "));
    let line = serial
        .lines()
        .find(|l| l.starts_with("blkfill: ioerr at sector "))
        .unwrap_or_else(|| panic!("the guest got no I/O error: {serial}"));
    let sector: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(sector * 512 < 64 * MIB, "{line}");
    assert!(serial.contains("blkfill: still serving"), "{serial}");

    // The host gave up at most the disk limit.
    let image = std::fs::metadata(spec.dir.join("disk.img")).unwrap();
    let overlay = std::fs::metadata(layer.overlay()).unwrap();
    println!(
        "host: disk.img {} MiB allocated of 64, overlay {} MiB allocated (apparent {} MiB)",
        image.blocks() * 512 / MIB,
        overlay.blocks() * 512 / MIB,
        overlay.len() / MIB
    );
    assert!(image.blocks() * 512 <= 64 * MIB);
    assert!(overlay.blocks() * 512 <= 64 * MIB);
    assert!(overlay.blocks() * 512 > 32 * MIB, "the guest did write");

    // The VMM still runs and answers its API (pause and resume).
    assert!(backend.is_running(&spec, pid));
    backend.pause(&spec).await.expect("pause through the API");
    backend.resume(&spec).await.expect("resume through the API");

    // In the workspace's cgroup, at RAM + overhead; usage from it.
    let member = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    println!("VMM cgroups: {}", member.trim().replace('\n', " "));
    assert!(
        member.contains(&format!("/cubicle/{}", spec.id)),
        "{member}"
    );
    assert_eq!(
        cgroup_memory_limit(&spec.id),
        Some(256 * MIB + VMM_OVERHEAD)
    );
    let usage = backend.usage(&spec);
    println!("usage: {usage:?}");
    assert!(usage.memory_bytes.is_some_and(|b| b > 0), "{usage:?}");
    assert!(usage.cpu_usage_usec.is_some_and(|u| u > 0), "{usage:?}");
    assert!(
        usage
            .disk_used_bytes
            .is_some_and(|b| b > 32 * MIB && b <= 64 * MIB),
        "{usage:?}"
    );

    // Jailed: its root, its ids, no capabilities.
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let top = names(&root);
    println!("VMM root: {top:?}");
    // `snapshots` is the workspace's `vm-snap/`, the one place it may
    // write a snapshot (empty: nothing of the host is in it).
    let want = [
        "api",
        "dev",
        "disks",
        "kernel",
        "serial",
        "snapshots",
        "vsock",
    ];
    assert_eq!(top, want.iter().map(|s| s.to_string()).collect());
    assert!(names(&root.join("snapshots")).is_empty());
    let uid = spec.host_uid;
    assert_eq!(status_field(pid, "Uid"), format!("{uid} {uid} {uid} {uid}"));
    assert_eq!(status_field(pid, "CapBnd"), "0000000000000000");
    assert_eq!(status_field(pid, "CapEff"), "0000000000000000");
    assert_eq!(status_field(pid, "NoNewPrivs"), "1");

    // A socket the daemon binds at vsock_port_socket(P) is the one the
    // VMM connects to for port P: it sees it at `/vsock/guest.sock_P`.
    let port = layer.vsock_port_socket(3128);
    let _listener = std::os::unix::net::UnixListener::bind(&port).unwrap();
    assert!(root.join("vsock/guest.sock_3128").exists());

    backend.stop(&spec).await.expect("stop");
    backend.clean(&spec).expect("clean");
    let how = tokio::time::timeout(guard(20), exited)
        .await
        .expect("the end is reported")
        .expect("the watcher reports")
        .description;
    println!("ended: {how}");
    assert!(!Hierarchy::detect().unwrap().workspace(&spec.id).exists());
    assert_eq!(mounted_under(&spec.dir), Vec::<String>::new());
    backend.destroy(&spec).unwrap();
}

#[tokio::test]
async fn a_kernel_that_cannot_be_bound_ends_the_start_naming_the_stage_and_leaves_nothing() {
    if !runnable() {
        return;
    }
    let Rig {
        _tmp,
        backend,
        spec,
        kernel,
    } = rig("mvm-nokernel");
    backend.create(&spec).unwrap();
    // Gone after the backend checked it: only the VMM's jail finds out.
    std::fs::remove_file(&kernel).unwrap();
    let how = match backend.start(&spec) {
        Ok((_pid, exited)) => {
            tokio::time::timeout(guard(20), exited)
                .await
                .expect("the end is reported")
                .expect("the watcher reports")
                .description
        }
        Err(err) => err.to_string(),
    };
    println!("failed start: {how}");
    assert!(
        how.contains(&format!(
            "jail: kernel {} cannot be opened",
            kernel.display()
        )),
        "{how}"
    );
    // What the manager does after a crash.
    let _ = backend.stop(&spec).await;
    backend.clean(&spec).expect("clean");
    assert!(!Hierarchy::detect().unwrap().workspace(&spec.id).exists());
    assert_eq!(mounted_under(&spec.dir), Vec::<String>::new());
    assert!(matches!(backend.destroy(&spec), Ok(())));
}
