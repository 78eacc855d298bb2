//! Emulated devices: the port-I/O and MMIO buses, COM1, the i8042 (reset
//! only), and the virtio-mmio devices.

pub mod bus;
pub mod i8042;
pub mod serial;
pub mod virtio;

use std::io;

use vm_superio::Trigger;
use vmm_sys_util::eventfd::EventFd;

/// An `EventFd` that vm-superio devices can signal (an interrupt line or the
/// VMM's exit event).
#[derive(Debug)]
pub struct EventFdTrigger(pub EventFd);

impl Trigger for EventFdTrigger {
    type E = io::Error;

    fn trigger(&self) -> io::Result<()> {
        self.0.write(1)
    }
}
