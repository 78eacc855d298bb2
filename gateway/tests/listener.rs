//! The gateway's server loop under many clients (README "Browsers and slow
//! clients": "at most 1024 connections are served at once"): with every
//! slot held by a request that has not been answered, the next client
//! waits in the kernel's backlog instead of being served, and is served as
//! soon as one slot frees. Real sockets on loopback, no root.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use cubicle_gateway::listener::{MAX_CONNECTIONS, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Raises this process's descriptor limit to what the test needs (both
/// ends of every connection live here); false if the hard limit is lower.
fn enough_descriptors(needed: u64) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return false;
    }
    if limit.rlim_cur >= needed {
        return true;
    }
    if limit.rlim_max < needed {
        return false;
    }
    limit.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct we own; raising the soft limit up
    // to the hard one needs no privilege.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 }
}

use cubicle_skip::skip;

/// Sends `GET path` on a new connection and returns the stream.
async fn ask(addr: std::net::SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: gateway\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// The start of the answer on `stream`, if one comes within `limit`.
async fn answer(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_limit_a_client_waits_until_a_slot_frees() {
    assert_eq!(MAX_CONNECTIONS, 1024, "README promises 1024");
    let needed = (MAX_CONNECTIONS as u64 + 64) * 2 + 256;
    if !enough_descriptors(needed) {
        return skip(&format!("the descriptor hard limit is below {needed}"));
    }
    // `/hold` answers once the test lets one through; `/ping` at once.
    let gate = Arc::new(Semaphore::new(0));
    let held = gate.clone();
    let router = Router::new()
        .route(
            "/hold",
            get(move || {
                let held = held.clone();
                async move {
                    held.acquire().await.expect("the gate stays open").forget();
                    "released"
                }
            }),
        )
        .route("/ping", get(|| async { "pong" }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, router, async move {
        let _ = stop_rx.await;
    }));

    // Positive control: with slots free, a ping is answered at once.
    let mut ping = ask(addr, "/ping").await;
    let first = answer(&mut ping, Duration::from_secs(5)).await;
    assert!(
        first
            .as_deref()
            .is_some_and(|a| a.starts_with("HTTP/1.1 200")),
        "{first:?}"
    );
    drop(ping);
    // The freed slot comes back once the server sees the close.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Every slot held by a request still waiting for its answer.
    let mut holders = Vec::with_capacity(MAX_CONNECTIONS);
    for _ in 0..MAX_CONNECTIONS {
        holders.push(ask(addr, "/hold").await);
    }
    // The next client connects (the kernel's backlog) but is not served.
    let mut late = ask(addr, "/ping").await;
    let early = answer(&mut late, Duration::from_secs(2)).await;
    assert_eq!(early, None, "a client past {MAX_CONNECTIONS} was served");

    // One held request answered and its connection closed: the late
    // client is served.
    gate.add_permits(1);
    let mut released = None;
    for (i, holder) in holders.iter_mut().enumerate() {
        if let Some(text) = answer(holder, Duration::from_millis(20)).await {
            released = Some((i, text));
            break;
        }
    }
    let (index, text) = match released {
        Some(found) => found,
        // Not among the quick looks: wait on each in turn.
        None => {
            let mut found = None;
            for (i, holder) in holders.iter_mut().enumerate() {
                if let Some(text) = answer(holder, Duration::from_millis(200)).await {
                    found = Some((i, text));
                    break;
                }
            }
            found.expect("the released request was answered")
        }
    };
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    drop(holders.swap_remove(index));
    let served = answer(&mut late, Duration::from_secs(10)).await;
    assert!(
        served
            .as_deref()
            .is_some_and(|a| a.starts_with("HTTP/1.1 200")),
        "the waiting client was not served once a slot freed: {served:?}"
    );

    gate.add_permits(MAX_CONNECTIONS);
    drop(holders);
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
}
