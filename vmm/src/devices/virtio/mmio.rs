//! The virtio-mmio transport (virtio 1.2, section 4.2.2, version 2 register
//! layout): feature negotiation, queue setup and the status state machine.
//! On DRIVER_OK it hands the queues to the device.

use std::sync::{Arc, Mutex, PoisonError};

use virtio_queue::{Queue, QueueT};
use vm_memory::GuestMemoryMmap;

use super::{INT_CONFIG, Interrupt, VIRTIO_F_VERSION_1, VirtioDevice};
use crate::devices::bus::BusDevice;

const MAGIC: u32 = 0x7472_6976; // "virt"
const VENDOR: u32 = 0x4355_4249; // "CUBI"

const S_DRIVER: u32 = 2;
pub(super) const S_DRIVER_OK: u32 = 4;
const S_FEATURES_OK: u32 = 8;
const S_NEEDS_RESET: u32 = 0x40;

/// One virtio device behind an MMIO window.
pub struct MmioTransport {
    pub(super) device: Arc<Mutex<dyn VirtioDevice>>,
    pub(super) mem: GuestMemoryMmap,
    pub(super) interrupt: Arc<Interrupt>,
    pub(super) queues: Vec<Queue>,
    pub(super) queue_select: u32,
    pub(super) features_select: u32,
    pub(super) acked_features_select: u32,
    pub(super) acked_features: u64,
    pub(super) status: u32,
    pub(super) config_generation: u32,
}

impl MmioTransport {
    /// A transport for `device`, raising `interrupt`.
    pub fn new(
        device: Arc<Mutex<dyn VirtioDevice>>,
        mem: GuestMemoryMmap,
        interrupt: Arc<Interrupt>,
    ) -> Self {
        let queues = fresh_queues(&*lock(&device));
        MmioTransport {
            device,
            mem,
            interrupt,
            queues,
            queue_select: 0,
            features_select: 0,
            acked_features_select: 0,
            acked_features: 0,
            status: 0,
            config_generation: 0,
        }
    }

    /// The device behind this transport (a snapshot locks it).
    pub fn device(&self) -> Arc<Mutex<dyn VirtioDevice>> {
        self.device.clone()
    }

    fn queue(&mut self) -> Option<&mut Queue> {
        if self.status & S_DRIVER_OK != 0 {
            return None; // queues belong to the device now
        }
        self.queues.get_mut(self.queue_select as usize)
    }

    fn read_reg(&self, offset: u64) -> u32 {
        let selected = self.queues.get(self.queue_select as usize);
        match offset {
            0x00 => MAGIC,
            0x04 => 2,
            0x08 => lock(&self.device).device_type(),
            0x0c => VENDOR,
            0x10 => self.device_features_word(),
            0x34 => selected.map_or(0, |q| u32::from(q.max_size())),
            0x44 => selected.map_or(0, |q| u32::from(q.ready())),
            0x60 => self.interrupt.status(),
            0x70 => self.status,
            0xfc => self.config_generation,
            _ => 0,
        }
    }

    fn device_features_word(&self) -> u32 {
        let features = lock(&self.device).features();
        match self.features_select {
            0 => features as u32,
            1 => (features >> 32) as u32,
            _ => 0,
        }
    }

    fn write_reg(&mut self, offset: u64, v: u32) {
        match offset {
            0x14 => self.features_select = v,
            0x20 => self.ack_features_word(v),
            0x24 => self.acked_features_select = v,
            0x30 => self.queue_select = v,
            0x38 => self.with_queue(|q| q.set_size(v as u16)),
            0x44 => self.with_queue(|q| q.set_ready(v == 1)),
            0x64 => self.interrupt.ack(v),
            0x70 => self.set_status(v),
            0x80 => self.with_queue(|q| q.set_desc_table_address(Some(v), None)),
            0x84 => self.with_queue(|q| q.set_desc_table_address(None, Some(v))),
            0x90 => self.with_queue(|q| q.set_avail_ring_address(Some(v), None)),
            0x94 => self.with_queue(|q| q.set_avail_ring_address(None, Some(v))),
            0xa0 => self.with_queue(|q| q.set_used_ring_address(Some(v), None)),
            0xa4 => self.with_queue(|q| q.set_used_ring_address(None, Some(v))),
            _ => {} // QueueNotify (0x50) is served by an ioeventfd in KVM.
        }
    }

    fn with_queue(&mut self, f: impl FnOnce(&mut Queue)) {
        if self.status & S_FEATURES_OK != 0
            && let Some(q) = self.queue()
        {
            f(q);
        }
    }

    fn ack_features_word(&mut self, v: u32) {
        if self.status & (S_DRIVER | S_FEATURES_OK) != S_DRIVER {
            return; // only between DRIVER and FEATURES_OK
        }
        let offered = lock(&self.device).features();
        let word = match self.acked_features_select {
            0 => u64::from(v),
            1 => u64::from(v) << 32,
            _ => return,
        };
        let mask = if self.acked_features_select == 0 {
            0xffff_ffff
        } else {
            !0xffff_ffffu64
        };
        self.acked_features = (self.acked_features & !mask) | (word & offered);
    }

    fn set_status(&mut self, v: u32) {
        if v == 0 {
            return self.reset();
        }
        if v & self.status != self.status {
            return; // bits are only cleared by a reset
        }
        let new = v & !self.status;
        let mut next = v & !S_DRIVER_OK;
        let version_1 = self.acked_features & VIRTIO_F_VERSION_1 != 0;
        if new & S_FEATURES_OK != 0 && (!version_1 || self.status & S_DRIVER == 0) {
            next &= !S_FEATURES_OK; // the driver reads back and sees the refusal
        }
        self.status = next | (self.status & S_DRIVER_OK);
        if new & S_DRIVER_OK != 0 && self.status & S_FEATURES_OK != 0 {
            self.activate();
        }
    }

    fn activate(&mut self) {
        if self
            .queues
            .iter()
            .any(|q| q.ready() && !q.is_valid(&self.mem))
        {
            return self.needs_reset();
        }
        let fresh = fresh_queues(&*lock(&self.device));
        let queues = std::mem::replace(&mut self.queues, fresh);
        let result = lock(&self.device).activate(self.mem.clone(), queues, self.interrupt.clone());
        match result {
            Ok(()) => self.status |= S_DRIVER_OK,
            Err(_) => self.needs_reset(),
        }
    }

    fn needs_reset(&mut self) {
        self.status |= S_NEEDS_RESET;
        // Nothing more can be done if the interrupt cannot be raised.
        let _ = self.interrupt.signal(INT_CONFIG);
    }

    fn reset(&mut self) {
        if self.status & S_DRIVER_OK != 0 {
            lock(&self.device).reset();
        }
        self.queues = fresh_queues(&*lock(&self.device));
        self.status = 0;
        self.acked_features = 0;
        self.queue_select = 0;
        self.features_select = 0;
        self.acked_features_select = 0;
        self.interrupt.ack(u32::MAX);
    }
}

fn fresh_queues(device: &dyn VirtioDevice) -> Vec<Queue> {
    let sizes = device.queue_max_sizes();
    sizes
        .iter()
        .map(|&s| Queue::new(s).expect("device queue sizes are powers of two"))
        .collect()
}

pub(super) fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BusDevice for MmioTransport {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        if offset >= 0x100 {
            return lock(&self.device).read_config(offset - 0x100, data);
        }
        let value = if data.len() == 4 {
            self.read_reg(offset)
        } else {
            0
        };
        let bytes = value.to_le_bytes();
        let n = data.len().min(4);
        data[..n].copy_from_slice(&bytes[..n]);
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if offset >= 0x100 {
            return; // no device here has a writable config space
        }
        if let Ok(bytes) = <[u8; 4]>::try_from(data) {
            self.write_reg(offset, u32::from_le_bytes(bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::ActivateError;
    use vm_memory::GuestAddress;
    use vmm_sys_util::eventfd::EventFd;

    #[derive(Default)]
    struct Dummy {
        activated: bool,
    }

    impl VirtioDevice for Dummy {
        fn device_type(&self) -> u32 {
            42
        }
        fn queue_max_sizes(&self) -> &[u16] {
            &[16]
        }
        fn features(&self) -> u64 {
            VIRTIO_F_VERSION_1 | 1
        }
        fn read_config(&self, offset: u64, data: &mut [u8]) {
            crate::devices::virtio::read_config_bytes(&[7, 8], offset, data);
        }
        fn activate(
            &mut self,
            _: GuestMemoryMmap,
            q: Vec<Queue>,
            _: Arc<Interrupt>,
        ) -> Result<(), ActivateError> {
            if !q[0].ready() {
                return Err(ActivateError::QueueNotReady(0));
            }
            self.activated = true;
            Ok(())
        }
        fn reset(&mut self) {
            self.activated = false;
        }
        fn queue_states(&self) -> Option<Vec<virtio_queue::QueueState>> {
            None
        }
        fn after_restore(&mut self) {}
    }

    fn transport() -> (MmioTransport, Arc<Mutex<Dummy>>) {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x10000)]).expect("memory");
        let dev = Arc::new(Mutex::new(Dummy::default()));
        let irq = Arc::new(Interrupt::new(
            EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"),
        ));
        (MmioTransport::new(dev.clone(), mem, irq), dev)
    }

    fn w(t: &mut MmioTransport, off: u64, v: u32) {
        t.write(off, &v.to_le_bytes());
    }

    fn r(t: &mut MmioTransport, off: u64) -> u32 {
        let mut b = [0u8; 4];
        t.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    fn negotiate(t: &mut MmioTransport, high_word: u32) {
        w(t, 0x70, 1);
        w(t, 0x70, 3);
        w(t, 0x24, 1);
        w(t, 0x20, high_word);
        w(t, 0x70, 3 | S_FEATURES_OK);
    }

    #[test]
    fn identity_registers() {
        let (mut t, _) = transport();
        assert_eq!((r(&mut t, 0), r(&mut t, 4), r(&mut t, 8)), (MAGIC, 2, 42));
        let mut cfg = [0u8; 4];
        t.read(0x100, &mut cfg);
        assert_eq!(cfg, [7, 8, 0, 0]);
    }

    #[test]
    fn features_ok_needs_version_1() {
        let (mut t, _) = transport();
        negotiate(&mut t, 0);
        assert_eq!(
            r(&mut t, 0x70) & S_FEATURES_OK,
            0,
            "legacy drivers are refused"
        );
        w(&mut t, 0x70, 0);
        negotiate(&mut t, 1);
        assert_ne!(r(&mut t, 0x70) & S_FEATURES_OK, 0);
    }

    #[test]
    fn driver_ok_activates_only_valid_queues() {
        let (mut t, dev) = transport();
        negotiate(&mut t, 1);
        w(&mut t, 0x70, 3 | S_FEATURES_OK | S_DRIVER_OK);
        assert!(!dev.lock().expect("lock").activated, "queue 0 not ready");
        assert_ne!(r(&mut t, 0x70) & S_NEEDS_RESET, 0);
        w(&mut t, 0x70, 0);
        negotiate(&mut t, 1);
        w(&mut t, 0x38, 16);
        w(&mut t, 0x80, 0x1000);
        w(&mut t, 0x90, 0x2000);
        w(&mut t, 0xa0, 0x3000);
        w(&mut t, 0x44, 1);
        w(&mut t, 0x70, 3 | S_FEATURES_OK | S_DRIVER_OK);
        assert!(dev.lock().expect("lock").activated);
        w(&mut t, 0x70, 0);
        assert!(
            !dev.lock().expect("lock").activated,
            "status 0 resets the device"
        );
    }

    #[test]
    fn queue_outside_memory_is_not_activated() {
        let (mut t, dev) = transport();
        negotiate(&mut t, 1);
        w(&mut t, 0x38, 16);
        w(&mut t, 0x80, 0xfff0);
        w(&mut t, 0x84, 0xffff_ffff);
        w(&mut t, 0x44, 1);
        w(&mut t, 0x70, 3 | S_FEATURES_OK | S_DRIVER_OK);
        assert!(!dev.lock().expect("lock").activated);
    }
}
