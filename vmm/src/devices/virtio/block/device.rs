//! The virtio-blk device: one request queue, processed on the event thread.

use std::sync::Arc;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use super::request::{self, Request, T_FLUSH, T_GET_ID, T_IN, T_OUT};
use super::{Disk, SECTOR_SIZE};
use crate::devices::virtio::chain;
use crate::devices::virtio::{
    ActivateError, INT_VRING, Interrupt, TYPE_BLOCK, VIRTIO_F_VERSION_1, VirtioDevice,
    read_config_bytes,
};

const QUEUE_SIZE: u16 = 256;
const F_RO: u64 = 1 << 5;
const F_FLUSH: u64 = 1 << 9;
const S_OK: u8 = 0;
const S_IOERR: u8 = 1;
const S_UNSUPP: u8 = 2;
/// Bounce buffer size: requests are copied through it in pieces.
const BOUNCE: usize = 64 * 1024;

/// Counters a test or the metrics API can read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BlockStats {
    /// Requests completed with S_OK.
    pub ok: u64,
    /// Requests answered with an error status.
    pub failed: u64,
    /// Chains refused outright (no usable status byte, loops, bad addresses).
    pub bad_chains: u64,
}

struct Active {
    mem: GuestMemoryMmap,
    queue: Queue,
    interrupt: Arc<Interrupt>,
}

/// A virtio-blk device.
pub struct Block {
    id: String,
    disk: Disk,
    queue_evt: EventFd,
    active: Option<Active>,
    bounce: Vec<u8>,
    stats: BlockStats,
}

impl Block {
    /// A device serving `disk`, notified through `queue_evt`.
    pub fn new(id: String, disk: Disk, queue_evt: EventFd) -> Self {
        Block {
            id,
            disk,
            queue_evt,
            active: None,
            bounce: Vec::new(),
            stats: BlockStats::default(),
        }
    }

    /// Request counters.
    pub fn stats(&self) -> BlockStats {
        self.stats
    }

    /// The disk's size in bytes, as the guest sees it.
    pub fn disk_size(&self) -> u64 {
        self.disk.size()
    }

    /// Handles every available request; returns whether any were used.
    pub fn process_queue(&mut self) -> bool {
        let Some(mut active) = self.active.take() else {
            return false;
        };
        let mut used = false;
        while let Some(chain) = active.queue.pop_descriptor_chain(&active.mem) {
            let head = chain.head_index();
            let len = self.handle_chain(&chain, &active.mem);
            // A failed add_used means the used ring is gone; stop this round.
            if active.queue.add_used(&active.mem, head, len).is_err() {
                break;
            }
            used = true;
        }
        if used {
            // The guest polls or will see the next interrupt.
            let _ = active.interrupt.signal(INT_VRING);
        }
        self.active = Some(active);
        used
    }

    fn handle_chain<M>(
        &mut self,
        chain: &virtio_queue::DescriptorChain<M>,
        mem: &GuestMemoryMmap,
    ) -> u32
    where
        M: std::ops::Deref + Clone,
        M::Target: vm_memory::GuestMemory,
    {
        let Ok(descs) = chain::validate(chain, mem) else {
            self.stats.bad_chains += 1;
            return 0;
        };
        let capacity = self.disk.size() / SECTOR_SIZE;
        match request::parse(&descs, mem, capacity) {
            Ok(req) => self.execute(&req, mem),
            Err(_) => self.refuse(&descs, mem),
        }
    }

    fn refuse(
        &mut self,
        descs: &[virtio_queue::desc::split::Descriptor],
        mem: &GuestMemoryMmap,
    ) -> u32 {
        match request::status_addr(descs) {
            Some(status) if mem.write_obj(S_IOERR, status).is_ok() => {
                self.stats.failed += 1;
                1
            }
            _ => {
                self.stats.bad_chains += 1;
                0
            }
        }
    }

    fn execute(&mut self, req: &Request, mem: &GuestMemoryMmap) -> u32 {
        let (status, written) = match req.kind {
            T_IN => self
                .copy(req, mem, true)
                .map_or((S_IOERR, 0), |()| (S_OK, req.data_len() as u32)),
            T_OUT => self
                .copy(req, mem, false)
                .map_or((S_IOERR, 0), |()| (S_OK, 0)),
            T_FLUSH => (
                if self.disk.flush().is_ok() {
                    S_OK
                } else {
                    S_IOERR
                },
                0,
            ),
            T_GET_ID => self.get_id(req, mem),
            _ => (S_UNSUPP, 0),
        };
        if status == S_OK {
            self.stats.ok += 1
        } else {
            self.stats.failed += 1
        }
        if mem.write_obj(status, req.status).is_err() {
            return 0;
        }
        written + 1
    }

    fn get_id(&self, req: &Request, mem: &GuestMemoryMmap) -> (u8, u32) {
        let mut id = [0u8; 20];
        let n = self.id.len().min(20);
        id[..n].copy_from_slice(&self.id.as_bytes()[..n]);
        let Some(&(addr, len)) = req.data.first() else {
            return (S_IOERR, 0);
        };
        let len = (len as usize).min(20);
        match mem.write_slice(&id[..len], addr) {
            Ok(()) => (S_OK, len as u32),
            Err(_) => (S_IOERR, 0),
        }
    }

    /// Moves data between the disk and the request's buffers, in bounce-sized pieces.
    fn copy(&mut self, req: &Request, mem: &GuestMemoryMmap, to_guest: bool) -> Result<(), ()> {
        if !to_guest && self.disk.read_only() {
            return Err(());
        }
        self.bounce.resize(BOUNCE, 0);
        let mut offset = req.sector * SECTOR_SIZE;
        for &(addr, len) in &req.data {
            let mut done = 0u64;
            while done < u64::from(len) {
                let n = (u64::from(len) - done).min(BOUNCE as u64) as usize;
                let at = GuestAddress(addr.0 + done);
                self.copy_piece(mem, at, offset, n, to_guest)?;
                done += n as u64;
                offset += n as u64;
            }
        }
        Ok(())
    }

    fn copy_piece(
        &mut self,
        mem: &GuestMemoryMmap,
        at: GuestAddress,
        offset: u64,
        n: usize,
        to_guest: bool,
    ) -> Result<(), ()> {
        let buf = &mut self.bounce[..n];
        if to_guest {
            self.disk.read_at(buf, offset).map_err(|_| ())?;
            mem.write_slice(buf, at).map_err(|_| ())
        } else {
            mem.read_slice(buf, at).map_err(|_| ())?;
            self.disk.write_at(buf, offset).map_err(|_| ())
        }
    }
}

impl VirtioDevice for Block {
    fn device_type(&self) -> u32 {
        TYPE_BLOCK
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &[QUEUE_SIZE]
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1 | F_FLUSH | if self.disk.read_only() { F_RO } else { 0 }
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        let capacity = (self.disk.size() / SECTOR_SIZE).to_le_bytes();
        read_config_bytes(&capacity, offset, data);
    }

    fn activate(
        &mut self,
        mem: GuestMemoryMmap,
        queues: Vec<Queue>,
        interrupt: Arc<Interrupt>,
    ) -> Result<(), ActivateError> {
        let got = queues.len();
        let queue = queues
            .into_iter()
            .next()
            .ok_or(ActivateError::QueueCount { expected: 1, got })?;
        if !queue.ready() {
            return Err(ActivateError::QueueNotReady(0));
        }
        self.active = Some(Active {
            mem,
            queue,
            interrupt,
        });
        Ok(())
    }

    fn reset(&mut self) {
        self.active = None;
    }

    fn queue_states(&self) -> Option<Vec<virtio_queue::QueueState>> {
        self.active.as_ref().map(|a| vec![a.queue.state()])
    }

    fn after_restore(&mut self) {
        // The event thread looks at the queue once it starts; a failed
        // write leaves the requests for the guest's next notification.
        let _ = self.queue_evt.write(1);
    }
}

impl MutEventSubscriber for Block {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        // Draining the counter can only fail if nothing was written; either way
        // the queue is looked at.
        let _ = self.queue_evt.read();
        self.process_queue();
    }

    fn init(&mut self, ops: &mut EventOps) {
        // Registration fails only if the fd is already registered: a bug.
        ops.add(Events::new(&self.queue_evt, EventSet::IN))
            .expect("queue eventfd registers once");
    }
}

#[cfg(test)]
mod tests;
