//! Register state at guest entry, for both boot protocols:
//! - Linux 64-bit: long mode, identity-mapped low 1 GiB, `%rsi` = boot_params.
//! - PVH: 32-bit protected mode, paging off, `%ebx` = hvm_start_info.

use kvm_bindings::{kvm_fpu, kvm_regs, kvm_segment, kvm_sregs};
use kvm_ioctls::VcpuFd;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::layout::*;

/// Which boot protocol the kernel image asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootProtocol {
    /// Linux 64-bit boot protocol (ELF without a PVH note, or bzImage).
    Linux,
    /// PVH (ELF with a XEN_ELFNOTE_PHYS32_ENTRY note).
    Pvh,
}

/// Where and how a vCPU starts.
#[derive(Clone, Copy, Debug)]
pub struct EntryPoint {
    /// Guest-physical entry address.
    pub addr: GuestAddress,
    /// Boot protocol.
    pub protocol: BootProtocol,
}

/// Errors while setting up registers.
#[derive(Debug, thiserror::Error)]
pub enum RegsError {
    /// A KVM register ioctl failed.
    #[error("KVM refused the {what} registers of the boot vCPU")]
    Kvm {
        /// Which register set.
        what: &'static str,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// Writing the GDT, IDT or page tables into guest memory failed.
    #[error("cannot write the boot {what} into guest memory: is the memory size at least 1 MiB?")]
    Memory {
        /// Which table.
        what: &'static str,
        /// The memory error.
        #[source]
        source: vm_memory::GuestMemoryError,
    },
}

const X86_CR0_PE: u64 = 0x1;
const X86_CR0_ET: u64 = 0x10;
const X86_CR0_PG: u64 = 0x8000_0000;
const X86_CR4_PAE: u64 = 0x20;
const EFER_LME: u64 = 0x100;
const EFER_LMA: u64 = 0x400;

fn kvm(what: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> RegsError {
    move |source| RegsError::Kvm { what, source }
}

fn mem(what: &'static str) -> impl FnOnce(vm_memory::GuestMemoryError) -> RegsError {
    move |source| RegsError::Memory { what, source }
}

/// General-purpose registers at entry.
pub fn setup_regs(vcpu: &VcpuFd, entry: EntryPoint) -> Result<(), RegsError> {
    let mut regs = kvm_regs {
        rflags: 0x2,
        rip: entry.addr.0,
        ..Default::default()
    };
    match entry.protocol {
        BootProtocol::Linux => {
            regs.rsp = BOOT_STACK_POINTER;
            regs.rbp = BOOT_STACK_POINTER;
            regs.rsi = ZERO_PAGE_START;
        }
        BootProtocol::Pvh => regs.rbx = PVH_INFO_START,
    }
    vcpu.set_regs(&regs).map_err(kvm("general"))
}

/// x87/SSE control state Linux expects (as after FNINIT).
pub fn setup_fpu(vcpu: &VcpuFd) -> Result<(), RegsError> {
    let fpu = kvm_fpu {
        fcw: 0x37f,
        mxcsr: 0x1f80,
        ..Default::default()
    };
    vcpu.set_fpu(&fpu).map_err(kvm("FPU"))
}

/// Segment, control and table registers, writing the GDT, IDT and (for
/// Linux) the identity page tables into guest memory.
pub fn setup_sregs(
    guest: &GuestMemoryMmap,
    vcpu: &VcpuFd,
    protocol: BootProtocol,
) -> Result<(), RegsError> {
    let mut sregs = vcpu.get_sregs().map_err(kvm("segment"))?;
    let gdt = match protocol {
        BootProtocol::Linux => [
            0,
            gdt_entry(0xa09b, 0, 0xfffff),
            gdt_entry(0xc093, 0, 0xfffff),
            gdt_entry(0x808b, 0, 0xfffff),
        ],
        BootProtocol::Pvh => [
            0,
            gdt_entry(0xc09b, 0, 0xffff_ffff),
            gdt_entry(0xc093, 0, 0xffff_ffff),
            gdt_entry(0x008b, 0, 0x67),
        ],
    };
    write_descriptor_tables(guest, &gdt)?;
    load_segments(&mut sregs, &gdt);
    match protocol {
        BootProtocol::Linux => {
            write_page_tables(guest)?;
            sregs.cr3 = PML4_START;
            sregs.cr4 |= X86_CR4_PAE;
            sregs.cr0 |= X86_CR0_PE | X86_CR0_PG | X86_CR0_ET;
            sregs.efer |= EFER_LME | EFER_LMA;
        }
        BootProtocol::Pvh => {
            sregs.cr0 = X86_CR0_PE | X86_CR0_ET;
            sregs.cr4 = 0;
        }
    }
    vcpu.set_sregs(&sregs).map_err(kvm("segment"))
}

fn write_descriptor_tables(guest: &GuestMemoryMmap, gdt: &[u64; 4]) -> Result<(), RegsError> {
    for (i, entry) in gdt.iter().enumerate() {
        let addr = GuestAddress(BOOT_GDT_START + 8 * i as u64);
        guest.write_obj(*entry, addr).map_err(mem("GDT"))?;
    }
    guest
        .write_obj(0u64, GuestAddress(BOOT_IDT_START))
        .map_err(mem("IDT"))
}

fn load_segments(sregs: &mut kvm_sregs, gdt: &[u64; 4]) {
    let code = segment_from_gdt(gdt[1], 1);
    let data = segment_from_gdt(gdt[2], 2);
    sregs.gdt.base = BOOT_GDT_START;
    sregs.gdt.limit = (std::mem::size_of_val(gdt) - 1) as u16;
    sregs.idt.base = BOOT_IDT_START;
    sregs.idt.limit = 7;
    sregs.cs = code;
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.tr = segment_from_gdt(gdt[3], 3);
}

/// Identity-maps the first 4 GiB (RAM below the gap and the MMIO gap, where
/// virtio devices live) with 2 MiB pages: one PML4 entry, four PDPT
/// entries, four page directories.
fn write_page_tables(guest: &GuestMemoryMmap) -> Result<(), RegsError> {
    let w = |v: u64, a: u64| {
        guest
            .write_obj(v, GuestAddress(a))
            .map_err(mem("page tables"))
    };
    w(PDPTE_START | 0x03, PML4_START)?;
    for gib in 0..4u64 {
        let pd = PDE_START + gib * 0x1000;
        w(pd | 0x03, PDPTE_START + gib * 8)?;
        for i in 0..512u64 {
            w((gib << 30) | (i << 21) | 0x83, pd + i * 8)?;
        }
    }
    Ok(())
}

/// Packs a GDT descriptor from its flags (access byte in bits 0-7, the
/// granularity/size nibble in bits 12-15), base and limit.
pub fn gdt_entry(flags: u16, base: u32, limit: u32) -> u64 {
    let (base, limit, flags) = (u64::from(base), u64::from(limit), u64::from(flags));
    ((base & 0xff00_0000) << 32)
        | ((flags & 0xf0ff) << 40)
        | ((limit & 0x000f_0000) << 32)
        | ((base & 0x00ff_ffff) << 16)
        | (limit & 0xffff)
}

/// The KVM view of a GDT descriptor at `index`.
pub fn segment_from_gdt(entry: u64, index: u16) -> kvm_segment {
    let bit = |n: u32| ((entry >> n) & 1) as u8;
    let base = ((entry >> 32) & 0xff00_0000) | ((entry >> 16) & 0x00ff_ffff);
    let raw_limit = ((entry >> 32) & 0x000f_0000) | (entry & 0xffff);
    let limit = if bit(55) == 1 {
        (raw_limit << 12) | 0xfff
    } else {
        raw_limit
    };
    kvm_segment {
        base,
        limit: limit as u32,
        selector: index * 8,
        type_: ((entry >> 40) & 0xf) as u8,
        present: bit(47),
        dpl: ((entry >> 45) & 0x3) as u8,
        db: bit(54),
        s: bit(44),
        l: bit(53),
        g: bit(55),
        avl: bit(52),
        unusable: 1 - bit(47),
        padding: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdt_round_trip() {
        let code64 = segment_from_gdt(gdt_entry(0xa09b, 0, 0xfffff), 1);
        assert_eq!((code64.l, code64.db, code64.g), (1, 0, 1));
        assert_eq!(
            (code64.limit, code64.type_, code64.selector),
            (0xffff_ffff, 0xb, 8)
        );
        let tss = segment_from_gdt(gdt_entry(0x008b, 0x1234_5678, 0x67), 3);
        assert_eq!((tss.base, tss.limit, tss.present), (0x1234_5678, 0x67, 1));
    }
}
