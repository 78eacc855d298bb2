//! A vCPU: configuration (CPUID, MSRs, LAPIC, boot registers) and the run
//! loop that dispatches port I/O and MMIO exits to the device buses.

use std::sync::{Arc, Mutex, PoisonError};

use kvm_bindings::{CpuId, kvm_msr_entry, kvm_xcrs};
use kvm_ioctls::{VcpuExit, VcpuFd, VmFd};
use vm_memory::GuestMemoryMmap;

use super::exit::{ExitReason, ExitSignal};
use super::run_control::RunControl;
use super::vcpu_state::{VcpuState, VcpuStateError};
use crate::arch::x86_64::regs::{self, EntryPoint, RegsError};
use crate::arch::x86_64::{cpuid, msr};
use crate::devices::bus::Bus;
use crate::metrics::{ExitCounters, ExitKind};

/// Errors while creating or configuring a vCPU.
#[derive(Debug, thiserror::Error)]
pub enum VcpuError {
    /// KVM_CREATE_VCPU failed.
    #[error("cannot create vCPU {index}")]
    Create {
        /// vCPU index.
        index: u8,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// KVM refused the CPUID.
    #[error("KVM refused the CPUID of vCPU {index}")]
    Cpuid {
        /// vCPU index.
        index: u8,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// KVM refused the initial XCR0.
    #[error("KVM refused the initial XCR0 of vCPU {index}")]
    Xcr0 {
        /// vCPU index.
        index: u8,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// MSR setup failed.
    #[error("cannot set the boot MSRs of vCPU {index}")]
    Msr {
        /// vCPU index.
        index: u8,
        /// The MSR error.
        #[source]
        source: msr::MsrError,
    },
    /// LAPIC setup failed.
    #[error("cannot set up the local APIC of vCPU {index}")]
    Lapic {
        /// vCPU index.
        index: u8,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// Register setup failed.
    #[error("cannot set the boot registers")]
    Regs(#[from] RegsError),
}

/// What a vCPU's run loop shares with the VMM.
pub struct RunContext {
    /// Port I/O devices.
    pub pio: Arc<Bus>,
    /// MMIO devices.
    pub mmio: Arc<Bus>,
    /// Run/pause/stop coordination.
    pub control: Arc<RunControl>,
    /// Exit counters.
    pub exits: Arc<ExitCounters>,
    /// How the VM asks to stop.
    pub exit: Arc<ExitSignal>,
    /// Where each parked vCPU puts its state when a snapshot asks (by index).
    pub saved: Vec<Mutex<Option<Result<VcpuState, VcpuStateError>>>>,
    /// The MSRs a snapshot reads.
    pub msr_indices: Vec<u32>,
}

/// One vCPU.
pub struct Vcpu {
    fd: VcpuFd,
    index: u8,
}

/// What every vCPU is configured with.
pub struct VcpuSetup<'a> {
    /// Host-supported CPUID (filtered per vCPU).
    pub cpuid: &'a CpuId,
    /// Boot MSRs KVM accepts.
    pub msrs: &'a [kvm_msr_entry],
    /// Number of vCPUs.
    pub count: u8,
    /// Boot vCPU entry.
    pub entry: EntryPoint,
}

impl Vcpu {
    /// Creates vCPU `index`.
    pub fn create(vm: &VmFd, index: u8) -> Result<Vcpu, VcpuError> {
        let fd = vm
            .create_vcpu(u64::from(index))
            .map_err(|source| VcpuError::Create { index, source })?;
        Ok(Vcpu { fd, index })
    }

    /// Sets CPUID, MSRs, LAPIC and (for the boot vCPU) the entry registers.
    pub fn configure(
        &self,
        guest: &GuestMemoryMmap,
        setup: &VcpuSetup<'_>,
    ) -> Result<(), VcpuError> {
        let index = self.index;
        let mut cpuid = setup.cpuid.clone();
        cpuid::filter_for_vcpu(&mut cpuid, index, setup.count);
        self.fd
            .set_cpuid2(&cpuid)
            .map_err(|source| VcpuError::Cpuid { index, source })?;
        self.set_xcr0(cpuid::initial_xcr0(&cpuid))
            .map_err(|source| VcpuError::Xcr0 { index, source })?;
        msr::set(&self.fd, setup.msrs).map_err(|source| VcpuError::Msr { index, source })?;
        self.setup_lint()
            .map_err(|source| VcpuError::Lapic { index, source })?;
        regs::setup_fpu(&self.fd)?;
        if index == 0 {
            regs::setup_regs(&self.fd, setup.entry)?;
            regs::setup_sregs(guest, &self.fd, setup.entry.protocol)?;
        }
        Ok(())
    }

    /// Sets XCR0 (see [`cpuid::initial_xcr0`]); 0 leaves it as KVM reset it.
    fn set_xcr0(&self, xcr0: u64) -> Result<(), kvm_ioctls::Error> {
        if xcr0 == 0 {
            return Ok(());
        }
        let mut xcrs = kvm_xcrs {
            nr_xcrs: 1,
            ..Default::default()
        };
        xcrs.xcrs[0].xcr = 0;
        xcrs.xcrs[0].value = xcr0;
        self.fd.set_xcrs(&xcrs)
    }

    /// LINT0 as ExtINT (the PIC) and LINT1 as NMI, as Linux expects.
    fn setup_lint(&self) -> Result<(), kvm_ioctls::Error> {
        let mut lapic = self.fd.get_lapic()?;
        for (offset, mode) in [(0x350usize, 7u32), (0x360, 4)] {
            let bytes: Vec<u8> = lapic.regs[offset..offset + 4]
                .iter()
                .map(|b| *b as u8)
                .collect();
            let value = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let value = (value & !0x700) | (mode << 8);
            for (dst, src) in lapic.regs[offset..offset + 4]
                .iter_mut()
                .zip(value.to_le_bytes())
            {
                *dst = src as _;
            }
        }
        self.fd.set_lapic(&lapic)
    }

    /// This vCPU's index.
    pub fn index(&self) -> u8 {
        self.index
    }

    /// The vCPU's KVM handle (for restoring its state before it runs).
    pub fn fd(&self) -> &VcpuFd {
        &self.fd
    }

    /// Runs until told to stop or the guest exits; while parked, saves its
    /// state when a snapshot asks.
    pub fn run(mut self, ctx: &RunContext) {
        while ctx.control.may_run(|| self.save_into(ctx)) {
            if let Some(reason) = self.run_once(ctx) {
                ctx.exit.request(reason);
            }
            if ctx.exit.requested() {
                break;
            }
        }
        ctx.control.exited();
    }

    fn save_into(&self, ctx: &RunContext) {
        let state = VcpuState::save(&self.fd, self.index, &ctx.msr_indices);
        if let Some(slot) = ctx.saved.get(usize::from(self.index)) {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
        }
    }

    fn run_once(&mut self, ctx: &RunContext) -> Option<ExitReason> {
        let exit = match self.fd.run() {
            Ok(exit) => exit,
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                ctx.exits.count(ExitKind::Interrupted);
                return None;
            }
            Err(e) => {
                return Some(ExitReason::Failed(format!(
                    "KVM_RUN failed on vCPU {}: {e}",
                    self.index
                )));
            }
        };
        match handle_exit(exit, ctx, self.index) {
            Some(ExitReason::TripleFault(_)) => Some(ExitReason::TripleFault(self.crash_state())),
            other => other,
        }
    }

    /// Where the guest was when it crashed (for the VMM's log): the
    /// instruction, stack and paging registers tell a kernel bug from a
    /// VMM one. KVM_GET_REGS and KVM_GET_SREGS are in the vCPU threads'
    /// seccomp filter for this.
    fn crash_state(&self) -> String {
        let (Ok(regs), Ok(sregs)) = (self.fd.get_regs(), self.fd.get_sregs()) else {
            return format!(" on vCPU {} (its registers cannot be read)", self.index);
        };
        format!(
            " on vCPU {} at rip={:#x} rsp={:#x} rflags={:#x} cs={:#x} cr0={:#x} cr2={:#x} cr3={:#x} cr4={:#x} efer={:#x}",
            self.index,
            regs.rip,
            regs.rsp,
            regs.rflags,
            sregs.cs.selector,
            sregs.cr0,
            sregs.cr2,
            sregs.cr3,
            sregs.cr4,
            sregs.efer
        )
    }
}

fn handle_exit(exit: VcpuExit<'_>, ctx: &RunContext, index: u8) -> Option<ExitReason> {
    let (kind, reason) = match exit {
        VcpuExit::IoIn(port, data) => {
            if !ctx.pio.read(u64::from(port), data) {
                data.fill(0xff);
            }
            (ExitKind::IoIn, None)
        }
        VcpuExit::IoOut(port, data) => {
            ctx.pio.write(u64::from(port), data);
            (ExitKind::IoOut, None)
        }
        VcpuExit::MmioRead(addr, data) => {
            if !ctx.mmio.read(addr, data) {
                data.fill(0);
            }
            (ExitKind::MmioRead, None)
        }
        VcpuExit::MmioWrite(addr, data) => {
            ctx.mmio.write(addr, data);
            (ExitKind::MmioWrite, None)
        }
        VcpuExit::Hlt => (ExitKind::Hlt, None),
        VcpuExit::Shutdown => (
            ExitKind::Shutdown,
            Some(ExitReason::TripleFault(String::new())),
        ),
        VcpuExit::SystemEvent(kind, _) => (ExitKind::SystemEvent, Some(system_event(kind))),
        VcpuExit::FailEntry(reason, cpu) => {
            let why = format!("KVM entry failed on vCPU {cpu}: hardware reason {reason:#x}");
            (ExitKind::Failure, Some(ExitReason::Failed(why)))
        }
        VcpuExit::InternalError => {
            let why = format!(
                "KVM internal error on vCPU {index} (the guest hit an instruction KVM cannot emulate)"
            );
            (ExitKind::Failure, Some(ExitReason::Failed(why)))
        }
        _ => (ExitKind::Other, None),
    };
    ctx.exits.count(kind);
    reason
}

fn system_event(kind: u32) -> ExitReason {
    match kind {
        kvm_bindings::KVM_SYSTEM_EVENT_RESET => ExitReason::GuestReset,
        kvm_bindings::KVM_SYSTEM_EVENT_SHUTDOWN => ExitReason::GuestShutdown,
        other => ExitReason::Failed(format!("unexpected KVM system event {other}")),
    }
}
