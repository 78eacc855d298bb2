//! Turns a validated [`VmConfig`] into a ready-to-start [`Vmm`]: memory,
//! VM, kernel, boot information, devices and vCPUs. If any step fails,
//! every file it created is removed again.

use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kvm_ioctls::{IoEventAddress, Kvm, VmFd};
use linux_loader::loader::Cmdline;
use vm_memory::{GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use crate::arch::x86_64::layout::*;
use crate::arch::x86_64::{boot, cpuid, mptable, msr};
use crate::config::{ConfigError, VmConfig};
use crate::devices::EventFdTrigger;
use crate::devices::bus::{Bus, BusError};
use crate::devices::i8042::{I8042, I8042_BASE, I8042_LEN};
use crate::devices::serial::{COM1_BASE, COM1_IRQ, SerialDevice, SerialSnapshot};
use crate::devices::virtio::block::{Block, Disk, DiskError};
use crate::devices::virtio::mmio::MmioTransport;
use crate::devices::virtio::vsock::Vsock;
use crate::devices::virtio::{EventedDevice, Interrupt};
use crate::event_loop::Subscriber;
use crate::snapshot::memory::MemoryImage;
use crate::vmm::{DeviceStats, Vmm, VmmParts};
use crate::vstate::exit::{ExitSignal, ResetTrigger};
use crate::vstate::vcpu::{Vcpu, VcpuError, VcpuSetup};
use crate::vstate::{memory, vcpu_state, vm};

/// Errors while building a VM.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// /dev/kvm cannot be opened.
    #[error("cannot open /dev/kvm: load the kvm module and check its permissions")]
    Kvm(#[source] kvm_ioctls::Error),
    /// VM creation failed.
    #[error(transparent)]
    Vm(#[from] vm::VmError),
    /// Guest memory failed.
    #[error(transparent)]
    Memory(#[from] memory::MemoryError),
    /// Kernel or boot information failed.
    #[error(transparent)]
    Boot(#[from] boot::BootError),
    /// A file could not be opened or created.
    #[error("{what} {path}: cannot open or create it")]
    File {
        /// Which input.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A disk could not be opened.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// Two devices collided on a bus.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// An eventfd, irqfd or ioeventfd failed.
    #[error("cannot wire {what}")]
    Wiring {
        /// What was being wired.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The command line is too long or malformed.
    #[error("kernel command line: {0}; shorten it")]
    Cmdline(String),
    /// MP table failed.
    #[error(transparent)]
    Mptable(#[from] mptable::MptableError),
    /// CPUID failed.
    #[error(transparent)]
    Cpuid(#[from] cpuid::CpuidError),
    /// MSR list failed.
    #[error(transparent)]
    Msr(#[from] msr::MsrError),
    /// vCPU setup failed.
    #[error(transparent)]
    Vcpu(#[from] VcpuError),
    /// A snapshot cannot be restored.
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
}

/// Files created while building, removed if the build fails.
#[derive(Default)]
pub struct CreatedFiles(pub Vec<PathBuf>);

impl Drop for CreatedFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn wiring(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let what = what.into();
    move |source| BuildError::Wiring { what, source }
}

fn eventfd(what: &str) -> Result<EventFd, BuildError> {
    EventFd::new(libc::EFD_NONBLOCK).map_err(wiring(what))
}

/// Everything devices need while being added.
struct DeviceWiring<'a> {
    vm: &'a VmFd,
    guest: &'a GuestMemoryMmap,
    mmio: Bus,
    cmdline: Cmdline,
    subscribers: Vec<Subscriber>,
    transports: Vec<Arc<Mutex<MmioTransport>>>,
    next_slot: u32,
}

impl DeviceWiring<'_> {
    /// Puts `device` in the next MMIO window with its own IRQ and queue ioeventfds.
    fn add<D: EventedDevice + 'static>(
        &mut self,
        device: D,
        queue_evts: &[EventFd],
    ) -> Result<Arc<Mutex<D>>, BuildError> {
        let slot = self.next_slot;
        self.next_slot += 1;
        let base = VIRTIO_MMIO_START + u64::from(slot) * VIRTIO_MMIO_SIZE;
        let irq = FIRST_DEVICE_IRQ + slot;
        let irqfd = eventfd("a virtio interrupt")?;
        self.vm
            .register_irqfd(&irqfd, irq)
            .map_err(|e| BuildError::Wiring {
                what: format!("irqfd for IRQ {irq}"),
                source: e.into(),
            })?;
        for (i, evt) in queue_evts.iter().enumerate() {
            let addr = IoEventAddress::Mmio(base + 0x50);
            self.vm
                .register_ioevent(evt, &addr, i as u32)
                .map_err(|e| BuildError::Wiring {
                    what: format!("queue {i} notifications at {base:#x}"),
                    source: e.into(),
                })?;
        }
        let device = Arc::new(Mutex::new(device));
        let interrupt = Arc::new(Interrupt::new(irqfd));
        let transport = Arc::new(Mutex::new(MmioTransport::new(
            device.clone(),
            self.guest.clone(),
            interrupt,
        )));
        self.mmio
            .insert(base, VIRTIO_MMIO_SIZE, transport.clone())?;
        self.transports.push(transport);
        self.cmdline
            .add_virtio_mmio_device(VIRTIO_MMIO_SIZE, GuestAddress(base), irq, None)
            .map_err(|e| BuildError::Cmdline(e.to_string()))?;
        self.subscribers.push(device.clone());
        Ok(device)
    }
}

/// Options that are not part of the VM's configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildOptions {
    /// Install seccomp filters on the vCPU and device threads.
    pub seccomp: bool,
    /// Test hook: a vCPU calls a forbidden syscall after its filter is in
    /// place (proves the filter kills the process).
    pub forbidden_syscall_test: bool,
}

/// Builds a VM from `config`.
pub fn build(config: &VmConfig, options: BuildOptions) -> Result<Vmm, BuildError> {
    config.validate()?;
    let mut created = CreatedFiles::default();
    let kvm = Kvm::new().map_err(BuildError::Kvm)?;
    let vm_fd = vm::create(&kvm)?;
    let guest = memory::create(config.memory_mib)?;
    memory::register(&vm_fd, &guest)?;
    let kernel = load_kernel(config, &guest)?;
    let devices = Devices::wire(config, &vm_fd, &guest, None, &mut created)?;
    boot::write_boot_info(
        &guest,
        &kernel.0,
        &devices.cmdline,
        kernel.1,
        config.memory_mib << 20,
    )?;
    mptable::setup(&guest, config.vcpus)?;
    let vcpus = create_vcpus(&kvm, &vm_fd, &guest, config, kernel.0.entry)?;
    let msr_indices = vcpu_state::msr_list(&kvm).map_err(msr::MsrError::IndexList)?;
    created.0.clear();
    let kvm = KvmParts {
        guest,
        vm: vm_fd,
        vcpus,
        msr_indices,
        memory_base: None,
    };
    Ok(devices.into_vmm(config, kvm, options))
}

/// A VM's devices, wired to its VM and memory: the buses, the virtio
/// transports, COM1, and what the event loop serves.
pub(crate) struct Devices {
    pio: Bus,
    mmio: Bus,
    pub(crate) cmdline: Cmdline,
    pub(crate) transports: Vec<Arc<Mutex<MmioTransport>>>,
    serial: Arc<Mutex<SerialDevice>>,
    exit: Arc<ExitSignal>,
    subscribers: Vec<Subscriber>,
    stats: DeviceStats,
}

impl Devices {
    /// Creates every device `config` names (COM1 with `serial`'s registers
    /// when restoring) in the order that gives each its MMIO slot.
    pub(crate) fn wire(
        config: &VmConfig,
        vm: &VmFd,
        guest: &GuestMemoryMmap,
        serial: Option<&SerialSnapshot>,
        created: &mut CreatedFiles,
    ) -> Result<Devices, BuildError> {
        let exit = Arc::new(ExitSignal::new(eventfd("the exit event")?));
        let (pio, serial) = legacy_devices(config, vm, &exit, serial, created)?;
        let cmdline = Cmdline::try_from(&config.cmdline, CMDLINE_MAX_SIZE)
            .map_err(|e| BuildError::Cmdline(e.to_string()))?;
        let mut wiring = DeviceWiring {
            vm,
            guest,
            mmio: Bus::default(),
            cmdline,
            subscribers: vec![],
            transports: vec![],
            next_slot: 0,
        };
        let stats = add_virtio_devices(config, &mut wiring, created)?;
        Ok(Devices {
            pio,
            mmio: wiring.mmio,
            cmdline: wiring.cmdline,
            transports: wiring.transports,
            serial,
            exit,
            subscribers: wiring.subscribers,
            stats,
        })
    }

    /// Each disk's id and size in bytes.
    pub(crate) fn disk_sizes(&self) -> Vec<(String, u64)> {
        self.stats
            .blocks
            .iter()
            .map(|(id, b)| {
                let size = b
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .disk_size();
                (id.clone(), size)
            })
            .collect()
    }

    /// The VM, ready to start.
    pub(crate) fn into_vmm(self, config: &VmConfig, kvm: KvmParts, options: BuildOptions) -> Vmm {
        let sockets = config.vsock.iter().map(|v| v.uds_path.clone()).collect();
        Vmm::new(VmmParts {
            guest: kvm.guest,
            vm: kvm.vm,
            vcpus: kvm.vcpus,
            pio: self.pio,
            mmio: self.mmio,
            exit: self.exit,
            subscribers: self.subscribers,
            stats: self.stats,
            sockets,
            options,
            config: config.clone(),
            transports: self.transports,
            serial: self.serial,
            msr_indices: kvm.msr_indices,
            memory_base: kvm.memory_base,
        })
    }
}

/// The KVM side of a built VM: memory, the VM, its vCPUs.
pub(crate) struct KvmParts {
    pub(crate) guest: GuestMemoryMmap,
    pub(crate) vm: VmFd,
    pub(crate) vcpus: Vec<Vcpu>,
    /// The MSRs a snapshot reads.
    pub(crate) msr_indices: Vec<u32>,
    /// The full memory image guest memory is mapped from (a restored VM).
    pub(crate) memory_base: Option<MemoryImage>,
}

fn load_kernel(
    config: &VmConfig,
    guest: &GuestMemoryMmap,
) -> Result<(boot::LoadedKernel, Option<boot::InitrdRange>), BuildError> {
    let mut file = open(&config.kernel, "kernel")?;
    let kernel = boot::load_kernel(guest, &mut file)?;
    let Some(path) = &config.initrd else {
        return Ok((kernel, None));
    };
    let mut initrd = open(path, "initrd")?;
    let size = initrd
        .metadata()
        .map_err(|source| BuildError::File {
            what: "initrd",
            path: path.clone(),
            source,
        })?
        .len();
    let range = boot::load_initrd(
        guest,
        kernel.end,
        config.low_memory_bytes(),
        &mut initrd,
        size,
    )?;
    Ok((kernel, Some(range)))
}

fn open(path: &Path, what: &'static str) -> Result<File, BuildError> {
    File::open(path).map_err(|source| BuildError::File {
        what,
        path: path.into(),
        source,
    })
}

fn legacy_devices(
    config: &VmConfig,
    vm: &VmFd,
    exit: &Arc<ExitSignal>,
    saved: Option<&SerialSnapshot>,
    created: &mut CreatedFiles,
) -> Result<(Bus, Arc<Mutex<SerialDevice>>), BuildError> {
    let out = serial_output(config, created)?;
    let serial_irq = eventfd("the COM1 interrupt")?;
    vm.register_irqfd(&serial_irq, COM1_IRQ)
        .map_err(|e| BuildError::Wiring {
            what: "the COM1 irqfd".into(),
            source: e.into(),
        })?;
    let irq = EventFdTrigger(serial_irq);
    let serial = match saved {
        None => SerialDevice::new(irq, out),
        Some(saved) => SerialDevice::restored(saved, irq, out).ok_or_else(|| {
            crate::snapshot::SnapshotError::Damaged("its COM1 holds more input than a FIFO".into())
        })?,
    };
    let serial = Arc::new(Mutex::new(serial));
    // The i8042 holds nothing across a snapshot but its reset command.
    let i8042 = I8042::new(ResetTrigger(exit.clone()));
    let mut pio = Bus::default();
    pio.insert(COM1_BASE, 8, serial.clone())?;
    pio.insert(I8042_BASE, I8042_LEN, Arc::new(Mutex::new(i8042)))?;
    Ok((pio, serial))
}

fn serial_output(
    config: &VmConfig,
    created: &mut CreatedFiles,
) -> Result<Box<dyn Write + Send>, BuildError> {
    let Some(path) = &config.serial_log else {
        let fd = std::io::stdout().lock();
        let owned = std::os::fd::AsFd::as_fd(&fd)
            .try_clone_to_owned()
            .map_err(wiring("stdout for the serial console"))?;
        return Ok(Box::new(File::from(owned)));
    };
    if !path.exists() {
        created.0.push(path.clone());
    }
    // Emptied, then appended to: after `CappedLog` truncates it, writes
    // land at its start with no seek.
    let file = File::create(path)
        .and_then(|_| std::fs::OpenOptions::new().append(true).open(path))
        .map_err(|source| BuildError::File {
            what: "serial_log",
            path: path.clone(),
            source,
        })?;
    Ok(Box::new(CappedLog::new(file, SERIAL_LOG_MAX)))
}

/// The most a guest's console log holds: a guest printing without end
/// must not fill the host's disk.
const SERIAL_LOG_MAX: u64 = 8 << 20;

/// A log file (opened to append) that starts over, with a line saying so,
/// each time it reaches `max` bytes, so it keeps what the guest said last.
/// Written from vCPU threads: `ftruncate` is in their seccomp filter.
struct CappedLog {
    file: File,
    written: u64,
    max: u64,
}

impl CappedLog {
    fn new(file: File, max: u64) -> Self {
        Self {
            file,
            written: 0,
            max,
        }
    }
}

impl Write for CappedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.max {
            self.file.set_len(0)?;
            let note = b"[cubicle-vmm: the console log reached its cap; earlier output dropped]\n";
            self.file.write_all(note)?;
            self.written = note.len() as u64;
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

fn add_virtio_devices(
    config: &VmConfig,
    wiring: &mut DeviceWiring<'_>,
    created: &mut CreatedFiles,
) -> Result<DeviceStats, BuildError> {
    let mut stats = DeviceStats::default();
    for d in &config.disks {
        let disk = Disk::open(&d.path, d.read_only, d.overlay.as_deref())?;
        let evt = eventfd("a block queue")?;
        let block = Block::new(
            d.id.clone(),
            disk,
            evt.try_clone().map_err(wiring_err("a block queue"))?,
        );
        stats
            .blocks
            .push((d.id.clone(), wiring.add(block, &[evt])?));
    }
    if let Some(v) = &config.vsock {
        let listener = UnixListener::bind(&v.uds_path).map_err(|source| BuildError::File {
            what: "vsock uds_path",
            path: v.uds_path.clone(),
            source,
        })?;
        created.0.push(v.uds_path.clone());
        let evts = [
            eventfd("a vsock queue")?,
            eventfd("a vsock queue")?,
            eventfd("a vsock queue")?,
        ];
        let clones = evts
            .iter()
            .map(|e| e.try_clone())
            .collect::<Result<Vec<_>, _>>()
            .map_err(wiring_err("vsock queues"))?;
        let vsock = Vsock::new(u64::from(v.guest_cid), &v.uds_path, listener, clones)
            .map_err(wiring_err("the vsock listener"))?;
        stats.vsock = Some(wiring.add(vsock, &evts)?);
    }
    Ok(stats)
}

fn wiring_err(what: &str) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Wiring {
        what: what.to_string(),
        source,
    }
}

fn create_vcpus(
    kvm: &Kvm,
    vm: &VmFd,
    guest: &GuestMemoryMmap,
    config: &VmConfig,
    entry: crate::arch::x86_64::regs::EntryPoint,
) -> Result<Vec<Vcpu>, BuildError> {
    let cpuid = cpuid::supported(kvm)?;
    let msrs = msr::boot_msrs(kvm)?;
    let setup = VcpuSetup {
        cpuid: &cpuid,
        msrs: &msrs,
        count: config.vcpus,
        entry,
    };
    (0..config.vcpus)
        .map(|i| {
            let vcpu = Vcpu::create(vm, i)?;
            vcpu.configure(guest, &setup)?;
            Ok(vcpu)
        })
        .collect()
}

#[cfg(test)]
mod capped_log_tests {
    use super::*;

    #[test]
    fn a_console_that_never_stops_stays_under_its_cap_and_keeps_the_latest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("serial.log");
        File::create(&path).expect("create");
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        let mut log = CappedLog::new(file, 1000);
        for i in 0..500 {
            writeln!(log, "line {i}").expect("write");
        }
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.len() <= 1000, "{} bytes", text.len());
        assert!(text.starts_with("[cubicle-vmm: the console log reached its cap"));
        assert!(text.ends_with("line 499\n"), "{text}");
    }
}
