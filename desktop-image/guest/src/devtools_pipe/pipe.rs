//! The two pipes of `--remote-debugging-pipe`: Chromium reads CDP calls
//! from its fd 3 and writes replies and events to its fd 4, each message a
//! JSON text ended by a NUL byte.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

/// Chromium's end: where it reads calls.
const CHILD_READS: RawFd = 3;
/// Chromium's end: where it writes replies and events.
const CHILD_WRITES: RawFd = 4;
/// The largest message read from Chromium (a full-page screenshot of a
/// long page is tens of MB of base64; the gateway relays up to 64 MiB).
pub const MAX_MESSAGE: usize = 128 * 1024 * 1024;

/// Chromium's ends of a new pair of pipes, to install as its fds 3 and 4.
pub struct ChildEnds {
    reads: OwnedFd,
    writes: OwnedFd,
}

/// The supervisor's ends.
pub struct ParentEnds {
    pub to_browser: pipe::Sender,
    pub from_browser: pipe::Receiver,
}

/// Makes both pipes. Every end is close-on-exec; the child's are moved to
/// fds 3 and 4 (and only those inherited) by [`ChildEnds::install`].
pub fn pair() -> std::io::Result<(ParentEnds, ChildEnds)> {
    let (child_reads, to_browser) = raw_pipe()?;
    let (from_browser, child_writes) = raw_pipe()?;
    // Above 4, so moving one to 3 or 4 in the child never overwrites the
    // other before it is moved.
    let child = ChildEnds {
        reads: above_four(&child_reads)?,
        writes: above_four(&child_writes)?,
    };
    let parent = ParentEnds {
        to_browser: pipe::Sender::from_owned_fd(to_browser)?,
        from_browser: pipe::Receiver::from_owned_fd(from_browser)?,
    };
    Ok((parent, child))
}

impl ChildEnds {
    /// Makes the command's child get these ends as fds 3 and 4. The ends
    /// stay open in this process until `self` is dropped (after spawning).
    pub fn install(&self, command: &mut tokio::process::Command) {
        let (reads, writes) = (self.reads.as_raw_fd(), self.writes.as_raw_fd());
        // SAFETY: the closure runs in the forked child before exec and calls
        // only dup2, which is async-signal-safe. Both sources are above 4
        // (see `pair`), so neither is overwritten before it is copied; dup2
        // gives the copies no close-on-exec flag, so exactly fds 3 and 4
        // are inherited.
        unsafe {
            command.pre_exec(move || {
                for (from, to) in [(reads, CHILD_READS), (writes, CHILD_WRITES)] {
                    if libc::dup2(from, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
impl ChildEnds {
    /// The ends as a fake Chromium in a test holds them: (reads, writes).
    pub fn into_fake_browser(self) -> (pipe::Receiver, pipe::Sender) {
        (
            pipe::Receiver::from_owned_fd(self.reads).expect("a pipe's read end"),
            pipe::Sender::from_owned_fd(self.writes).expect("a pipe's write end"),
        )
    }
}

fn raw_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid out array of two ints; the result is checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A close-on-exec copy of `fd` numbered above 4.
fn above_four(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own; the result is checked.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, CHILD_WRITES + 1) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fcntl just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Reads NUL-ended messages.
pub struct Reader {
    from_browser: pipe::Receiver,
    buffer: Vec<u8>,
    scanned: usize,
}

/// What can go wrong reading the pipe.
#[derive(Debug, thiserror::Error)]
pub enum PipeError {
    #[error("Chromium closed its DevTools pipe")]
    Closed,
    #[error("reading Chromium's DevTools pipe: {0}")]
    Io(#[from] std::io::Error),
    #[error("Chromium sent a DevTools message over {MAX_MESSAGE} bytes")]
    TooLong,
}

impl Reader {
    pub fn new(from_browser: pipe::Receiver) -> Self {
        Self {
            from_browser,
            buffer: Vec::new(),
            scanned: 0,
        }
    }

    /// The next message (without its NUL), as text (lossy: Chromium writes
    /// UTF-8).
    pub async fn next(&mut self) -> Result<String, PipeError> {
        loop {
            if let Some(end) = self.buffer[self.scanned..].iter().position(|&b| b == 0) {
                let end = self.scanned + end;
                let message = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..=end);
                self.scanned = 0;
                return Ok(message);
            }
            self.scanned = self.buffer.len();
            if self.buffer.len() > MAX_MESSAGE {
                return Err(PipeError::TooLong);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.from_browser.read(&mut chunk).await?;
            if n == 0 {
                return Err(PipeError::Closed);
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Writes one message and its NUL.
pub async fn write(to_browser: &mut pipe::Sender, message: &str) -> std::io::Result<()> {
    to_browser.write_all(message.as_bytes()).await?;
    to_browser.write_all(&[0]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_are_split_at_nul_whatever_the_reads() {
        let (reads, writes) = raw_pipe().unwrap();
        let mut sender = pipe::Sender::from_owned_fd(writes).unwrap();
        let mut reader = Reader::new(pipe::Receiver::from_owned_fd(reads).unwrap());
        write(&mut sender, r#"{"id":1}"#).await.unwrap();
        sender.write_all(b"{\"id\":2}\0{\"id\"").await.unwrap();
        assert_eq!(reader.next().await.unwrap(), r#"{"id":1}"#);
        assert_eq!(reader.next().await.unwrap(), r#"{"id":2}"#);
        sender.write_all(b":3}\0").await.unwrap();
        assert_eq!(reader.next().await.unwrap(), r#"{"id":3}"#);
        drop(sender);
        assert!(matches!(reader.next().await, Err(PipeError::Closed)));
    }

    /// A real child gets the ends as fds 3 and 4 and no other copy of
    /// either pipe: a shell echoes what it reads on 3 to 4, then lists its
    /// descriptors.
    #[tokio::test]
    async fn the_child_reads_fd_3_and_writes_fd_4() {
        let (parent, child) = pair().unwrap();
        let mine = [
            child.reads.as_raw_fd(),
            child.writes.as_raw_fd(),
            parent.to_browser.as_raw_fd(),
            parent.from_browser.as_raw_fd(),
        ];
        let mut command = tokio::process::Command::new("/bin/sh");
        command.args(["-c", "head -c 9 <&3 >&4; ls /proc/self/fd >&4"]);
        child.install(&mut command);
        let mut running = command.spawn().unwrap();
        drop(child);
        let ParentEnds {
            mut to_browser,
            from_browser,
        } = parent;
        write(&mut to_browser, r#"{"id":1}"#).await.unwrap();
        let mut reader = Reader::new(from_browser);
        assert_eq!(reader.next().await.unwrap(), r#"{"id":1}"#);
        assert!(running.wait().await.unwrap().success());
        let listed = match reader.next().await {
            Err(PipeError::Closed) => String::from_utf8_lossy(&reader.buffer).into_owned(),
            other => panic!("{other:?}"),
        };
        let open: Vec<RawFd> = listed
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        assert!(open.contains(&3) && open.contains(&4), "{open:?}");
        // Numbers 3 and 4 are the child's own ends whatever the parent's
        // copies were numbered (another test may have freed 3 or 4 in this
        // process just before): a copy there would have been replaced.
        for fd in mine.into_iter().filter(|fd| *fd > 4) {
            assert!(!open.contains(&fd), "the child inherited fd {fd}: {open:?}");
        }
    }
}
