//! virtio-blk against virtio-queue's mock split queues, including hostile
//! descriptor chains: the device answers with an error or returns the chain
//! unused, and never panics or touches memory outside the guest.

use std::sync::Arc;

use virtio_queue::Queue;
use virtio_queue::desc::{RawDescriptor, split::Descriptor as SplitDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use super::*;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;
const MEM: usize = 0x10_0000;
const HDR: u64 = 0x1_0000;
const DATA: u64 = 0x2_0000;
const STATUS: u64 = 0x3_0000;

struct Rig {
    mem: GuestMemoryMmap,
    dir: std::path::PathBuf,
}

impl Rig {
    fn new(name: &str) -> Rig {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
        let dir = std::env::temp_dir().join(format!("cubicle-blk-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Rig { mem, dir }
    }

    fn block(&self, read_only: bool) -> Block {
        let path = self.dir.join("disk.img");
        let image: Vec<u8> = (0..8 * 512).map(|i| (i / 512) as u8).collect();
        std::fs::write(&path, image).expect("disk image");
        let disk = Disk::open(&path, read_only, None).expect("open disk");
        Block::new(
            "test".into(),
            disk,
            EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"),
        )
    }

    fn header(&self, kind: u32, sector: u64) {
        self.mem
            .write_obj(kind, GuestAddress(HDR))
            .expect("header type");
        self.mem
            .write_obj(sector, GuestAddress(HDR + 8))
            .expect("header sector");
        self.mem
            .write_obj(0xffu8, GuestAddress(STATUS))
            .expect("status");
    }

    fn status(&self) -> u8 {
        self.mem.read_obj(GuestAddress(STATUS)).expect("status")
    }

    /// Runs one chain through the device; returns (used length, stats).
    fn run(&self, block: &mut Block, descs: &[(u64, u32, u16, u16)]) -> (u32, BlockStats) {
        let vq = MockSplitQueue::new(&self.mem, 16);
        let raw: Vec<RawDescriptor> = descs
            .iter()
            .map(|&(a, l, f, n)| RawDescriptor::from(SplitDescriptor::new(a, l, f, n)))
            .collect();
        vq.add_desc_chains(&raw, 0).expect("chain fits the table");
        let queue: Queue = vq.create_queue().expect("valid queue");
        let irq = Arc::new(Interrupt::new(
            EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"),
        ));
        block
            .activate(self.mem.clone(), vec![queue], irq)
            .expect("activate");
        assert!(
            block.process_queue(),
            "the chain is always returned to the guest"
        );
        let used = vq.used().ring().ref_at(0).expect("used slot").load();
        (used.len(), block.stats())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn reads_sectors_into_guest_memory() {
    let rig = Rig::new("read");
    let mut block = rig.block(false);
    rig.header(request::T_IN, 3);
    let (len, stats) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, 1024, WRITE | NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((len, rig.status(), stats.ok), (1025, S_OK, 1));
    let mut data = [0u8; 1024];
    rig.mem
        .read_slice(&mut data, GuestAddress(DATA))
        .expect("read data");
    assert!(data[..512].iter().all(|&b| b == 3) && data[512..].iter().all(|&b| b == 4));
}

#[test]
fn writes_reach_the_disk_and_read_only_refuses() {
    let rig = Rig::new("write");
    let mut block = rig.block(false);
    rig.mem
        .write_slice(&[0xab; 512], GuestAddress(DATA))
        .expect("fill");
    rig.header(request::T_OUT, 1);
    let (_, stats) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, 512, NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((rig.status(), stats.ok), (S_OK, 1));
    assert_eq!(
        std::fs::read(rig.dir.join("disk.img")).expect("image")[512],
        0xab
    );

    let mut ro = rig.block(true);
    rig.header(request::T_OUT, 1);
    let (_, stats) = rig.run(
        &mut ro,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, 512, NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((rig.status(), stats.failed), (S_IOERR, 1));
    assert_eq!(
        std::fs::read(rig.dir.join("disk.img")).expect("image")[512],
        1
    );
}

#[test]
fn out_of_range_sectors_get_ioerr() {
    let rig = Rig::new("range");
    let mut block = rig.block(false);
    for sector in [8, u64::MAX] {
        rig.header(request::T_IN, sector);
        let (len, _) = rig.run(
            &mut block,
            &[
                (HDR, 16, NEXT, 1),
                (DATA, 512, WRITE | NEXT, 2),
                (STATUS, 1, WRITE, 0),
            ],
        );
        assert_eq!((len, rig.status()), (1, S_IOERR));
    }
}

#[test]
fn buffers_outside_guest_memory_are_refused() {
    let rig = Rig::new("oob");
    let mut block = rig.block(false);
    rig.header(request::T_IN, 0);
    let beyond = MEM as u64 - 256;
    let (len, stats) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (beyond, 512, WRITE | NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((len, stats.bad_chains), (0, 1));
    assert_eq!(rig.status(), 0xff, "nothing written for a refused chain");
    let (len, stats) = rig.run(
        &mut block,
        &[(u64::MAX - 8, 16, NEXT, 1), (STATUS, 1, WRITE, 0)],
    );
    assert_eq!((len, stats.bad_chains), (0, 2));
}

#[test]
fn huge_lengths_are_refused() {
    let rig = Rig::new("huge");
    let mut block = rig.block(false);
    rig.header(request::T_IN, 0);
    let (len, stats) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, u32::MAX, WRITE | NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((len, stats.bad_chains), (0, 1));
}

#[test]
fn descriptor_loops_are_refused() {
    let rig = Rig::new("loop");
    let mut block = rig.block(false);
    rig.header(request::T_IN, 0);
    let (len, stats) = rig.run(
        &mut block,
        &[(HDR, 16, NEXT, 1), (DATA, 512, WRITE | NEXT, 0)],
    );
    assert_eq!((len, stats.bad_chains), (0, 1));
    let (len, stats) = rig.run(&mut block, &[(HDR, 16, NEXT, 15)]);
    assert_eq!((len, stats.bad_chains), (0, 2), "NEXT pointing at garbage");
}

#[test]
fn bad_flags_are_refused() {
    let rig = Rig::new("flags");
    let mut block = rig.block(false);
    rig.header(request::T_IN, 0);
    // Header marked device-writable.
    let (len, _) = rig.run(
        &mut block,
        &[(HDR, 16, WRITE | NEXT, 1), (STATUS, 1, WRITE, 0)],
    );
    assert_eq!((len, rig.status()), (1, S_IOERR));
    // Readable after writable.
    let (len, stats) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, 512, WRITE | NEXT, 2),
            (STATUS, 1, 0, 0),
        ],
    );
    assert_eq!((len, stats.bad_chains), (0, 1));
    // Read request whose data buffer is device-readable.
    rig.header(request::T_IN, 0);
    let (len, _) = rig.run(
        &mut block,
        &[
            (HDR, 16, NEXT, 1),
            (DATA, 512, NEXT, 2),
            (STATUS, 1, WRITE, 0),
        ],
    );
    assert_eq!((len, rig.status()), (1, S_IOERR));
    // An indirect descriptor whose table length is not a multiple of 16.
    let (len, stats) = rig.run(&mut block, &[(DATA, 17, INDIRECT, 0)]);
    assert_eq!((len, stats.bad_chains), (0, 2));
    // A chain with no status byte at all.
    let (len, stats) = rig.run(&mut block, &[(HDR, 16, 0, 0)]);
    assert_eq!((len, stats.bad_chains), (0, 3));
    assert_eq!(
        stats.failed, 2,
        "the two requests with a status byte were answered"
    );
}

#[test]
fn unknown_request_types_are_unsupported() {
    let rig = Rig::new("unsupp");
    let mut block = rig.block(false);
    rig.header(0x1234, 0);
    let (len, _) = rig.run(&mut block, &[(HDR, 16, NEXT, 1), (STATUS, 1, WRITE, 0)]);
    assert_eq!((len, rig.status()), (1, S_UNSUPP));
}
