//! Address-range dispatch for port I/O and MMIO exits. Small enough to write
//! here rather than pull in a device-manager crate: a sorted map from base
//! address to device, with overlap checks on insert.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// A device on a bus. Offsets are relative to the device's base address.
pub trait BusDevice: Send {
    /// A guest read of `data.len()` bytes at `offset`.
    fn read(&mut self, offset: u64, data: &mut [u8]);
    /// A guest write at `offset`.
    fn write(&mut self, offset: u64, data: &[u8]);
}

/// A shared device handle.
pub type SharedDevice = Arc<Mutex<dyn BusDevice>>;

/// Errors while building a bus.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BusError {
    /// Two devices claim overlapping address ranges.
    #[error(
        "device range {base:#x}+{len:#x} overlaps another device; give each device its own range"
    )]
    Overlap {
        /// Base of the refused range.
        base: u64,
        /// Length of the refused range.
        len: u64,
    },
    /// Zero-length or wrapping range.
    #[error("device range {base:#x}+{len:#x} is empty or wraps around the address space")]
    BadRange {
        /// Base.
        base: u64,
        /// Length.
        len: u64,
    },
}

/// One address space (port I/O or MMIO).
#[derive(Default)]
pub struct Bus {
    devices: BTreeMap<u64, (u64, SharedDevice)>,
}

impl Bus {
    /// Adds `device` at `[base, base + len)`.
    pub fn insert(&mut self, base: u64, len: u64, device: SharedDevice) -> Result<(), BusError> {
        let end = base.checked_add(len).filter(|_| len > 0);
        let end = end.ok_or(BusError::BadRange { base, len })?;
        let before = self.devices.range(..end).next_back();
        if before.is_some_and(|(b, (l, _))| b + l > base) {
            return Err(BusError::Overlap { base, len });
        }
        self.devices.insert(base, (len, device));
        Ok(())
    }

    fn find(&self, addr: u64) -> Option<(u64, &SharedDevice)> {
        let (base, (len, device)) = self.devices.range(..=addr).next_back()?;
        (addr - base < *len).then_some((addr - base, device))
    }

    /// Dispatches a read; returns false (and leaves `data` alone) if no
    /// device claims `addr`.
    pub fn read(&self, addr: u64, data: &mut [u8]) -> bool {
        let Some((offset, device)) = self.find(addr) else {
            return false;
        };
        device
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read(offset, data);
        true
    }

    /// Dispatches a write; returns false if no device claims `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> bool {
        let Some((offset, device)) = self.find(addr) else {
            return false;
        };
        device
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write(offset, data);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(u8);
    impl BusDevice for Echo {
        fn read(&mut self, offset: u64, data: &mut [u8]) {
            data.fill(self.0 + offset as u8);
        }
        fn write(&mut self, _offset: u64, data: &[u8]) {
            self.0 = data[0];
        }
    }

    fn dev(v: u8) -> SharedDevice {
        Arc::new(Mutex::new(Echo(v)))
    }

    #[test]
    fn dispatch_and_overlap() {
        let mut bus = Bus::default();
        bus.insert(0x100, 0x10, dev(1)).expect("free range");
        assert_eq!(
            bus.insert(0x10f, 1, dev(2)),
            Err(BusError::Overlap {
                base: 0x10f,
                len: 1
            })
        );
        assert_eq!(
            bus.insert(0xf8, 0x9, dev(2)),
            Err(BusError::Overlap { base: 0xf8, len: 9 })
        );
        assert!(bus.insert(0x110, 0x10, dev(5)).is_ok());
        assert!(bus.insert(u64::MAX, 2, dev(5)).is_err());
        let mut b = [0u8; 1];
        assert!(bus.read(0x102, &mut b));
        assert_eq!(b[0], 3);
        assert!(!bus.read(0x120, &mut b));
        assert!(bus.write(0x110, &[9]));
        assert!(bus.read(0x111, &mut b));
        assert_eq!(b[0], 10);
    }
}
