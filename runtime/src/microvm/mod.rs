//! The microvm backend: each workspace is one `cubicle-vmm` process (our own
//! VMM on KVM). The guest boots Cubicle's kernel on the desktop image's ext4
//! (read-only base + a per-workspace copy-on-write overlay, so its root is
//! writable and survives stop/start) with `cubicle-guest --vm` as init. The
//! guest channel socket (`<dir>/chan/guest.sock`) is the VMM's hybrid vsock
//! socket, so the host side speaks the same `CONNECT <port>` handshake as
//! with the jail, and checks the same way that the VMM (uid and pid) is the
//! one listening.
//!
//! The VMM gets the walls the jail has, started the way Firecracker's
//! jailer starts Firecracker ([`command`], `cubicle_vmm::jail`):
//!
//! - **cgroup**: the workspace's own ([`crate::limits::cgroup`]), joined by
//!   the shim before the exec, so the VMM is inside from its first
//!   instruction: memory = the guest's RAM (the workspace's memory limit)
//!   plus [`VMM_OVERHEAD`], the CPU quota and weight and the task limit of
//!   the workspace. Removed at stop, like the jail's. Pause and resume go
//!   through the VMM's API, which parks the vCPUs.
//! - **disk**: the overlay lives on the workspace's size-capped ext4
//!   ([`crate::limits::disk`]), so a guest that fills its disk gets
//!   virtio-blk I/O errors and the host gives up at most the disk limit.
//! - **jail**: its own mount namespace whose root holds only the kernel,
//!   the base, the overlay, `/dev/kvm` and its socket directories; the
//!   workspace's unprivileged uid with only `/dev/kvm`'s group; no
//!   capabilities; no new privileges; then its per-thread seccomp filters.
//!
//! Only hosts with hardware virtualization (vmx/svm) qualify: on PVM hosts
//! [`MicrovmBackend::new`] refuses with one sentence and points at the jail.
//! The VMM's confinement, cgroup and disk cap are tested with the VMM's
//! own test guests inside `scripts/nested` (`runtime/tests/microvm.rs`).

pub mod api;
pub mod command;
pub mod host_disk;
pub mod kernel;
pub mod layer;
mod snapshot;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{Backend, BackendError, Exit, WorkspaceSpec};
use crate::channel::GuestChannel;
use crate::host::HostKind;
use crate::proc_scan;

use crate::limits::Usage;
use crate::limits::cgroup::{self, Hierarchy, WorkspaceCgroup};

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
/// Memory the VMM's cgroup holds beyond the guest's RAM. The VMM's own
/// resident memory is a few MiB (its code, one small stack per thread, the
/// virtqueue and vsock buffers, each bounded); the rest is what the kernel
/// charges to the cgroup for it: KVM's page tables for guest memory (about
/// 2 MiB per GiB), its vCPU state, and the page cache of the base and the
/// overlay, which is reclaimed under pressure rather than counted against
/// the guest. Nothing the guest does grows the VMM past this bound: a guest
/// that uses all of its RAM gets the guest kernel's OOM killer, not a
/// killed VMM.
pub const VMM_OVERHEAD: u64 = 128 * 1024 * 1024;

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
    /// The KVM device node each VMM gets as its `/dev/kvm`; its group is
    /// the VMM's only supplementary group.
    pub kvm_device: PathBuf,
    /// vCPUs per VM (at most each workspace's CPU limit, rounded up). The
    /// guest's RAM is each workspace's memory limit.
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

    /// 2 vCPUs.
    pub fn new(vmm_bin: PathBuf, shim_bin: PathBuf, kernel: PathBuf, base_ext4: PathBuf) -> Self {
        Self {
            vmm_bin,
            shim_bin,
            kernel,
            base_ext4,
            xvnc: "/usr/bin/Xvnc".into(),
            kvm_device: "/dev/kvm".into(),
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
    /// Where workspace cgroups go here, or why they cannot (then no
    /// workspace starts: limits are not optional).
    cgroups: Result<Hierarchy, String>,
}

impl MicrovmBackend {
    /// The backend on this host, or `Unavailable` saying why not.
    pub fn new(config: MicrovmConfig) -> Result<Self, BackendError> {
        Self::new_on(HostKind::detect(), config)
    }

    /// The backend on a host of kind `host`.
    pub fn new_on(host: HostKind, config: MicrovmConfig) -> Result<Self, BackendError> {
        check_host(host)?;
        let kvm = &config.kvm_device;
        let kvm_gid = std::fs::metadata(kvm)
            .map_err(|err| {
                BackendError::Unavailable(
                    "microvm",
                    format!("cannot stat {}: {err}", kvm.display()),
                )
            })?
            .gid();
        if kvm_gid == 0 {
            return Err(BackendError::Unavailable(
                "microvm",
                format!(
                    "{} belongs to group root, which each VMM would then hold; give it a group of its own, mode 0660 (Debian: group kvm)",
                    kvm.display()
                ),
            ));
        }
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
        let cgroups = Hierarchy::detect().map_err(|e| e.to_string());
        Self {
            config,
            kvm_gid,
            cgroups,
        }
    }

    pub fn config(&self) -> &MicrovmConfig {
        &self.config
    }

    /// The workspace's cgroup on this host, or why there is none.
    fn cgroup(&self, spec: &WorkspaceSpec) -> Result<WorkspaceCgroup, BackendError> {
        Ok(Hierarchy::workspace_in(&self.cgroups, &spec.id)?)
    }

    /// Makes the workspace's cgroup (guest RAM plus the VMM's overhead) and
    /// mounts its disk.
    fn apply_limits(&self, spec: &WorkspaceSpec) -> Result<WorkspaceCgroup, BackendError> {
        let cgroup = self.cgroup(spec)?;
        if let Ok(hierarchy) = &self.cgroups {
            hierarchy.prepare()?;
        }
        cgroup.create(&spec.limits.with_extra_memory(VMM_OVERHEAD))?;
        Layer::of(spec)
            .disk()
            .ensure_mounted_empty(spec.limits.disk_bytes())?;
        Ok(cgroup)
    }

    /// Kills what is left in the cgroup, removes it, and unmounts the disk.
    fn release_limits(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        if let Ok(cgroup) = self.cgroup(spec) {
            cgroup.remove()?;
        }
        Layer::of(spec).disk().unmount()?;
        Ok(())
    }

    /// Limits first (cgroup, disk), then `launch`; a start that fails
    /// takes its limits back down, so nothing stays mounted or made.
    fn start_with(
        &self,
        spec: &WorkspaceSpec,
        launch: impl FnOnce(
            &WorkspaceCgroup,
        )
            -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError>,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        Layer::of(spec).create_dir()?;
        let started = self.apply_limits(spec).and_then(|cgroup| launch(&cgroup));
        if started.is_err()
            && let Err(err) = self.release_limits(spec)
        {
            tracing::warn!(workspace = %spec.id, %err, "cannot undo the limits of a failed start");
        }
        started
    }

    /// Everything of a start after the limits: the overlay, the VMM's
    /// directories, and the VMM under its shim, in the cgroup.
    fn launch(
        &self,
        spec: &WorkspaceSpec,
        cgroup: &WorkspaceCgroup,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        let layer = Layer::of(spec);
        let base = layer.ensure_overlay(spec.host_uid, &self.config.base_ext4)?;
        layer.prepare_run(spec)?;
        host_disk::build(
            &layer.host_disk(),
            self.config.egress_trust.as_deref(),
            spec.host_uid,
        )?;
        let argv =
            command::argv(self, spec, &base).map_err(|e| BackendError::Spawn(e.to_string()))?;
        self.spawn_vmm(spec, cgroup, argv)
    }

    /// The VMM with `argv` under a shim of its own (so the workspace
    /// outlives the daemon), in the workspace's cgroup.
    fn spawn_vmm(
        &self,
        spec: &WorkspaceSpec,
        cgroup: &WorkspaceCgroup,
        argv: Vec<String>,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        let layer = Layer::of(spec);
        // Opened now, written by the child between fork and exec.
        let join = cgroup.open_join_files()?;
        let (pid, exited) = crate::shim::launch(crate::shim::Launch {
            shim: &self.config.shim_bin,
            spec,
            log: layer.vmm_log(),
            log_max: VMM_LOG_MAX,
            join_fds: cgroup::raw_fds(&join),
            pass_fds: Vec::new(),
            argv,
        })?;
        drop(join);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let how = exited.await.map(|e| e.description).unwrap_or_default();
            let console = layer.console();
            let description = format!(
                "cubicle-vmm {how}; {}; the console ended: {}",
                layer.vmm_log_tail(),
                console.tail
            );
            let _ = tx.send(Exit {
                description,
                boot_stage: Some(console.stage),
            });
        });
        Ok((pid, rx))
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

    /// The directory only: the disk and the overlay on it are made at the
    /// first start, when the disk is mounted.
    fn create(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        Layer::of(spec).create_dir()
    }

    /// Limits first (cgroup, disk), then the VMM; a start that fails takes
    /// its limits back down, so nothing stays mounted or made.
    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        self.start_with(spec, |cgroup| self.launch(spec, cgroup))
    }

    fn memory_snapshots(&self) -> bool {
        true
    }

    async fn snapshot_memory(
        &self,
        spec: &WorkspaceSpec,
        files: &crate::snapshots::Files,
        id: &str,
    ) -> Result<crate::snapshots::MemoryParts, BackendError> {
        self.take_memory(spec, files, id).await
    }

    /// Like [`Backend::start`], with the snapshot's disks in place of the
    /// workspace's and the VMM restoring instead of booting.
    fn start_restored(
        &self,
        spec: &WorkspaceSpec,
        image: &crate::snapshots::MemoryImage,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        self.start_with(spec, |cgroup| self.launch_restored(spec, cgroup, image))
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
        Layer::of(spec).clean()?;
        self.release_limits(spec)
    }

    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        self.release_limits(spec)?;
        if spec.dir.exists() {
            std::fs::remove_dir_all(&spec.dir).map_err(io_err(&spec.dir))?;
        }
        Ok(())
    }

    /// Memory and CPU from the workspace's cgroup (the VMM and the guest's
    /// RAM; its limit is the cgroup's, RAM plus [`VMM_OVERHEAD`]), disk
    /// from its disk (the overlay).
    fn usage(&self, spec: &WorkspaceSpec) -> Usage {
        let mut usage = Usage::of_limits(&spec.limits.with_extra_memory(VMM_OVERHEAD));
        if let Ok(cgroup) = self.cgroup(spec) {
            let measured = cgroup.usage();
            usage.memory_bytes = measured.memory_bytes;
            usage.cpu_usage_usec = measured.cpu_usage_usec;
            usage.pids = measured.pids;
            usage.oom_kills = measured.oom_kills.unwrap_or(0);
        }
        usage.disk_used_bytes = Layer::of(spec).disk().used_bytes();
        usage
    }

    /// The VMM's vsock socket; its listener is the VMM, which is the top
    /// process itself (prlimit execs into it).
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
