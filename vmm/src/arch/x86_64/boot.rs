//! Kernel loading (ELF vmlinux with or without a PVH note, bzImage) through
//! linux-loader, and the boot information the kernel reads: the command line,
//! the initrd, the e820 memory map, and either Linux `boot_params` or a PVH
//! `hvm_start_info`.

use std::fs::File;

use linux_loader::configurator::linux::LinuxBootConfigurator;
use linux_loader::configurator::pvh::PvhBootConfigurator;
use linux_loader::configurator::{BootConfigurator, BootParams};
use linux_loader::loader::bootparam::{boot_params, setup_header};
use linux_loader::loader::elf::{Error as ElfError, PvhBootCapability};
use linux_loader::loader::{self, BzImage, Cmdline, Elf, KernelLoader, KernelLoaderResult};
use linux_loader::start_info::{hvm_memmap_table_entry, hvm_modlist_entry, hvm_start_info};
use vm_memory::{ByteValued, Bytes, GuestAddress, GuestMemoryMmap, ReadVolatile};

use super::layout::*;
use super::regs::{BootProtocol, EntryPoint};

/// Errors while loading the kernel and writing boot information.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The kernel is neither a loadable ELF nor a bzImage.
    #[error(
        "the kernel is not a loadable x86-64 ELF vmlinux or bzImage (ELF: {elf}); \
         pass an uncompressed vmlinux or a bzImage"
    )]
    Kernel {
        /// Why the ELF loader refused it.
        elf: loader::Error,
        /// Why the bzImage loader refused it.
        #[source]
        bzimage: loader::Error,
    },
    /// The initrd does not fit in guest memory.
    #[error("the initrd ({size} bytes) does not fit in guest memory above the kernel; add memory")]
    InitrdTooBig {
        /// Initrd size.
        size: u64,
    },
    /// Reading the initrd into guest memory failed.
    #[error("cannot read the initrd into guest memory")]
    InitrdRead(#[source] vm_memory::GuestMemoryError),
    /// The command line could not be written.
    #[error("cannot write the kernel command line into guest memory")]
    Cmdline(#[source] loader::Error),
    /// linux-loader refused the boot parameters.
    #[error("cannot write the boot parameters into guest memory")]
    Params(#[source] linux_loader::configurator::Error),
}

/// A loaded kernel: where to enter it and what it told us.
#[derive(Debug)]
pub struct LoadedKernel {
    /// Entry point and boot protocol.
    pub entry: EntryPoint,
    /// First byte after the kernel image in guest memory.
    pub end: u64,
    setup_header: Option<setup_header>,
}

/// Where the initrd was placed.
#[derive(Clone, Copy, Debug)]
pub struct InitrdRange {
    /// Guest-physical start.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Loads `kernel` into guest memory, as an ELF first and then as a bzImage.
pub fn load_kernel(guest: &GuestMemoryMmap, kernel: &mut File) -> Result<LoadedKernel, BootError> {
    let himem = Some(GuestAddress(HIMEM_START));
    match Elf::load(guest, None, kernel, himem) {
        Ok(result) => return Ok(from_elf(result)),
        Err(loader::Error::Elf(ElfError::InvalidElfMagicNumber)) => {}
        Err(elf) => {
            return Err(BootError::Kernel {
                elf,
                bzimage: loader::Error::InvalidKernelStartAddress,
            });
        }
    }
    match BzImage::load(guest, None, kernel, himem) {
        Ok(result) => Ok(from_bzimage(result)),
        Err(bzimage) => Err(BootError::Kernel {
            elf: loader::Error::Elf(ElfError::InvalidElfMagicNumber),
            bzimage,
        }),
    }
}

fn from_elf(result: KernelLoaderResult) -> LoadedKernel {
    let entry = match result.pvh_boot_cap {
        PvhBootCapability::PvhEntryPresent(addr) => EntryPoint {
            addr,
            protocol: BootProtocol::Pvh,
        },
        _ => EntryPoint {
            addr: result.kernel_load,
            protocol: BootProtocol::Linux,
        },
    };
    LoadedKernel {
        entry,
        end: result.kernel_end,
        setup_header: None,
    }
}

fn from_bzimage(result: KernelLoaderResult) -> LoadedKernel {
    // The 64-bit entry of a bzImage is 0x200 past its protected-mode start.
    let addr = GuestAddress(result.kernel_load.0 + 0x200);
    LoadedKernel {
        entry: EntryPoint {
            addr,
            protocol: BootProtocol::Linux,
        },
        end: result.kernel_end,
        setup_header: result.setup_header,
    }
}

/// Places the initrd at the highest page-aligned address of low RAM.
pub fn load_initrd(
    guest: &GuestMemoryMmap,
    kernel_end: u64,
    low_ram_end: u64,
    initrd: &mut File,
    size: u64,
) -> Result<InitrdRange, BootError> {
    let too_big = BootError::InitrdTooBig { size };
    let addr = low_ram_end.checked_sub(size).ok_or(too_big)? & !0xfff;
    if addr < kernel_end.max(HIMEM_START) {
        return Err(BootError::InitrdTooBig { size });
    }
    let count = usize::try_from(size).map_err(|_| BootError::InitrdTooBig { size })?;
    read_into(guest, GuestAddress(addr), initrd, count)?;
    Ok(InitrdRange { addr, size })
}

fn read_into<F: ReadVolatile>(
    guest: &GuestMemoryMmap,
    addr: GuestAddress,
    src: &mut F,
    count: usize,
) -> Result<(), BootError> {
    guest
        .read_exact_volatile_from(addr, src, count)
        .map_err(BootError::InitrdRead)
}

/// The e820 map: (start, size) of every RAM range.
pub fn e820_ram(mem_size: u64) -> Vec<(u64, u64)> {
    let mut map = vec![(0, EBDA_START)];
    for (base, size) in ram_ranges(mem_size) {
        let (start, end) = (base.max(HIMEM_START), base + size);
        if end > start {
            map.push((start, end - start));
        }
    }
    map
}

const E820_RAM: u32 = 1;
const E820_RESERVED: u32 = 2;

/// Writes the command line and the protocol's boot information.
pub fn write_boot_info(
    guest: &GuestMemoryMmap,
    kernel: &LoadedKernel,
    cmdline: &Cmdline,
    initrd: Option<InitrdRange>,
    mem_size: u64,
) -> Result<(), BootError> {
    loader::load_cmdline(guest, GuestAddress(CMDLINE_START), cmdline)
        .map_err(BootError::Cmdline)?;
    let cmdline_len = cmdline
        .as_cstring()
        .map(|c| c.as_bytes().len())
        .unwrap_or(0);
    match kernel.entry.protocol {
        BootProtocol::Linux => write_zero_page(guest, kernel, cmdline_len, initrd, mem_size),
        BootProtocol::Pvh => write_start_info(guest, initrd, mem_size),
    }
}

fn write_zero_page(
    guest: &GuestMemoryMmap,
    kernel: &LoadedKernel,
    cmdline_len: usize,
    initrd: Option<InitrdRange>,
    mem_size: u64,
) -> Result<(), BootError> {
    let mut params = boot_params::default();
    if let Some(hdr) = kernel.setup_header {
        params.hdr = hdr;
    }
    params.hdr.type_of_loader = 0xff;
    params.hdr.boot_flag = 0xaa55;
    params.hdr.header = 0x5372_6448; // "HdrS"
    params.hdr.cmd_line_ptr = CMDLINE_START as u32;
    params.hdr.cmdline_size = cmdline_len as u32;
    params.hdr.kernel_alignment = 0x0100_0000;
    if let Some(initrd) = initrd {
        params.hdr.ramdisk_image = initrd.addr as u32;
        params.hdr.ramdisk_size = initrd.size as u32;
    }
    let map = e820_ram(mem_size);
    for (slot, &(addr, size)) in params.e820_table.iter_mut().zip(&map) {
        slot.addr = addr;
        slot.size = size;
        slot.r#type = E820_RAM;
    }
    params.e820_entries = map.len() as u8;
    let boot = BootParams::new::<boot_params>(&params, GuestAddress(ZERO_PAGE_START));
    LinuxBootConfigurator::write_bootparams::<GuestMemoryMmap>(&boot, guest)
        .map_err(BootError::Params)
}

/// `hvm_start_info` and friends as `ByteValued` (linux-loader does not mark them).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
struct StartInfo(hvm_start_info);
// SAFETY: hvm_start_info is repr(C) plain data: integers only, no padding-sensitive invariants.
unsafe impl ByteValued for StartInfo {}
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
struct MemmapEntry(hvm_memmap_table_entry);
// SAFETY: repr(C) plain integers; any byte pattern is a valid value.
unsafe impl ByteValued for MemmapEntry {}
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
struct ModlistEntry(hvm_modlist_entry);
// SAFETY: repr(C) plain integers; any byte pattern is a valid value.
unsafe impl ByteValued for ModlistEntry {}

fn write_start_info(
    guest: &GuestMemoryMmap,
    initrd: Option<InitrdRange>,
    mem_size: u64,
) -> Result<(), BootError> {
    let mut memmap: Vec<MemmapEntry> = e820_ram(mem_size)
        .into_iter()
        .map(|(addr, size)| memmap_entry(addr, size, E820_RAM))
        .collect();
    memmap.insert(
        1,
        memmap_entry(EBDA_START, EBDA_END - EBDA_START, E820_RESERVED),
    );
    let mut info = hvm_start_info {
        magic: 0x336e_c578,
        version: 1,
        cmdline_paddr: CMDLINE_START,
        memmap_paddr: PVH_MEMMAP_START,
        memmap_entries: memmap.len() as u32,
        ..Default::default()
    };
    let mut boot = BootParams::new::<StartInfo>(&StartInfo(info), GuestAddress(PVH_INFO_START));
    if let Some(initrd) = initrd {
        info.nr_modules = 1;
        info.modlist_paddr = PVH_MODLIST_START;
        boot = BootParams::new::<StartInfo>(&StartInfo(info), GuestAddress(PVH_INFO_START));
        let module = hvm_modlist_entry {
            paddr: initrd.addr,
            size: initrd.size,
            ..Default::default()
        };
        boot.set_modules(&[ModlistEntry(module)], GuestAddress(PVH_MODLIST_START));
    }
    boot.set_sections(&memmap, GuestAddress(PVH_MEMMAP_START));
    PvhBootConfigurator::write_bootparams::<GuestMemoryMmap>(&boot, guest)
        .map_err(BootError::Params)
}

fn memmap_entry(addr: u64, size: u64, type_: u32) -> MemmapEntry {
    MemmapEntry(hvm_memmap_table_entry {
        addr,
        size,
        type_,
        reserved: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e820_covers_low_and_high_ram() {
        assert_eq!(
            e820_ram(128 << 20),
            vec![(0, EBDA_START), (HIMEM_START, (128 << 20) - HIMEM_START)]
        );
        let big = e820_ram(4 << 30);
        assert_eq!(big[2], (MMIO_GAP_END, 1 << 30));
    }

    #[test]
    fn pvh_start_info_lands_where_ebx_points() {
        let guest =
            GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 4 << 20)]).expect("mmap");
        write_start_info(&guest, None, 4 << 20).expect("start info");
        let magic: u32 = guest.read_obj(GuestAddress(PVH_INFO_START)).expect("read");
        assert_eq!(magic, 0x336e_c578);
        let entries: u32 = guest
            .read_obj(GuestAddress(PVH_INFO_START + 48))
            .expect("read");
        assert_eq!(entries, 3);
    }
}
