//! The virtio-vsock device, run on the event thread: TX packets from the
//! guest go to the host-side multiplexer (`muxer.rs`); control replies and
//! host data go out as RX buffers and the guest's credit allow.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::timerfd::TimerFd;

use super::HOST_CID;
use super::connection::{Connection, HOST_BUF_ALLOC};
use super::packet::{self, *};
use crate::devices::virtio::chain;
use crate::devices::virtio::{
    ActivateError, INT_VRING, Interrupt, TYPE_VSOCK, VIRTIO_F_VERSION_1, VirtioDevice,
    read_config_bytes,
};

const QUEUE_SIZE: u16 = 256;
const RXQ: usize = 0;
const TXQ: usize = 1;
const EVQ: usize = 2;
const DATA_LISTENER: u32 = 3;
pub(super) const DATA_CONN: u32 = 4;
const DATA_TIMER: u32 = 5;
/// Host ports for host-initiated streams start here (as in Firecracker).
pub(super) const FIRST_LOCAL_PORT: u32 = 1 << 30;
/// Control replies (RST, RESPONSE, credit updates) waiting for RX buffers,
/// at most. Past it the TX queue waits until the guest posts RX buffers: a
/// guest that sends without reading cannot grow the VMM's memory.
pub(super) const MAX_CONTROL: usize = 256;

/// Counters for tests and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VsockStats {
    /// TX chains or packets refused as malformed or spoofed.
    pub bad_packets: u64,
    /// Packets delivered to the guest.
    pub rx_packets: u64,
    /// Packets taken from the guest.
    pub tx_packets: u64,
}

pub(super) struct Active {
    mem: GuestMemoryMmap,
    queues: Vec<Queue>,
    interrupt: Arc<Interrupt>,
}

/// A virtio-vsock device with a hybrid Unix-socket host side.
pub struct Vsock {
    pub(super) connect_timer: TimerFd,
    pub(super) cid: u64,
    pub(super) uds_path: PathBuf,
    pub(super) listener: UnixListener,
    pub(super) queue_evts: Vec<EventFd>,
    pub(super) active: Option<Active>,
    pub(super) conns: HashMap<RawFd, Connection>,
    pub(super) ports: HashMap<(u32, u32), RawFd>,
    pub(super) polled: HashMap<RawFd, EventSet>,
    pub(super) dead: Vec<Connection>,
    pub(super) control: VecDeque<Header>,
    /// TX stopped at [`MAX_CONTROL`]; it resumes once RX buffers drain it.
    pub(super) tx_waiting: bool,
    pub(super) next_local_port: u32,
    pub(super) stats: VsockStats,
    /// A restore owes the guest a TRANSPORT_RESET event (sent once it
    /// posts an event buffer).
    pub(super) reset_owed: bool,
}

impl Vsock {
    /// A device for guest `cid`, listening on `uds_path`.
    pub fn new(
        cid: u64,
        uds_path: &Path,
        listener: UnixListener,
        queue_evts: Vec<EventFd>,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let connect_timer = TimerFd::new().map_err(io::Error::from)?;
        Ok(Vsock {
            connect_timer,
            cid,
            uds_path: uds_path.to_path_buf(),
            listener,
            queue_evts,
            active: None,
            conns: HashMap::new(),
            ports: HashMap::new(),
            polled: HashMap::new(),
            dead: Vec::new(),
            control: VecDeque::new(),
            tx_waiting: false,
            next_local_port: FIRST_LOCAL_PORT,
            stats: VsockStats::default(),
            reset_owed: false,
        })
    }

    /// Packet counters.
    pub fn stats(&self) -> VsockStats {
        self.stats
    }

    pub(super) fn header(&self, op: u16, local: u32, peer: u32, len: u32, fwd_cnt: u32) -> Header {
        Header {
            src_cid: HOST_CID,
            dst_cid: self.cid,
            src_port: local,
            dst_port: peer,
            len,
            type_: TYPE_STREAM,
            op,
            flags: 0,
            buf_alloc: HOST_BUF_ALLOC,
            fwd_cnt,
        }
    }

    /// Drains the TX queue and acts on every packet.
    pub fn process_tx(&mut self) {
        let Some(mut active) = self.active.take() else {
            return;
        };
        let mut used = false;
        while self.control.len() < MAX_CONTROL {
            let Some(chain) = active.queues[TXQ].pop_descriptor_chain(&active.mem) else {
                break;
            };
            let head = chain.head_index();
            let parsed = chain::validate(&chain, &active.mem)
                .ok()
                .and_then(|descs| packet::read(chain, &descs, &active.mem).ok());
            used |= active.queues[TXQ].add_used(&active.mem, head, 0).is_ok();
            match parsed {
                Some((h, data)) => self.on_guest_packet(h, data),
                None => self.stats.bad_packets += 1,
            }
        }
        self.tx_waiting = self.control.len() >= MAX_CONTROL;
        if used {
            let _ = active.interrupt.signal(INT_VRING);
        }
        self.active = Some(active);
    }

    /// Fills RX buffers, then takes up TX again if it waited for them.
    pub fn service_rx(&mut self) {
        self.deliver_rx();
        if self.tx_waiting && self.control.len() < MAX_CONTROL {
            self.process_tx();
            self.deliver_rx();
        }
    }

    /// Fills RX buffers with control packets, then stream data.
    pub fn deliver_rx(&mut self) {
        let Some(mut active) = self.active.take() else {
            return;
        };
        let mut used = false;
        while self.has_rx_work() {
            let Some(chain) = active.queues[RXQ].pop_descriptor_chain(&active.mem) else {
                break;
            };
            let head = chain.head_index();
            let len = self.fill_rx(chain, &active.mem);
            used |= active.queues[RXQ].add_used(&active.mem, head, len).is_ok();
        }
        if used {
            let _ = active.interrupt.signal(INT_VRING);
        }
        self.active = Some(active);
    }

    /// Tells the guest its connections are gone (VIRTIO_VSOCK_EVENT_TRANSPORT_RESET,
    /// virtio 1.2 5.10.6.4): the driver resets every socket and reads the
    /// CID again. Waits for an event buffer if the guest has none posted.
    fn send_reset_event(&mut self) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        let Some(chain) = active.queues[EVQ].pop_descriptor_chain(&active.mem) else {
            return;
        };
        let head = chain.head_index();
        let written = chain
            .writable()
            .next()
            .filter(|d| d.len() >= 4)
            .and_then(|d| active.mem.write_obj(0u32, d.addr()).ok())
            .map_or(0, |()| 4);
        if written == 0 {
            self.stats.bad_packets += 1;
        }
        let _ = active.queues[EVQ].add_used(&active.mem, head, written);
        let _ = active.interrupt.signal(INT_VRING);
        self.reset_owed = false;
    }

    fn has_rx_work(&self) -> bool {
        !self.control.is_empty() || self.conns.values().any(super::muxer::sendable)
    }

    fn fill_rx(
        &mut self,
        chain: virtio_queue::DescriptorChain<&GuestMemoryMmap>,
        mem: &GuestMemoryMmap,
    ) -> u32 {
        let capacity = chain::validate(&chain, mem)
            .ok()
            .filter(|d| d.iter().all(|d| d.is_write_only()))
            .and_then(|_| packet::rx_capacity(&chain, mem));
        let Some(capacity) = capacity else {
            self.stats.bad_packets += 1;
            return 0;
        };
        if let Some(h) = self.control.pop_front() {
            return self.write_rx(chain, mem, &h, &[]);
        }
        let Some(conn) = self.conns.values_mut().find(|c| super::muxer::sendable(c)) else {
            return 0;
        };
        let n = conn
            .to_guest
            .len()
            .min(conn.peer_credit() as usize)
            .min(capacity)
            .min(MAX_PAYLOAD as usize);
        let data: Vec<u8> = conn.to_guest.drain(..n).collect();
        conn.rx_cnt = conn.rx_cnt.wrapping_add(n as u32);
        conn.fwd_cnt_sent = conn.fwd_cnt;
        let (local, peer, fwd) = (conn.local_port, conn.peer_port, conn.fwd_cnt);
        let h = self.header(OP_RW, local, peer, n as u32, fwd);
        self.write_rx(chain, mem, &h, &data)
    }

    fn write_rx(
        &mut self,
        chain: virtio_queue::DescriptorChain<&GuestMemoryMmap>,
        mem: &GuestMemoryMmap,
        h: &Header,
        data: &[u8],
    ) -> u32 {
        self.stats.rx_packets += 1;
        packet::write(chain, mem, h, data).unwrap_or(0)
    }
}

impl VirtioDevice for Vsock {
    fn device_type(&self) -> u32 {
        TYPE_VSOCK
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &[QUEUE_SIZE; 3]
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        read_config_bytes(&self.cid.to_le_bytes(), offset, data);
    }

    fn activate(
        &mut self,
        mem: GuestMemoryMmap,
        queues: Vec<Queue>,
        interrupt: Arc<Interrupt>,
    ) -> Result<(), ActivateError> {
        if queues.len() != 3 {
            return Err(ActivateError::QueueCount {
                expected: 3,
                got: queues.len(),
            });
        }
        if let Some(i) = queues.iter().take(2).position(|q| !q.ready()) {
            return Err(ActivateError::QueueNotReady(i));
        }
        self.active = Some(Active {
            mem,
            queues,
            interrupt,
        });
        Ok(())
    }

    fn queue_states(&self) -> Option<Vec<virtio_queue::QueueState>> {
        self.active
            .as_ref()
            .map(|a| a.queues.iter().map(Queue::state).collect())
    }

    fn after_restore(&mut self) {
        // Whatever streams the snapshot's VM had are not here: the guest is
        // told, and the queues are looked at once the event thread starts.
        self.reset_owed = true;
        self.send_reset_event();
        for evt in &self.queue_evts {
            let _ = evt.write(1);
        }
    }

    fn reset(&mut self) {
        self.active = None;
        self.reset_owed = false;
        let fds: Vec<RawFd> = self.conns.keys().copied().collect();
        for fd in fds {
            self.close(fd);
        }
        self.control.clear();
        self.tx_waiting = false;
    }
}

impl MutEventSubscriber for Vsock {
    fn process(&mut self, events: Events, ops: &mut EventOps) {
        match events.data() {
            d if d as usize == RXQ => {
                let _ = self.queue_evts[RXQ].read();
            }
            d if d as usize == EVQ => {
                let _ = self.queue_evts[EVQ].read();
                if self.reset_owed {
                    self.send_reset_event();
                }
            }
            d if d as usize == TXQ => {
                let _ = self.queue_evts[TXQ].read();
                self.process_tx();
            }
            DATA_LISTENER => self.accept_all(),
            DATA_TIMER => self.expire_connects(),
            _ => self.on_host_event(events.fd(), events.event_set()),
        }
        self.service_rx();
        self.reconcile(ops);
    }

    fn init(&mut self, ops: &mut EventOps) {
        ops.add(Events::with_data(
            &self.connect_timer,
            DATA_TIMER,
            EventSet::IN,
        ))
        .expect("timer registers once");
        for (i, evt) in self.queue_evts.iter().enumerate() {
            // Fails only if the fd is registered twice: a bug.
            ops.add(Events::with_data(evt, i as u32, EventSet::IN))
                .expect("queue eventfd registers once");
        }
        ops.add(Events::with_data(
            &self.listener,
            DATA_LISTENER,
            EventSet::IN,
        ))
        .expect("listener registers once");
    }
}

#[cfg(test)]
mod tests;
