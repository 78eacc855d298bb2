//! The virtio-vsock packet header and its reading from TX chains / writing
//! into RX chains. virtio-queue's `Reader` and `Writer` treat a chain as one
//! byte stream, so a header and data in one descriptor or in two read the same.

use std::io::{Read, Write};

use virtio_queue::DescriptorChain;
use virtio_queue::desc::split::Descriptor;
use virtio_queue::{Reader, Writer};
use vm_memory::{ByteValued, GuestMemoryMmap};

/// Stream socket type.
pub const TYPE_STREAM: u16 = 1;
/// Operations.
pub const OP_REQUEST: u16 = 1;
/// Connection accepted.
pub const OP_RESPONSE: u16 = 2;
/// Connection reset.
pub const OP_RST: u16 = 3;
/// Shutdown (flags: 1 receive, 2 send).
pub const OP_SHUTDOWN: u16 = 4;
/// Data.
pub const OP_RW: u16 = 5;
/// Credit update.
pub const OP_CREDIT_UPDATE: u16 = 6;
/// Credit request.
pub const OP_CREDIT_REQUEST: u16 = 7;
/// Largest payload we accept from or send to a guest in one packet.
pub const MAX_PAYLOAD: u32 = 64 * 1024;

/// The 44-byte header (all fields little-endian on the wire; x86 is too).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Source CID.
    pub src_cid: u64,
    /// Destination CID.
    pub dst_cid: u64,
    /// Source port.
    pub src_port: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Payload length.
    pub len: u32,
    /// Socket type.
    pub type_: u16,
    /// Operation.
    pub op: u16,
    /// Operation flags.
    pub flags: u32,
    /// Sender's receive buffer size.
    pub buf_alloc: u32,
    /// Bytes the sender has consumed.
    pub fwd_cnt: u32,
}

// SAFETY: Header is repr(C, packed) plain integers: every byte pattern is valid.
unsafe impl ByteValued for Header {}

/// Header size on the wire.
pub const HDR_LEN: usize = std::mem::size_of::<Header>();

/// Why a TX packet was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PacketError {
    /// The chain is shorter than a header.
    #[error("vsock packet shorter than its 44-byte header")]
    Short,
    /// The header's length field disagrees with the buffers.
    #[error("vsock packet says {len} payload bytes but carries {carried}")]
    Length {
        /// Claimed payload length.
        len: u32,
        /// Bytes present.
        carried: usize,
    },
    /// Payload above [`MAX_PAYLOAD`].
    #[error("vsock payload of {0} bytes is above the 64 KiB limit")]
    TooBig(u32),
    /// A TX buffer is device-writable, or guest memory refused access.
    #[error("vsock TX chain has bad buffers")]
    Buffers,
}

/// Reads a packet (header and payload) from a validated TX chain.
pub fn read<M>(
    chain: DescriptorChain<M>,
    descs: &[Descriptor],
    mem: &GuestMemoryMmap,
) -> Result<(Header, Vec<u8>), PacketError>
where
    M: std::ops::Deref,
    M::Target: vm_memory::GuestMemory + Sized,
{
    if descs.iter().any(|d| d.is_write_only()) {
        return Err(PacketError::Buffers);
    }
    let mut reader: Reader<'_> = Reader::new(mem, chain).map_err(|_| PacketError::Buffers)?;
    let header: Header = reader.read_obj().map_err(|_| PacketError::Short)?;
    let len = header.len;
    if len > MAX_PAYLOAD {
        return Err(PacketError::TooBig(len));
    }
    let carried = reader.available_bytes();
    if carried < len as usize {
        return Err(PacketError::Length { len, carried });
    }
    let mut data = vec![0u8; len as usize];
    reader
        .read_exact(&mut data)
        .map_err(|_| PacketError::Buffers)?;
    Ok((header, data))
}

/// Room for payload in an RX chain (0 if it cannot even hold a header).
pub fn rx_capacity<M>(chain: &DescriptorChain<M>, mem: &GuestMemoryMmap) -> Option<usize>
where
    M: std::ops::Deref + Clone,
    M::Target: vm_memory::GuestMemory + Sized,
{
    let writer: Writer<'_> = Writer::new(mem, chain.clone()).ok()?;
    writer.available_bytes().checked_sub(HDR_LEN)
}

/// Writes a packet into an RX chain; returns the bytes written.
pub fn write<M>(
    chain: DescriptorChain<M>,
    mem: &GuestMemoryMmap,
    header: &Header,
    data: &[u8],
) -> Option<u32>
where
    M: std::ops::Deref,
    M::Target: vm_memory::GuestMemory + Sized,
{
    let mut writer: Writer<'_> = Writer::new(mem, chain).ok()?;
    writer.write_obj(*header).ok()?;
    writer.write_all(data).ok()?;
    u32::try_from(HDR_LEN + data.len()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_44_bytes() {
        assert_eq!(HDR_LEN, 44);
    }
}
