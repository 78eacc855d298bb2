//! The guest end of the guest channel: a Unix socket the host bound in a
//! directory of its own and handed to us as an inherited descriptor
//! (`--channel-fd`); we only `listen()` on it, which makes this process the
//! peer the host's `SO_PEERCRED` check sees. Each connection starts with the
//! handshake of [`cubicle_image::handshake`]; then it is spliced to the
//! service, wherever [`crate::endpoints`] says it listens.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cubicle_image::{handshake, ports};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

use crate::supervisor::Supervisor;

/// Connections the kernel queues before we accept them.
const BACKLOG: i32 = 64;

/// Takes the inherited, bound Unix stream socket `fd`, marks it
/// close-on-exec (no service we start may hold it) and listens on it.
pub fn listen_on_fd(fd: RawFd) -> Result<UnixListener, String> {
    let bad = |why: String| format!("--channel-fd {fd}: {why}");
    if fd <= 2 {
        return Err(bad("must not be stdin, stdout or stderr".into()));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; it fails with EBADF
    // if `fd` is not open, which is checked before anything owns it.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(bad(format!("{}", std::io::Error::last_os_error())));
    }
    // SAFETY: `fd` is open (checked above) and was inherited for this use
    // only: nothing else in this process refers to it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let int_opt = |option| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are valid out pointers of the sizes given.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&raw mut value).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    if int_opt(libc::SO_DOMAIN) != Some(libc::AF_UNIX)
        || int_opt(libc::SO_TYPE) != Some(libc::SOCK_STREAM)
    {
        return Err(bad("is not a Unix stream socket".into()));
    }
    // SAFETY: fcntl and listen on a descriptor we own; results are checked.
    let ok = unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) == 0 && libc::listen(fd, BACKLOG) == 0
    };
    if !ok {
        return Err(bad(format!("{}", std::io::Error::last_os_error())));
    }
    let listener = std::os::unix::net::UnixListener::from(socket);
    listener
        .set_nonblocking(true)
        .and_then(|()| UnixListener::from_std(listener))
        .map_err(|err| bad(err.to_string()))
}

pub async fn serve(listener: UnixListener, supervisor: Arc<Supervisor>) {
    let streams = Arc::new(AtomicU32::new(0));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let n = streams.fetch_add(1, Ordering::Relaxed) + 1;
                connections.spawn(handle(stream, n, supervisor.clone()));
            }
            Err(err) => tracing::warn!(%err, "guest channel accept failed"),
        }
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(mut stream: UnixStream, n: u32, supervisor: Arc<Supervisor>) {
    let port = match handshake::read_line(&mut stream)
        .await
        .and_then(|line| handshake::parse_connect(&line))
    {
        Ok(port) => port,
        Err(err) => {
            let _ = stream.write_all(format!("ERR {err}\n").as_bytes()).await;
            return;
        }
    };
    if port == ports::CONTROL {
        if stream
            .write_all(format!("OK {n}\n").as_bytes())
            .await
            .is_ok()
        {
            crate::control_server::serve(stream, &supervisor).await;
        }
        return;
    }
    if port == ports::CDP {
        match supervisor.endpoints.devtools.endpoint() {
            Ok(devtools) => {
                if stream
                    .write_all(format!("OK {n}\n").as_bytes())
                    .await
                    .is_ok()
                {
                    devtools.serve(stream).await;
                }
            }
            Err(err) => {
                let reply =
                    format!("ERR service on port {port} is not accepting connections: {err}\n");
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        }
        return;
    }
    let service = match supervisor.endpoints.connect(port).await {
        Ok(service) => service,
        Err(err) => {
            let reply = format!("ERR service on port {port} is not accepting connections: {err}\n");
            let _ = stream.write_all(reply.as_bytes()).await;
            return;
        }
    };
    if stream
        .write_all(format!("OK {n}\n").as_bytes())
        .await
        .is_ok()
    {
        service.splice(&mut stream).await;
    }
}
