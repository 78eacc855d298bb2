//! Relaying a byte stream both ways, each direction on its own. Every
//! relay between the workspace and the host (the egress relay in the
//! workspace, the guest's port endpoints, the host proxy's tunnels) is one.
//!
//! Not `tokio::io::copy_bidirectional`: it returns at the first error in
//! either direction and drops both streams. A server that answers and
//! closes while the client is still sending (a proxy refusing a request
//! before its body, an HTTP/1.0 origin) makes the client's next write
//! fail, and the answer already on its way back was dropped with it: the
//! client saw a bare close. Here a direction that fails stops alone; the
//! other carries what the far side already sent, to its end.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

mod kernel;
pub use kernel::{Socket, splice_sockets};

/// How one direction of a splice ended.
#[derive(Debug)]
pub enum End {
    /// Its reader ended; its writer was shut down (the far side sees the
    /// half-close).
    Eof,
    /// Its reader failed: that side is gone, and the splice ended.
    ReadFailed(io::Error),
    /// Its writer failed (the far side closed); the other direction went on.
    WriteFailed(io::Error),
    /// Stopped unfinished, because the other direction's reader failed.
    Stopped,
}

/// What one direction carried, and how it ended.
#[derive(Debug)]
pub struct Flow {
    pub bytes: u64,
    pub end: End,
}

/// Copies `a` → `b` and `b` → `a`, and returns what each carried (`a` →
/// `b`, `b` → `a`). A direction whose reader ends shuts its writer down
/// and the other goes on (a half-close); one whose writer fails stops and
/// the other goes on, carrying what the far side already sent to its end;
/// a reader that fails ends both (that side is gone).
pub async fn splice<A, B>(a: &mut A, b: &mut B) -> (Flow, Flow)
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let forward = pump(&mut a_read, &mut b_write);
    let back = pump(&mut b_read, &mut a_write);
    both_ways(forward, back).await
}

/// Runs both directions to their ends: a reader that fails stops the
/// other direction too, anything else lets it go on.
async fn both_ways(
    forward: impl std::future::Future<Output = Flow>,
    back: impl std::future::Future<Output = Flow>,
) -> (Flow, Flow) {
    tokio::pin!(forward, back);
    let stopped = || Flow {
        bytes: 0,
        end: End::Stopped,
    };
    tokio::select! {
        forward = &mut forward => {
            if matches!(forward.end, End::ReadFailed(_)) {
                return (forward, stopped());
            }
            (forward, back.await)
        }
        back = &mut back => {
            if matches!(back.end, End::ReadFailed(_)) {
                return (stopped(), back);
            }
            (forward.await, back)
        }
    }
}

/// One direction. Not `tokio::io::copy`: its error does not say which
/// side failed, and that decides whether the other direction goes on.
async fn pump<R, W>(from: &mut R, to: &mut W) -> Flow
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut bytes = 0;
    let end = copy(from, to, &mut bytes).await;
    Flow { bytes, end }
}

async fn copy<R, W>(from: &mut R, to: &mut W, bytes: &mut u64) -> End
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(err) => return End::ReadFailed(err),
        };
        if let Err(err) = to.write_all(&buf[..n]).await {
            return End::WriteFailed(err);
        }
        *bytes += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use tokio::net::{TcpListener, UnixStream};

    use super::*;

    /// The race behind a refused request arriving as a bare close, made
    /// certain: the server answers the head and closes before the body
    /// arrives, and the relay (on this one-thread runtime) wakes only when
    /// both the body to forward and the answer to carry back are waiting.
    /// The body's write fails; the answer must still reach the client.
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_sent_before_a_close_reaches_the_client_still_sending() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (relay_side, server) = UnixStream::pair().unwrap();
        let mut server = server.into_std().unwrap();
        server.set_nonblocking(false).unwrap();
        let (head_tx, head_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let mut head = [0_u8; 5];
            server.read_exact(&mut head).unwrap();
            head_tx.send(head).unwrap();
            go_rx.recv().unwrap();
            server.write_all(b"400 refused\n").unwrap();
        });
        let relay = tokio::spawn(async move {
            let (mut client, _) = listener.accept().await.unwrap();
            let mut host = relay_side;
            splice(&mut client, &mut host).await
        });
        let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
        client.write_all(b"HEAD\n").await.unwrap();
        assert_eq!(
            &head_rx.await.unwrap(),
            b"HEAD\n",
            "the relay forwards the head"
        );
        // From here until the read below this thread does not yield, so
        // the relay cannot run: the server answers and closes, the client
        // sends its body, and the relay then finds both waiting.
        go_tx.send(()).unwrap();
        server.join().unwrap();
        assert_eq!(client.try_write(b"body\n").unwrap(), 5);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "400 refused\n");
        let (forward, back) = relay.await.unwrap();
        assert!(
            matches!(forward.end, End::WriteFailed(_)),
            "the body had nowhere to go: {forward:?}"
        );
        assert!(matches!(back.end, End::Eof), "{back:?}");
        assert_eq!(back.bytes, 12);
    }

    #[tokio::test]
    async fn each_side_sees_the_others_half_close() {
        let (mut a, mut a_far) = tokio::io::duplex(64);
        let (mut b, mut b_far) = tokio::io::duplex(64);
        let relay = tokio::spawn(async move { splice(&mut a, &mut b).await });
        a_far.write_all(b"question").await.unwrap();
        a_far.shutdown().await.unwrap();
        let mut got = String::new();
        b_far.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "question");
        b_far.write_all(b"answer").await.unwrap();
        b_far.shutdown().await.unwrap();
        got.clear();
        a_far.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "answer");
        let (forward, back) = relay.await.unwrap();
        assert_eq!((forward.bytes, back.bytes), (8, 6));
        assert!(matches!((forward.end, back.end), (End::Eof, End::Eof)));
    }

    /// A side whose reads fail (reset, a TLS stream cut short).
    struct Broken;

    impl AsyncRead for Broken {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()))
        }
    }

    impl AsyncWrite for Broken {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A side that is gone ends the splice even though the other side
    /// never closes (an idle server behind a client that was reset).
    #[tokio::test]
    async fn a_side_that_fails_ends_the_splice() {
        let (mut b, _b_far_stays_open) = tokio::io::duplex(64);
        let (forward, back) = splice(&mut Broken, &mut b).await;
        assert!(matches!(forward.end, End::ReadFailed(_)), "{forward:?}");
        assert!(matches!(back.end, End::Stopped), "{back:?}");
    }
}
