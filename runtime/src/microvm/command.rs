//! The command line that starts one microVM: `prlimit` (resource limits) →
//! `setpriv` (the workspace's own unprivileged uid, plus the group of
//! `/dev/kvm`, parent-death signal) → `cubicle-vmm run`. Each execs the
//! next, so the whole chain is one process, the child of the workspace's
//! shim (`crate::shim`). Its parent-death signal (set again by `setpriv`
//! after the uid change, which clears the shim's) ties the VM to its shim
//! as bubblewrap's `--die-with-parent` ties a jail, never to the daemon.
//!
//! The guest kernel's command line makes `cubicle-guest` init; the kernel
//! hands everything after ` -- ` to init as its arguments (the VMM keeps
//! that part last when it adds its `virtio_mmio.device=` entries).

use std::path::Path;

use crate::backend::WorkspaceSpec;
use crate::unprivileged::{self, Groups, Limits};

use super::MicrovmBackend;
use super::layer::Layer;

/// Per-workspace limits on the VMM process (its uid runs nothing else).
const MAX_PROCESSES: u32 = 64;
const MAX_OPEN_FILES: u32 = 4096;
/// The guest's vsock context id; each VM has its own device, so all can share it.
const GUEST_CID: u32 = 3;
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

/// The full argv, or which input cannot be expressed in it.
pub fn argv(
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
    let mut argv = unprivileged::prefix(spec.host_uid, limits, Groups::Only(vm.kvm_gid));
    argv.extend([
        "--pdeathsig".into(),
        "KILL".into(),
        "--".into(),
        path(&vm.config.vmm_bin),
        "run".into(),
        "--kernel".into(),
        path(&vm.config.kernel),
        "--cmdline".into(),
        kernel_cmdline(spec, &vm.config.xvnc)?,
        "--memory-mib".into(),
        vm.config.memory_mib.to_string(),
        "--vcpus".into(),
        vm.config.vcpus.to_string(),
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

/// The guest kernel's command line: the overlay-backed disk as a
/// read-write root, `cubicle-guest --vm` as init, and its arguments.
pub fn kernel_cmdline(spec: &WorkspaceSpec, xvnc: &str) -> Result<String, CommandError> {
    kernel_value("workspace id", &spec.id)?;
    kernel_value("Xvnc path", xvnc)?;
    let geometry = spec.geometry.to_string();
    let init = cubicle_guest::vm_init::VmInit {
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
    fn vmm_runs_as_the_workspace_uid_with_only_the_kvm_group() {
        let argv = argv(&vm(), &spec(), Path::new("/img/desktop.ext4")).unwrap();
        let joined = argv.join(" ");
        for needle in [
            "prlimit --nproc=64:64 --nofile=4096:4096 --core=0:0 -- setpriv",
            "--reuid=1600007 --regid=1600007 --groups=107 --no-new-privs --pdeathsig KILL -- /opt/cubicle/cubicle-vmm run",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in {joined}");
        }
        assert_eq!(after(&argv, "--kernel"), "/var/lib/cubicle/kernel/vmlinux");
        assert_eq!(after(&argv, "--memory-mib"), "2048");
        assert_eq!(after(&argv, "--vcpus"), "2");
        assert_eq!(
            after(&argv, "--disk"),
            "id=root,path=/img/desktop.ext4,overlay=/data/workspaces/ws-1a2b/vm/overlay.img"
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
}
