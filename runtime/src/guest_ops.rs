//! Exec and files on a workspace's guest, through its control service
//! (see `cubicle_image::control` for the ops).
//!
//! Nothing the guest sends is trusted: every reply is read with a byte cap
//! sized for the largest valid answer and a deadline, parsed as JSON, and its
//! decoded payloads are checked against the protocol's limits. Requests are
//! validated here first, so a bad field is reported without a round trip.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{
    DeletePath, DirListing, ErrorCode, ErrorReply, ExecEvent, ExecExit, ExecInput, ExecRequest,
    ExecResult, FileData, FileInfo, InvalidField, MAX_EVENT_LINE, MAX_FILE, MAX_OUTPUT,
    MAX_PROFILE, MAX_STDIN, PathArg, ProfileArchive, ProfileChunk, ProfilePut, ProfileSave,
    ReadFile, Request, STREAM_CHUNK, StageUpload, WriteFile, normalise_path,
};
use cubicle_image::ports;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Take};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;

use crate::channel::{ChannelError, GuestChannel};

/// Room for the JSON around a reply's payload.
const ENVELOPE: u64 = 64 * 1024;
/// An exec reply: two outputs of [`MAX_OUTPUT`] in base64.
const MAX_EXEC_REPLY: u64 = 2 * base64_len(MAX_OUTPUT as u64) + ENVELOPE;
/// A file read: [`MAX_FILE`] in base64.
const MAX_READ_REPLY: u64 = base64_len(MAX_FILE) + ENVELOPE;
/// A listing of up to `MAX_ENTRIES` entries with long names.
const MAX_META_REPLY: u64 = 8 * 1024 * 1024;
/// How long a files op may take, transfer included.
const FILES_TIMEOUT: Duration = Duration::from_secs(60);
/// How long saving or loading a browser profile may take on the guest (the
/// browser closes and opens again: minutes under emulated virtualization).
const PROFILE_TIMEOUT: Duration = Duration::from_secs(300);
/// How much longer than its own timeout an exec's reply may take.
const EXEC_SLACK: Duration = Duration::from_secs(10);

/// Lowercase hex SHA-256, as the guest names a profile archive.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

const fn base64_len(bytes: u64) -> u64 {
    bytes.div_ceil(3) * 4
}

/// What can go wrong running an op on the guest.
#[derive(Debug, thiserror::Error)]
pub enum GuestOpError {
    /// A request field the guest would refuse, caught before sending.
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("{what} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        what: &'static str,
        size: u64,
        limit: u64,
    },
    /// The guest refused or failed the op; `code` says why.
    #[error("{message}")]
    Guest { code: ErrorCode, message: String },
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error("guest control stream failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the guest did not answer within {0:?}")]
    Timeout(Duration),
    #[error("guest reply is not valid: {0}")]
    BadReply(String),
}

impl From<ErrorReply> for GuestOpError {
    fn from(reply: ErrorReply) -> Self {
        Self::Guest {
            code: reply.code.unwrap_or(ErrorCode::Io),
            message: reply.error,
        }
    }
}

/// The outcome of a buffered exec, payloads decoded.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    pub exit: ExecExit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// Part of a file, decoded.
#[derive(Debug, Clone)]
pub struct FileChunk {
    pub bytes: Vec<u8>,
    pub offset: u64,
    /// The file's whole size.
    pub size: u64,
    pub eof: bool,
}

fn decode(what: &'static str, text: &str, limit: usize) -> Result<Vec<u8>, GuestOpError> {
    if text.len() as u64 > base64_len(limit as u64) {
        return Err(GuestOpError::BadReply(format!("{what} over {limit} bytes")));
    }
    B64.decode(text)
        .map_err(|err| GuestOpError::BadReply(format!("{what} is not base64: {err}")))
}

/// Parses one reply line: the op's result or an [`ErrorReply`].
fn parse_reply<T: DeserializeOwned>(line: &[u8]) -> Result<T, GuestOpError> {
    let bad = |err: serde_json::Error| {
        let start = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
        GuestOpError::BadReply(format!("{err}: {start}"))
    };
    let value: serde_json::Value = serde_json::from_slice(line).map_err(bad)?;
    if value.get("error").is_some() {
        let reply: ErrorReply = serde_json::from_value(value).map_err(bad)?;
        return Err(reply.into());
    }
    serde_json::from_value(value).map_err(bad)
}

/// Reads one `\n`-terminated line of at most `limit` bytes.
async fn read_line<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut BufReader<Take<R>>,
    limit: u64,
) -> Result<Option<Vec<u8>>, GuestOpError> {
    reader.get_mut().set_limit(limit + 1);
    let mut line = Vec::new();
    let n = reader.read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\n") {
        let why = if line.len() as u64 > limit {
            format!("reply line over {limit} bytes")
        } else {
            "the guest closed the stream mid-line".into()
        };
        return Err(GuestOpError::BadReply(why));
    }
    Ok(Some(line))
}

async fn send_line(
    write: &mut OwnedWriteHalf,
    value: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}

impl GuestChannel {
    /// Sends one request and reads its one reply, within `limit` and `wait`.
    async fn call<T: DeserializeOwned>(
        &self,
        request: &Request,
        limit: u64,
        wait: Duration,
    ) -> Result<T, GuestOpError> {
        let exchange = async {
            let (read, mut write) = self.connect(ports::CONTROL).await?.into_split();
            send_line(&mut write, request).await?;
            let mut reader = BufReader::new(read.take(limit + 1));
            let line = read_line(&mut reader, limit).await?.ok_or_else(|| {
                GuestOpError::BadReply("the guest closed the stream without a reply".into())
            })?;
            parse_reply(&line)
        };
        tokio::time::timeout(wait, exchange)
            .await
            .map_err(|_| GuestOpError::Timeout(wait))?
    }

    /// Runs a command to its end (buffered exec).
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, GuestOpError> {
        request.validate()?;
        if let Some(stdin) = &request.stdin
            && stdin.len() as u64 > base64_len(MAX_STDIN as u64)
        {
            return Err(GuestOpError::TooLarge {
                what: "stdin",
                size: stdin.len() as u64 / 4 * 3,
                limit: MAX_STDIN as u64,
            });
        }
        let wait = Duration::from_millis(request.timeout_ms) + EXEC_SLACK;
        let exec = Request::Exec(request.clone());
        let result: ExecResult = self.call(&exec, MAX_EXEC_REPLY, wait).await?;
        Ok(ExecOutput {
            exit: result.exit,
            stdout: decode("stdout", &result.stdout, MAX_OUTPUT)?,
            stderr: decode("stderr", &result.stderr, MAX_OUTPUT)?,
            stdout_truncated: result.stdout_truncated,
            stderr_truncated: result.stderr_truncated,
        })
    }

    /// Starts a streamed exec; returns once the command runs, or the
    /// guest's reason it cannot.
    pub async fn exec_stream(
        &self,
        request: &ExecRequest,
    ) -> Result<(ExecEvents, ExecStdin), GuestOpError> {
        request.validate()?;
        let mut request = request.clone();
        request.stdin = None;
        let wait = Duration::from_millis(request.timeout_ms) + EXEC_SLACK;
        let (read, mut write) = self.connect(ports::CONTROL).await?.into_split();
        send_line(&mut write, &Request::ExecStream(request)).await?;
        let mut events = ExecEvents {
            reader: BufReader::new(read.take(0)),
            deadline: Instant::now() + wait,
            wait,
            done: false,
        };
        match events.next_raw().await? {
            Some(ExecEvent::Started) => Ok((events, ExecStdin { writer: write })),
            Some(ExecEvent::Error(reply)) => Err(reply.into()),
            other => Err(GuestOpError::BadReply(format!(
                "expected `started`, got {other:?}"
            ))),
        }
    }

    /// Reads a file, or `max_len` bytes of it from `offset`.
    pub async fn read_file(
        &self,
        path: &str,
        offset: u64,
        max_len: Option<u64>,
    ) -> Result<FileChunk, GuestOpError> {
        normalise_path("path", path)?;
        if let Some(max) = max_len.filter(|&max| max > MAX_FILE) {
            return Err(GuestOpError::TooLarge {
                what: "length",
                size: max,
                limit: MAX_FILE,
            });
        }
        let request = Request::ReadFile(ReadFile {
            path: path.to_owned(),
            offset,
            max_len,
        });
        let data: FileData = self.call(&request, MAX_READ_REPLY, FILES_TIMEOUT).await?;
        Ok(FileChunk {
            bytes: decode("file data", &data.data, MAX_FILE as usize)?,
            offset: data.offset,
            size: data.size,
            eof: data.eof,
        })
    }

    /// Creates or truncates a regular file with `bytes`.
    pub async fn write_file(
        &self,
        path: &str,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<FileInfo, GuestOpError> {
        normalise_path("path", path)?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(GuestOpError::TooLarge {
                what: "the content",
                size: bytes.len() as u64,
                limit: MAX_FILE,
            });
        }
        let request = Request::WriteFile(WriteFile {
            path: path.to_owned(),
            data: B64.encode(bytes),
            mode,
            append: false,
        });
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }

    /// Keeps `bytes` as file `name` where only the browser can read it
    /// (for a page's file input); its metadata, named by its guest path.
    pub async fn stage_upload(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, GuestOpError> {
        if bytes.len() as u64 > MAX_FILE {
            return Err(GuestOpError::TooLarge {
                what: "the content",
                size: bytes.len() as u64,
                limit: MAX_FILE,
            });
        }
        let request = Request::StageUpload(StageUpload {
            name: name.to_owned(),
            data: B64.encode(bytes),
        });
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }

    /// Closes the browser, packs its profile (caches left out) and fetches
    /// the archive; the browser opens again unless `stay_closed`. The
    /// archive's size and SHA-256 are the guest's word, checked against
    /// what arrives; it is never unpacked on the host.
    pub async fn save_profile(&self, stay_closed: bool) -> Result<Vec<u8>, GuestOpError> {
        let request = Request::ProfileSave(ProfileSave { stay_closed });
        let archive: ProfileArchive = self.call(&request, ENVELOPE, PROFILE_TIMEOUT).await?;
        if archive.size > MAX_PROFILE {
            return Err(GuestOpError::TooLarge {
                what: "the profile archive",
                size: archive.size,
                limit: MAX_PROFILE,
            });
        }
        let mut bytes = Vec::with_capacity(archive.size.min(MAX_FILE) as usize);
        while (bytes.len() as u64) < archive.size {
            let request = Request::ProfileChunk(ProfileChunk {
                offset: bytes.len() as u64,
            });
            let data: FileData = self.call(&request, MAX_READ_REPLY, FILES_TIMEOUT).await?;
            let piece = decode("profile archive", &data.data, MAX_FILE as usize)?;
            if piece.is_empty() || bytes.len() as u64 + piece.len() as u64 > archive.size {
                return Err(GuestOpError::BadReply(format!(
                    "the profile archive was announced as {} bytes; a piece at {} had {}",
                    archive.size,
                    bytes.len(),
                    piece.len()
                )));
            }
            bytes.extend_from_slice(&piece);
        }
        let sha256 = sha256_hex(&bytes);
        if !sha256.eq_ignore_ascii_case(&archive.sha256) {
            return Err(GuestOpError::BadReply(format!(
                "the profile archive's SHA-256 is {sha256}, not the {} announced",
                archive.sha256
            )));
        }
        Ok(bytes)
    }

    /// Puts a profile archive (from [`GuestChannel::save_profile`] of an
    /// earlier workspace) in place of the browser's profile; returns once
    /// the browser runs on it.
    pub async fn load_profile(&self, bytes: &[u8]) -> Result<(), GuestOpError> {
        if bytes.len() as u64 > MAX_PROFILE {
            return Err(GuestOpError::TooLarge {
                what: "the profile archive",
                size: bytes.len() as u64,
                limit: MAX_PROFILE,
            });
        }
        let mut offset = 0u64;
        for piece in bytes.chunks(MAX_FILE as usize) {
            let request = Request::ProfilePut(ProfilePut {
                offset,
                data: B64.encode(piece),
            });
            let _: ProfileArchive = self.call(&request, ENVELOPE, FILES_TIMEOUT).await?;
            offset += piece.len() as u64;
        }
        let request = Request::ProfileLoad(ProfileArchive {
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        });
        let _: ProfileArchive = self.call(&request, ENVELOPE, PROFILE_TIMEOUT).await?;
        Ok(())
    }

    /// Adds `bytes` (at most [`MAX_FILE`]) at the end of a regular file.
    pub async fn append_file(&self, path: &str, bytes: &[u8]) -> Result<FileInfo, GuestOpError> {
        normalise_path("path", path)?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(GuestOpError::TooLarge {
                what: "the content",
                size: bytes.len() as u64,
                limit: MAX_FILE,
            });
        }
        let request = Request::WriteFile(WriteFile {
            path: path.to_owned(),
            data: B64.encode(bytes),
            mode: None,
            append: true,
        });
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }

    /// Lists a directory.
    pub async fn list_dir(&self, path: &str) -> Result<DirListing, GuestOpError> {
        let request = Request::ListDir(path_arg(path)?);
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }

    /// A path's metadata (a final symlink is not followed).
    pub async fn stat(&self, path: &str) -> Result<FileInfo, GuestOpError> {
        let request = Request::Stat(path_arg(path)?);
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }

    /// Deletes a file, symlink or empty directory (any directory if
    /// `recursive`); returns what was removed.
    pub async fn delete(&self, path: &str, recursive: bool) -> Result<FileInfo, GuestOpError> {
        normalise_path("path", path)?;
        let request = Request::Delete(DeletePath {
            path: path.to_owned(),
            recursive,
        });
        self.call(&request, MAX_META_REPLY, FILES_TIMEOUT).await
    }
}

fn path_arg(path: &str) -> Result<PathArg, GuestOpError> {
    normalise_path("path", path)?;
    Ok(PathArg {
        path: path.to_owned(),
    })
}

/// What a streamed exec produces, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The last event.
    Exit(ExecExit),
}

/// The output side of a streamed exec.
pub struct ExecEvents {
    reader: BufReader<Take<OwnedReadHalf>>,
    deadline: Instant,
    wait: Duration,
    done: bool,
}

impl ExecEvents {
    async fn next_raw(&mut self) -> Result<Option<ExecEvent>, GuestOpError> {
        let read = read_line(&mut self.reader, MAX_EVENT_LINE as u64);
        let line = tokio::time::timeout_at(self.deadline, read)
            .await
            .map_err(|_| GuestOpError::Timeout(self.wait))??;
        let Some(line) = line else {
            return Ok(None);
        };
        serde_json::from_slice(&line)
            .map(Some)
            .map_err(|err| GuestOpError::BadReply(format!("bad exec event: {err}")))
    }

    /// The next event; `None` once `Exit` was returned.
    pub async fn next(&mut self) -> Result<Option<StreamEvent>, GuestOpError> {
        if self.done {
            return Ok(None);
        }
        let event = match self.next_raw().await? {
            Some(ExecEvent::Stdout { data }) => {
                StreamEvent::Stdout(decode("stdout", &data, STREAM_CHUNK)?)
            }
            Some(ExecEvent::Stderr { data }) => {
                StreamEvent::Stderr(decode("stderr", &data, STREAM_CHUNK)?)
            }
            Some(ExecEvent::Exit(exit)) => {
                self.done = true;
                StreamEvent::Exit(exit)
            }
            Some(ExecEvent::Error(reply)) => return Err(reply.into()),
            Some(ExecEvent::Started) => {
                return Err(GuestOpError::BadReply("a second `started` event".into()));
            }
            None => {
                return Err(GuestOpError::BadReply(
                    "the guest closed the stream before the command's exit".into(),
                ));
            }
        };
        Ok(Some(event))
    }
}

/// The stdin side of a streamed exec. Dropping it without
/// [`ExecStdin::close`] hangs up: the guest kills the command.
pub struct ExecStdin {
    writer: OwnedWriteHalf,
}

impl ExecStdin {
    /// Sends bytes to the command's stdin, in chunks the guest accepts.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), GuestOpError> {
        for chunk in bytes.chunks(STREAM_CHUNK) {
            let input = ExecInput::Stdin {
                data: B64.encode(chunk),
            };
            send_line(&mut self.writer, &input).await?;
        }
        Ok(())
    }

    /// Closes the command's stdin; the stream stays open for its output.
    pub async fn close(&mut self) -> Result<(), GuestOpError> {
        Ok(send_line(&mut self.writer, &ExecInput::StdinEof).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_parsed_or_refused() {
        let err = parse_reply::<FileInfo>(br#"{"error":"no","code":"not_found"}"#).unwrap_err();
        assert!(matches!(
            err,
            GuestOpError::Guest {
                code: ErrorCode::NotFound,
                ..
            }
        ));
        let err = parse_reply::<FileInfo>(br#"{"error":"old guest"}"#).unwrap_err();
        assert!(matches!(
            err,
            GuestOpError::Guest {
                code: ErrorCode::Io,
                ..
            }
        ));
        assert!(matches!(
            parse_reply::<FileInfo>(b"[1,2]").unwrap_err(),
            GuestOpError::BadReply(_)
        ));
        assert!(matches!(
            decode("stdout", &"A".repeat(4 * 1024), 1024).unwrap_err(),
            GuestOpError::BadReply(_)
        ));
    }

    #[tokio::test]
    async fn overlong_and_unterminated_lines_are_refused() {
        let (mut guest, host) = tokio::io::duplex(1024);
        guest.write_all(&[b'x'; 100]).await.unwrap();
        drop(guest);
        let mut reader = BufReader::new(host.take(0));
        assert!(read_line(&mut reader, 50).await.is_err());
        let (mut guest, host) = tokio::io::duplex(1024);
        guest.write_all(b"{}\n").await.unwrap();
        drop(guest);
        let mut reader = BufReader::new(host.take(0));
        assert_eq!(read_line(&mut reader, 50).await.unwrap().unwrap(), b"{}\n");
        assert!(read_line(&mut reader, 50).await.unwrap().is_none());
    }
}
