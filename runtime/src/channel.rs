//! The host end of the guest channel: a Unix socket per workspace, the
//! `CONNECT <port>` handshake, then a byte stream to the guest service.
//!
//! Nothing the guest sends is trusted: replies are bounded in size and time.
//!
//! Nor is the socket's path: before a single byte is written, every connect
//! checks who is listening on the other end ([`GuestPeer`]). `SO_PEERCRED` on
//! a connected Unix stream names the process that called `listen()`, so the
//! check holds whoever bound the path or put a symlink there: the listener
//! must run as the workspace's own host uid, in the workspace's own process
//! tree. The final path component is never followed if it is a symlink.
//!
//! # Who owns the socket, and why
//!
//! The guest channel used to be a socket the guest bound in a directory its
//! user owned. Anyone in the workspace could replace it with a symlink to
//! another workspace's socket (through `/proc/<pid>/root/...`) or to a
//! root-only host socket, and the root daemon followed it: exec on
//! workspace A ran in B. Two walls now stand in the way, each enough alone:
//!
//! - **The host owns the path.** For the jail the daemon creates the socket
//!   itself and binds it at `<dir>/host/guest.sock` (`host/` is root's,
//!   mode 0700, under the root-owned 0711 workspace dir); nothing of it is
//!   mounted into the jail. The bound, not yet listening, socket is
//!   inherited through `prlimit` → `setpriv` → `bwrap` and `cubicle-guest
//!   --channel-fd N` calls `listen()` on it. The workspace can neither see
//!   nor replace the path the daemon connects to. The microVM's socket is
//!   made by `cubicle-vmm` (the workspace uid) in `<dir>/chan/`, a directory
//!   of that uid, so there only the second wall and no-follow hold.
//! - **The peer is checked** ([`GuestPeer::check`]) before the handshake:
//!   uid equal to the workspace's, pid in the tree under its top process
//!   (bubblewrap, or the VMM itself). A socket of another workspace (other
//!   uid) or of the host (root or a service uid) is refused with nothing
//!   sent. Uids are per workspace and leased host-wide, so the uid alone
//!   names the workspace; the tree check also refuses a stray process of a
//!   reused uid that is not under the current top process.
//!
//! What a process inside the workspace can still do is talk to its own
//! workspace's guest service, which it already controls: no wall is crossed.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cubicle_image::control::{Health, Request};
use cubicle_image::handshake::{self, HandshakeError};
use cubicle_image::ports;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The longest control reply the host reads.
const MAX_REPLY: u64 = 1024 * 1024;
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// What can go wrong talking to a guest.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("cannot reach the guest channel at {path}: {source}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the guest channel {path} is not a socket (a symlink or any other file there is never followed): refusing"
    )]
    NotASocket { path: String },
    #[error(
        "the workspace has no running top process to check its guest channel against; start it first"
    )]
    NotRunning,
    #[error(
        "guest channel peer is uid {uid} pid {pid}, expected workspace uid {expected_uid} in the tree of pid {top_pid}: refusing"
    )]
    WrongPeer {
        uid: u32,
        pid: i32,
        expected_uid: u32,
        top_pid: i32,
    },
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("guest control request failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("guest control reply timed out after {CONTROL_TIMEOUT:?}")]
    Timeout,
    #[error("guest control reply is not valid: {0}")]
    BadReply(String),
}

/// Who must be listening on a workspace's guest channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestPeer {
    /// The workspace's own host uid.
    pub uid: u32,
    /// The host pid of the workspace's top process (bubblewrap, or the
    /// VMM); `None` while it does not run, and then nothing is connected.
    pub top_pid: Option<i32>,
}

impl GuestPeer {
    /// Accepts a listener whose credentials are `uid` and `pid` (as
    /// `SO_PEERCRED` reports them) only if it is this workspace's: its uid,
    /// and `pid` the top process or one of its descendants.
    pub fn check(&self, uid: u32, pid: Option<i32>) -> Result<(), ChannelError> {
        let top_pid = self.top_pid.ok_or(ChannelError::NotRunning)?;
        let pid = pid.unwrap_or(0);
        let in_tree = pid > 0 && crate::proc_scan::descends_from(pid, top_pid);
        if uid != self.uid || !in_tree {
            return Err(ChannelError::WrongPeer {
                uid,
                pid,
                expected_uid: self.uid,
                top_pid,
            });
        }
        Ok(())
    }
}

/// Connects to the socket at `path` without following a symlink in its
/// last component: the path is opened `O_PATH | O_NOFOLLOW`, must be a
/// socket, and is connected through `/proc/self/fd/N`, so a swap between
/// the check and the connect cannot redirect it.
pub(crate) async fn connect_no_follow(path: &Path) -> Result<UnixStream, ChannelError> {
    let connect_err = |source| ChannelError::Connect {
        path: path.display().to_string(),
        source,
    };
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .map_err(connect_err)?;
    if !handle
        .metadata()
        .map_err(connect_err)?
        .file_type()
        .is_socket()
    {
        return Err(ChannelError::NotASocket {
            path: path.display().to_string(),
        });
    }
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
    let stream = UnixStream::connect(&by_fd).await.map_err(connect_err)?;
    drop(handle);
    Ok(stream)
}

/// How to reach one workspace's guest.
#[derive(Debug, Clone)]
pub struct GuestChannel {
    socket: PathBuf,
    peer: GuestPeer,
}

impl GuestChannel {
    /// The channel at `socket`, answered only by `peer`.
    pub fn new(socket: PathBuf, peer: GuestPeer) -> Self {
        Self { socket, peer }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A stream to the guest's listener, checked to be the workspace's
    /// before anything is written to it; a wrong peer's stream is dropped.
    async fn connect_checked(&self) -> Result<UnixStream, ChannelError> {
        if self.peer.top_pid.is_none() {
            return Err(ChannelError::NotRunning);
        }
        let stream = connect_no_follow(&self.socket).await?;
        let cred = stream.peer_cred()?;
        self.peer.check(cred.uid(), cred.pid())?;
        Ok(stream)
    }

    /// Opens a stream to the guest service on `port`.
    pub async fn connect(&self, port: u16) -> Result<UnixStream, ChannelError> {
        if !ports::is_allowed(port) {
            return Err(HandshakeError::PortNotAllowed(port).into());
        }
        let mut stream = self.connect_checked().await?;
        handshake::connect(&mut stream, port).await?;
        Ok(stream)
    }

    /// Asks the guest's control service for its health report.
    pub async fn health(&self) -> Result<Health, ChannelError> {
        let stream = self.connect(ports::CONTROL).await?;
        let exchange = async {
            let reply = one_exchange(stream, &Request::Health).await?;
            serde_json::from_str::<Health>(&reply)
                .map_err(|err| ChannelError::BadReply(format!("{err}: {reply:.200}")))
        };
        tokio::time::timeout(CONTROL_TIMEOUT, exchange)
            .await
            .map_err(|_| ChannelError::Timeout)?
    }
}

/// Sends `request` as one JSON line on `stream` and reads one reply line.
async fn one_exchange<T: serde::Serialize>(
    stream: UnixStream,
    request: &T,
) -> Result<String, ChannelError> {
    let (read, mut write) = stream.into_split();
    let mut line =
        serde_json::to_string(request).map_err(|err| ChannelError::BadReply(err.to_string()))?;
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read.take(MAX_REPLY))
        .read_line(&mut reply)
        .await?;
    Ok(reply)
}

impl GuestChannel {
    /// Gives a microVM restored from a memory snapshot its own identity
    /// (see [`cubicle_image::identity`]): its init reseeds the kernel's RNG
    /// with `identity`'s entropy, takes its machine id and hostname and
    /// steps its clock. Only a microVM's init serves this port; the VMM is
    /// the checked peer, as for every other port.
    pub async fn fresh_identity(
        &self,
        identity: &cubicle_image::identity::Identity,
    ) -> Result<(), ChannelError> {
        use cubicle_image::identity::{IdentityReply, PORT};
        let mut stream = self.connect_checked().await?;
        let exchange = async {
            handshake::connect(&mut stream, PORT).await?;
            let reply = one_exchange(stream, identity).await?;
            if reply.is_empty() {
                // Closed without a word: a VM just restored resets the
                // vsock streams it had (the restore's TRANSPORT_RESET), and
                // one made that early can go with them. Worth asking again.
                return Err(ChannelError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            let reply: IdentityReply = serde_json::from_str(&reply).map_err(|err| {
                ChannelError::BadReply(format!(
                    "the VM's init did not answer the identity request ({err}): {reply:.200}"
                ))
            })?;
            match reply.ok {
                true => Ok(()),
                false => Err(ChannelError::BadReply(format!(
                    "the VM's init refused its new identity: {}",
                    reply.error.unwrap_or_default()
                ))),
            }
        };
        tokio::time::timeout(CONTROL_TIMEOUT, exchange)
            .await
            .map_err(|_| ChannelError::Timeout)?
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use tokio::net::UnixListener;

    use super::*;

    fn me() -> (u32, i32) {
        // SAFETY: getuid has no preconditions and cannot fail.
        (unsafe { libc::getuid() }, std::process::id() as i32)
    }

    /// A listener at `<dir>/guest.sock` that answers one handshake with
    /// `OK 1` when `answer`, and reports how many bytes each connection
    /// sent before it closed.
    fn listener(dir: &Path, answer: bool) -> (PathBuf, tokio::task::JoinHandle<Vec<usize>>) {
        let path = dir.join("guest.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let task = tokio::spawn(async move {
            let mut sent = Vec::new();
            while let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(Duration::from_millis(500), listener.accept()).await
            {
                if answer {
                    let _ = stream.write_all(b"OK 1\n").await;
                }
                let mut bytes = Vec::new();
                let _ = tokio::time::timeout(
                    Duration::from_millis(500),
                    stream.read_to_end(&mut bytes),
                )
                .await;
                sent.push(bytes.len());
            }
            sent
        });
        (path, task)
    }

    /// A restored VM's init at `<dir>/guest.sock`: accepts the handshake,
    /// reads the identity request and answers each connection with the
    /// next of `replies` (an empty one: closes without a word).
    fn init(dir: &Path, replies: Vec<&'static str>) -> PathBuf {
        let path = dir.join("guest.sock");
        let listener = UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            for reply in replies {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                let _ = write.write_all(b"OK 1\n").await;
                let _ = lines.next_line().await; // CONNECT 1025
                let _ = lines.next_line().await; // the identity
                let _ = write.write_all(reply.as_bytes()).await;
            }
        });
        path
    }

    #[tokio::test]
    async fn an_identity_request_closed_unanswered_may_be_asked_again_a_garbled_one_not() {
        let identity = cubicle_image::identity::Identity {
            hostname: "ws-1".into(),
            machine_id: "0".repeat(32),
            entropy: "0".repeat(128),
            time_unix_ns: 1,
        };
        let dir = tempfile::tempdir().unwrap();
        let (uid, pid) = me();
        let peer = GuestPeer {
            uid,
            top_pid: Some(crate::proc_scan::parent_pid(pid).unwrap()),
        };
        let path = init(
            dir.path(),
            vec![
                "",
                "{\"ok\":true}\n",
                "garbled\n",
                "{\"ok\":false,\"error\":\"no\"}\n",
            ],
        );
        let channel = GuestChannel::new(path, peer);
        // Closed without a word (the restore's vsock reset): an I/O error,
        // which the manager asks again after.
        let first = channel.fresh_identity(&identity).await.unwrap_err();
        assert!(matches!(first, ChannelError::Io(_)), "{first}");
        channel.fresh_identity(&identity).await.unwrap();
        let garbled = channel.fresh_identity(&identity).await.unwrap_err();
        assert!(matches!(garbled, ChannelError::BadReply(_)), "{garbled}");
        let refused = channel.fresh_identity(&identity).await.unwrap_err();
        assert!(
            matches!(&refused, ChannelError::BadReply(m) if m.contains("refused its new identity: no")),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_listener_of_another_uid_is_refused_before_a_byte_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let (path, heard) = listener(dir.path(), true);
        let (uid, pid) = me();
        let peer = GuestPeer {
            uid: uid.wrapping_add(1),
            top_pid: Some(pid),
        };
        let err = GuestChannel::new(path, peer)
            .connect(ports::CONTROL)
            .await
            .unwrap_err();
        match err {
            ChannelError::WrongPeer {
                uid: got, pid: at, ..
            } => assert_eq!((got, at), (uid, pid)),
            other => panic!("expected WrongPeer, got {other}"),
        }
        assert_eq!(heard.await.unwrap(), vec![0], "the listener got bytes");
    }

    #[tokio::test]
    async fn a_listener_of_the_right_uid_outside_the_tree_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, heard) = listener(dir.path(), true);
        let (uid, _) = me();
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let peer = GuestPeer {
            uid,
            top_pid: Some(other.id() as i32),
        };
        let err = GuestChannel::new(path, peer)
            .connect(ports::CONTROL)
            .await
            .unwrap_err();
        let _ = other.kill();
        let _ = other.wait();
        assert!(matches!(err, ChannelError::WrongPeer { .. }), "{err}");
        assert!(err.to_string().contains("refusing"), "{err}");
        assert_eq!(heard.await.unwrap(), vec![0], "the listener got bytes");
    }

    #[tokio::test]
    async fn the_workspaces_own_listener_is_accepted_and_the_handshake_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (path, heard) = listener(dir.path(), true);
        let (uid, pid) = me();
        let parent = crate::proc_scan::parent_pid(pid).unwrap();
        let peer = GuestPeer {
            uid,
            top_pid: Some(parent),
        };
        let stream = GuestChannel::new(path, peer)
            .connect(ports::CONTROL)
            .await
            .unwrap();
        drop(stream);
        assert_eq!(heard.await.unwrap(), vec![b"CONNECT 1024\n".len()]);
    }

    #[tokio::test]
    async fn a_symlink_is_not_followed_and_no_top_pid_connects_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (path, heard) = listener(dir.path(), true);
        let (uid, pid) = me();
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let peer = GuestPeer {
            uid,
            top_pid: Some(pid),
        };
        let err = GuestChannel::new(link, peer)
            .connect(ports::CONTROL)
            .await
            .unwrap_err();
        assert!(matches!(err, ChannelError::NotASocket { .. }), "{err}");
        let stopped = GuestPeer { uid, top_pid: None };
        let err = GuestChannel::new(path, stopped)
            .connect(ports::CONTROL)
            .await
            .unwrap_err();
        assert!(matches!(err, ChannelError::NotRunning), "{err}");
        assert!(heard.await.unwrap().is_empty(), "nothing may connect");
    }

    /// The jail's arrangement for real: root binds, a child of another uid
    /// only listens, and the host sees the child as the peer. Needs root.
    #[test]
    fn the_peer_is_whoever_listens_not_whoever_bound() {
        let (uid, _) = me();
        if uid != 0 {
            return cubicle_skip::skip("needs root to listen as another uid");
        }
        const NOBODY: u32 = 65534;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guest.sock");
        let bound = crate::jail::host_socket::bind_unbound(&path).unwrap();
        let fd = bound.as_raw_fd();
        // SAFETY: the child only makes async-signal-safe calls (setresgid,
        // setresuid, listen, accept, read, _exit) on descriptors it has.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            // SAFETY: as above; `buf` is a local buffer of the size given.
            unsafe {
                if libc::setresgid(NOBODY, NOBODY, NOBODY) != 0
                    || libc::setresuid(NOBODY, NOBODY, NOBODY) != 0
                    || libc::listen(fd, 4) != 0
                {
                    libc::_exit(250);
                }
                let mut total: isize = 0;
                for _ in 0..2 {
                    let conn = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                    if conn < 0 {
                        libc::_exit(251);
                    }
                    let mut buf = [0u8; 64];
                    loop {
                        let n = libc::read(conn, buf.as_mut_ptr().cast(), buf.len());
                        if n <= 0 {
                            break;
                        }
                        total += n;
                    }
                }
                libc::_exit(total.min(200) as i32);
            }
        }
        // The child's listen() replaces the bind-time credentials; wait for it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while crate::proc_scan::real_uid(child) != Some(NOBODY)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let own = GuestPeer {
                uid: NOBODY,
                top_pid: Some(child),
            };
            let channel = GuestChannel::new(path.clone(), own);
            let accepted = channel.connect_checked().await.unwrap();
            drop(accepted);
            let other = GuestPeer {
                uid: 1_600_999,
                top_pid: Some(child),
            };
            let err = GuestChannel::new(path.clone(), other)
                .connect(ports::CONTROL)
                .await
                .unwrap_err();
            match err {
                ChannelError::WrongPeer { uid, pid, .. } => assert_eq!((uid, pid), (NOBODY, child)),
                other => panic!("expected WrongPeer, got {other}"),
            }
        });
        let mut status = 0;
        // SAFETY: `child` is our child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status), "child died: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "bytes reached the listener");
    }
}
