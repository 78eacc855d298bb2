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
    // Every ISA IRQ n is a plain INT on IOAPIC pin n, IRQ 0 included:
    // KVM's PIT raises GSI 0, and Linux's `setup_IO_APIC` needs IRQ 0 on a
    // pin (as ExtINT it found no timer pin and dereferenced a NULL).
    for pin in 0..IOAPIC_PINS {
        entries.extend([3, 0, 0, 0, 0, pin, ioapic_id, pin]);
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

    /// The sum of `bytes` modulo 256, computed here apart from the writer's
    /// own `checksum` helper: the MP spec wants 0 over each structure.
    fn byte_sum(bytes: &[u8]) -> u32 {
        bytes.iter().map(|&b| u32::from(b)).sum::<u32>() % 256
    }

    /// Reads the tables back from guest memory as Linux does: the
    /// floating pointer at the EBDA, the table it points at with the
    /// length its header gives, and the entries the count says.
    #[test]
    fn linux_finds_every_cpu_and_the_ioapic_in_guest_memory() {
        let guest =
            GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 1 << 20)]).expect("mmap");
        for cpus in [1, 3, MAX_VCPUS] {
            setup(&guest, cpus).expect("fits");
            let mut floating = [0u8; 16];
            guest
                .read_slice(&mut floating, GuestAddress(EBDA_START))
                .expect("read the floating pointer");
            assert_eq!(&floating[..4], b"_MP_");
            assert_eq!(byte_sum(&floating), 0, "floating pointer checksum");
            let table_at = u32::from_le_bytes(floating[4..8].try_into().expect("4 bytes"));
            assert!((EBDA_START..EBDA_END).contains(&u64::from(table_at)));

            let mut header = [0u8; 44];
            guest
                .read_slice(&mut header, GuestAddress(u64::from(table_at)))
                .expect("read the table header");
            assert_eq!(&header[..4], b"PCMP");
            let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
            assert!(
                u64::from(table_at) + length as u64 <= EBDA_END,
                "fits in the EBDA"
            );
            let mut table = vec![0u8; length];
            guest
                .read_slice(&mut table, GuestAddress(u64::from(table_at)))
                .expect("read the table");
            assert_eq!(byte_sum(&table), 0, "table checksum over its length");
            assert_eq!(
                u32::from_le_bytes(table[36..40].try_into().expect("4 bytes")),
                APIC_START as u32
            );

            // Walk the entries: processors (20 bytes), the rest 8 bytes each.
            let count = u16::from_le_bytes([table[34], table[35]]);
            let (mut at, mut processors, mut bsp, mut ioapic) = (44, Vec::new(), 0, None);
            let mut routes = Vec::new();
            for _ in 0..count {
                match table[at] {
                    0 => {
                        processors.push(table[at + 1]);
                        assert_eq!(table[at + 3] & 1, 1, "CPU {} enabled", table[at + 1]);
                        bsp += usize::from(table[at + 3] & 2 != 0);
                        at += 20;
                    }
                    2 => {
                        ioapic = Some(u32::from_le_bytes(
                            table[at + 4..at + 8].try_into().expect("4 bytes"),
                        ));
                        at += 8;
                    }
                    3 => {
                        // (interrupt type, source bus IRQ, destination pin)
                        routes.push((table[at + 1], table[at + 5], table[at + 7]));
                        at += 8;
                    }
                    1 | 4 => at += 8,
                    other => panic!("unknown MP entry type {other}"),
                }
            }
            assert_eq!(at, length, "the entries fill the table exactly");
            assert_eq!(processors, (0..cpus).collect::<Vec<_>>());
            assert_eq!(bsp, 1, "exactly one bootstrap processor");
            assert_eq!(ioapic, Some(IOAPIC_START as u32));
            let expected: Vec<_> = (0..IOAPIC_PINS).map(|pin| (0, pin, pin)).collect();
            assert_eq!(
                routes, expected,
                "each ISA IRQ, 0 included, an INT on its own pin"
            );
        }
        assert!(setup(&guest, MAX_VCPUS + 1).is_err());
        assert!(setup(&guest, 0).is_err());
    }
}
