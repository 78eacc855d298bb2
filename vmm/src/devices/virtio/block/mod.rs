//! virtio-blk: a raw disk image, read-only, writable, or a read-only base
//! with a copy-on-write overlay file.

pub mod device;
pub mod disk;
pub mod request;

pub use device::Block;
pub use disk::{Disk, DiskError};

/// Sector size of the virtio-blk protocol.
pub const SECTOR_SIZE: u64 = 512;
