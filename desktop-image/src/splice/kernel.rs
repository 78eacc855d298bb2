//! The same relay between two sockets, with the bytes never leaving the
//! kernel: each direction moves them socket → pipe → socket with
//! `splice(2)`, so a download through the egress relays costs no copy
//! into and out of a buffer of ours, and a system call moves up to 256 KiB
//! rather than 16 KiB.
//!
//! Not `tokio-splice`'s `zero_copy_bidirectional`: it ends as
//! `copy_bidirectional` does, at the first error in either direction,
//! dropping the answer already on its way (see [`super`]). Here the
//! ends are the same as [`super::splice`]'s.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::{TcpStream, UnixStream};

use super::{End, Flow};

/// What one `splice` call moves at most, and the size each pipe asks for
/// (the kernel's default pipe holds 64 KiB; a pipe past the user's pipe
/// allowance keeps its default, which works, just in smaller steps).
const CHUNK: usize = 256 * 1024;

/// A nonblocking socket whose readiness tokio tracks.
pub trait Socket: AsRawFd {
    fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<()>>;
    /// Runs `io` on the socket, clearing its readiness if it would block.
    fn try_io<R>(&self, interest: Interest, io: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

/// Tokio's two socket types that splice: the same methods under the same names.
macro_rules! socket {
    ($type:ty) => {
        impl Socket for $type {
            fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<()>> {
                if interest.is_readable() {
                    self.poll_read_ready(cx)
                } else {
                    self.poll_write_ready(cx)
                }
            }

            fn try_io<R>(
                &self,
                interest: Interest,
                io: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$type>::try_io(self, interest, io)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

/// One pipe: what a direction's bytes pass through in the kernel.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both are open descriptors owned by no one else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETPIPE_SZ on a pipe we own; a refusal leaves it as it was.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
        Ok(Self { read, write })
    }
}

/// `splice(2)` with neither offset: some of `len` bytes from `from` to `to`.
fn splice_once(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the call's length (their owners
    // are borrowed by the caller), and null offsets are what sockets and
    // pipes take.
    let moved = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if moved < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(moved as usize)
    }
}

/// Waits until `socket` is ready for `interest`, then runs `io`, as many
/// times as it would block.
async fn when_ready<S: Socket>(
    socket: &S,
    interest: Interest,
    mut io: impl FnMut() -> io::Result<usize>,
) -> io::Result<usize> {
    loop {
        std::future::poll_fn(|cx| socket.poll_ready(cx, interest)).await?;
        match socket.try_io(interest, &mut io) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            done => return done,
        }
    }
}

/// One direction, through `pipe`: read as much as there is (up to
/// [`CHUNK`]) into the pipe, then write all of it out, and again.
async fn pump<R: Socket, W: Socket>(from: &R, to: &W, pipe: Pipe) -> Flow {
    let mut bytes = 0;
    let end = carry(from, to, &pipe, &mut bytes).await;
    Flow { bytes, end }
}

async fn carry<R: Socket, W: Socket>(from: &R, to: &W, pipe: &Pipe, bytes: &mut u64) -> End {
    loop {
        let read = when_ready(from, Interest::READABLE, || {
            splice_once(from.as_raw_fd(), pipe.write.as_raw_fd(), CHUNK)
        })
        .await;
        let mut left = match read {
            Ok(0) => {
                // SAFETY: shutdown on a socket we borrow; a failure (the far
                // side is gone) leaves nothing to do.
                unsafe { libc::shutdown(to.as_raw_fd(), libc::SHUT_WR) };
                return End::Eof;
            }
            Ok(n) => n,
            Err(err) => return End::ReadFailed(err),
        };
        while left > 0 {
            let written = when_ready(to, Interest::WRITABLE, || {
                splice_once(pipe.read.as_raw_fd(), to.as_raw_fd(), left)
            })
            .await;
            match written {
                Ok(n) => {
                    left -= n;
                    *bytes += n as u64;
                }
                Err(err) => return End::WriteFailed(err),
            }
        }
    }
}

/// [`super::splice`] between two sockets, in the kernel. Where the two
/// pipes cannot be had (the process is out of descriptors), the bytes are
/// copied as [`super::splice`] does.
pub async fn splice_sockets<A, B>(a: &mut A, b: &mut B) -> (Flow, Flow)
where
    A: Socket + AsyncRead + AsyncWrite + Unpin,
    B: Socket + AsyncRead + AsyncWrite + Unpin,
{
    let (forward_pipe, back_pipe) = match (Pipe::new(), Pipe::new()) {
        (Ok(forward), Ok(back)) => (forward, back),
        _ => return super::splice(a, b).await,
    };
    let forward = pump(&*a, &*b, forward_pipe);
    let back = pump(&*b, &*a, back_pipe);
    super::both_ways(forward, back).await
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap());
        let (near, far) = tokio::join!(near, listener.accept());
        (near.unwrap(), far.unwrap().0)
    }

    /// Sends `bytes` and closes its sending half while it reads all the
    /// other side sends.
    async fn send_and_receive<S>(stream: S, bytes: Vec<u8>) -> Vec<u8>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite,
    {
        let (mut read, mut write) = tokio::io::split(stream);
        let send = async {
            write.write_all(&bytes).await.unwrap();
            write.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let ((), received) = tokio::join!(send, read.read_to_end(&mut got));
        received.unwrap();
        got
    }

    /// 8 MiB one way while 1 MiB goes the other, both read back whole and
    /// in order, each half-close carried: the relay between a workspace's
    /// TCP client and the host's Unix socket.
    #[tokio::test]
    async fn both_ways_arrive_whole_and_each_half_close_is_carried() {
        let (client, mut relay_tcp) = tcp_pair().await;
        let (mut relay_unix, host) = UnixStream::pair().unwrap();
        let relay =
            tokio::spawn(async move { splice_sockets(&mut relay_tcp, &mut relay_unix).await });
        let up: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let down: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 241) as u8).collect();
        let (up_sent, down_sent) = (up.clone(), down.clone());
        let client_side = tokio::spawn(send_and_receive(client, up_sent));
        let host_side = tokio::spawn(send_and_receive(host, down_sent));
        assert!(client_side.await.unwrap() == down, "the download, whole");
        assert!(host_side.await.unwrap() == up, "the upload, whole");
        let (forward, back) = relay.await.unwrap();
        assert_eq!((forward.bytes, back.bytes), (1 << 20, 8 << 20));
        assert!(matches!((forward.end, back.end), (End::Eof, End::Eof)));
    }

    /// A far side that closes while the near one still sends: its answer
    /// arrives all the same, and only the direction towards it stops.
    #[tokio::test]
    async fn an_answer_sent_before_a_close_reaches_the_client_still_sending() {
        let (mut client, mut relay_tcp) = tcp_pair().await;
        let (mut relay_unix, mut server) = UnixStream::pair().unwrap();
        // The relay's TCP socket outlives the splice until the end of the
        // test: closed with the body unread, it would reset the client,
        // and a reset drops an answer the client has not read yet.
        let relay = tokio::spawn(async move {
            let flows = splice_sockets(&mut relay_tcp, &mut relay_unix).await;
            (flows, relay_tcp)
        });
        client.write_all(b"HEAD\n").await.unwrap();
        let mut head = [0_u8; 5];
        server.read_exact(&mut head).await.unwrap();
        server.write_all(b"400 refused\n").await.unwrap();
        drop(server);
        // The body meets a closed socket; the answer must still arrive.
        client.write_all(&[7_u8; 64 * 1024]).await.unwrap();
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer).await;
        assert_eq!(answer, b"400 refused\n");
        let ((forward, back), _relay_tcp) = relay.await.unwrap();
        assert!(matches!(back.end, End::Eof), "{back:?}");
        assert_eq!(back.bytes, 12);
        assert!(
            matches!(forward.end, End::WriteFailed(_) | End::Eof),
            "{forward:?}"
        );
    }
}
