//! One vsock stream: its host Unix socket, its state, the bytes buffered in
//! each direction, and the credit accounting of the virtio-vsock protocol.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

/// Receive buffer we advertise to the guest (bytes it may send us unread).
pub const HOST_BUF_ALLOC: u32 = 256 * 1024;
/// Most bytes read from the host and not yet delivered to the guest.
pub const TO_GUEST_CAP: usize = 64 * 1024;
/// How long a host-initiated stream waits for the guest to accept.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// Longest `CONNECT <port>\n` line accepted.
const MAX_LINE: usize = 32;

/// Where a stream is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Host connected; waiting for its `CONNECT <port>\n`.
    AwaitingConnect,
    /// REQUEST sent to the guest; waiting for RESPONSE or RST.
    Connecting,
    /// Data flows.
    Established,
    /// Shutting down: close once `to_host` is drained.
    Closing,
}

/// A stream between a host Unix socket and a guest vsock port.
pub struct Connection {
    /// The host side.
    pub stream: UnixStream,
    /// Life-cycle state.
    pub state: State,
    /// Port on the host side (CID 2).
    pub local_port: u32,
    /// Port on the guest side.
    pub peer_port: u32,
    line: Vec<u8>,
    /// Guest bytes waiting for the host socket.
    pub to_host: Vec<u8>,
    /// Host bytes waiting for RX buffers and guest credit.
    pub to_guest: Vec<u8>,
    /// The guest's receive buffer size.
    pub peer_buf_alloc: u32,
    /// Bytes the guest has consumed.
    pub peer_fwd_cnt: u32,
    /// Bytes we sent the guest.
    pub rx_cnt: u32,
    /// Bytes we forwarded to the host socket.
    pub fwd_cnt: u32,
    /// `fwd_cnt` last told to the guest.
    pub fwd_cnt_sent: u32,
    /// When a host-initiated stream gives up waiting for the guest.
    pub deadline: Option<std::time::Instant>,
}

impl Connection {
    /// A stream in `state` on a non-blocking host socket.
    pub fn new(stream: UnixStream, state: State, local_port: u32, peer_port: u32) -> Self {
        Connection {
            stream,
            state,
            local_port,
            peer_port,
            line: Vec::new(),
            to_host: Vec::new(),
            to_guest: Vec::new(),
            peer_buf_alloc: 0,
            peer_fwd_cnt: 0,
            rx_cnt: 0,
            fwd_cnt: 0,
            fwd_cnt_sent: 0,
            deadline: None,
        }
    }

    /// Bytes the guest can still take.
    pub fn peer_credit(&self) -> u32 {
        let in_flight = self.rx_cnt.wrapping_sub(self.peer_fwd_cnt);
        self.peer_buf_alloc.saturating_sub(in_flight)
    }

    /// Whether the host socket should be polled for reading.
    pub fn wants_read(&self) -> bool {
        match self.state {
            State::AwaitingConnect => true,
            State::Established => self.to_guest.len() < TO_GUEST_CAP,
            State::Connecting | State::Closing => false,
        }
    }

    /// Whether the host socket should be polled for writing.
    pub fn wants_write(&self) -> bool {
        !self.to_host.is_empty()
    }

    /// Reads the handshake one byte at a time (so no stream byte is
    /// consumed early). `Ok(Some(port))` once a full valid line is in.
    pub fn read_connect_line(&mut self) -> io::Result<Option<u32>> {
        let mut byte = [0u8; 1];
        loop {
            match self.stream.read(&mut byte) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) if byte[0] == b'\n' => return parse_connect(&self.line).map(Some),
                Ok(_) if self.line.len() >= MAX_LINE => return Err(bad_line()),
                Ok(_) => self.line.push(byte[0]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what the host sent into `to_guest`; `Ok(0)` means EOF.
    pub fn read_from_host(&mut self) -> io::Result<usize> {
        let room = TO_GUEST_CAP.saturating_sub(self.to_guest.len());
        let mut buf = vec![0u8; room.min(16 * 1024)];
        match self.stream.read(&mut buf) {
            Ok(n) => {
                self.to_guest.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(e),
            Err(e) => Err(e),
        }
    }

    /// Writes as much of `to_host` as the socket takes.
    pub fn flush_to_host(&mut self) -> io::Result<()> {
        while !self.to_host.is_empty() {
            match self.stream.write(&self.to_host) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.to_host.drain(..n);
                    if self.state != State::Connecting {
                        self.fwd_cnt = self.fwd_cnt.wrapping_add(n as u32);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn bad_line() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "expected `CONNECT <port>\\n`")
}

/// Parses `CONNECT <port>` (a trailing `\r` is tolerated).
pub fn parse_connect(line: &[u8]) -> io::Result<u32> {
    let text = std::str::from_utf8(line).map_err(|_| bad_line())?;
    let port = text
        .trim_end_matches('\r')
        .strip_prefix("CONNECT ")
        .ok_or_else(bad_line)?;
    port.parse().map_err(|_| bad_line())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_lines() {
        assert_eq!(parse_connect(b"CONNECT 1024").expect("valid"), 1024);
        assert_eq!(parse_connect(b"CONNECT 52\r").expect("valid"), 52);
        assert!(parse_connect(b"CONNECT").is_err());
        assert!(parse_connect(b"connect 5").is_err());
        assert!(parse_connect(b"CONNECT 99999999999").is_err());
    }

    #[test]
    fn credit_accounting() {
        let (a, _b) = UnixStream::pair().expect("pair");
        let mut c = Connection::new(a, State::Established, 1, 2);
        c.peer_buf_alloc = 100;
        c.rx_cnt = 70;
        c.peer_fwd_cnt = 20;
        assert_eq!(c.peer_credit(), 50);
        c.peer_fwd_cnt = 70;
        assert_eq!(c.peer_credit(), 100);
    }
}
