//! The microvm backend: each workspace is one `cubicle-vmm` process (our own
//! VMM on KVM), started as the workspace's own unprivileged host uid with
//! only the extra group of `/dev/kvm`. The guest boots Cubicle's kernel on
//! the desktop image's ext4 (read-only base + a per-workspace copy-on-write
//! overlay, so its root is writable and survives stop/start) with
//! `cubicle-guest --vm` as init. The guest channel socket
//! (`<dir>/chan/guest.sock`) is the VMM's hybrid vsock socket, so the host
//! side speaks the same `CONNECT <port>` handshake as with the jail, and
//! checks the same way that the VMM (uid and pid) is the one listening.
//!
//! Only hosts with hardware virtualization (vmx/svm) qualify: on PVM hosts
//! [`MicrovmBackend::new`] refuses with one sentence and points at the jail.
//!
//! Unverified on the machines this was written on (their `/dev/kvm` is PVM,
//! where a stock kernel cannot boot): the boot itself, the guest's init and
//! vsock path, and the timing of readiness. What runs here is unit-tested:
//! the command line, the disk layout, the kernel lookup and the host check.

pub mod api;
pub mod command;
pub mod host_disk;
pub mod kernel;
pub mod layer;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{Backend, BackendError, Exit, WorkspaceSpec};
use crate::channel::GuestChannel;
use crate::host::HostKind;
use crate::proc_scan;

use layer::{Layer, io_err};

/// Grace period between SIGTERM and SIGKILL when a workspace stops.
const STOP_GRACE: Duration = Duration::from_millis(1500);
/// The most of the VMM's output kept in `vmm.log` per start.
const VMM_LOG_MAX: u64 = 8 * 1024 * 1024;
/// The vsock port on the host (CID 2) the guest's egress relay connects
/// to; the VMM hands it to [`Layer::vsock_port_socket`] of it.
pub const EGRESS_VSOCK_PORT: u32 = 3128;
/// The VMM's process name, checked before re-attaching to a pid.
const VMM_NAME: &str = "cubicle-vmm";

/// What the microvm backend needs to start VMs.
#[derive(Debug, Clone)]
pub struct MicrovmConfig {
    /// The `cubicle-vmm` binary.
    pub vmm_bin: PathBuf,
    /// The `cubicle-shim` binary each VMM is started under.
    pub shim_bin: PathBuf,
    /// The guest kernel (see [`kernel::find`] and [`kernel::stage`]); it must
    /// be readable by the workspaces' uids.
    pub kernel: PathBuf,
    /// The desktop image's ext4 form with `cubicle-guest` in it
    /// (`ImageStore::ensure_ext4`), for new workspaces.
    pub base_ext4: PathBuf,
    /// The Xvnc path inside the image.
    pub xvnc: String,
    pub memory_mib: u32,
    pub vcpus: u8,
    /// The installation's egress trust files (`crate::egress::trust`),
    /// carried into every VM on its host disk.
    pub egress_trust: Option<PathBuf>,
}

impl MicrovmConfig {
    /// The configuration on this host: the kernel `build.sh` built (found as
    /// [`kernel::find`] does, from the environment), staged under
    /// `data_dir` if the workspaces' uids cannot read it where it is.
    /// `Unavailable` with the build command when it is not built.
    pub fn locate(
        vmm_bin: PathBuf,
        shim_bin: PathBuf,
        base_ext4: PathBuf,
        data_dir: &Path,
    ) -> Result<Self, BackendError> {
        let built = kernel::find(&kernel::KernelSearch::from_env())?;
        let kernel = kernel::stage(&built, data_dir)?;
        Ok(Self::new(vmm_bin, shim_bin, kernel, base_ext4))
    }

    /// 2 GiB and 2 vCPUs: the desktop idles at about 570 MiB (FACTS.md).
    pub fn new(vmm_bin: PathBuf, shim_bin: PathBuf, kernel: PathBuf, base_ext4: PathBuf) -> Self {
        Self {
            vmm_bin,
            shim_bin,
            kernel,
            base_ext4,
            xvnc: "/usr/bin/Xvnc".into(),
            memory_mib: 2048,
            vcpus: 2,
            egress_trust: None,
        }
    }

    /// VMs trust the egress CA through the files in `dir`.
    pub fn with_egress_trust(mut self, dir: Option<PathBuf>) -> Self {
        self.egress_trust = dir;
        self
    }
}

/// How the microvm backend runs workspaces.
#[derive(Debug, Clone)]
pub struct MicrovmBackend {
    config: MicrovmConfig,
    /// The group owning `/dev/kvm`, given to each VMM as its only extra group.
    kvm_gid: u32,
}

impl MicrovmBackend {
    /// The backend on this host, or `Unavailable` saying why not.
    pub fn new(config: MicrovmConfig) -> Result<Self, BackendError> {
        Self::new_on(HostKind::detect(), config)
    }

    /// The backend on a host of kind `host`.
    pub fn new_on(host: HostKind, config: MicrovmConfig) -> Result<Self, BackendError> {
        check_host(host)?;
        let kvm_gid = std::fs::metadata("/dev/kvm")
            .map_err(|err| {
                BackendError::Unavailable("microvm", format!("cannot stat /dev/kvm: {err}"))
            })?
            .gid();
        let needs = [
            (
                "the guest kernel",
                &config.kernel,
                kernel::world_readable as fn(&Path) -> bool,
            ),
            (
                "the desktop ext4 image",
                &config.base_ext4,
                kernel::world_readable,
            ),
            ("cubicle-vmm", &config.vmm_bin, kernel::world_executable),
        ];
        for (what, path, usable) in needs {
            if !usable(path) {
                return Err(BackendError::Unavailable(
                    "microvm",
                    format!(
                        "{what} {} is missing or not usable by the workspaces' unprivileged uids (it must be readable, or executable, by others, and every directory above it searchable)",
                        path.display()
                    ),
                ));
            }
        }
        Ok(Self::with_kvm_gid(config, kvm_gid))
    }

    fn with_kvm_gid(config: MicrovmConfig, kvm_gid: u32) -> Self {
        Self { config, kvm_gid }
    }

    pub fn config(&self) -> &MicrovmConfig {
        &self.config
    }
}

/// `Unavailable`, with the reason in one sentence, unless `host` has
/// hardware virtualization.
pub fn check_host(host: HostKind) -> Result<(), BackendError> {
    match unavailable_reason(host) {
        Some(reason) => Err(BackendError::Unavailable("microvm", reason.into())),
        None => Ok(()),
    }
}

/// Why a host cannot run the microvm backend, in one sentence.
fn unavailable_reason(host: HostKind) -> Option<&'static str> {
    match host {
        HostKind::HardwareVirt => None,
        HostKind::Pvm => Some(
            "/dev/kvm here is PVM (software virtualization, no vmx/svm in /proc/cpuinfo), which boots only PVM-built guest kernels, not Cubicle's microVM kernel; the jail backend (bubblewrap) is available",
        ),
        HostKind::NoKvm => Some(
            "this host has no hardware virtualization (no /dev/kvm, or no vmx/svm in /proc/cpuinfo); the jail backend (bubblewrap) is available",
        ),
    }
}

/// Whether a process's `/proc/<pid>/cmdline` is the VMM's.
fn is_vmm_cmdline(cmdline: &[u8]) -> bool {
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    Path::new(std::ffi::OsStr::from_bytes(argv0))
        .file_name()
        .is_some_and(|name| name == VMM_NAME)
}

/// `PUT /vm/<what>` on the workspace's VMM, answered by the VMM itself.
async fn vmm_put(spec: &WorkspaceSpec, what: &'static str) -> Result<(), BackendError> {
    let socket = Layer::of(spec).api_socket();
    api::put(&socket, spec.guest_peer(), &format!("/vm/{what}"))
        .await
        .map_err(|e| BackendError::Pause {
            what,
            id: spec.id.clone(),
            reason: e.to_string(),
        })
}

impl Backend for MicrovmBackend {
    fn name(&self) -> &'static str {
        "microvm"
    }

    fn create(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        let layer = Layer::of(spec);
        layer.create_dir()?;
        layer.ensure_overlay(spec.host_uid, &self.config.base_ext4)?;
        Ok(())
    }

    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        let layer = Layer::of(spec);
        layer.create_dir()?;
        let base = layer.ensure_overlay(spec.host_uid, &self.config.base_ext4)?;
        layer.prepare_run(spec)?;
        let seccomp = crate::jail::seccomp::vm_filter_bytes()
            .map_err(|e| BackendError::Spawn(e.to_string()))?;
        host_disk::build(
            &layer.host_disk(),
            self.config.egress_trust.as_deref(),
            &seccomp,
            spec.host_uid,
        )?;
        let argv =
            command::argv(self, spec, &base).map_err(|e| BackendError::Spawn(e.to_string()))?;
        // Under a shim of its own, so the workspace outlives the daemon.
        let (pid, exited) = crate::shim::launch(crate::shim::Launch {
            shim: &self.config.shim_bin,
            spec,
            log: layer.vmm_log(),
            log_max: VMM_LOG_MAX,
            join_fds: Vec::new(),
            pass_fds: Vec::new(),
            argv,
        })?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let how = exited.await.map(|e| e.description).unwrap_or_default();
            let description = format!("cubicle-vmm {how}; {}", layer.vmm_log_tail());
            let _ = tx.send(Exit { description });
        });
        Ok((pid, rx))
    }

    fn is_running(&self, spec: &WorkspaceSpec, pid: i32) -> bool {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        proc_scan::is_alive(pid)
            && proc_scan::real_uid(pid) == Some(spec.host_uid)
            && is_vmm_cmdline(&cmdline)
    }

    async fn stop(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        crate::backend::end_processes(spec, STOP_GRACE).await
    }

    /// Parks every vCPU through the VMM's API (`PUT /vm/pause`).
    async fn pause(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        vmm_put(spec, "pause").await
    }

    async fn resume(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        vmm_put(spec, "resume").await
    }

    fn clean(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        Layer::of(spec).clean()
    }

    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        if spec.dir.exists() {
            std::fs::remove_dir_all(&spec.dir).map_err(io_err(&spec.dir))?;
        }
        Ok(())
    }

    /// The VMM's vsock socket; its listener is the VMM, which is the top
    /// process itself (prlimit and setpriv exec into it).
    fn channel(&self, spec: &WorkspaceSpec) -> GuestChannel {
        GuestChannel::new(Layer::of(spec).vsock_socket(), spec.guest_peer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MicrovmConfig {
        MicrovmConfig::new(
            "/opt/cubicle/cubicle-vmm".into(),
            "/opt/cubicle/cubicle-shim".into(),
            "/var/lib/cubicle/kernel/vmlinux".into(),
            "/var/cache/cubicle/images/abc/ext4/def.ext4".into(),
        )
    }

    #[test]
    fn pvm_host_is_refused_in_one_sentence_naming_pvm_and_jail() {
        let err = MicrovmBackend::new_on(HostKind::Pvm, config()).unwrap_err();
        assert!(matches!(err, BackendError::Unavailable("microvm", _)));
        let message = err.to_string();
        for needle in [
            "microvm backend is not available",
            "PVM",
            "vmx/svm",
            "jail backend",
            "available",
        ] {
            assert!(message.contains(needle), "missing {needle:?} in {message}");
        }
        assert_eq!(message.matches(". ").count(), 0, "one sentence: {message}");

        let message = MicrovmBackend::new_on(HostKind::NoKvm, config())
            .unwrap_err()
            .to_string();
        assert!(message.contains("no hardware virtualization"), "{message}");
        assert!(
            message.contains("jail backend (bubblewrap) is available"),
            "{message}"
        );
    }

    #[test]
    fn only_the_vmm_counts_as_running() {
        assert!(is_vmm_cmdline(
            b"/opt/cubicle/cubicle-vmm\0run\0--kernel\0k\0"
        ));
        assert!(is_vmm_cmdline(b"cubicle-vmm\0"));
        assert!(!is_vmm_cmdline(b"prlimit\0--\0setpriv\0"));
        assert!(!is_vmm_cmdline(b"/usr/bin/cubicle-vmm-evil\0"));
        assert!(!is_vmm_cmdline(b""));
    }
}
