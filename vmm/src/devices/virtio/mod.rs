//! virtio over MMIO: the transport, descriptor-chain validation, and the
//! devices (block, vsock). Queue processing runs on the VMM's event thread,
//! woken by ioeventfds the guest's queue notifications hit in KVM.

pub mod block;
pub mod chain;
pub mod mmio;
pub mod persist;
pub mod vsock;

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use event_manager::MutEventSubscriber;
use virtio_queue::Queue;
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;

/// VIRTIO_F_VERSION_1: every device we offer is a modern (1.x) device.
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
/// Device type of virtio-blk.
pub const TYPE_BLOCK: u32 = 2;
/// Device type of virtio-vsock.
pub const TYPE_VSOCK: u32 = 19;

/// Errors a device reports at activation.
#[derive(Debug, thiserror::Error)]
pub enum ActivateError {
    /// A queue the device needs was not set up by the driver.
    #[error("the driver did not set up queue {0}, which this device needs")]
    QueueNotReady(usize),
    /// The driver set up the wrong number of queues.
    #[error("expected {expected} queues, got {got}")]
    QueueCount {
        /// Queues the device has.
        expected: usize,
        /// Queues handed over.
        got: usize,
    },
}

/// What the MMIO transport needs from a device.
pub trait VirtioDevice: Send {
    /// The virtio device type.
    fn device_type(&self) -> u32;
    /// Maximum size of each queue.
    fn queue_max_sizes(&self) -> &[u16];
    /// Features offered to the driver.
    fn features(&self) -> u64;
    /// Reads from the device-specific configuration space.
    fn read_config(&self, offset: u64, data: &mut [u8]);
    /// Starts the device with the driver's queues (on DRIVER_OK).
    fn activate(
        &mut self,
        mem: GuestMemoryMmap,
        queues: Vec<Queue>,
        interrupt: std::sync::Arc<Interrupt>,
    ) -> Result<(), ActivateError>;
    /// Stops the device (the driver wrote 0 to the status register).
    fn reset(&mut self);
    /// The queues of an active device, for a snapshot (None when inactive).
    fn queue_states(&self) -> Option<Vec<virtio_queue::QueueState>>;
    /// Right after a restore re-activated the device: take up whatever the
    /// guest posted before the snapshot (its notification is not replayed).
    fn after_restore(&mut self);
}

/// A device that is both a virtio device and an event subscriber.
pub trait EventedDevice: VirtioDevice + MutEventSubscriber {}
impl<T: VirtioDevice + MutEventSubscriber> EventedDevice for T {}

/// The interrupt line of one virtio-mmio device: the InterruptStatus
/// register and an irqfd into KVM's IOAPIC.
#[derive(Debug)]
pub struct Interrupt {
    status: AtomicU32,
    irqfd: EventFd,
}

/// InterruptStatus bit: a used ring changed.
pub const INT_VRING: u32 = 1;
/// InterruptStatus bit: the configuration changed (or the device needs a reset).
pub const INT_CONFIG: u32 = 2;

impl Interrupt {
    /// An interrupt that raises `irqfd`.
    pub fn new(irqfd: EventFd) -> Self {
        Interrupt {
            status: AtomicU32::new(0),
            irqfd,
        }
    }

    /// Tells the driver a used ring changed.
    pub fn signal(&self, why: u32) -> io::Result<()> {
        self.status.fetch_or(why, Ordering::SeqCst);
        self.irqfd.write(1)
    }

    /// The InterruptStatus register.
    pub fn status(&self) -> u32 {
        self.status.load(Ordering::SeqCst)
    }

    /// The driver acknowledged `bits`.
    pub fn ack(&self, bits: u32) {
        self.status.fetch_and(!bits, Ordering::SeqCst);
    }
}

/// Copies `src` (a device's config space) into `data` at `offset`, leaving
/// bytes beyond the end untouched (reads past the config space read zero).
pub fn read_config_bytes(src: &[u8], offset: u64, data: &mut [u8]) {
    data.fill(0);
    let Ok(start) = usize::try_from(offset) else {
        return;
    };
    let Some(avail) = src.get(start..) else {
        return;
    };
    let n = avail.len().min(data.len());
    data[..n].copy_from_slice(&avail[..n]);
}
