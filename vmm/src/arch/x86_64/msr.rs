//! Model-specific registers set at boot: only those KVM lists in
//! `KVM_GET_MSR_INDEX_LIST` (this matters on hosts that reject some, such as
//! IA32_ARCH_CAPABILITIES on PVM).

use kvm_bindings::{Msrs, kvm_msr_entry};
use kvm_ioctls::{Kvm, VcpuFd};

/// Errors while setting MSRs.
#[derive(Debug, thiserror::Error)]
pub enum MsrError {
    /// KVM_GET_MSR_INDEX_LIST failed.
    #[error("KVM_GET_MSR_INDEX_LIST failed")]
    IndexList(#[source] kvm_ioctls::Error),
    /// The MSR list could not be built.
    #[error("too many boot MSRs for one KVM_SET_MSRS call")]
    TooMany,
    /// KVM_SET_MSRS failed or set fewer than asked.
    #[error("KVM accepted {set} of {wanted} boot MSRs (first refused: {first_refused:#x})")]
    Set {
        /// MSRs set.
        set: usize,
        /// MSRs asked for.
        wanted: usize,
        /// The index of the first MSR KVM refused.
        first_refused: u32,
    },
    /// KVM_SET_MSRS returned an error.
    #[error("KVM_SET_MSRS failed")]
    Ioctl(#[source] kvm_ioctls::Error),
}

const BOOT_MSRS: &[(u32, u64)] = &[
    (0x174, 0),       // IA32_SYSENTER_CS
    (0x175, 0),       // IA32_SYSENTER_ESP
    (0x176, 0),       // IA32_SYSENTER_EIP
    (0xc000_0081, 0), // STAR
    (0xc000_0082, 0), // LSTAR
    (0xc000_0083, 0), // CSTAR
    (0xc000_0084, 0), // SYSCALL_MASK
    (0xc000_0102, 0), // KERNEL_GS_BASE
    (0x10, 0),        // TSC
    (0x1a0, 1),       // IA32_MISC_ENABLE: fast strings
];

/// The boot MSRs that this host's KVM lists.
pub fn boot_msrs(kvm: &Kvm) -> Result<Vec<kvm_msr_entry>, MsrError> {
    let listed = kvm.get_msr_index_list().map_err(MsrError::IndexList)?;
    let listed = listed.as_slice();
    Ok(BOOT_MSRS
        .iter()
        .filter(|(index, _)| listed.contains(index))
        .map(|&(index, data)| kvm_msr_entry {
            index,
            data,
            ..Default::default()
        })
        .collect())
}

/// Sets `entries` on a vCPU, failing if KVM refuses any.
pub fn set(vcpu: &VcpuFd, entries: &[kvm_msr_entry]) -> Result<(), MsrError> {
    let msrs = Msrs::from_entries(entries).map_err(|_| MsrError::TooMany)?;
    let set = vcpu.set_msrs(&msrs).map_err(MsrError::Ioctl)?;
    if set != entries.len() {
        let first_refused = entries.get(set).map_or(0, |e| e.index);
        return Err(MsrError::Set {
            set,
            wanted: entries.len(),
            first_refused,
        });
    }
    Ok(())
}
