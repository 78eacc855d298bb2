//! The i8042 keyboard controller, only for its CPU-reset command (0xfe on
//! port 0x64), which Linux uses for `reboot=k` and our test guests use to
//! exit: vm-superio signals the VMM's exit event.

use vm_superio::I8042Device;

use vm_superio::Trigger;

use super::bus::BusDevice;

/// Port base (0x60 data .. 0x64 command).
pub const I8042_BASE: u64 = 0x60;
/// Ports covered.
pub const I8042_LEN: u64 = 5;

/// The i8042 on the port I/O bus.
pub struct I8042<T: Trigger> {
    device: I8042Device<T>,
}

impl<T: Trigger> I8042<T> {
    /// An i8042 whose reset command fires `reset`.
    pub fn new(reset: T) -> Self {
        I8042 {
            device: I8042Device::new(reset),
        }
    }
}

impl<T: Trigger + Send> BusDevice for I8042<T> {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        if let (Some(first), Ok(offset)) = (data.first_mut(), u8::try_from(offset)) {
            *first = self.device.read(offset);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if let (Some(&value), Ok(offset)) = (data.first(), u8::try_from(offset)) {
            // If the exit event cannot be signalled the guest keeps running;
            // the API's stop still works.
            let _ = self.device.write(offset, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::EventFdTrigger;
    use vmm_sys_util::eventfd::EventFd;

    #[test]
    fn reset_command_signals_exit() {
        let exit = EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");
        let mut dev = I8042::new(EventFdTrigger(exit.try_clone().expect("clone")));
        dev.write(4, &[0x12]);
        assert!(exit.read().is_err(), "other commands do nothing");
        dev.write(4, &[0xfe]);
        assert_eq!(exit.read().expect("reset signalled"), 1);
    }
}
