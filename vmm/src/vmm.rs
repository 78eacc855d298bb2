//! [`Vmm`]: one built VM and the threads that run it — a thread per vCPU
//! and one device event thread — with start, pause, resume, stop and metrics.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use kvm_ioctls::VmFd;
use serde::Serialize;
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::signal::{Killable, SIGRTMIN, register_signal_handler};

use crate::builder::BuildOptions;
use crate::config::VmConfig;
use crate::devices::bus::Bus;
use crate::devices::serial::SerialDevice;
use crate::devices::virtio::block::Block;
use crate::devices::virtio::block::device::BlockStats;
use crate::devices::virtio::mmio::MmioTransport;
use crate::devices::virtio::vsock::Vsock;
use crate::devices::virtio::vsock::device::VsockStats;
use crate::event_loop::{EventLoop, EventLoopError, Subscriber};
use crate::hardening::{self, ThreadKind};
use crate::metrics::{ExitCounters, MemoryReport, memory_report};
use crate::snapshot::memory::{MemoryImage, Pages};
use crate::snapshot::{self, Snapshot, SnapshotError, SnapshotInfo};
use crate::vstate::exit::{ExitReason, ExitSignal};
use crate::vstate::memory;
use crate::vstate::run_control::{RunControl, Target};
use crate::vstate::vcpu::{RunContext, Vcpu};
use crate::vstate::vcpu_state::VcpuState;
use crate::vstate::vm::VmKvmState;

/// Errors from a running VM's life cycle.
#[derive(Debug, thiserror::Error)]
pub enum VmmError {
    /// The action does not fit the VM's state.
    #[error("cannot {action} a VM that is {state}")]
    State {
        /// What was asked.
        action: &'static str,
        /// The current state.
        state: &'static str,
    },
    /// A vCPU thread could not be spawned.
    #[error("cannot spawn a vCPU thread")]
    Spawn(#[source] std::io::Error),
    /// The kick signal handler could not be installed.
    #[error("cannot install the vCPU kick signal handler")]
    Signal(#[source] vmm_sys_util::errno::Error),
    /// The device thread failed to start.
    #[error(transparent)]
    EventLoop(#[from] EventLoopError),
}

/// Handles on devices for metrics.
#[derive(Default)]
pub struct DeviceStats {
    /// Block devices by id.
    pub blocks: Vec<(String, Arc<Mutex<Block>>)>,
    /// The vsock device.
    pub vsock: Option<Arc<Mutex<Vsock>>>,
}

/// What the builder hands over.
pub struct VmmParts {
    /// Guest memory.
    pub guest: GuestMemoryMmap,
    /// The VM.
    pub vm: VmFd,
    /// Configured vCPUs.
    pub vcpus: Vec<Vcpu>,
    /// Port I/O bus.
    pub pio: Bus,
    /// MMIO bus.
    pub mmio: Bus,
    /// How the VM asks to stop.
    pub exit: Arc<ExitSignal>,
    /// Devices for the event loop.
    pub subscribers: Vec<Subscriber>,
    /// Device handles for metrics.
    pub stats: DeviceStats,
    /// Unix sockets to remove at exit.
    pub sockets: Vec<PathBuf>,
    /// Build options.
    pub options: BuildOptions,
    /// The configuration it was built from (a snapshot keeps it).
    pub config: VmConfig,
    /// virtio-mmio transports, by slot.
    pub transports: Vec<Arc<Mutex<MmioTransport>>>,
    /// COM1.
    pub serial: Arc<Mutex<SerialDevice>>,
    /// The MSRs a snapshot reads.
    pub msr_indices: Vec<u32>,
    /// The full memory image guest memory is mapped from (a restored VM).
    pub memory_base: Option<MemoryImage>,
}

/// Life-cycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VmState {
    /// Built, not started.
    Ready,
    /// vCPUs running.
    Running,
    /// vCPUs parked.
    Paused,
    /// Stopped.
    Stopped,
}

impl VmState {
    fn name(self) -> &'static str {
        match self {
            VmState::Ready => "not started",
            VmState::Running => "running",
            VmState::Paused => "paused",
            VmState::Stopped => "stopped",
        }
    }
}

/// Metrics as the API returns them.
#[derive(Debug, Serialize)]
pub struct Metrics {
    /// Life-cycle state.
    pub state: VmState,
    /// vCPU exits by reason.
    pub exits: std::collections::BTreeMap<&'static str, u64>,
    /// Memory use.
    pub memory: MemoryReport,
    /// Block device counters by id.
    pub block: std::collections::BTreeMap<String, BlockCounters>,
    /// vsock counters.
    pub vsock: Option<VsockCounters>,
}

/// Block counters for the API.
#[derive(Debug, Serialize)]
pub struct BlockCounters {
    /// Completed requests.
    pub ok: u64,
    /// Requests answered with an error.
    pub failed: u64,
    /// Malformed chains.
    pub bad_chains: u64,
}

/// vsock counters for the API.
#[derive(Debug, Serialize)]
pub struct VsockCounters {
    /// Packets to the guest.
    pub rx_packets: u64,
    /// Packets from the guest.
    pub tx_packets: u64,
    /// Refused packets.
    pub bad_packets: u64,
}

/// A VM and its threads. Read this type first.
pub struct Vmm {
    guest: GuestMemoryMmap,
    vm: VmFd,
    config: VmConfig,
    transports: Vec<Arc<Mutex<MmioTransport>>>,
    serial: Arc<Mutex<SerialDevice>>,
    memory_base: Option<MemoryImage>,
    vcpus: Vec<Vcpu>,
    threads: Vec<JoinHandle<()>>,
    ctx: Arc<RunContext>,
    subscribers: Vec<Subscriber>,
    event_loop: Option<EventLoop>,
    stats: DeviceStats,
    sockets: Vec<PathBuf>,
    options: BuildOptions,
    state: VmState,
}

extern "C" fn kick_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

/// The signal that kicks vCPUs out of KVM_RUN.
fn kick_signal() -> libc::c_int {
    SIGRTMIN()
}

impl Vmm {
    /// Assembles a VM from built parts.
    pub fn new(p: VmmParts) -> Vmm {
        let ctx = RunContext {
            pio: Arc::new(p.pio),
            mmio: Arc::new(p.mmio),
            control: Arc::new(RunControl::new(p.vcpus.len())),
            exits: Arc::new(ExitCounters::default()),
            exit: p.exit,
            saved: (0..p.vcpus.len()).map(|_| Mutex::new(None)).collect(),
            msr_indices: p.msr_indices,
        };
        Vmm {
            guest: p.guest,
            vm: p.vm,
            config: p.config,
            transports: p.transports,
            serial: p.serial,
            memory_base: p.memory_base,
            vcpus: p.vcpus,
            threads: Vec::new(),
            ctx: Arc::new(ctx),
            subscribers: p.subscribers,
            event_loop: None,
            stats: p.stats,
            sockets: p.sockets,
            options: p.options,
            state: VmState::Ready,
        }
    }

    /// The eventfd signalled when the guest exits (reset, shutdown, failure).
    pub fn exit_event(&self) -> &EventFd {
        self.ctx.exit.event()
    }

    /// The current state.
    pub fn state(&self) -> VmState {
        self.state
    }

    /// Starts the device thread and every vCPU.
    pub fn start(&mut self) -> Result<(), VmmError> {
        self.expect_state("start", VmState::Ready)?;
        register_signal_handler(kick_signal(), kick_handler).map_err(VmmError::Signal)?;
        let subscribers = std::mem::take(&mut self.subscribers);
        self.event_loop = Some(EventLoop::start(subscribers, self.options.seccomp)?);
        for vcpu in self.vcpus.drain(..) {
            let ctx = self.ctx.clone();
            let options = self.options;
            let name = format!("vcpu{}", vcpu.index());
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || vcpu_thread(vcpu, &ctx, options))
                .map_err(VmmError::Spawn)?;
            self.threads.push(thread);
        }
        self.state = VmState::Running;
        Ok(())
    }

    fn expect_state(&self, action: &'static str, want: VmState) -> Result<(), VmmError> {
        if self.state != want {
            return Err(VmmError::State {
                action,
                state: self.state.name(),
            });
        }
        Ok(())
    }

    fn kick_all(&self) {
        for t in &self.threads {
            // A thread that already exited cannot be signalled; that is fine.
            let _ = t.kill(kick_signal());
        }
    }

    /// Parks every vCPU (returns once they are all out of the guest).
    pub fn pause(&mut self) -> Result<(), VmmError> {
        self.expect_state("pause", VmState::Running)?;
        self.ctx.control.set(Target::Pause, || self.kick_all());
        self.state = VmState::Paused;
        Ok(())
    }

    /// Resumes parked vCPUs.
    pub fn resume(&mut self) -> Result<(), VmmError> {
        self.expect_state("resume", VmState::Paused)?;
        self.ctx.control.set(Target::Run, || {});
        self.state = VmState::Running;
        Ok(())
    }

    /// Writes a snapshot of the paused VM: its state to `state_path` and
    /// its memory to `memory_path` (see [`crate::snapshot`]); with `pages`
    /// [`Pages::Dirty`], only what it wrote since it was restored. The VM
    /// stays paused; on an error neither file is left.
    pub fn snapshot(
        &mut self,
        state_path: &Path,
        memory_path: &Path,
        pages: Pages,
    ) -> Result<SnapshotInfo, SnapshotError> {
        if self.state != VmState::Paused {
            return Err(SnapshotError::NotPaused(self.state.name()));
        }
        if pages == Pages::Dirty && self.memory_base.is_none() {
            return Err(SnapshotError::NoDiff);
        }
        for path in [state_path, memory_path] {
            if path.exists() {
                return Err(SnapshotError::Exists(path.to_path_buf()));
            }
        }
        let partial = snapshot::partial_name(memory_path);
        let _ = std::fs::remove_file(&partial);
        let result = self.write_snapshot(state_path, memory_path, &partial, pages);
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }

    fn write_snapshot(
        &mut self,
        state_path: &Path,
        memory_path: &Path,
        partial: &Path,
        pages: Pages,
    ) -> Result<SnapshotInfo, SnapshotError> {
        let vcpus = self.save_vcpus()?;
        // The transports, then their devices (the order a vCPU's MMIO exit
        // takes them in), stay locked until guest memory is on disk: the
        // event thread must not move a queue or write a buffer in between.
        let transports: Vec<_> = self.transports.iter().map(|t| lock(t)).collect();
        let devices: Vec<_> = transports.iter().map(|t| t.device()).collect();
        let guards: Vec<_> = devices.iter().map(|d| lock(d)).collect();
        let virtio = transports
            .iter()
            .zip(&guards)
            .map(|(t, device)| t.save(&**device))
            .collect();
        let serial = lock(&self.serial).save();
        let vm = VmKvmState::save(&self.vm)?;
        let mut memory =
            snapshot::memory::write(&self.guest, partial, pages, self.memory_base.as_ref())?;
        if pages == Pages::Dirty {
            memory.base = self.memory_base.clone().map(Box::new);
        }
        drop(guards);
        drop(transports);
        let disk_sizes = self
            .stats
            .blocks
            .iter()
            .map(|(id, b)| (id.clone(), lock(b).disk_size()))
            .collect();
        let state = Snapshot {
            vmm_version: env!("CARGO_PKG_VERSION").to_string(),
            config: self.config.clone(),
            disk_sizes,
            memory,
            vm,
            vcpus,
            serial,
            virtio,
        };
        snapshot::publish(partial, memory_path)?;
        state.write(state_path).inspect_err(|_| {
            let _ = std::fs::remove_file(memory_path);
        })
    }

    /// Has every parked vCPU read its own state, and collects them.
    fn save_vcpus(&self) -> Result<Vec<VcpuState>, SnapshotError> {
        for slot in &self.ctx.saved {
            *lock(slot) = None;
        }
        self.ctx.control.run_jobs();
        self.ctx
            .saved
            .iter()
            .enumerate()
            .map(|(i, slot)| match lock(slot).take() {
                Some(state) => Ok(state?),
                None => Err(SnapshotError::VcpuGone(i)),
            })
            .collect()
    }

    /// Stops the VM (idempotent) and returns why it stopped.
    pub fn stop(&mut self) -> ExitReason {
        if self.state == VmState::Running || self.state == VmState::Paused {
            self.ctx.control.set(Target::Stop, || self.kick_all());
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
            if let Some(mut l) = self.event_loop.take() {
                l.stop();
            }
        }
        self.state = VmState::Stopped;
        self.remove_sockets();
        self.ctx.exit.reason().unwrap_or(ExitReason::Stopped)
    }

    /// Blocks until the guest exits, then stops everything.
    pub fn wait(&mut self) -> ExitReason {
        // read() blocks only on a blocking eventfd; poll instead.
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(self.ctx.exit.event()),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd for the duration of the call.
        while unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {}
        self.stop()
    }

    fn remove_sockets(&mut self) {
        for s in self.sockets.drain(..) {
            let _ = std::fs::remove_file(s);
        }
    }

    /// Exit counters, memory, and device counters.
    pub fn metrics(&self) -> Metrics {
        let block = self.stats.blocks.iter().map(|(id, b)| {
            let s: BlockStats = b.lock().unwrap_or_else(PoisonError::into_inner).stats();
            (
                id.clone(),
                BlockCounters {
                    ok: s.ok,
                    failed: s.failed,
                    bad_chains: s.bad_chains,
                },
            )
        });
        let vsock = self.stats.vsock.as_ref().map(|v| {
            let s: VsockStats = v.lock().unwrap_or_else(PoisonError::into_inner).stats();
            VsockCounters {
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                bad_packets: s.bad_packets,
            }
        });
        Metrics {
            state: self.state,
            exits: self.ctx.exits.snapshot(),
            memory: memory_report(&memory::host_ranges(&self.guest)),
            block: block.collect(),
            vsock,
        }
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Vmm {
    fn drop(&mut self) {
        self.stop();
    }
}

fn vcpu_thread(vcpu: Vcpu, ctx: &RunContext, options: BuildOptions) {
    if options.seccomp {
        if let Err(e) = hardening::apply(ThreadKind::Vcpu) {
            eprintln!("cubicle-vmm: {e}; exiting rather than running unconfined");
            std::process::exit(3);
        }
        if options.forbidden_syscall_test {
            // SAFETY: getppid has no arguments and no memory effects; the
            // seccomp filter is expected to kill the process right here.
            unsafe { libc::getppid() };
        }
    }
    vcpu.run(ctx);
}
