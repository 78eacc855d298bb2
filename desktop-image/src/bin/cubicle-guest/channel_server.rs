//! The guest end of the guest channel: a Unix socket in a directory the host
//! bind-mounts. Each connection starts with the handshake of
//! [`cubicle_guest::handshake`]; then it is spliced to the service.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cubicle_guest::{handshake, ports};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::supervisor::Supervisor;

pub fn bind(path: &Path) -> Result<UnixListener, String> {
    // A socket left by an earlier run of this workspace would make bind fail.
    let _ = std::fs::remove_file(path);
    UnixListener::bind(path)
        .map_err(|err| format!("cannot listen on guest channel {}: {err}", path.display()))
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
    let mut service = match TcpStream::connect(("127.0.0.1", port)).await {
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
        let _ = tokio::io::copy_bidirectional(&mut stream, &mut service).await;
    }
}
