//! COM1 (a 16550A UART from vm-superio) writing the guest's console to a log
//! file or to stdout. Input is not wired: guests here are driven over vsock.

use std::io::Write;

use vm_superio::Serial;
use vm_superio::serial::NoEvents;

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
