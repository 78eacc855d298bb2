//! Snapshots of virtio-mmio devices: the transport's registers and every
//! queue's position, so that a restored driver finds its rings where it
//! left them. Queues come from the device once it is active (it owns them
//! after DRIVER_OK) and from the transport before.

use serde::{Deserialize, Serialize};
use virtio_queue::{Queue, QueueState, QueueT};

use super::VirtioDevice;
use super::mmio::{MmioTransport, S_DRIVER_OK};

/// Errors while restoring a device.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The snapshot's device in this slot is another kind.
    #[error(
        "virtio slot {slot}: the snapshot holds a device of type {saved}, the VM has type {built}; \
         give the restore the same disks and vsock as the snapshot's VM"
    )]
    DeviceType {
        /// The MMIO slot.
        slot: usize,
        /// Type in the snapshot.
        saved: u32,
        /// Type built now.
        built: u32,
    },
    /// A saved queue is not one virtio-queue accepts, or lies outside memory.
    #[error("virtio slot {slot}: saved queue {queue} is invalid ({why}); the snapshot is damaged")]
    Queue {
        /// The MMIO slot.
        slot: usize,
        /// Queue index.
        queue: usize,
        /// What is wrong.
        why: String,
    },
    /// The device refused its restored queues.
    #[error("virtio slot {slot}: the device refused its restored queues")]
    Activate {
        /// The MMIO slot.
        slot: usize,
        /// Why.
        #[source]
        source: super::ActivateError,
    },
}

/// One queue's position (virtio-queue's `QueueState`, which has no serde).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    /// Largest size the device offers.
    pub max_size: u16,
    /// Next available-ring entry the device reads.
    pub next_avail: u16,
    /// Next used-ring entry the device writes.
    pub next_used: u16,
    /// VIRTIO_F_RING_EVENT_IDX negotiated.
    pub event_idx: bool,
    /// Size the driver chose.
    pub size: u16,
    /// The driver marked it ready.
    pub ready: bool,
    /// Descriptor table address.
    pub desc_table: u64,
    /// Available ring address.
    pub avail_ring: u64,
    /// Used ring address.
    pub used_ring: u64,
}

impl From<QueueState> for QueueSnapshot {
    fn from(q: QueueState) -> Self {
        QueueSnapshot {
            max_size: q.max_size,
            next_avail: q.next_avail,
            next_used: q.next_used,
            event_idx: q.event_idx_enabled,
            size: q.size,
            ready: q.ready,
            desc_table: q.desc_table,
            avail_ring: q.avail_ring,
            used_ring: q.used_ring,
        }
    }
}

impl From<QueueSnapshot> for QueueState {
    fn from(q: QueueSnapshot) -> Self {
        QueueState {
            max_size: q.max_size,
            next_avail: q.next_avail,
            next_used: q.next_used,
            event_idx_enabled: q.event_idx,
            size: q.size,
            ready: q.ready,
            desc_table: q.desc_table,
            avail_ring: q.avail_ring,
            used_ring: q.used_ring,
        }
    }
}

/// A virtio-mmio device as a snapshot holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportSnapshot {
    /// The device type (checked against the device built at restore).
    pub device_type: u32,
    /// Device status register.
    pub status: u32,
    /// Features the driver accepted.
    pub acked_features: u64,
    /// QueueSel.
    pub queue_select: u32,
    /// DeviceFeaturesSel.
    pub features_select: u32,
    /// DriverFeaturesSel.
    pub acked_features_select: u32,
    /// ConfigGeneration.
    pub config_generation: u32,
    /// InterruptStatus bits not yet acknowledged.
    pub interrupt_status: u32,
    /// Every queue.
    pub queues: Vec<QueueSnapshot>,
}

impl MmioTransport {
    /// The transport and its queues; `device` is this transport's device,
    /// locked by the caller (who holds it until guest memory is saved too).
    pub fn save(&self, device: &dyn VirtioDevice) -> TransportSnapshot {
        let queues = match device.queue_states() {
            Some(active) if self.status & S_DRIVER_OK != 0 => active,
            _ => self.queues.iter().map(Queue::state).collect(),
        };
        TransportSnapshot {
            device_type: device.device_type(),
            status: self.status,
            acked_features: self.acked_features,
            queue_select: self.queue_select,
            features_select: self.features_select,
            acked_features_select: self.acked_features_select,
            config_generation: self.config_generation,
            interrupt_status: self.interrupt.status(),
            queues: queues.into_iter().map(QueueSnapshot::from).collect(),
        }
    }

    /// Puts a fresh transport (and its device, if the driver had started
    /// it) where `saved` was. `slot` names the device in errors.
    pub fn restore(&mut self, slot: usize, saved: &TransportSnapshot) -> Result<(), PersistError> {
        let built = super::mmio::lock(&self.device).device_type();
        if built != saved.device_type {
            return Err(PersistError::DeviceType {
                slot,
                saved: saved.device_type,
                built,
            });
        }
        let queues = saved
            .queues
            .iter()
            .enumerate()
            .map(|(queue, q)| {
                let queue_err = |why: String| PersistError::Queue { slot, queue, why };
                let restored =
                    Queue::try_from(QueueState::from(*q)).map_err(|e| queue_err(e.to_string()))?;
                if restored.ready() && !restored.is_valid(&self.mem) {
                    return Err(queue_err("its rings lie outside guest memory".into()));
                }
                Ok(restored)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.status = saved.status;
        self.acked_features = saved.acked_features;
        self.queue_select = saved.queue_select;
        self.features_select = saved.features_select;
        self.acked_features_select = saved.acked_features_select;
        self.config_generation = saved.config_generation;
        if saved.status & S_DRIVER_OK != 0 {
            let mut device = super::mmio::lock(&self.device);
            device
                .activate(self.mem.clone(), queues, self.interrupt.clone())
                .map_err(|source| PersistError::Activate { slot, source })?;
            device.after_restore();
        } else {
            self.queues = queues;
        }
        if saved.interrupt_status != 0 {
            // Raised again: the guest acknowledges what it had not yet seen.
            let _ = self.interrupt.signal(saved.interrupt_status);
        }
        Ok(())
    }
}
