//! The command line that starts one microVM: `prlimit` (resource limits)
//! → `cubicle-vmm run --jail-root …`, which starts as root, inside the
//! workspace's cgroup from its first instruction (the shim joins it before
//! the exec), confines itself the way Firecracker's jailer does (its own
//! mount namespace rooted on `vmm-root/` with only the kernel, the base, the
//! overlay, `/dev/kvm` and its socket directories; the workspace's uid with
//! only the group of `/dev/kvm`; no capabilities; no new privileges; see
//! `cubicle_vmm::jail`) and only then builds the VM. `prlimit` execs the
//! VMM, so the chain is one process, the child of the workspace's shim
//! (`crate::shim`). The jail sets the parent-death signal after its uid
//! change, which tied the VM to its shim as bubblewrap's
//! `--die-with-parent` ties a jail, never to the daemon.
//!
//! The guest's RAM is the workspace's memory limit; its vCPUs are the
//! configured number, at most the CPU limit rounded up.
//!
//! The guest kernel's command line makes `cubicle-guest` init; the kernel
//! hands everything after ` -- ` to init as its arguments (the VMM keeps
//! that part last when it adds its `virtio_mmio.device=` entries).

use std::path::Path;

use crate::backend::WorkspaceSpec;
use crate::unprivileged::{self, Limits};

use super::MicrovmBackend;
use super::layer::Layer;

/// Per-workspace limits on the VMM process (its uid runs nothing else).
const MAX_PROCESSES: u32 = 64;
const MAX_OPEN_FILES: u32 = 4096;
/// The guest's vsock context id; each VM has its own device, so all can share it.
const GUEST_CID: u32 = 3;
const MIB: u64 = 1024 * 1024;
/// Where the image holds `cubicle-guest` (`ImageStore::ensure_ext4` puts it there).
pub const GUEST_INIT: &str = "/usr/local/sbin/cubicle-guest";

/// A value that cannot be carried on the VMM's or the kernel's command line.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{what} {value:?} contains {bad:?}, which the {line} command line cannot carry; {fix}")]
    Unrepresentable {
        what: &'static str,
        value: String,
        bad: char,
        line: &'static str,
        fix: &'static str,
    },
}

/// The full argv of a boot, or which input cannot be expressed in it.
pub fn argv(
    vm: &MicrovmBackend,
    spec: &WorkspaceSpec,
    base: &Path,
) -> Result<Vec<String>, CommandError> {
    let mut argv = common(vm, spec, base)?;
    argv.extend([
        "--kernel".into(),
        vm.config.kernel.display().to_string(),
        "--cmdline".into(),
        kernel_cmdline(spec, &vm.config.xvnc)?,
        "--memory-mib".into(),
        guest_memory_mib(spec).to_string(),
        "--vcpus".into(),
        vcpus(vm.config.vcpus, spec.limits.cpus()).to_string(),
    ]);
    Ok(argv)
}

/// The argv of a restore from memory snapshot `image`: the snapshot's
/// machine (its vCPUs, RAM and kernel are in its state file) on this
/// workspace's disks, vsock socket and console. The state and memory files
/// are opened by the VMM as root before its jail, so its root holds
/// neither.
pub fn restore_argv(
    vm: &MicrovmBackend,
    spec: &WorkspaceSpec,
    image: &crate::snapshots::MemoryImage,
) -> Result<Vec<String>, CommandError> {
    let mut argv = common(vm, spec, Path::new(&image.parts.base_image))?;
    argv.extend([
        "--restore".into(),
        image.state.display().to_string(),
        "--restore-memory".into(),
        image.memory.display().to_string(),
    ]);
    Ok(argv)
}

/// What a boot and a restore share: the limits, the jail, the disks, the
/// vsock socket, the console and the API socket.
fn common(
    vm: &MicrovmBackend,
    spec: &WorkspaceSpec,
    base: &Path,
) -> Result<Vec<String>, CommandError> {
    let layer = Layer::of(spec);
    let path = |p: &Path| p.display().to_string();
    let disk = format!(
        "id=root,path={},overlay={}",
        vmm_path(base)?,
        vmm_path(&layer.overlay())?
    );
    let vsock = format!("cid={GUEST_CID},uds={}", vmm_path(&layer.vsock_socket())?);
    let limits = Limits {
        processes: MAX_PROCESSES,
        open_files: MAX_OPEN_FILES,
    };
    let mut argv = unprivileged::prlimit(limits);
    argv.extend([
        path(&vm.config.vmm_bin),
        "run".into(),
        "--jail-root".into(),
        path(&layer.vmm_root()),
        "--jail-uid".into(),
        spec.host_uid.to_string(),
        "--jail-gid".into(),
        spec.host_uid.to_string(),
        "--jail-groups".into(),
        vm.kvm_gid.to_string(),
        "--jail-kvm".into(),
        path(&vm.config.kvm_device),
        "--snapshot-dir".into(),
        path(&layer.snapshot_dir()),
        "--disk".into(),
        disk,
        "--disk".into(),
        format!("id=host,path={},ro", vmm_path(&layer.host_disk())?),
        "--vsock".into(),
        vsock,
        "--serial-log".into(),
        path(&layer.serial_log()),
        "--api-socket".into(),
        path(&layer.api_socket()),
    ]);
    Ok(argv)
}

/// The guest's RAM: the workspace's memory limit.
pub fn guest_memory_mib(spec: &WorkspaceSpec) -> u64 {
    spec.limits.memory_bytes() / MIB
}

/// `configured` vCPUs, but no more than the CPU quota rounded up: a vCPU
/// beyond it would only wait for quota (and stall the guest's locks).
fn vcpus(configured: u8, cpus: f64) -> u8 {
    let quota = cpus.ceil().clamp(1.0, f64::from(u8::MAX)) as u8;
    configured.clamp(1, quota)
}

/// The guest kernel's command line: the overlay-backed disk as a
/// read-write root, `cubicle-guest --vm` as init, and its arguments.
pub fn kernel_cmdline(spec: &WorkspaceSpec, xvnc: &str) -> Result<String, CommandError> {
    kernel_value("workspace id", &spec.id)?;
    kernel_value("Xvnc path", xvnc)?;
    let geometry = spec.geometry.to_string();
    let init = cubicle_image::vm_init::VmInit {
        hostname: &spec.id,
        geometry: &geometry,
        xvnc,
    };
    Ok(format!(
        "console=ttyS0 reboot=k panic=1 root=/dev/vda rw init={GUEST_INIT} -- {}",
        init.words().join(" ")
    ))
}

/// `--disk` and `--vsock` take `key=value` pairs split on commas, so a
/// path there must not hold one.
fn vmm_path(path: &Path) -> Result<String, CommandError> {
    let text = path.display().to_string();
    match text.contains(',') {
        true => Err(CommandError::Unrepresentable {
            what: "path",
            value: text,
            bad: ',',
            line: "cubicle-vmm",
            fix: "use a data directory and image cache whose paths have no comma",
        }),
        false => Ok(text),
    }
}

/// Kernel command line words are split on whitespace and may be quoted.
fn kernel_value(what: &'static str, value: &str) -> Result<(), CommandError> {
    match value.chars().find(|c| c.is_whitespace() || *c == '"') {
        Some(bad) => Err(CommandError::Unrepresentable {
            what,
            value: value.to_owned(),
            bad,
            line: "guest kernel",
            fix: "use a value without spaces or quotes",
        }),
        None if value.is_empty() => Err(CommandError::Unrepresentable {
            what,
            value: String::new(),
            bad: ' ',
            line: "guest kernel",
            fix: "give a non-empty value",
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microvm::MicrovmConfig;

    fn vm() -> MicrovmBackend {
        MicrovmBackend::with_kvm_gid(
            MicrovmConfig::new(
                "/opt/cubicle/cubicle-vmm".into(),
                "/opt/cubicle/cubicle-shim".into(),
                "/var/lib/cubicle/kernel/vmlinux".into(),
                "/img/desktop.ext4".into(),
            ),
            107,
        )
    }

    fn spec() -> WorkspaceSpec {
        WorkspaceSpec {
            id: "ws-1a2b".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: 1_600_007,
            dir: "/data/workspaces/ws-1a2b".into(),
            top_pid: None,
            limits: Default::default(),
        }
    }

    /// The value following `flag` in `argv`.
    fn after<'a>(argv: &'a [String], flag: &str) -> &'a str {
        let at = argv
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("no {flag}"));
        &argv[at + 1]
    }

    #[test]
    fn vmm_jails_itself_as_the_workspace_uid_with_only_the_kvm_group() {
        let argv = argv(&vm(), &spec(), Path::new("/img/desktop.ext4")).unwrap();
        let joined = argv.join(" ");
        assert!(
            joined.starts_with(
                "prlimit --nproc=64:64 --nofile=4096:4096 --core=0:0 -- /opt/cubicle/cubicle-vmm run --jail-root /data/workspaces/ws-1a2b/vmm-root --jail-uid 1600007 --jail-gid 1600007 --jail-groups 107 --jail-kvm /dev/kvm --snapshot-dir /data/workspaces/ws-1a2b/vm-snap --disk "
            ),
            "{joined}"
        );
        // The VMM drops privileges itself: no setpriv before it, and no
        // supplementary group but /dev/kvm's.
        assert!(!joined.contains("setpriv"), "{joined}");
        assert_eq!(after(&argv, "--kernel"), "/var/lib/cubicle/kernel/vmlinux");
        assert_eq!(
            after(&argv, "--disk"),
            "id=root,path=/img/desktop.ext4,overlay=/data/workspaces/ws-1a2b/disk/overlay.img"
        );
        // The vsock socket is the guest channel socket the host connects to.
        assert_eq!(
            after(&argv, "--vsock"),
            format!("cid=3,uds={}", Layer::of(&spec()).vsock_socket().display())
        );
        assert_eq!(
            after(&argv, "--serial-log"),
            "/data/workspaces/ws-1a2b/vm/serial.log"
        );
        assert_eq!(
            after(&argv, "--api-socket"),
            "/data/workspaces/ws-1a2b/vm/vmm.sock"
        );
    }

    #[test]
    fn guest_ram_is_the_memory_limit_and_vcpus_follow_the_cpu_quota() {
        let policy = crate::limits::LimitsPolicy::with_maxima(64 << 30, 8.0, 4096, 64 << 30);
        let limits = |memory_mb, cpus| {
            policy
                .resolve(&crate::limits::LimitsRequest {
                    memory_mb: Some(memory_mb),
                    cpus: Some(cpus),
                    ..Default::default()
                })
                .unwrap()
        };
        let mut small = spec();
        small.limits = limits(512, 0.5);
        let argv = argv(&vm(), &small, Path::new("/img/desktop.ext4")).unwrap();
        assert_eq!(after(&argv, "--memory-mib"), "512");
        assert_eq!(after(&argv, "--vcpus"), "1");
        let argv = argv_default();
        assert_eq!(after(&argv, "--memory-mib"), "2048");
        assert_eq!(after(&argv, "--vcpus"), "2");
        assert_eq!(vcpus(2, 1.5), 2);
        assert_eq!(vcpus(4, 1.5), 2);
        assert_eq!(vcpus(0, 8.0), 1);
    }

    fn argv_default() -> Vec<String> {
        argv(&vm(), &spec(), Path::new("/img/desktop.ext4")).unwrap()
    }

    #[test]
    fn guest_boots_cubicle_guest_as_init_with_its_arguments_after_dashes() {
        let argv = argv(&vm(), &spec(), Path::new("/img/desktop.ext4")).unwrap();
        let cmdline = after(&argv, "--cmdline");
        let (kernel, init) = cmdline.split_once(" -- ").unwrap();
        for word in [
            "console=ttyS0",
            "reboot=k",
            "panic=1",
            "root=/dev/vda",
            "rw",
        ] {
            assert!(
                kernel.split(' ').any(|w| w == word),
                "missing {word} in {kernel}"
            );
        }
        assert!(kernel.contains("init=/usr/local/sbin/cubicle-guest"));
        assert_eq!(
            init,
            "--vm --hostname ws-1a2b --geometry 1280x800 --xvnc /usr/bin/Xvnc"
        );
    }

    #[test]
    fn values_the_command_lines_cannot_carry_are_refused() {
        let mut bad = spec();
        bad.dir = "/data,x/ws".into();
        let err = argv(&vm(), &bad, Path::new("/img/desktop.ext4")).unwrap_err();
        assert!(err.to_string().contains("comma"), "{err}");
        let mut bad = spec();
        bad.id = "ws 1".into();
        assert!(argv(&vm(), &bad, Path::new("/img/desktop.ext4")).is_err());
        assert!(kernel_cmdline(&spec(), "/usr/bin/X vnc").is_err());
    }

    #[test]
    fn a_restore_names_the_snapshot_files_and_none_of_the_boot() {
        let files = crate::snapshots::Files::under(Path::new("/data"));
        let row = crate::snapshots::Row {
            id: "snap-1".into(),
            owner_token: "tok".into(),
            name: "booted".into(),
            workspace_id: "ws-0".into(),
            backend: "microvm".into(),
            kind: "memory".into(),
            home_size: 0,
            home_sha256: String::new(),
            profile_size: 0,
            profile_sha256: String::new(),
            sha256: String::new(),
            created_at: 0,
            memory: crate::snapshots::MemoryParts {
                base_image: "/img/older.ext4".into(),
                ..Default::default()
            },
        };
        let argv = restore_argv(&vm(), &spec(), &files.image(&row)).unwrap();
        assert_eq!(after(&argv, "--restore"), "/data/snapshots/snap-1.vmstate");
        assert_eq!(
            after(&argv, "--restore-memory"),
            "/data/snapshots/snap-1.memory"
        );
        // The snapshot's base under this workspace's overlay.
        assert_eq!(
            after(&argv, "--disk"),
            "id=root,path=/img/older.ext4,overlay=/data/workspaces/ws-1a2b/disk/overlay.img"
        );
        for boot_only in ["--kernel", "--cmdline", "--memory-mib", "--vcpus"] {
            assert!(
                !argv.iter().any(|a| a == boot_only),
                "{boot_only} in {argv:?}"
            );
        }
        assert_eq!(
            after(&argv, "--snapshot-dir"),
            "/data/workspaces/ws-1a2b/vm-snap"
        );
    }
}
