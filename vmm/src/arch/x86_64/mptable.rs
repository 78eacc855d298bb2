//! The Intel MultiProcessor table (MP spec 1.4) in the EBDA: how Linux
//! finds the vCPUs, the IOAPIC and the ISA interrupt routing when it has no
//! ACPI. Written as bytes here because no rust-vmm crate provides it.

use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::layout::{APIC_START, EBDA_END, EBDA_START, IOAPIC_START, MAX_VCPUS};

/// Errors while writing the MP table.
#[derive(Debug, thiserror::Error)]
pub enum MptableError {
    /// Too many vCPUs for the EBDA.
    #[error("{0} vCPUs do not fit in the MP table (at most {MAX_VCPUS})")]
    TooManyCpus(u8),
    /// The table did not fit or guest memory refused it.
    #[error("cannot write the MP table into guest memory (is the memory size at least 1 MiB?)")]
    Write(#[source] vm_memory::GuestMemoryError),
}

const IOAPIC_PINS: u8 = 24;

/// Writes the floating pointer and configuration table for `cpus` vCPUs.
pub fn setup(guest: &GuestMemoryMmap, cpus: u8) -> Result<(), MptableError> {
    if cpus == 0 || cpus > MAX_VCPUS {
        return Err(MptableError::TooManyCpus(cpus));
    }
    let table_addr = EBDA_START + 16;
    let config = config_table(cpus);
    debug_assert!(table_addr + config.len() as u64 <= EBDA_END);
    let floating = floating_pointer(table_addr as u32);
    guest
        .write_slice(&floating, GuestAddress(EBDA_START))
        .map_err(MptableError::Write)?;
    guest
        .write_slice(&config, GuestAddress(table_addr))
        .map_err(MptableError::Write)
}

fn checksum(bytes: &[u8]) -> u8 {
    0u8.wrapping_sub(bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b)))
}

fn floating_pointer(table: u32) -> [u8; 16] {
    let mut f = [0u8; 16];
    f[..4].copy_from_slice(b"_MP_");
    f[4..8].copy_from_slice(&table.to_le_bytes());
    f[8] = 1; // length in 16-byte units
    f[9] = 4; // spec revision 1.4
    f[10] = checksum(&f);
    f
}

fn config_table(cpus: u8) -> Vec<u8> {
    let ioapic_id = cpus + 1;
    let mut entries = Vec::new();
    for cpu in 0..cpus {
        entries.extend(processor_entry(cpu));
    }
    entries.extend([1, 0, b'I', b'S', b'A', b' ', b' ', b' ']); // bus 0: ISA
    entries.extend([2, ioapic_id, 0x11, 1]);
    entries.extend((IOAPIC_START as u32).to_le_bytes());
    for pin in 0..IOAPIC_PINS {
        let kind = if pin == 0 { 3 } else { 0 }; // ExtINT, then INT
        entries.extend([3, kind, 0, 0, 0, pin, ioapic_id, pin]);
    }
    entries.extend([4, 3, 0, 0, 0, 0, 0, 0]); // LINT0: ExtINT
    entries.extend([4, 1, 0, 0, 0, 0, 0xff, 1]); // LINT1: NMI
    let count = u16::from(cpus) + 2 + u16::from(IOAPIC_PINS) + 2;
    let mut table = header(44 + entries.len(), count);
    table.extend(entries);
    table[7] = checksum(&table);
    table
}

fn header(length: usize, entry_count: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(length);
    h.extend(b"PCMP");
    h.extend((length as u16).to_le_bytes());
    h.extend([4, 0]); // revision, checksum (filled later)
    h.extend(b"CUBICLE ");
    h.extend(b"MICROVM     ");
    h.extend([0u8; 4]); // OEM table pointer
    h.extend([0u8; 2]); // OEM table size
    h.extend(entry_count.to_le_bytes());
    h.extend((APIC_START as u32).to_le_bytes());
    h.extend([0u8; 4]); // extended length, checksum, reserved
    h
}

fn processor_entry(cpu: u8) -> [u8; 20] {
    let mut e = [0u8; 20];
    e[0] = 0;
    e[1] = cpu;
    e[2] = 0x14; // local APIC version
    e[3] = 1 | if cpu == 0 { 2 } else { 0 }; // enabled, BSP
    e[4..8].copy_from_slice(&0x600u32.to_le_bytes()); // family 6
    e[8..12].copy_from_slice(&0x201u32.to_le_bytes()); // FPU, APIC
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestMemoryBackend;

    #[test]
    fn tables_checksum_to_zero_and_fit() {
        let guest =
            GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 1 << 20)]).expect("mmap");
        setup(&guest, MAX_VCPUS).expect("32 vCPUs fit");
        let mut floating = [0u8; 16];
        guest
            .read_slice(&mut floating, GuestAddress(EBDA_START))
            .expect("read");
        assert_eq!(checksum(&floating), 0);
        let table = config_table(MAX_VCPUS);
        assert_eq!(checksum(&table), 0);
        assert!(EBDA_START + 16 + table.len() as u64 <= EBDA_END);
        assert!(guest.check_range(GuestAddress(EBDA_START), 16));
        assert!(setup(&guest, MAX_VCPUS + 1).is_err());
    }
}
