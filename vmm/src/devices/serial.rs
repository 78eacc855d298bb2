//! COM1 (a 16550A UART from vm-superio) writing the guest's console to a log
//! file or to stdout. Input is not wired: guests here are driven over vsock.

use std::io::Write;

use serde::{Deserialize, Serialize};
use vm_superio::Serial;
use vm_superio::serial::{NoEvents, SerialState};

use super::EventFdTrigger;
use super::bus::BusDevice;

/// I/O port base of COM1.
pub const COM1_BASE: u64 = 0x3f8;
/// COM1 IRQ.
pub const COM1_IRQ: u32 = 4;

/// COM1 on the port I/O bus.
pub struct SerialDevice {
    serial: Serial<EventFdTrigger, NoEvents, Box<dyn Write + Send>>,
}

impl SerialDevice {
    /// A UART raising `irq` and writing to `out` (unbuffered: every byte the
    /// guest sends reaches `out` at once).
    pub fn new(irq: EventFdTrigger, out: Box<dyn Write + Send>) -> Self {
        SerialDevice {
            serial: Serial::new(irq, out),
        }
    }
}

/// The UART's registers for snapshots (vm-superio's `SerialState`, which
/// has no serde of its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SerialSnapshot {
    /// Divisor latch, low and high bytes.
    pub baud_divisor: [u8; 2],
    /// Interrupt enable.
    pub interrupt_enable: u8,
    /// Interrupt identification.
    pub interrupt_identification: u8,
    /// Line control.
    pub line_control: u8,
    /// Line status.
    pub line_status: u8,
    /// Modem control.
    pub modem_control: u8,
    /// Modem status.
    pub modem_status: u8,
    /// Scratch.
    pub scratch: u8,
    /// Bytes received and not yet read (none: input is not wired).
    pub in_buffer: Vec<u8>,
}

impl SerialDevice {
    /// The UART's registers.
    pub fn save(&self) -> SerialSnapshot {
        let s = self.serial.state();
        SerialSnapshot {
            baud_divisor: [s.baud_divisor_low, s.baud_divisor_high],
            interrupt_enable: s.interrupt_enable,
            interrupt_identification: s.interrupt_identification,
            line_control: s.line_control,
            line_status: s.line_status,
            modem_control: s.modem_control,
            modem_status: s.modem_status,
            scratch: s.scratch,
            in_buffer: s.in_buffer,
        }
    }

    /// A UART with `saved` registers (raising its interrupt again if one
    /// was pending), or None when the saved input buffer is over the FIFO.
    pub fn restored(
        saved: &SerialSnapshot,
        irq: EventFdTrigger,
        out: Box<dyn Write + Send>,
    ) -> Option<Self> {
        let state = SerialState {
            baud_divisor_low: saved.baud_divisor[0],
            baud_divisor_high: saved.baud_divisor[1],
            interrupt_enable: saved.interrupt_enable,
            interrupt_identification: saved.interrupt_identification,
            line_control: saved.line_control,
            line_status: saved.line_status,
            modem_control: saved.modem_control,
            modem_status: saved.modem_status,
            scratch: saved.scratch,
            in_buffer: saved.in_buffer.clone(),
        };
        let serial = Serial::from_state(&state, irq, NoEvents, out).ok()?;
        Some(SerialDevice { serial })
    }
}

impl BusDevice for SerialDevice {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        if let (Some(first), Ok(offset)) = (data.first_mut(), u8::try_from(offset)) {
            *first = self.serial.read(offset);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if let (Some(&value), Ok(offset)) = (data.first(), u8::try_from(offset)) {
            // A failed write to the log or a failed interrupt cannot be
            // reported to the guest; the UART keeps working.
            let _ = self.serial.write(offset, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use vmm_sys_util::eventfd::EventFd;

    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("test lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn bytes_reach_the_log() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let irq = EventFdTrigger(EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"));
        let mut dev = SerialDevice::new(irq, Box::new(Shared(log.clone())));
        for b in b"hi" {
            dev.write(0, &[*b]);
        }
        let mut lsr = [0u8];
        dev.read(5, &mut lsr);
        assert_ne!(lsr[0] & 0x20, 0, "transmitter empty");
        assert_eq!(&*log.lock().expect("test lock"), b"hi");
    }
}
