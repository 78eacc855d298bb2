//! Parsing a virtio-blk request out of a validated descriptor chain:
//! a readable 16-byte header, data buffers, and a writable status byte.

use virtio_queue::desc::split::Descriptor;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::SECTOR_SIZE;

/// VIRTIO_BLK_T_IN: read from the disk.
pub const T_IN: u32 = 0;
/// VIRTIO_BLK_T_OUT: write to the disk.
pub const T_OUT: u32 = 1;
/// VIRTIO_BLK_T_FLUSH.
pub const T_FLUSH: u32 = 4;
/// VIRTIO_BLK_T_GET_ID.
pub const T_GET_ID: u32 = 8;

/// Why a request was refused (the device answers VIRTIO_BLK_S_IOERR or
/// VIRTIO_BLK_S_UNSUPP, or, without a status byte, returns the chain unused).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    /// The chain is too short to hold a header and a status byte.
    #[error("request has {0} descriptors; needs a header and a status byte")]
    TooShort(usize),
    /// The header is not device-readable or shorter than 16 bytes.
    #[error("request header is missing, too short or device-writable")]
    BadHeader,
    /// The last descriptor is not a device-writable status byte.
    #[error("request status descriptor is missing or not device-writable")]
    BadStatus,
    /// A data buffer has the wrong direction for the request type.
    #[error("data buffer {0} has the wrong direction for this request")]
    BadDataDirection(usize),
    /// Data length is not a whole number of sectors.
    #[error("data length {0} is not a multiple of 512")]
    BadLength(u64),
    /// The request reaches past the end of the disk.
    #[error("sectors {sector}..+{count} are past the end of the disk ({capacity} sectors)")]
    OutOfRange {
        /// First sector.
        sector: u64,
        /// Sectors asked for.
        count: u64,
        /// Disk capacity in sectors.
        capacity: u64,
    },
    /// Guest memory could not be read.
    #[error("cannot read the request header from guest memory")]
    Memory,
}

/// A parsed request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// Request type (T_IN, T_OUT, ...).
    pub kind: u32,
    /// First sector.
    pub sector: u64,
    /// Data buffers (address, length).
    pub data: Vec<(GuestAddress, u32)>,
    /// Where the status byte goes.
    pub status: GuestAddress,
}

impl Request {
    /// Total data length.
    pub fn data_len(&self) -> u64 {
        self.data.iter().map(|&(_, l)| u64::from(l)).sum()
    }
}

/// The status address of a chain, if its last descriptor can take one.
pub fn status_addr(descs: &[Descriptor]) -> Option<GuestAddress> {
    let last = descs.last().filter(|d| d.is_write_only() && d.len() >= 1)?;
    Some(GuestAddress(last.addr().0 + u64::from(last.len()) - 1))
}

/// Parses and bounds-checks a request against a disk of `capacity` sectors.
pub fn parse(
    descs: &[Descriptor],
    mem: &GuestMemoryMmap,
    capacity: u64,
) -> Result<Request, RequestError> {
    if descs.len() < 2 {
        return Err(RequestError::TooShort(descs.len()));
    }
    let header = descs[0];
    if header.is_write_only() || header.len() < 16 {
        return Err(RequestError::BadHeader);
    }
    let status = status_addr(descs).ok_or(RequestError::BadStatus)?;
    let kind: u32 = mem
        .read_obj(header.addr())
        .map_err(|_| RequestError::Memory)?;
    let sector: u64 = mem
        .read_obj(GuestAddress(header.addr().0 + 8))
        .map_err(|_| RequestError::Memory)?;
    let data_descs = &descs[1..descs.len() - 1];
    let data: Vec<_> = data_descs.iter().map(|d| (d.addr(), d.len())).collect();
    let request = Request {
        kind: u32::from_le(kind),
        sector: u64::from_le(sector),
        data,
        status,
    };
    check_data(&request, data_descs, capacity)?;
    Ok(request)
}

fn check_data(request: &Request, data: &[Descriptor], capacity: u64) -> Result<(), RequestError> {
    if request.kind != T_IN && request.kind != T_OUT {
        return Ok(());
    }
    let writable = request.kind == T_IN;
    if let Some(i) = data.iter().position(|d| d.is_write_only() != writable) {
        return Err(RequestError::BadDataDirection(i));
    }
    let len = request.data_len();
    if !len.is_multiple_of(SECTOR_SIZE) {
        return Err(RequestError::BadLength(len));
    }
    let count = len / SECTOR_SIZE;
    let fits = request
        .sector
        .checked_add(count)
        .is_some_and(|end| end <= capacity);
    if !fits {
        return Err(RequestError::OutOfRange {
            sector: request.sector,
            count,
            capacity,
        });
    }
    Ok(())
}
