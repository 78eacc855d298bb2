//! Where each guest service listens, and how the supervisor (alone)
//! reaches it. The guest channel keeps its port numbers
//! ([`cubicle_image::ports`]); behind them:
//!
//! | port | service | reached at |
//! | --- | --- | --- |
//! | 5900 | Xvnc's RFB | the Unix socket [`RFB_SOCKET`], in a 0700 directory of the services id; Xvnc listens on no TCP port |
//! | 9222 | Chromium's DevTools | served by the supervisor itself over Chromium's DevTools pipe ([`crate::devtools_pipe`]); Chromium listens on no port |
//!
//! Neither is reachable by the user's processes: the socket's directory is
//! closed to their id, and the pipe is held by the supervisor alone (nor by
//! the browser's own pages: there is no address to name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cubicle_image::ports;
use cubicle_image::splice::splice;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;

use crate::browser_net::BrowserNet;
use crate::devtools_pipe::DevTools;

/// The services' private directory (mode 0700).
pub const SERVICES_DIR: &str = "/run/cubicle-services";
/// Xvnc's RFB socket.
pub const RFB_SOCKET: &str = "/run/cubicle-services/rfb.sock";

/// How the supervisor reaches the services behind the guest ports.
#[derive(Clone)]
pub struct Endpoints {
    pub rfb_socket: PathBuf,
    pub browser_net: BrowserNet,
    /// The running Chromium's DevTools pipe.
    pub devtools: Arc<DevTools>,
}

/// A stream to one service.
pub enum Service {
    Unix(UnixStream),
}

impl Endpoints {
    pub fn new(browser_net: BrowserNet) -> Self {
        Self {
            rfb_socket: PathBuf::from(RFB_SOCKET),
            browser_net,
            devtools: Arc::default(),
        }
    }

    /// Makes the services' private directory (0700), where Xvnc puts its
    /// socket.
    pub fn prepare(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let dir = self.rfb_socket.parent().unwrap_or(Path::new(SERVICES_DIR));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }

    /// Connects to the service behind guest port `port` (not the control
    /// port nor DevTools: the supervisor serves those itself).
    pub async fn connect(&self, port: u16) -> std::io::Result<Service> {
        match port {
            ports::RFB => UnixStream::connect(&self.rfb_socket)
                .await
                .map(Service::Unix),
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("port {other} has no service behind it"),
            )),
        }
    }
}

impl Service {
    /// Copies both ways between `client` and the service until both end.
    pub async fn splice<S: AsyncRead + AsyncWrite + Unpin>(self, client: &mut S) {
        match self {
            Service::Unix(mut service) => {
                let _ = splice(client, &mut service).await;
            }
        };
    }
}
