//! virtio-vsock with a Firecracker-style hybrid host side: one Unix socket
//! for host-initiated streams (`CONNECT <port>\n` → `OK <n>\n`), and
//! `<socket>_<port>` sockets for guest-initiated ones.

pub mod connection;
pub mod device;
pub mod muxer;
pub mod packet;

pub use device::Vsock;

/// The host's CID.
pub const HOST_CID: u64 = 2;
