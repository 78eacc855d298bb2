//! The virtio-vsock device and its host-side multiplexer, run on the event
//! thread: TX packets from the guest drive connections; host socket data and
//! control replies queue up and go out as RX buffers and credit allow.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use virtio_queue::{Queue, QueueT};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;

use super::HOST_CID;
use super::connection::{Connection, HOST_BUF_ALLOC, State};
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
const DATA_CONN: u32 = 4;
/// Host ports for host-initiated streams start here (as in Firecracker).
const FIRST_LOCAL_PORT: u32 = 1 << 30;

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

struct Active {
    mem: GuestMemoryMmap,
    queues: Vec<Queue>,
    interrupt: Arc<Interrupt>,
}

/// A virtio-vsock device with a hybrid Unix-socket host side.
pub struct Vsock {
    cid: u64,
    uds_path: PathBuf,
    listener: UnixListener,
    queue_evts: Vec<EventFd>,
    active: Option<Active>,
    conns: HashMap<RawFd, Connection>,
    ports: HashMap<(u32, u32), RawFd>,
    polled: HashMap<RawFd, EventSet>,
    dead: Vec<Connection>,
    control: VecDeque<Header>,
    next_local_port: u32,
    stats: VsockStats,
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
        Ok(Vsock {
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
            next_local_port: FIRST_LOCAL_PORT,
            stats: VsockStats::default(),
        })
    }

    /// Packet counters.
    pub fn stats(&self) -> VsockStats {
        self.stats
    }

    fn header(&self, op: u16, local: u32, peer: u32, len: u32, fwd_cnt: u32) -> Header {
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

    fn push_control(&mut self, op: u16, local: u32, peer: u32, flags: u32) {
        let fwd = self.conn_by_ports(local, peer).map_or(0, |c| c.fwd_cnt);
        let mut h = self.header(op, local, peer, 0, fwd);
        h.flags = flags;
        self.control.push_back(h);
    }

    fn conn_by_ports(&self, local: u32, peer: u32) -> Option<&Connection> {
        self.ports
            .get(&(local, peer))
            .and_then(|fd| self.conns.get(fd))
    }

    fn add_conn(&mut self, conn: Connection) {
        let fd = conn.stream.as_raw_fd();
        if conn.state != State::AwaitingConnect {
            self.ports.insert((conn.local_port, conn.peer_port), fd);
        }
        self.conns.insert(fd, conn);
    }

    fn close(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.remove(&fd) {
            self.ports.remove(&(conn.local_port, conn.peer_port));
            self.dead.push(conn);
        }
    }

    /// Drains the TX queue and acts on every packet.
    pub fn process_tx(&mut self) {
        let Some(mut active) = self.active.take() else {
            return;
        };
        let mut used = false;
        while let Some(chain) = active.queues[TXQ].pop_descriptor_chain(&active.mem) {
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
        if used {
            let _ = active.interrupt.signal(INT_VRING);
        }
        self.active = Some(active);
    }

    fn on_guest_packet(&mut self, h: Header, data: Vec<u8>) {
        self.stats.tx_packets += 1;
        let (src_cid, dst_cid, type_, op) = (h.src_cid, h.dst_cid, h.type_, h.op);
        if src_cid != self.cid || dst_cid != HOST_CID {
            self.stats.bad_packets += 1;
            return;
        }
        let (local, peer) = (h.dst_port, h.src_port);
        if type_ != TYPE_STREAM {
            return self.push_control(OP_RST, local, peer, 0);
        }
        let fd = self.ports.get(&(local, peer)).copied();
        if let Some(conn) = fd.and_then(|fd| self.conns.get_mut(&fd)) {
            conn.peer_buf_alloc = h.buf_alloc;
            conn.peer_fwd_cnt = h.fwd_cnt;
        }
        match (op, fd) {
            (OP_REQUEST, None) => self.guest_connect(local, peer),
            (OP_RESPONSE, Some(fd)) => self.guest_accepted(fd),
            (OP_RW, Some(fd)) => self.guest_data(fd, &data),
            (OP_CREDIT_UPDATE, Some(_)) => {}
            (OP_CREDIT_REQUEST, Some(_)) => self.push_control(OP_CREDIT_UPDATE, local, peer, 0),
            (OP_SHUTDOWN, Some(fd)) => self.guest_shutdown(fd),
            (OP_RST, Some(fd)) => self.close(fd),
            (OP_RST, None) => {}
            _ => self.push_control(OP_RST, local, peer, 0),
        }
    }

    /// A guest-initiated stream: connect to `<uds_path>_<port>`.
    fn guest_connect(&mut self, local: u32, peer: u32) {
        let mut path = self.uds_path.clone().into_os_string();
        path.push(format!("_{local}"));
        let stream = UnixStream::connect(&path).and_then(|s| s.set_nonblocking(true).map(|()| s));
        match stream {
            Ok(stream) => {
                self.add_conn(Connection::new(stream, State::Established, local, peer));
                self.push_control(OP_RESPONSE, local, peer, 0);
            }
            Err(_) => self.push_control(OP_RST, local, peer, 0),
        }
    }

    fn guest_accepted(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        if conn.state != State::Connecting {
            let (l, p) = (conn.local_port, conn.peer_port);
            self.close(fd);
            return self.push_control(OP_RST, l, p, 0);
        }
        conn.to_host
            .extend_from_slice(format!("OK {}\n", conn.local_port).as_bytes());
        // The handshake reply is written before the state changes, so its
        // bytes do not count as forwarded stream data.
        let flushed = conn.flush_to_host();
        conn.state = State::Established;
        if flushed.is_err() {
            self.host_gone(fd);
        }
    }

    fn guest_data(&mut self, fd: RawFd, data: &[u8]) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        let over_credit = conn.to_host.len() + data.len() > HOST_BUF_ALLOC as usize;
        if conn.state != State::Established || over_credit {
            return self.host_gone(fd);
        }
        conn.to_host.extend_from_slice(data);
        if conn.flush_to_host().is_err() {
            return self.host_gone(fd);
        }
        self.maybe_credit_update(fd);
    }

    fn maybe_credit_update(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        if conn.fwd_cnt.wrapping_sub(conn.fwd_cnt_sent) >= HOST_BUF_ALLOC / 4 {
            conn.fwd_cnt_sent = conn.fwd_cnt;
            let (l, p) = (conn.local_port, conn.peer_port);
            self.push_control(OP_CREDIT_UPDATE, l, p, 0);
        }
    }

    fn guest_shutdown(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        conn.state = State::Closing;
        let (l, p) = (conn.local_port, conn.peer_port);
        if conn.flush_to_host().is_err() || conn.to_host.is_empty() {
            self.close(fd);
        }
        self.push_control(OP_RST, l, p, 0);
    }

    /// The host side failed or overran: reset the guest side and close.
    fn host_gone(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get(&fd) else {
            return;
        };
        let (l, p, state) = (conn.local_port, conn.peer_port, conn.state);
        self.close(fd);
        if state != State::AwaitingConnect {
            self.push_control(OP_RST, l, p, 0);
        }
    }

    fn accept_all(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_ok() {
                self.add_conn(Connection::new(stream, State::AwaitingConnect, 0, 0));
            }
        }
    }

    fn on_host_event(&mut self, fd: RawFd, set: EventSet) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        if set.contains(EventSet::OUT) && conn.flush_to_host().is_err() {
            return self.host_gone(fd);
        }
        if set.contains(EventSet::IN) {
            self.host_readable(fd);
        } else if set.intersects(EventSet::HANG_UP | EventSet::ERROR) {
            self.host_eof(fd);
        }
        let closing = self
            .conns
            .get(&fd)
            .is_some_and(|c| c.state == State::Closing && c.to_host.is_empty());
        if closing {
            self.close(fd);
        } else {
            self.maybe_credit_update(fd);
        }
    }

    fn host_readable(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        if conn.state == State::AwaitingConnect {
            return self.host_handshake(fd);
        }
        if conn.state != State::Established {
            return;
        }
        match conn.read_from_host() {
            Ok(0) => self.host_eof(fd),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => self.host_gone(fd),
        }
    }

    fn host_handshake(&mut self, fd: RawFd) {
        let local = self.next_local_port;
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        match conn.read_connect_line() {
            Ok(None) => {}
            Ok(Some(port)) => {
                self.next_local_port = local.wrapping_add(1).max(FIRST_LOCAL_PORT);
                conn.state = State::Connecting;
                conn.local_port = local;
                conn.peer_port = port;
                self.ports.insert((local, port), fd);
                self.push_control(OP_REQUEST, local, port, 0);
            }
            Err(_) => self.close(fd),
        }
    }

    fn host_eof(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        if conn.state != State::Established {
            return self.host_gone(fd);
        }
        conn.state = State::Closing;
        let (l, p) = (conn.local_port, conn.peer_port);
        self.push_control(OP_SHUTDOWN, l, p, 3);
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

    fn has_rx_work(&self) -> bool {
        !self.control.is_empty() || self.conns.values().any(sendable)
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
        let Some(conn) = self.conns.values_mut().find(|c| sendable(c)) else {
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

    /// Brings epoll interest in line with what each connection wants, and
    /// drops closed connections (after removing them from epoll).
    fn reconcile(&mut self, ops: &mut EventOps) {
        for conn in self.dead.drain(..) {
            if self.polled.remove(&conn.stream.as_raw_fd()).is_some() {
                let _ = ops.remove(Events::empty(&conn.stream));
            }
        }
        for (fd, conn) in &self.conns {
            let mut want = EventSet::empty();
            if conn.wants_read() {
                want |= EventSet::IN;
            }
            if conn.wants_write() {
                want |= EventSet::OUT;
            }
            update_interest(ops, &mut self.polled, *fd, want);
        }
    }
}

fn sendable(c: &Connection) -> bool {
    c.state == State::Established && !c.to_guest.is_empty() && c.peer_credit() > 0
}

fn update_interest(
    ops: &mut EventOps,
    polled: &mut HashMap<RawFd, EventSet>,
    fd: RawFd,
    want: EventSet,
) {
    let events = Events::with_data_raw(fd, DATA_CONN, want);
    let result = match polled.get(&fd) {
        Some(&have) if have == want => return,
        Some(_) if want.is_empty() => ops.remove(events),
        Some(_) => ops.modify(events),
        None if want.is_empty() => return,
        None => ops.add(events),
    };
    if result.is_ok() {
        if want.is_empty() {
            polled.remove(&fd);
        } else {
            polled.insert(fd, want);
        }
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

    fn reset(&mut self) {
        self.active = None;
        let fds: Vec<RawFd> = self.conns.keys().copied().collect();
        for fd in fds {
            self.close(fd);
        }
        self.control.clear();
    }
}

impl MutEventSubscriber for Vsock {
    fn process(&mut self, events: Events, ops: &mut EventOps) {
        match events.data() {
            d if d as usize == RXQ || d as usize == EVQ => {
                let _ = self.queue_evts[d as usize].read();
            }
            d if d as usize == TXQ => {
                let _ = self.queue_evts[TXQ].read();
                self.process_tx();
            }
            DATA_LISTENER => self.accept_all(),
            _ => self.on_host_event(events.fd(), events.event_set()),
        }
        self.deliver_rx();
        self.reconcile(ops);
    }

    fn init(&mut self, ops: &mut EventOps) {
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
