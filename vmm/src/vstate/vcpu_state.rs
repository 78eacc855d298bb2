//! A vCPU's architectural state for snapshots: what KVM holds of it
//! (registers, FPU/XSAVE, control registers, LAPIC, MSRs, pending events,
//! CPUID, TSC frequency), read while the vCPU is parked and written back
//! into a fresh vCPU in the order KVM needs (CPUID first; the LAPIC before
//! the MSRs, so the TSC deadline lands on a LAPIC in deadline mode; the
//! pending events last, since setting registers can clear them).

use kvm_bindings::{
    CpuId, KVM_MAX_CPUID_ENTRIES, Msrs, kvm_cpuid_entry2, kvm_debugregs, kvm_lapic_state,
    kvm_mp_state, kvm_msr_entry, kvm_regs, kvm_sregs, kvm_vcpu_events, kvm_xcrs, kvm_xsave,
};
use kvm_ioctls::{Kvm, VcpuFd};
use serde::{Deserialize, Serialize};

/// Errors while saving or restoring a vCPU.
#[derive(Debug, thiserror::Error)]
pub enum VcpuStateError {
    /// A KVM get/set ioctl failed.
    #[error("KVM refused to {action} the {what} of vCPU {index}")]
    Kvm {
        /// "read" or "write".
        action: &'static str,
        /// Which state.
        what: &'static str,
        /// vCPU index.
        index: u8,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// KVM took fewer MSRs than the snapshot holds.
    #[error(
        "KVM accepted {set} of {wanted} MSRs of vCPU {index} (first refused: {first:#x}); \
         this host's KVM does not support every MSR the snapshot's host had"
    )]
    Msrs {
        /// vCPU index.
        index: u8,
        /// MSRs set.
        set: usize,
        /// MSRs in the snapshot.
        wanted: usize,
        /// The first MSR refused.
        first: u32,
    },
    /// An MSR or CPUID list does not fit KVM's array.
    #[error("vCPU {index}: the snapshot's {what} list is longer than KVM takes")]
    TooLong {
        /// vCPU index.
        index: u8,
        /// Which list.
        what: &'static str,
    },
}

/// Everything KVM holds of one vCPU.
#[derive(Serialize, Deserialize)]
pub struct VcpuState {
    /// The vCPU's index (its APIC ID).
    pub index: u8,
    /// The CPUID the guest sees.
    pub cpuid: Vec<kvm_cpuid_entry2>,
    /// Every MSR this host's KVM lists and could read.
    pub msrs: Vec<kvm_msr_entry>,
    /// General-purpose registers.
    pub regs: kvm_regs,
    /// Segment, control and descriptor-table registers.
    pub sregs: kvm_sregs,
    /// x87, SSE and extended state (XSAVE layout).
    pub xsave: kvm_xsave,
    /// Extended control registers (XCR0).
    pub xcrs: kvm_xcrs,
    /// Debug registers.
    pub debugregs: kvm_debugregs,
    /// The local APIC's registers.
    pub lapic: kvm_lapic_state,
    /// Running, halted, waiting for INIT/SIPI.
    pub mp_state: kvm_mp_state,
    /// Pending exceptions, interrupts and NMIs.
    pub events: kvm_vcpu_events,
    /// The guest's TSC frequency, where KVM tells it.
    pub tsc_khz: Option<u32>,
}

fn kvm_err(
    action: &'static str,
    what: &'static str,
    index: u8,
) -> impl FnOnce(kvm_ioctls::Error) -> VcpuStateError {
    move |source| VcpuStateError::Kvm {
        action,
        what,
        index,
        source,
    }
}

/// IA32_TSC_DEADLINE: written after IA32_TSC, or the deadline is read
/// against the old TSC.
const MSR_TSC_DEADLINE: u32 = 0x6e0;

/// The MSRs worth saving: every index KVM lists (the architectural ones it
/// saves and those it emulates, kvmclock's among them), the TSC deadline
/// last.
pub fn msr_list(kvm: &Kvm) -> Result<Vec<u32>, kvm_ioctls::Error> {
    let mut list = kvm.get_msr_index_list()?.as_slice().to_vec();
    list.sort_by_key(|&m| m == MSR_TSC_DEADLINE);
    Ok(list)
}

/// Reads `indices` from `fd`, leaving out those this KVM lists but cannot
/// read (KVM_GET_MSRS stops at the first such one: it is dropped and the
/// read goes on after it; PVM refuses a few).
fn read_msrs(
    fd: &VcpuFd,
    index: u8,
    indices: &[u32],
) -> Result<Vec<kvm_msr_entry>, VcpuStateError> {
    let mut out = Vec::with_capacity(indices.len());
    let mut rest = indices;
    while !rest.is_empty() {
        let chunk = &rest[..rest.len().min(kvm_bindings::KVM_MAX_MSR_ENTRIES)];
        let entries: Vec<kvm_msr_entry> = chunk
            .iter()
            .map(|&index| kvm_msr_entry {
                index,
                ..Default::default()
            })
            .collect();
        let mut msrs = Msrs::from_entries(&entries)
            .map_err(|_| VcpuStateError::TooLong { index, what: "MSR" })?;
        let read = fd
            .get_msrs(&mut msrs)
            .map_err(kvm_err("read", "MSRs", index))?;
        out.extend_from_slice(&msrs.as_slice()[..read]);
        // `read` entries came back; the next one (if any) is unreadable.
        let skip = if read < chunk.len() { read + 1 } else { read };
        rest = &rest[skip..];
    }
    Ok(out)
}

impl VcpuState {
    /// Reads the state of a parked vCPU.
    pub fn save(fd: &VcpuFd, index: u8, msr_indices: &[u32]) -> Result<Self, VcpuStateError> {
        let read = |what| kvm_err("read", what, index);
        // The MP state first: reading it settles a pending INIT/SIPI.
        let mp_state = fd.get_mp_state().map_err(read("MP state"))?;
        let regs = fd.get_regs().map_err(read("registers"))?;
        let sregs = fd.get_sregs().map_err(read("segment registers"))?;
        let xsave = fd.get_xsave().map_err(read("XSAVE area"))?;
        let xcrs = fd.get_xcrs().map_err(read("XCRs"))?;
        let debugregs = fd.get_debug_regs().map_err(read("debug registers"))?;
        let lapic = fd.get_lapic().map_err(read("local APIC"))?;
        let tsc_khz = fd.get_tsc_khz().ok();
        let msrs = read_msrs(fd, index, msr_indices)?;
        let events = fd.get_vcpu_events().map_err(read("pending events"))?;
        let cpuid = fd
            .get_cpuid2(KVM_MAX_CPUID_ENTRIES)
            .map_err(read("CPUID"))?
            .as_slice()
            .to_vec();
        Ok(VcpuState {
            index,
            cpuid,
            msrs,
            regs,
            sregs,
            xsave,
            xcrs,
            debugregs,
            lapic,
            mp_state,
            events,
            tsc_khz,
        })
    }

    /// Writes this state into a fresh vCPU that has run nothing.
    pub fn restore(&self, fd: &VcpuFd) -> Result<(), VcpuStateError> {
        let index = self.index;
        let write = |what| kvm_err("write", what, index);
        let cpuid = CpuId::from_entries(&self.cpuid).map_err(|_| VcpuStateError::TooLong {
            index,
            what: "CPUID",
        })?;
        fd.set_cpuid2(&cpuid).map_err(write("CPUID"))?;
        if let Some(khz) = self.tsc_khz
            && fd.get_tsc_khz().ok() != Some(khz)
        {
            // Without TSC scaling the guest's TSC runs at the host's rate;
            // Linux's kvmclock keeps its time right either way.
            let _ = fd.set_tsc_khz(khz);
        }
        fd.set_mp_state(self.mp_state).map_err(write("MP state"))?;
        fd.set_regs(&self.regs).map_err(write("registers"))?;
        fd.set_sregs(&self.sregs)
            .map_err(write("segment registers"))?;
        // SAFETY: `kvm_xsave` is the 4 KiB legacy area KVM_GET_XSAVE filled;
        // KVM_SET_XSAVE reads exactly that much from it.
        unsafe { fd.set_xsave(&self.xsave) }.map_err(write("XSAVE area"))?;
        fd.set_xcrs(&self.xcrs).map_err(write("XCRs"))?;
        fd.set_debug_regs(&self.debugregs)
            .map_err(write("debug registers"))?;
        fd.set_lapic(&self.lapic).map_err(write("local APIC"))?;
        let mut done = 0;
        for chunk in self.msrs.chunks(kvm_bindings::KVM_MAX_MSR_ENTRIES) {
            let msrs = Msrs::from_entries(chunk)
                .map_err(|_| VcpuStateError::TooLong { index, what: "MSR" })?;
            let set = fd.set_msrs(&msrs).map_err(write("MSRs"))?;
            if set != chunk.len() {
                return Err(VcpuStateError::Msrs {
                    index,
                    set: done + set,
                    wanted: self.msrs.len(),
                    first: chunk[set].index,
                });
            }
            done += set;
        }
        fd.set_vcpu_events(&self.events)
            .map_err(write("pending events"))
    }
}
