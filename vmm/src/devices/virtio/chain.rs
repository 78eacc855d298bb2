//! Validation of the descriptor chains a guest hands us. virtio-queue's
//! iterator stops silently at a loop, a bad `next` index or an unreadable
//! descriptor; devices must instead report such chains as errors, so every
//! chain goes through [`validate`] before a device touches its buffers.

use virtio_queue::DescriptorChain;
use virtio_queue::desc::split::Descriptor;
use vm_memory::{GuestMemoryBackend, GuestMemoryMmap};

/// Why a descriptor chain was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChainError {
    /// The chain never ends (a loop), or points past the table.
    #[error("descriptor chain is truncated or loops (descriptor {0} still has NEXT)")]
    Unterminated(usize),
    /// A buffer lies (partly) outside guest memory.
    #[error("descriptor {index} points outside guest memory ({addr:#x}+{len:#x})")]
    OutOfMemory {
        /// Position in the chain.
        index: usize,
        /// Buffer address.
        addr: u64,
        /// Buffer length.
        len: u32,
    },
    /// A device-readable buffer follows a device-writable one.
    #[error("readable descriptor {0} follows a writable one")]
    BadOrder(usize),
    /// The chain's buffers add up to more than 4 GiB.
    #[error("descriptor chain is longer than 4 GiB")]
    TooLong,
    /// The chain has no descriptors at all.
    #[error("empty descriptor chain")]
    Empty,
}

/// Checks a chain and returns its descriptors (indirect tables resolved).
pub fn validate<M>(
    chain: &DescriptorChain<M>,
    mem: &GuestMemoryMmap,
) -> Result<Vec<Descriptor>, ChainError>
where
    M: std::ops::Deref + Clone,
    M::Target: vm_memory::GuestMemory,
{
    let descs: Vec<Descriptor> = chain.clone().collect();
    let last = descs.last().ok_or(ChainError::Empty)?;
    if last.has_next() {
        return Err(ChainError::Unterminated(descs.len() - 1));
    }
    let mut total: u32 = 0;
    let mut seen_writable = false;
    for (index, d) in descs.iter().enumerate() {
        total = total.checked_add(d.len()).ok_or(ChainError::TooLong)?;
        if !mem.check_range(d.addr(), d.len() as usize) && d.len() > 0 {
            return Err(ChainError::OutOfMemory {
                index,
                addr: d.addr().0,
                len: d.len(),
            });
        }
        seen_writable |= d.is_write_only();
        if seen_writable && !d.is_write_only() {
            return Err(ChainError::BadOrder(index));
        }
    }
    Ok(descs)
}
