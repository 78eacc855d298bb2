//! The host side of virtio-vsock: the table of streams between guest ports
//! and host Unix sockets, the `CONNECT <port>` handshake, guest-initiated
//! connections to `<uds_path>_<port>`, credit updates, and the epoll
//! interest of every host socket.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use event_manager::{EventOps, EventSet, Events};

use super::HOST_CID;
use super::connection::{CONNECT_TIMEOUT, Connection, HOST_BUF_ALLOC, State};
use super::device::{DATA_CONN, FIRST_LOCAL_PORT, Vsock};
use super::packet::*;

/// Streams open at once, at most: a guest asking for more gets an RST, so
/// it cannot spend the VMM's file descriptors.
pub(super) const MAX_STREAMS: usize = 256;

impl Vsock {
    pub(super) fn push_control(&mut self, op: u16, local: u32, peer: u32, flags: u32) {
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

    pub(super) fn close(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.remove(&fd) {
            self.ports.remove(&(conn.local_port, conn.peer_port));
            self.dead.push(conn);
        }
    }

    pub(super) fn on_guest_packet(&mut self, h: Header, data: Vec<u8>) {
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
        if self.conns.len() >= MAX_STREAMS {
            return self.push_control(OP_RST, local, peer, 0);
        }
        let mut path = self.uds_path.clone().into_os_string();
        path.push(format!("_{local}"));
        match connect_nonblocking(Path::new(&path)) {
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

    pub(super) fn accept_all(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_ok() {
                self.add_conn(Connection::new(stream, State::AwaitingConnect, 0, 0));
            }
        }
    }

    pub(super) fn on_host_event(&mut self, fd: RawFd, set: EventSet) {
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
                conn.deadline = Some(Instant::now() + CONNECT_TIMEOUT);
                self.ports.insert((local, port), fd);
                self.push_control(OP_REQUEST, local, port, 0);
                self.arm_connect_timer();
            }
            Err(_) => self.close(fd),
        }
    }

    /// Host streams whose guest never answered the REQUEST are closed (the
    /// host sees EOF instead of waiting forever) and the guest gets an RST.
    pub(super) fn expire_connects(&mut self) {
        // The timer fired (epoll said so): this read does not block.
        let _ = self.connect_timer.wait();
        let now = Instant::now();
        let expired: Vec<RawFd> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == State::Connecting && c.deadline.is_some_and(|d| d <= now))
            .map(|(fd, _)| *fd)
            .collect();
        for fd in expired {
            self.host_gone(fd);
        }
        self.arm_connect_timer();
    }

    /// Arms the timer for the earliest pending handshake deadline.
    fn arm_connect_timer(&mut self) {
        let now = Instant::now();
        let next = self
            .conns
            .values()
            .filter(|c| c.state == State::Connecting)
            .filter_map(|c| c.deadline)
            .min();
        if let Some(deadline) = next {
            let wait = deadline
                .saturating_duration_since(now)
                .max(Duration::from_millis(1));
            // Without the timer a stuck handshake lingers until the VM stops; no worse.
            let _ = self.connect_timer.reset(wait, None);
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

    /// Brings epoll interest in line with what each connection wants, and
    /// drops closed connections (after removing them from epoll).
    pub(super) fn reconcile(&mut self, ops: &mut EventOps) {
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

pub(super) fn sendable(c: &Connection) -> bool {
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

/// Connects without blocking the event thread: a Unix socket whose backlog
/// is full answers `EAGAIN` at once (the guest gets an RST) instead of
/// stalling every device until the listener accepts.
fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::UNIX,
        socket2::Type::STREAM.nonblocking(),
        None,
    )?;
    socket.connect(&socket2::SockAddr::unix(path)?)?;
    Ok(UnixStream::from(std::os::fd::OwnedFd::from(socket)))
}
