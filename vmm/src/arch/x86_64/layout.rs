//! Where things live in guest-physical memory. Low addresses follow the
//! conventions Linux and Firecracker use, so a stock vmlinux finds them.

/// Global descriptor table used at entry.
pub const BOOT_GDT_START: u64 = 0x500;
/// An empty interrupt descriptor table used at entry.
pub const BOOT_IDT_START: u64 = 0x520;
/// PVH `hvm_start_info`.
pub const PVH_INFO_START: u64 = 0x6000;
/// PVH module list (the initrd).
pub const PVH_MODLIST_START: u64 = 0x6040;
/// PVH memory map entries.
pub const PVH_MEMMAP_START: u64 = 0x6100;
/// Linux `boot_params` ("zero page").
pub const ZERO_PAGE_START: u64 = 0x7000;
/// Initial stack pointer for the Linux 64-bit entry.
pub const BOOT_STACK_POINTER: u64 = 0x8ff0;
/// Identity-mapping page tables: PML4, PDPT, 4 PDs (2 MiB pages, first 4 GiB).
pub const PML4_START: u64 = 0x9000;
/// Page directory pointer table.
pub const PDPTE_START: u64 = 0xa000;
/// First of four page directories (0xb000..0xf000).
pub const PDE_START: u64 = 0xb000;
/// Kernel command line.
pub const CMDLINE_START: u64 = 0x20000;
/// Longest command line we pass (Linux x86 COMMAND_LINE_SIZE).
pub const CMDLINE_MAX_SIZE: usize = 2048;
/// Extended BIOS data area: the MP table goes here.
pub const EBDA_START: u64 = 0x9fc00;
/// End of the EBDA / start of the legacy VGA hole.
pub const EBDA_END: u64 = 0xa0000;
/// Where kernels are loaded ("high memory" start, 1 MiB).
pub const HIMEM_START: u64 = 0x10_0000;
/// The 32-bit MMIO gap below 4 GiB: RAM stops here and resumes at 4 GiB.
pub const MMIO_GAP_START: u64 = 0xc000_0000;
/// End of the MMIO gap.
pub const MMIO_GAP_END: u64 = 0x1_0000_0000;
/// First virtio-mmio device window.
pub const VIRTIO_MMIO_START: u64 = 0xd000_0000;
/// Size of one virtio-mmio device window.
pub const VIRTIO_MMIO_SIZE: u64 = 0x1000;
/// First IOAPIC pin given to virtio devices (0-4 are legacy: PIT, keyboard, COM).
pub const FIRST_DEVICE_IRQ: u32 = 5;
/// Last usable IOAPIC pin (the in-kernel IOAPIC has 24).
pub const LAST_DEVICE_IRQ: u32 = 23;
/// Local APIC and IOAPIC addresses.
pub const APIC_START: u64 = 0xfee0_0000;
/// IOAPIC base address.
pub const IOAPIC_START: u64 = 0xfec0_0000;
/// KVM needs a 3-page region for the TSS, inside the gap.
pub const KVM_TSS_ADDRESS: usize = 0xfffb_d000;
/// Most vCPUs whose MP table entries fit in the EBDA.
pub const MAX_VCPUS: u8 = 32;

/// Guest RAM ranges for `size` bytes: below the MMIO gap, then above 4 GiB.
pub fn ram_ranges(size: u64) -> Vec<(u64, u64)> {
    if size <= MMIO_GAP_START {
        return vec![(0, size)];
    }
    vec![(0, MMIO_GAP_START), (MMIO_GAP_END, size - MMIO_GAP_START)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_skips_the_mmio_gap() {
        assert_eq!(ram_ranges(128 << 20), vec![(0, 128 << 20)]);
        let big = ram_ranges(4 << 30);
        assert_eq!(big, vec![(0, MMIO_GAP_START), (MMIO_GAP_END, 1 << 30)]);
    }
}
