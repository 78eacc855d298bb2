//! Guest memory: anonymous mappings laid out around the MMIO gap, and their
//! registration as KVM memory slots.

use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::VmFd;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};

use crate::arch::x86_64::layout;

/// Errors while creating guest memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The host refused the mapping.
    #[error("cannot map {mib} MiB of guest memory: lower memory_mib or free host memory")]
    Map {
        /// Size asked for.
        mib: u64,
        /// The mapping error.
        #[source]
        source: vm_memory::mmap::FromRangesError,
    },
    /// KVM refused a memory slot.
    #[error("KVM refused guest memory slot {slot}")]
    Slot {
        /// The slot.
        slot: u32,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
}

/// Maps `mib` MiB of guest RAM.
pub fn create(mib: u64) -> Result<GuestMemoryMmap, MemoryError> {
    let ranges: Vec<(GuestAddress, usize)> = layout::ram_ranges(mib << 20)
        .into_iter()
        .map(|(start, size)| (GuestAddress(start), size as usize))
        .collect();
    GuestMemoryMmap::from_ranges(&ranges).map_err(|source| MemoryError::Map { mib, source })
}

/// Host address ranges (start, length) of guest RAM, for memory accounting.
pub fn host_ranges(guest: &GuestMemoryMmap) -> Vec<(u64, u64)> {
    guest.iter().map(|r| (r.as_ptr() as u64, r.len())).collect()
}

/// Registers every region with KVM.
pub fn register(vm: &VmFd, guest: &GuestMemoryMmap) -> Result<(), MemoryError> {
    for (slot, region) in guest.iter().enumerate() {
        let slot = slot as u32;
        let region = kvm_userspace_memory_region {
            slot,
            guest_phys_addr: region.start_addr().0,
            memory_size: region.len(),
            userspace_addr: region.as_ptr() as u64,
            flags: 0,
        };
        // SAFETY: the region is a live mapping owned by `guest`, which the VMM
        // keeps alive for as long as the VM exists.
        unsafe { vm.set_user_memory_region(region) }
            .map_err(|source| MemoryError::Slot { slot, source })?;
    }
    Ok(())
}
