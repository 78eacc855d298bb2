//! The workspace's way out: `127.0.0.1:3128`, an HTTP(S) proxy address for
//! the shell (`http_proxy`, `https_proxy`) and Chromium (`--proxy-server`).
//! Each connection is relayed byte for byte to the host's egress proxy over
//! the reverse channel ([`Upstream`]): in a jail a Unix socket the host made
//! and shows the jail read-only (`/run/cubicle-egress/proxy.sock`); in a
//! microVM a vsock stream to the host (CID 2) on port [`PORT`], which the
//! VMM hands to a socket the daemon made beside the guest channel's. The
//! host checks who connects either way. Nothing here decides anything; the
//! host proxy does. There is no other route: the workspace has only a
//! loopback interface (a microVM has no network device at all).
//!
//! Also here: trusting the host's interception CA in the browser, by
//! copying the NSS database the host prepared into the browser's home.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cubicle_image::splice::{splice, splice_sockets};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::Semaphore;

/// The proxy port inside the workspace.
pub const PORT: u16 = 3128;
/// Where the host's socket appears in the jail.
pub const DEFAULT_SOCKET: &str = "/run/cubicle-egress/proxy.sock";
/// Where the host's trust files appear in the jail.
pub const DEFAULT_TRUST_DIR: &str = "/run/cubicle-trust";
/// Connections relayed at once, at most.
const MAX_CONNECTIONS: usize = 512;
/// How long a connection waits for the host's proxy to be there: the host
/// opens a workspace's proxy just after the workspace is ready, and again
/// when its daemon restarts, so a request made in that moment waits rather
/// than fails.
const UPSTREAM_WAIT: Duration = Duration::from_secs(10);
const UPSTREAM_RETRY: Duration = Duration::from_millis(50);

/// The proxy settings every process of the session gets.
pub fn proxy_env() -> [(&'static str, &'static str); 6] {
    const URL: &str = "http://127.0.0.1:3128";
    const LOCAL: &str = "localhost,127.0.0.1,::1";
    [
        ("http_proxy", URL),
        ("https_proxy", URL),
        ("HTTP_PROXY", URL),
        ("HTTPS_PROXY", URL),
        ("no_proxy", LOCAL),
        ("NO_PROXY", LOCAL),
    ]
}

/// Chromium's flag for it.
pub fn chromium_flag() -> String {
    format!("--proxy-server=http://127.0.0.1:{PORT}")
}

/// Where the host's egress proxy is.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A Unix socket the host shows the jail.
    Unix(PathBuf),
    /// The host side of a microVM's vsock device, on [`PORT`].
    Vsock,
}

impl Upstream {
    /// Relays `client` to the host until both sides close.
    async fn relay(&self, client: &mut TcpStream) {
        let outcome = match self {
            Upstream::Unix(socket) => match connect_waiting(socket, UPSTREAM_WAIT).await {
                Ok(mut host) => {
                    let _ = splice_sockets(client, &mut host).await;
                    Ok(())
                }
                Err(err) => Err(err),
            },
            Upstream::Vsock => {
                let host =
                    tokio_vsock::VsockAddr::new(tokio_vsock::VMADDR_CID_HOST, u32::from(PORT));
                match tokio_vsock::VsockStream::connect(host).await {
                    Ok(mut host) => {
                        let _ = splice(client, &mut host).await;
                        Ok(())
                    }
                    Err(err) => Err(err),
                }
            }
        };
        if let Err(err) = outcome {
            tracing::warn!(%err, upstream = ?self, "egress relay ended with an error (is the host's proxy up?)");
        }
    }
}

/// Connects to the host's socket, asking again until `wait` has passed
/// while it is not there yet (or not yet listening).
async fn connect_waiting(socket: &Path, wait: Duration) -> std::io::Result<UnixStream> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match UnixStream::connect(socket).await {
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(UPSTREAM_RETRY).await;
            }
            done => return done,
        }
    }
}

/// Listens on `127.0.0.1:3128` and relays each connection to `upstream`
/// until the task is dropped.
pub async fn serve(upstream: Upstream) {
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, PORT)).await {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(%err, "cannot listen on 127.0.0.1:{PORT}: the workspace has no egress");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (mut client, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(%err, "egress accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!("too many egress connections; closing a new one");
            continue;
        };
        // A relay forwards each write as it comes: with Nagle on, a small
        // write behind an unacknowledged one (a CONNECT's 200, then the TLS
        // hello) waits out the client's delayed ACK, ~40 ms per request.
        let _ = client.set_nodelay(true);
        let upstream = upstream.clone();
        connections.spawn(async move {
            let _slot = slot;
            upstream.relay(&mut client).await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// Copies the host's NSS database (trusting its interception CA) into
/// `home/.pki/nssdb`, where Chromium reads locally trusted roots. Replaced
/// at every start, so a workspace that broke it gets it back.
pub fn install_browser_trust(trust_dir: &Path, home: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    let source = trust_dir.join("nssdb");
    if !source.join("cert9.db").exists() {
        return Ok(false);
    }
    let target = home.join(".pki").join("nssdb");
    std::fs::create_dir_all(&target)?;
    std::fs::set_permissions(home.join(".pki"), std::fs::Permissions::from_mode(0o700))?;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700))?;
    for entry in std::fs::read_dir(&source)?.flatten() {
        let name = entry.file_name();
        let to = target.join(&name);
        // A symlink planted there is replaced, never followed.
        let _ = std::fs::remove_file(&to);
        std::fs::copy(entry.path(), &to)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(true)
}

/// Trusts the interception CA for the browser whose environment is
/// `env` (in its `HOME`); logs what it could not do.
pub fn trust_for(env: &[(String, String)]) {
    let Some((_, home)) = env.iter().find(|(k, _)| k == "HOME") else {
        return;
    };
    match install_browser_trust(Path::new(DEFAULT_TRUST_DIR), Path::new(home)) {
        Ok(true) => tracing::info!(home, "the browser trusts the egress CA"),
        Ok(false) => tracing::warn!(
            "no NSS database from the host: the browser will refuse intercepted sites"
        ),
        Err(err) => tracing::warn!(%err, home, "cannot install the egress CA for the browser"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_waits_for_the_hosts_proxy_to_be_there_then_gives_up() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let later = socket.clone();
        let bound = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let listener = tokio::net::UnixListener::bind(&later).unwrap();
            listener.accept().await.map(|_| ())
        });
        connect_waiting(&socket, UPSTREAM_WAIT).await.unwrap();
        bound.await.unwrap().unwrap();
        let gone = dir.path().join("never.sock");
        let err = connect_waiting(&gone, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn trust_is_copied_private_and_a_planted_symlink_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let trust = dir.path().join("trust");
        std::fs::create_dir_all(trust.join("nssdb")).unwrap();
        std::fs::write(trust.join("nssdb/cert9.db"), "db").unwrap();
        std::fs::write(trust.join("nssdb/key4.db"), "keys").unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".pki/nssdb")).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, home.join(".pki/nssdb/cert9.db")).unwrap();
        assert!(install_browser_trust(&trust, &home).unwrap());
        assert_eq!(
            std::fs::read_to_string(home.join(".pki/nssdb/cert9.db")).unwrap(),
            "db"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let empty = dir.path().join("none");
        assert!(!install_browser_trust(&empty, &home).unwrap());
    }

    #[test]
    fn the_session_is_told_about_the_proxy() {
        let env: std::collections::HashMap<_, _> = proxy_env().into_iter().collect();
        assert_eq!(env["https_proxy"], "http://127.0.0.1:3128");
        assert!(env["no_proxy"].contains("127.0.0.1"));
        assert_eq!(chromium_flag(), "--proxy-server=http://127.0.0.1:3128");
    }
}
