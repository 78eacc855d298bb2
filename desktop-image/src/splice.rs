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

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// Copies `a` → `b` and `b` → `a` until both directions end, and returns
/// what each carried (`a` → `b`, `b` → `a`). A direction ends at the end
/// of its reader, whereupon its writer is shut down (the far side sees the
/// half-close), or at its first error.
pub async fn splice<A, B>(a: &mut A, b: &mut B) -> (io::Result<u64>, io::Result<u64>)
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let forward = async {
        let copied = tokio::io::copy(&mut a_read, &mut b_write).await?;
        b_write.shutdown().await?;
        Ok(copied)
    };
    let back = async {
        let copied = tokio::io::copy(&mut b_read, &mut a_write).await?;
        a_write.shutdown().await?;
        Ok(copied)
    };
    tokio::join!(forward, back)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use tokio::io::AsyncReadExt;
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
        assert!(forward.is_err(), "the body had nowhere to go: {forward:?}");
        assert_eq!(back.unwrap(), 12);
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
        assert_eq!((forward.unwrap(), back.unwrap()), (8, 6));
    }
}
