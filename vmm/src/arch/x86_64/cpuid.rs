//! CPUID for guests: what KVM supports (`KVM_GET_SUPPORTED_CPUID`), with the
//! topology rewritten per vCPU, the hypervisor bit set, KVM's hypervisor
//! leaves present, and nested virtualization and power management hidden.

use kvm_bindings::{CpuId, KVM_MAX_CPUID_ENTRIES, kvm_cpuid_entry2};
use kvm_ioctls::Kvm;

/// Errors while building CPUID.
#[derive(Debug, thiserror::Error)]
pub enum CpuidError {
    /// KVM_GET_SUPPORTED_CPUID failed.
    #[error("KVM_GET_SUPPORTED_CPUID failed: is /dev/kvm a working KVM?")]
    Supported(#[source] kvm_ioctls::Error),
    /// The hypervisor leaf could not be appended.
    #[error("cannot add the hypervisor CPUID leaf: the CPUID table is full")]
    Full,
}

const LEAF_HYPERVISOR: u32 = 0x4000_0000;
const ECX_HYPERVISOR: u32 = 1 << 31;
const EDX_HTT: u32 = 1 << 28;
const ECX_VMX: u32 = 1 << 5;
const ECX_SVM: u32 = 1 << 2;
const ECX_XSAVE: u32 = 1 << 26;
/// "KVMKVMKVM\0\0\0" as three little-endian registers.
const KVM_SIGNATURE: [u32; 3] = [0x4b4d_564b, 0x564b_4d56, 0x0000_004d];

/// The supported CPUID of this host, before per-vCPU filtering.
pub fn supported(kvm: &Kvm) -> Result<CpuId, CpuidError> {
    let mut cpuid = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(CpuidError::Supported)?;
    ensure_hypervisor_leaf(&mut cpuid)?;
    Ok(cpuid)
}

fn ensure_hypervisor_leaf(cpuid: &mut CpuId) -> Result<(), CpuidError> {
    if cpuid
        .as_slice()
        .iter()
        .any(|e| e.function == LEAF_HYPERVISOR)
    {
        return Ok(());
    }
    let [ebx, ecx, edx] = KVM_SIGNATURE;
    let leaf = kvm_cpuid_entry2 {
        function: LEAF_HYPERVISOR,
        eax: LEAF_HYPERVISOR + 1,
        ebx,
        ecx,
        edx,
        ..Default::default()
    };
    cpuid.push(leaf).map_err(|_| CpuidError::Full)
}

/// Rewrites `cpuid` for vCPU `index` of `count`: APIC IDs, topology, and the
/// hypervisor-present bit.
pub fn filter_for_vcpu(cpuid: &mut CpuId, index: u8, count: u8) {
    for entry in cpuid.as_mut_slice() {
        match entry.function {
            1 => leaf_1(entry, index, count),
            4 => {
                // Cores per package - 1, in EAX[31:26].
                entry.eax = (entry.eax & 0x03ff_ffff) | (u32::from(count - 1) << 26);
            }
            0xb | 0x1f => leaf_topology(entry, index, count),
            // No thermal or power management inside a VM.
            6 => (entry.eax, entry.ecx) = (0, 0),
            // No nested virtualization: hide SVM.
            0x8000_0001 => entry.ecx &= !ECX_SVM,
            _ => {}
        }
    }
}

/// The XCR0 a vCPU starts with: every state component leaf 0xD.0 offers
/// (0 where the CPU has no XSAVE).
///
/// Leaf 0xD.0 EBX is the XSAVE area size for what XCR0 enables. KVM fills
/// it in from the vCPU's XCR0 when CPUID is set and again when the guest's
/// XSETBV exits; where that exit never comes (nested SVM under QEMU's TCG)
/// Linux read 576 bytes (x87 and SSE) for its AVX/MPX/PKRU state and
/// warned "XSAVE consistency problem". Linux enables every component the
/// leaf offers, so starting there gives it the size it will use.
pub fn initial_xcr0(cpuid: &CpuId) -> u64 {
    let slice = cpuid.as_slice();
    let has_xsave = slice
        .iter()
        .any(|e| e.function == 1 && e.ecx & ECX_XSAVE != 0);
    slice
        .iter()
        .find(|e| e.function == 0xd && e.index == 0 && has_xsave)
        .map_or(0, |e| u64::from(e.eax) | u64::from(e.edx) << 32)
}

fn leaf_1(entry: &mut kvm_cpuid_entry2, index: u8, count: u8) {
    entry.ebx = (entry.ebx & 0x0000_ffff) | (u32::from(index) << 24) | (u32::from(count) << 16);
    entry.ecx = (entry.ecx | ECX_HYPERVISOR) & !ECX_VMX;
    if count > 1 {
        entry.edx |= EDX_HTT;
    } else {
        entry.edx &= !EDX_HTT;
    }
}

/// Extended topology: one thread per core, `count` cores in one package.
fn leaf_topology(entry: &mut kvm_cpuid_entry2, index: u8, count: u8) {
    entry.edx = u32::from(index);
    match entry.index {
        0 => {
            entry.eax = 0;
            entry.ebx = 1;
            entry.ecx = 1 << 8;
        }
        1 => {
            // Bits to shift an x2APIC ID right to get the package ID.
            entry.eax = u32::from(count).next_power_of_two().trailing_zeros();
            entry.ebx = u32::from(count);
            entry.ecx = (2 << 8) | 1;
        }
        _ => {
            entry.eax = 0;
            entry.ebx = 0;
            entry.ecx = entry.index;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> CpuId {
        let leaf1 = kvm_cpuid_entry2 {
            function: 1,
            ..Default::default()
        };
        CpuId::from_entries(&[leaf1]).expect("one entry fits")
    }

    #[test]
    fn apic_id_and_hypervisor_bit() {
        let mut cpuid = table();
        ensure_hypervisor_leaf(&mut cpuid).expect("room for the leaf");
        filter_for_vcpu(&mut cpuid, 3, 4);
        let leaf1 = cpuid.as_slice()[0];
        assert_eq!(leaf1.ebx >> 24, 3);
        assert_ne!(leaf1.ecx & ECX_HYPERVISOR, 0);
        assert_eq!(leaf1.ecx & ECX_VMX, 0, "no nested VMX");
        let hv = cpuid.as_slice()[1];
        assert_eq!((hv.function, hv.ebx), (LEAF_HYPERVISOR, KVM_SIGNATURE[0]));
    }

    #[test]
    fn vcpus_start_with_every_offered_xsave_component() {
        let entry = |function, index, eax, ecx| kvm_cpuid_entry2 {
            function,
            index,
            eax,
            ecx,
            ..Default::default()
        };
        // x87|SSE|AVX|MPX|PKRU, as KVM offered them in the nested host.
        let xsave = CpuId::from_entries(&[entry(1, 0, 0, ECX_XSAVE), entry(0xd, 0, 0x21f, 2696)])
            .expect("fits");
        assert_eq!(initial_xcr0(&xsave), 0x21f);
        let none =
            CpuId::from_entries(&[entry(1, 0, 0, 0), entry(0xd, 0, 0x21f, 2696)]).expect("fits");
        assert_eq!(initial_xcr0(&none), 0, "no XSAVE, no XCR0");
    }
}
