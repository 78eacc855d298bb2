//! The guest end of the guest channel inside a microVM: one AF_VSOCK
//! listener per port of [`cubicle_image::ports`].
//!
//! There is no handshake here. The host speaks `CONNECT <port>\n` to the
//! VMM's hybrid vsock socket; the VMM turns it into a vsock connection to
//! that guest port and answers `OK <n>\n` itself once we accept. So each
//! accepted stream already *is* the service: 1024 is the control service,
//! 5900 is spliced to the service where [`crate::endpoints`] says it
//! listens, 9222 is served over Chromium's DevTools pipe
//! ([`crate::devtools_pipe`]).
//!
//! Unlike the jail's Unix socket, the host has already been told `OK` when a
//! TCP service is not up yet: it sees the stream close at once instead of an
//! `ERR` line.
//!
//! Why `tokio-vsock` rather than libc + `AsyncFd`: it is the maintained
//! tokio binding for AF_VSOCK (rust-vsock), gives a stream that implements
//! `AsyncRead`/`AsyncWrite`, and keeps `sockaddr_vm` handling and its
//! unsafe code out of this crate.

use std::sync::Arc;

use cubicle_image::ports;
use tokio::task::JoinSet;
use tokio_vsock::{VMADDR_CID_ANY, VsockAddr, VsockListener, VsockStream};

use crate::supervisor::Supervisor;

/// What can go wrong setting up the vsock listeners.
#[derive(Debug, thiserror::Error)]
pub enum VsockServerError {
    #[error(
        "cannot listen on vsock port {port}: {source} (does the kernel have CONFIG_VIRTIO_VSOCKETS and the VM a vsock device?)"
    )]
    Bind {
        port: u32,
        #[source]
        source: std::io::Error,
    },
}

/// One listener per guest port.
pub struct Listeners(Vec<(u16, VsockListener)>);

/// Binds a vsock listener on every port in `ports` (any CID: the VM has one).
pub fn bind(ports: &[u16]) -> Result<Listeners, VsockServerError> {
    let listeners = ports
        .iter()
        .map(|&port| {
            VsockListener::bind(VsockAddr::new(VMADDR_CID_ANY, u32::from(port)))
                .map(|listener| (port, listener))
                .map_err(|source| VsockServerError::Bind {
                    port: u32::from(port),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(Listeners(listeners))
}

/// Binds every port of the guest channel table.
pub fn bind_guest_ports() -> Result<Listeners, VsockServerError> {
    bind(&ports::ALLOWED)
}

/// Accepts on every listener until the task is dropped.
pub async fn serve(listeners: Listeners, supervisor: Arc<Supervisor>) {
    let mut accepting = JoinSet::new();
    for (port, listener) in listeners.0 {
        accepting.spawn(accept_loop(port, listener, supervisor.clone()));
    }
    while accepting.join_next().await.is_some() {}
}

async fn accept_loop(port: u16, listener: VsockListener, supervisor: Arc<Supervisor>) {
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                connections.spawn(handle(port, stream, supervisor.clone()));
            }
            Err(err) => {
                tracing::warn!(%err, port, "vsock accept failed");
                // A persistent error (e.g. EMFILE) must not spin the CPU.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(port: u16, mut stream: VsockStream, supervisor: Arc<Supervisor>) {
    if port == ports::CONTROL {
        return crate::control_server::serve(stream, &supervisor).await;
    }
    if port == ports::CDP {
        return match supervisor.endpoints.devtools.endpoint() {
            Ok(devtools) => devtools.serve(stream).await,
            Err(err) => {
                tracing::info!(%err, "DevTools asked for with no browser running; closing the vsock stream")
            }
        };
    }
    match supervisor.endpoints.connect(port).await {
        Ok(service) => service.splice(&mut stream).await,
        Err(err) => {
            tracing::info!(%err, port, "guest service not accepting; closing the vsock stream")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Binding needs only the vsock core module, which hosts load with any
    // vsock transport; connecting needs a transport to a peer, which only a
    // VM has (the streams themselves are tested by booting, where possible).
    #[tokio::test]
    async fn binds_one_listener_per_port_or_names_the_port() {
        match bind(&[40_917, 40_918]) {
            Ok(listeners) => assert_eq!(
                listeners.0.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
                [40_917, 40_918]
            ),
            Err(VsockServerError::Bind { port, .. }) => assert_eq!(port, 40_917),
        }
    }
}
