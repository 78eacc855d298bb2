//! Descriptor chains a guest builds in its own memory, as the VMM meets
//! them: a split queue of up to 16 descriptors (address, length, flags,
//! next, all from the input) over 1 MiB of guest memory filled from the
//! input, validated (`chain::validate`) and, when valid, read as a vsock TX
//! packet (`packet::read`). Every refusal must be an error, never a panic
//! or an access outside guest memory.
#![no_main]

use cubicle_vmm::devices::virtio::chain::validate;
use cubicle_vmm::devices::virtio::vsock::packet;
use libfuzzer_sys::fuzz_target;
use virtio_queue::QueueOwnedT;
use virtio_queue::desc::{RawDescriptor, split::Descriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const MEM: usize = 0x10_0000;
const QUEUE: u16 = 16;
/// Where the payload bytes of the input are copied in guest memory.
const DATA: u64 = 0x8_0000;

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % QUEUE as u8) + 1;
    let (table, payload) = rest.split_at(rest.len().min(count * 16));
    if table.len() < count * 16 {
        return;
    }
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
    let _ = mem.write_slice(
        &payload[..payload.len().min(MEM - DATA as usize)],
        GuestAddress(DATA),
    );
    let queue = MockSplitQueue::create(&mem, GuestAddress(0), QUEUE);
    let descs: Vec<RawDescriptor> = table
        .chunks_exact(16)
        .map(|d| {
            let addr = u64::from_le_bytes(d[0..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(d[8..12].try_into().expect("4 bytes"));
            let flags = u16::from_le_bytes([d[12], d[13]]);
            let next = u16::from_le_bytes([d[14], d[15]]);
            RawDescriptor::from(Descriptor::new(addr, len, flags, next))
        })
        .collect();
    // Stored as given (loops, bad `next`, indirect tables and all).
    if queue.add_desc_chains(&descs, 0).is_err() {
        return;
    }
    let Ok(mut q) = queue.create_queue::<virtio_queue::Queue>() else {
        return;
    };
    let Ok(mut chains) = q.iter(&mem) else {
        return;
    };
    for chain in chains.by_ref() {
        if let Ok(descs) = validate(&chain, &mem) {
            let _ = packet::rx_capacity(&chain, &mem);
            let _ = packet::read(chain, &descs, &mem);
        }
    }
});
