//! The jail's stdout and stderr: a pipe the daemon drains into the
//! root-owned `<dir>/guest.log`, at most [`MAX_LOG`] bytes of it.
//!
//! Why not hand the jail the file itself: every process that inherits the
//! descriptor could seek and overwrite what was logged before it, or fill
//! the host's disk, since `guest.log` lies outside the workspace's own disk.
//! Through a pipe the jail can only add bytes at the end, and no more than
//! the cap.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use crate::backend::{BackendError, WorkspaceSpec};

use super::io_err;

/// The most a jail writes to its `guest.log` per start.
pub const MAX_LOG: u64 = 8 * 1024 * 1024;
/// How long the drain may go on after the jail's top process ended (its
/// pid namespace is gone by then, so every writer is closed).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
const NOTE: &[u8] = b"\n[cubicle: guest.log reached its size limit; later output is dropped]\n";

/// The jail's stdout and stderr (write ends of one pipe) and the drain
/// that copies the pipe into `guest.log`.
pub struct GuestLog {
    pub stdout: Stdio,
    pub stderr: Stdio,
    pub drain: LogDrain,
}

/// The read end of a jail's log pipe and the file it goes to.
pub struct LogDrain {
    reader: pipe::Receiver,
    path: PathBuf,
}

impl GuestLog {
    /// A fresh pipe for the jail of `spec`; `guest.log` is truncated now.
    /// Must be called inside the tokio runtime.
    pub fn open(spec: &WorkspaceSpec) -> Result<Self, BackendError> {
        let path = spec.dir.join("guest.log");
        // The daemon's only: the workspace dir is traversable by others.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)))
            .map_err(io_err(&path))?;
        let (reader, writer) = std::io::pipe().map_err(io_err(&path))?;
        let stderr = writer.try_clone().map_err(io_err(&path))?;
        let reader = pipe::Receiver::from_owned_fd(reader.into()).map_err(io_err(&path))?;
        Ok(Self {
            stdout: writer.into(),
            stderr: stderr.into(),
            drain: LogDrain { reader, path },
        })
    }
}

impl LogDrain {
    /// Copies what the jail writes to the log, up to [`MAX_LOG`] bytes,
    /// until every write end is closed; beyond the cap output is read and
    /// dropped so the jail never blocks on a full pipe.
    pub async fn run(self) {
        let Self { mut reader, path } = self;
        let Ok(mut log) = tokio::fs::OpenOptions::new().append(true).open(&path).await else {
            tracing::warn!(path = %path.display(), "cannot open the guest log");
            return;
        };
        let mut buf = vec![0u8; 16 * 1024];
        let mut written = 0u64;
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if written >= MAX_LOG {
                continue;
            }
            let room = usize::try_from(MAX_LOG - written).unwrap_or(usize::MAX);
            let take = n.min(room);
            if log.write_all(&buf[..take]).await.is_err() {
                break;
            }
            written += take as u64;
            if written >= MAX_LOG {
                let _ = log.write_all(NOTE).await;
            }
        }
        let _ = log.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn spec(dir: &Path) -> WorkspaceSpec {
        WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: 1_600_007,
            dir: dir.to_owned(),
            top_pid: None,
            limits: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_jail_appends_through_a_pipe_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("guest.log");
        std::fs::write(&log_path, "left from the last start").unwrap();
        let log = GuestLog::open(&spec(dir.path())).unwrap();
        assert_eq!(std::fs::read(&log_path).unwrap(), b"");
        let mode = std::fs::metadata(&log_path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A jail process cannot seek its stdout back over what was logged.
        let script = "python3 -c 'import os; os.lseek(1, 0, 0)' 2>/dev/null && echo SEEKED; \
                      printf start; head -c 9000000 /dev/zero | tr '\\0' x; printf end >&2";
        let mut jail = tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdout(log.stdout)
            .stderr(log.stderr)
            .spawn()
            .unwrap();
        let (_, status) = tokio::join!(log.drain.run(), jail.wait());
        assert!(status.unwrap().success());
        let bytes = std::fs::read(&log_path).unwrap();
        assert!(bytes.starts_with(b"start"), "{:?}", &bytes[..20]);
        assert_eq!(bytes.len() as u64, MAX_LOG + NOTE.len() as u64);
        assert!(bytes.ends_with(NOTE));
        assert!(!bytes.ends_with(b"end"));
    }
}
