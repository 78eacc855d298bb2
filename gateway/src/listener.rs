//! The gateway's HTTP server loop: hyper on each accepted connection, with
//! the limits `axum::serve` does not offer. A client must finish sending a
//! request's headers within [`HEADER_TIMEOUT`] (also while a kept-alive
//! connection waits for its next request), and at most [`MAX_CONNECTIONS`]
//! connections are served at once; past that, new ones wait in the kernel's
//! backlog. Slow or idle clients therefore cannot pin the gateway's sockets.
//! WebSockets (live view, CDP, exec) are upgraded connections and are not
//! cut by the header timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long shutdown waits for open connections to finish.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, client) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // EMFILE and friends: back off rather than spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Every answer goes out as soon as it is written: with Nagle's
        // algorithm a live view's update read from Xvnc in two pieces sat
        // until the viewer acknowledged the first (a delayed ACK, up to
        // 40 ms), which cut its frame rate while a page scrolled.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%client, %err, "cannot turn off Nagle's algorithm");
        }
        let service = hyper::service::service_fn(with_client(router.clone(), client));
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%client, %err, "connection ended with an error");
            }
            drop(permit);
        });
    }
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
    Ok(())
}

type Request = hyper::Request<hyper::body::Incoming>;

/// The router as a hyper service that knows the client's address.
fn with_client(
    router: Router,
    client: SocketAddr,
) -> impl Fn(
    Request,
) -> futures_util::future::BoxFuture<
    'static,
    Result<axum::response::Response, std::convert::Infallible>,
> + Clone {
    move |mut request: Request| {
        request.extensions_mut().insert(ConnectInfo(client));
        let router = router.clone();
        Box::pin(async move { router.oneshot(request.map(axum::body::Body::new)).await })
    }
}
