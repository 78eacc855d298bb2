//! virtio-vsock against virtio-queue's mock split queues: both descriptor
//! layouts in each direction, and hostile TX/RX chains that must be counted
//! and dropped without a panic or an out-of-bounds access.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;

use virtio_queue::desc::{RawDescriptor, split::Descriptor as SplitDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use super::super::muxer::MAX_STREAMS;
use super::*;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const MEM: usize = 0x10_0000;
const CID: u64 = 3;
const PKT: u64 = 0x4_0000;
const RXBUF: u64 = 0x5_0000;

struct Rig {
    mem: GuestMemoryMmap,
    dir: PathBuf,
}

fn desc(a: u64, l: u32, f: u16, n: u16) -> RawDescriptor {
    RawDescriptor::from(SplitDescriptor::new(a, l, f, n))
}

impl Rig {
    fn new(name: &str) -> Rig {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
        let dir = std::env::temp_dir().join(format!("cubicle-vsock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Rig { mem, dir }
    }

    fn queues(&self) -> [MockSplitQueue<'_, GuestMemoryMmap>; 3] {
        [0x0, 0x1000, 0x2000].map(|a| MockSplitQueue::create(&self.mem, GuestAddress(a), 16))
    }

    fn device(&self, mocks: &[MockSplitQueue<'_, GuestMemoryMmap>; 3]) -> Vsock {
        let uds = self.dir.join("v.sock");
        let listener = UnixListener::bind(&uds).expect("bind");
        let evts = (0..3)
            .map(|_| EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"))
            .collect();
        let mut dev = Vsock::new(CID, &uds, listener, evts).expect("device");
        let queues = mocks
            .iter()
            .map(|m| m.create_queue().expect("queue"))
            .collect();
        let irq = Arc::new(Interrupt::new(
            EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"),
        ));
        dev.activate(self.mem.clone(), queues, irq)
            .expect("activate");
        dev
    }

    fn header(&self, op: u16, src_cid: u64, len: u32) -> Header {
        Header {
            src_cid,
            dst_cid: HOST_CID,
            src_port: 1025,
            dst_port: 5000,
            len,
            type_: TYPE_STREAM,
            op,
            flags: 0,
            buf_alloc: 65536,
            fwd_cnt: 0,
        }
    }

    fn write_packet(&self, h: Header, data: &[u8]) {
        self.mem.write_obj(h, GuestAddress(PKT)).expect("header");
        self.mem
            .write_slice(data, GuestAddress(PKT + HDR_LEN as u64))
            .expect("data");
    }

    fn rx_header(&self, at: u64) -> Header {
        self.mem.read_obj(GuestAddress(at)).expect("rx header")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn request_and_data_in_both_layouts() {
    let rig = Rig::new("layouts");
    let host = UnixListener::bind(rig.dir.join("v.sock_5000")).expect("host port");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    // RX buffers: one split (header, data), one whole.
    let hdr = HDR_LEN as u32;
    mocks[RXQ]
        .add_desc_chains(
            &[
                desc(RXBUF, hdr, WRITE | NEXT, 1),
                desc(RXBUF + 64, 256, WRITE, 0),
                desc(RXBUF + 0x1000, hdr + 256, WRITE, 0),
            ],
            0,
        )
        .expect("rx buffers");
    // REQUEST in one descriptor.
    rig.write_packet(rig.header(OP_REQUEST, CID, 0), &[]);
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, hdr, 0, 0)], 0)
        .expect("tx");
    dev.process_tx();
    dev.deliver_rx();
    let (mut conn, _) = host.accept().expect("the device connected to <uds>_5000");
    let reply = rig.rx_header(RXBUF);
    assert_eq!(
        (reply.op, reply.dst_port, reply.src_port, reply.dst_cid),
        (OP_RESPONSE, 1025, 5000, CID)
    );
    // RW with the header and data in two descriptors.
    rig.write_packet(rig.header(OP_RW, CID, 5), b"hello");
    mocks[TXQ]
        .add_desc_chains(
            &[desc(PKT, hdr, NEXT, 2), desc(PKT + hdr as u64, 5, 0, 0)],
            1,
        )
        .expect("tx");
    dev.process_tx();
    let mut got = [0u8; 5];
    conn.read_exact(&mut got).expect("data reached the host");
    assert_eq!(&got, b"hello");
    // RW with header and data in one descriptor.
    rig.write_packet(rig.header(OP_RW, CID, 3), b"abc");
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, hdr + 3, 0, 0)], 3)
        .expect("tx");
    dev.process_tx();
    let mut got = [0u8; 3];
    conn.read_exact(&mut got).expect("data reached the host");
    assert_eq!(&got, b"abc");
    // A credit request is answered in the single-descriptor RX buffer.
    rig.write_packet(rig.header(OP_CREDIT_REQUEST, CID, 0), &[]);
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, hdr, 0, 0)], 4)
        .expect("tx");
    dev.process_tx();
    dev.deliver_rx();
    let update = rig.rx_header(RXBUF + 0x1000);
    assert_eq!((update.op, update.fwd_cnt), (OP_CREDIT_UPDATE, 8));
    assert_eq!(dev.stats().bad_packets, 0);
}

#[test]
fn connection_refused_gets_rst() {
    let rig = Rig::new("refused");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    mocks[RXQ]
        .add_desc_chains(&[desc(RXBUF, 64, WRITE, 0)], 0)
        .expect("rx");
    rig.write_packet(rig.header(OP_REQUEST, CID, 0), &[]);
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, HDR_LEN as u32, 0, 0)], 0)
        .expect("tx");
    dev.process_tx();
    dev.deliver_rx();
    let op = rig.rx_header(RXBUF).op;
    assert_eq!(op, OP_RST);
}

/// Runs one hostile TX chain; returns the bad-packet count.
fn hostile_tx(name: &str, setup: impl FnOnce(&Rig) -> Vec<RawDescriptor>) -> u64 {
    let rig = Rig::new(name);
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    let chain = setup(&rig);
    mocks[TXQ].add_desc_chains(&chain, 0).expect("tx");
    dev.process_tx();
    dev.deliver_rx();
    let used = mocks[TXQ].used().idx().load();
    assert_eq!(used, 1, "the chain is returned to the guest");
    dev.stats().bad_packets
}

#[test]
fn hostile_tx_chains_are_dropped() {
    let hdr = HDR_LEN as u32;
    let spoofed = hostile_tx("spoof", |r| {
        r.write_packet(r.header(OP_REQUEST, 99, 0), &[]);
        vec![desc(PKT, hdr, 0, 0)]
    });
    assert_eq!(spoofed, 1, "another CID's packet");
    let short = hostile_tx("len", |r| {
        r.write_packet(r.header(OP_RW, CID, 4096), b"xy");
        vec![desc(PKT, hdr + 2, 0, 0)]
    });
    assert_eq!(short, 1, "length field larger than the buffers");
    let huge = hostile_tx("huge", |r| {
        r.write_packet(r.header(OP_RW, CID, u32::MAX), &[]);
        vec![desc(PKT, u32::MAX, 0, 0)]
    });
    assert_eq!(huge, 1, "huge length");
    let outside = hostile_tx("oob", |_| vec![desc(MEM as u64 - 8, hdr, 0, 0)]);
    assert_eq!(outside, 1, "header outside guest memory");
    let writable = hostile_tx("flags", |r| {
        r.write_packet(r.header(OP_REQUEST, CID, 0), &[]);
        vec![desc(PKT, hdr, WRITE, 0)]
    });
    assert_eq!(writable, 1, "device-writable TX buffer");
    let looped = hostile_tx("loop", |r| {
        r.write_packet(r.header(OP_RW, CID, 0), &[]);
        vec![desc(PKT, 8, NEXT, 1), desc(PKT + 8, 8, NEXT, 0)]
    });
    assert_eq!(looped, 1, "descriptor loop");
    let tiny = hostile_tx("tiny", |_| vec![desc(PKT, 10, 0, 0)]);
    assert_eq!(tiny, 1, "shorter than a header");
}

#[test]
fn hostile_rx_buffers_are_returned_empty() {
    let rig = Rig::new("rx");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    // Read-only RX buffer, then one too small for a header, then one outside memory.
    mocks[RXQ]
        .add_desc_chains(
            &[
                desc(RXBUF, 64, 0, 0),
                desc(RXBUF, 8, WRITE, 0),
                desc(u64::MAX - 4, 64, WRITE, 0),
            ],
            0,
        )
        .expect("rx");
    rig.write_packet(rig.header(OP_REQUEST, CID, 0), &[]);
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, HDR_LEN as u32, 0, 0)], 0)
        .expect("tx");
    dev.process_tx();
    dev.deliver_rx();
    assert_eq!(mocks[RXQ].used().idx().load(), 3);
    for i in 0..3 {
        assert_eq!(
            mocks[RXQ]
                .used()
                .ring()
                .ref_at(i)
                .expect("slot")
                .load()
                .len(),
            0
        );
    }
    assert_eq!(dev.stats().bad_packets, 3);
}

#[test]
fn a_guest_that_sends_without_reading_waits_instead_of_growing_the_vmm() {
    let rig = Rig::new("flood");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    // Packets of a stream type the device does not speak each ask for an
    // RST; the guest posts no RX buffer to take them.
    let mut h = rig.header(OP_REQUEST, CID, 0);
    h.type_ = 2;
    for _ in 0..MAX_CONTROL + 10 {
        if dev.control.len() < MAX_CONTROL {
            dev.on_guest_packet(h, Vec::new());
        }
    }
    assert_eq!(dev.control.len(), MAX_CONTROL);
    // The next TX chain waits in its queue: nothing more is held.
    rig.write_packet(h, &[]);
    mocks[TXQ]
        .add_desc_chains(&[desc(PKT, HDR_LEN as u32, 0, 0)], 0)
        .expect("tx");
    dev.process_tx();
    dev.service_rx();
    assert_eq!(mocks[TXQ].used().idx().load(), 0, "TX waited");
    assert_eq!(dev.control.len(), MAX_CONTROL);
    // RX buffers drain the replies and TX takes up where it waited.
    let rx: Vec<RawDescriptor> = (0..8).map(|i| desc(RXBUF + i * 64, 64, WRITE, 0)).collect();
    mocks[RXQ].add_desc_chains(&rx, 0).expect("rx");
    dev.service_rx();
    assert_eq!(mocks[RXQ].used().idx().load(), 8);
    let first = rig.rx_header(RXBUF).op;
    assert_eq!(first, OP_RST);
    assert_eq!(mocks[TXQ].used().idx().load(), 1, "TX resumed");
    assert_eq!(dev.control.len(), MAX_CONTROL - 8 + 1);
}

#[test]
fn streams_past_the_limit_and_a_full_backlog_get_rst_without_blocking() {
    let rig = Rig::new("streams");
    // A listener that never accepts: its backlog fills.
    let socket =
        socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).expect("socket");
    socket
        .bind(&socket2::SockAddr::unix(rig.dir.join("v.sock_5000")).expect("path"))
        .expect("bind");
    socket.listen(1).expect("listen");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    let hdr = HDR_LEN as u32;
    let mut answers = Vec::new();
    for i in 0..8u16 {
        let mut h = rig.header(OP_REQUEST, CID, 0);
        h.src_port = 2000 + u32::from(i);
        rig.write_packet(h, &[]);
        mocks[TXQ]
            .add_desc_chains(&[desc(PKT, hdr, 0, 0)], i)
            .expect("tx");
        mocks[RXQ]
            .add_desc_chains(&[desc(RXBUF, 64, WRITE, 0)], i)
            .expect("rx");
        dev.process_tx();
        dev.service_rx();
        answers.push(rig.rx_header(RXBUF).op);
    }
    // The backlog holds a connection or two, then the rest are refused at
    // once: the event thread never waited on the listener.
    assert_eq!(answers[0], OP_RESPONSE, "{answers:?}");
    assert_eq!(answers[7], OP_RST, "{answers:?}");
    assert!(dev.conns.len() < 8);
}

#[test]
fn no_more_than_max_streams_at_once() {
    let rig = Rig::new("max");
    let host = UnixListener::bind(rig.dir.join("v.sock_5000")).expect("host port");
    host.set_nonblocking(true).expect("nonblocking");
    let mocks = rig.queues();
    let mut dev = rig.device(&mocks);
    let mut held = Vec::new();
    let mut last = 0;
    for i in 0..=MAX_STREAMS as u32 {
        let mut h = rig.header(OP_REQUEST, CID, 0);
        h.src_port = 3000 + i;
        dev.on_guest_packet(h, Vec::new());
        if let Ok((stream, _)) = host.accept() {
            held.push(stream);
        }
        last = dev.control.back().map_or(0, |h| h.op);
        if i < MAX_STREAMS as u32 {
            assert_eq!(last, OP_RESPONSE, "stream {i}");
        }
    }
    assert_eq!(last, OP_RST, "stream {MAX_STREAMS} is one too many");
    assert_eq!(dev.conns.len(), MAX_STREAMS);
}
