//! The browser's own network namespace: Chromium and its pages see a
//! loopback of their own, where nothing of the user's listens and from
//! where only the egress proxy leads out.
//!
//! DevTools is not served here any more: Chromium speaks it over a pipe to
//! the supervisor ([`crate::devtools_pipe`]), because a TCP port in this
//! namespace was reachable by the browser's own pages (the attack is in
//! that module's doc). The namespace stays so that the user's processes
//! and the browser share no loopback. A thread of the supervisor moves
//! into it at start (`unshare` of the network namespace is per thread),
//! brings its loopback up, drops every capability, and from then on does
//! the few things that must happen in there: spawning Chromium (a child is
//! born in its parent thread's namespace) and listening on the browser's
//! side of the egress proxy ([`relay_egress`]).
//!
//! The X display is reached through its socket file (`/tmp/.X11-unix/X0`),
//! which does not depend on the network namespace.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::mpsc;
use std::time::Duration;

use cubicle_image::splice::splice_sockets;
use tokio::net::{TcpListener, TcpStream};

use crate::caps;

/// The workspace's egress proxy port (`127.0.0.1:3128`), served in the
/// browser's namespace too.
pub const EGRESS_PORT: u16 = 3128;

/// How long a loopback connect in the browser's namespace may take.
#[cfg(test)]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

type Job = Box<dyn FnOnce() + Send>;

/// What can go wrong making the namespace.
#[derive(Debug, thiserror::Error)]
pub enum BrowserNetError {
    #[error(
        "cannot make the browser's network namespace: {0} (the supervisor needs CAP_SYS_ADMIN and CAP_NET_ADMIN at start; the jail grants them)"
    )]
    Setup(#[source] std::io::Error),
    #[error("the browser's network thread is gone")]
    Gone,
}

/// A handle on the thread that lives in the browser's network namespace.
#[derive(Clone)]
pub struct BrowserNet {
    jobs: mpsc::Sender<Job>,
}

impl BrowserNet {
    /// Makes the namespace (call before the supervisor drops its start-up
    /// capabilities: the new thread starts with the caller's).
    pub fn create() -> Result<Self, BrowserNetError> {
        Self::start(true)
    }

    /// A thread in the test's own namespace (making one needs privileges
    /// a unit test does not have).
    #[cfg(test)]
    pub fn shared() -> Self {
        Self::start(false).expect("a thread without setup cannot fail to start")
    }

    fn start(isolate: bool) -> Result<Self, BrowserNetError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("browser-net".into())
            .spawn(move || {
                let setup = if isolate {
                    enter_new_namespace()
                } else {
                    Ok(())
                };
                let ok = setup.is_ok();
                let _ = ready_tx.send(setup);
                if !ok {
                    return;
                }
                while let Ok(job) = queue.recv() {
                    job();
                }
            })
            .map_err(BrowserNetError::Setup)?;
        ready
            .recv()
            .map_err(|_| BrowserNetError::Gone)?
            .map_err(BrowserNetError::Setup)?;
        Ok(Self { jobs })
    }

    /// Runs `job` on the thread in the browser's namespace.
    pub async fn run<T, F>(&self, job: F) -> Result<T, BrowserNetError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(job());
            }))
            .map_err(|_| BrowserNetError::Gone)?;
        rx.await.map_err(|_| BrowserNetError::Gone)
    }

    /// A connection to `127.0.0.1:port` in the browser's namespace.
    #[cfg(test)]
    pub async fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = self
            .run(move || {
                let stream = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
                stream.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(stream)
            })
            .await
            .map_err(std::io::Error::other)??;
        TcpStream::from_std(stream)
    }

    /// A listener on `127.0.0.1:port` in the browser's namespace.
    pub async fn listen(&self, port: u16) -> std::io::Result<TcpListener> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = self
            .run(move || {
                let listener = std::net::TcpListener::bind(addr)?;
                listener.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(listener)
            })
            .await
            .map_err(std::io::Error::other)??;
        TcpListener::from_std(listener)
    }
}

/// On the browser thread: a new network namespace with loopback up, then
/// no capabilities left on this thread.
fn enter_new_namespace() -> std::io::Result<()> {
    // SAFETY: unshare takes a flag word; it moves only this thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    loopback_up()?;
    caps::drop_all()
}

/// `ip link set lo up`, by ioctl.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: socket takes plain integers; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and nothing else owns it.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    let raw = std::os::fd::AsRawFd::as_raw_fd(&socket);
    // SAFETY: `request` is a valid ifreq naming "lo"; the kernel reads and
    // writes only within it.
    if unsafe { libc::ioctl(raw, libc::SIOCGIFFLAGS, &raw mut request) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe {
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: as above.
    if unsafe { libc::ioctl(raw, libc::SIOCSIFFLAGS, &raw const request) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Serves the egress proxy port inside the browser's namespace: each
/// connection there is spliced to the same port in the supervisor's own
/// namespace, where the workspace's egress proxy listens. Runs until the
/// task is dropped; a failure to listen is logged once.
pub async fn relay_egress(net: BrowserNet, port: u16) {
    let listener = match net.listen(port).await {
        Ok(listener) => listener,
        Err(err) => {
            tracing::warn!(%err, port, "cannot listen on the browser's egress port");
            return;
        }
    };
    let mut connections = tokio::task::JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((mut browser, _)) => {
                connections.spawn(async move {
                    if let Ok(mut proxy) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await {
                        let _ = splice_sockets(&mut browser, &mut proxy).await;
                    }
                });
            }
            Err(err) => {
                tracing::warn!(%err, "browser egress accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn listen_and_connect_meet_in_the_same_namespace() {
        let net = BrowserNet::shared();
        let listener = net.listen(0).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accept = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            stream.write_all(b"hi").await.unwrap();
        });
        let mut stream = net.connect(port).await.unwrap();
        let mut buf = [0u8; 2];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        accept.await.unwrap();
    }

    /// As root: a port opened in the browser's namespace is not there for
    /// the rest of the process, and the namespace's loopback is up.
    #[tokio::test]
    async fn a_port_in_the_browser_namespace_is_absent_outside() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return cubicle_skip::skip("needs CAP_SYS_ADMIN to make a network namespace");
        }
        let net = BrowserNet::create().unwrap();
        let listener = net.listen(0).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let inside = net.connect(port).await;
        assert!(inside.is_ok(), "{inside:?}");
        let outside = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await;
        assert!(outside.is_err(), "the browser's port answered outside");
    }
}
