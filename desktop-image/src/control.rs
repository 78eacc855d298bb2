//! The control service (guest port 1024): JSON lines.
//!
//! Every request is one line `{"op": ..., ...}` and, except `exec_stream`,
//! gets one reply line: the op's result, or an [`ErrorReply`]
//! `{"error": message, "code": ...}`. The ops:
//!
//! | op | fields | reply |
//! | --- | --- | --- |
//! | `health` | — | [`Health`] |
//! | `exec` | [`ExecRequest`] | [`ExecResult`] |
//! | `exec_stream` | [`ExecRequest`] | [`ExecEvent`] lines; the host sends [`ExecInput`] lines |
//! | `read_file` | [`ReadFile`] | [`FileData`] |
//! | `write_file` | [`WriteFile`] | [`FileInfo`] of the written file |
//! | `list_dir` | [`PathArg`] | [`DirListing`] |
//! | `stat` | [`PathArg`] | [`FileInfo`] |
//! | `delete` | [`DeletePath`] | [`FileInfo`] of what was removed |
//! | `stage_upload` | [`StageUpload`] | [`FileInfo`] of the kept file |
//! | `profile_save` | [`ProfileSave`] | [`ProfileArchive`] |
//! | `profile_chunk` | [`ProfileChunk`] | [`FileData`] of the saved archive |
//! | `profile_put` | [`ProfilePut`] | [`ProfileArchive`] received so far |
//! | `profile_load` | [`ProfileArchive`] | [`ProfileArchive`] loaded |
//!
//! Byte payloads (stdin, output, file contents) travel as standard base64.
//! A request line is at most [`MAX_REQUEST`] bytes: large enough for a
//! [`MAX_FILE`] write in base64, and nothing larger. Paths go through
//! [`normalise_path`] on both sides.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest file `read_file` returns whole and `write_file` accepts.
pub const MAX_FILE: u64 = 16 * 1024 * 1024;
/// The longest request line the guest accepts: a [`MAX_FILE`] write in
/// base64 (4/3 of it) plus room for the path and the JSON around it.
pub const MAX_REQUEST: usize = 24 * 1024 * 1024;
/// The most of each of stdout and stderr that `exec` keeps; beyond it the
/// output is read and dropped, and the `*_truncated` flag is set.
pub const MAX_OUTPUT: usize = 1024 * 1024;
/// The most stdin bytes a buffered `exec` accepts.
pub const MAX_STDIN: usize = 1024 * 1024;
/// The longest an exec may run before its process group is killed.
pub const MAX_TIMEOUT_MS: u64 = 10 * 60 * 1000;
/// The timeout of an exec that does not ask for one.
pub const DEFAULT_TIMEOUT_MS: u64 = 30 * 1000;
/// The largest chunk of output in one [`ExecEvent`] (before base64).
pub const STREAM_CHUNK: usize = 32 * 1024;
/// The longest line of an `exec_stream` in either direction.
pub const MAX_EVENT_LINE: usize = 256 * 1024;
/// The most entries `list_dir` returns.
pub const MAX_ENTRIES: usize = 10_000;
/// The longest path accepted (Linux's PATH_MAX).
pub const MAX_PATH: usize = 4096;
/// The most environment variables an exec may set.
pub const MAX_ENV: usize = 256;
/// The most arguments an exec may have.
pub const MAX_ARGS: usize = 4096;

/// A request on the control port.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Report the state of every supervised service and overall readiness.
    Health,
    /// Run a command to completion; one [`ExecResult`] reply.
    Exec(ExecRequest),
    /// Run a command with its output streamed as [`ExecEvent`] lines.
    ExecStream(ExecRequest),
    ReadFile(ReadFile),
    WriteFile(WriteFile),
    ListDir(PathArg),
    Stat(PathArg),
    Delete(DeletePath),
    /// Keep a file for the browser to hand to a page, where only the
    /// services' id can read it; the reply's [`FileInfo`] names its path.
    StageUpload(StageUpload),
    /// Close the browser (so it writes out its profile), pack the profile
    /// without its caches, and open the browser again unless `stay_closed`.
    ProfileSave(ProfileSave),
    /// A piece of the archive the last `profile_save` made.
    ProfileChunk(ProfileChunk),
    /// A piece of an archive to load (offset 0 starts a new one).
    ProfilePut(ProfilePut),
    /// Close the browser, replace its profile with the archive put, open
    /// it again; the reply comes once it is ready.
    ProfileLoad(ProfileArchive),
}

/// A command to run as the workspace user.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecRequest {
    /// The program and its arguments; or leave empty and set `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// A shell command line, run by `/bin/bash -lc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Added to (and overriding) the workspace's session environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Absolute working directory; the home by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Kill the whole process group after this long (1..=[`MAX_TIMEOUT_MS`]).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Bytes for stdin (base64); stdin is empty otherwise (buffered exec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

impl Default for ExecRequest {
    /// No command yet, the default timeout.
    fn default() -> Self {
        Self {
            argv: Vec::new(),
            command: None,
            env: BTreeMap::new(),
            cwd: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            stdin: None,
        }
    }
}

/// How a command ended (both exec forms).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecExit {
    /// The exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// It ran past its timeout and its process group was killed.
    pub timed_out: bool,
    pub duration_ms: u64,
}

/// The reply to [`Request::Exec`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecResult {
    #[serde(flatten)]
    pub exit: ExecExit,
    /// Base64 of the first [`MAX_OUTPUT`] bytes of stdout.
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// One line from the guest during an `exec_stream`; `exit` or `error` is last.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ExecEvent {
    /// The process started; stdin lines are accepted from now on.
    Started,
    Stdout {
        data: String,
    },
    Stderr {
        data: String,
    },
    Exit(ExecExit),
    Error(ErrorReply),
}

/// One line from the host during an `exec_stream`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum ExecInput {
    /// Bytes for the process's stdin (base64).
    Stdin { data: String },
    /// Close the process's stdin.
    StdinEof,
}

/// `read_file`: up to `max_len` bytes from `offset`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReadFile {
    pub path: String,
    #[serde(default)]
    pub offset: u64,
    /// At most [`MAX_FILE`]; without it the whole file, which must then fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u64>,
}

/// The reply to `read_file`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileData {
    /// Base64 of the bytes read.
    pub data: String,
    pub offset: u64,
    /// The file's whole size.
    pub size: u64,
    /// Whether the read reached the end of the file.
    pub eof: bool,
}

/// `write_file`: create or truncate a regular file with these bytes, or
/// (with `append`) add them at its end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WriteFile {
    pub path: String,
    /// Base64 of the content, at most [`MAX_FILE`] bytes decoded.
    pub data: String,
    /// Permission bits (e.g. 0o644) for the file; kept as is otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Add to the end of the file instead of replacing its content: a file
    /// larger than [`MAX_FILE`] goes in pieces.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
}

/// `stage_upload`: a file the gateway hands to a page's file input. It is
/// kept under the browser's home (the services' id, mode 0600 in a folder
/// of 0700), never where the workspace's user can read or replace it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StageUpload {
    /// The file's name as the page will see it: one path component of
    /// 1..=255 bytes, no `/`, NUL, `.` or `..`.
    pub name: String,
    /// Base64 of the content, at most [`MAX_FILE`] bytes decoded.
    pub data: String,
}

/// The largest browser profile archive (gzip'd tar, caches left out)
/// either side accepts.
pub const MAX_PROFILE: u64 = 256 * 1024 * 1024;

/// `profile_save`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProfileSave {
    /// Leave the browser closed (the workspace is stopping).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stay_closed: bool,
}

/// A profile archive: its size and SHA-256 (hex).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProfileArchive {
    pub size: u64,
    pub sha256: String,
}

/// `profile_chunk`: at most [`MAX_FILE`] bytes of the saved archive.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProfileChunk {
    pub offset: u64,
}

/// `profile_put`: bytes of an archive at `offset` (the size put so far).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProfilePut {
    pub offset: u64,
    /// Base64, at most [`MAX_FILE`] bytes decoded.
    pub data: String,
}

/// An op that only takes a path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PathArg {
    pub path: String,
}

/// `delete`: a file, a symlink, or an empty directory unless `recursive`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeletePath {
    pub path: String,
    #[serde(default)]
    pub recursive: bool,
}

/// What a path is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One file's metadata (not following a final symlink).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileInfo {
    /// The absolute path for `stat`, the entry's name in a listing.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FileKind,
    pub size: u64,
    /// Permission bits, e.g. 0o644 = 420.
    pub mode: u32,
    /// Last modification, milliseconds since the Unix epoch.
    pub mtime_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// The reply to `list_dir`, sorted by name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DirListing {
    pub path: String,
    pub entries: Vec<FileInfo>,
    /// More than [`MAX_ENTRIES`] entries: the rest were left out.
    pub truncated: bool,
}

/// One supervised process as the guest sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceStatus {
    pub name: String,
    /// `starting`, `running`, `restarting` or `failed`.
    pub state: String,
    /// Whether its readiness probe passed (RFB banner, CDP `/json/version`).
    pub ready: bool,
    pub restarts: u32,
    /// How the last run ended, if it did.
    pub last_exit: Option<String>,
}

/// The reply to [`Request::Health`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Health {
    /// Xvnc answers RFB, the window manager runs, Chromium answers
    /// `/json/version` and its window is shown maximized.
    pub ready: bool,
    /// Set when the workspace cannot become ready; the reason for a human.
    pub failed: Option<String>,
    pub services: Vec<ServiceStatus>,
}

/// Why the guest refused or failed a request, for the host to map to a
/// status (4xx for all but `io`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A malformed request or field.
    BadRequest,
    /// A path that does not start with `/`.
    NotAbsolute,
    /// A path with `..`, NUL, or over [`MAX_PATH`] bytes.
    BadPath,
    NotFound,
    IsADirectory,
    NotADirectory,
    /// A directory delete without `recursive` on a non-empty directory.
    NotEmpty,
    /// A FIFO, socket or device where a regular file is needed.
    SpecialFile,
    /// Over [`MAX_FILE`] or [`MAX_REQUEST`].
    TooLarge,
    /// Not allowed for the workspace user, or on the read-only image root.
    PermissionDenied,
    /// The workspace's disk is full.
    NoSpace,
    /// The program to exec does not exist or cannot be run.
    NotExecutable,
    /// Anything else (an I/O error inside the guest).
    Io,
}

/// The reply to a request the guest could not serve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorReply {
    pub error: String,
    /// Absent from guests older than exec and files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
}

impl ErrorReply {
    pub fn new(code: ErrorCode, error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            code: Some(code),
        }
    }
}

/// A request field that cannot be served as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidField {
    /// The request field at fault (`path`, `argv`, `timeout_ms`, ...).
    pub field: &'static str,
    pub code: ErrorCode,
    pub reason: String,
}

impl InvalidField {
    fn new(field: &'static str, code: ErrorCode, reason: impl Into<String>) -> Self {
        Self {
            field,
            code,
            reason: reason.into(),
        }
    }

    fn bad(field: &'static str, reason: impl Into<String>) -> Self {
        Self::new(field, ErrorCode::BadRequest, reason)
    }
}

/// Checks that `path` is absolute, has no `..`, NUL or over-long form, and
/// returns it with `.` components and repeated or trailing slashes removed.
/// `field` names the request field in the error.
pub fn normalise_path(field: &'static str, path: &str) -> Result<PathBuf, InvalidField> {
    if path.is_empty() {
        return Err(InvalidField::new(
            field,
            ErrorCode::NotAbsolute,
            "is empty: give an absolute path such as /home/user/file.txt",
        ));
    }
    if path.contains('\0') {
        return Err(InvalidField::new(field, ErrorCode::BadPath, "contains NUL"));
    }
    if path.len() > MAX_PATH {
        return Err(InvalidField::new(
            field,
            ErrorCode::BadPath,
            format!("is longer than {MAX_PATH} bytes"),
        ));
    }
    if !path.starts_with('/') {
        return Err(InvalidField::new(
            field,
            ErrorCode::NotAbsolute,
            format!(
                "{path:?} is not absolute: paths inside the workspace start with /, e.g. /home/user/{path}"
            ),
        ));
    }
    let mut clean = PathBuf::from("/");
    for component in Path::new(path).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => clean.push(name),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(InvalidField::new(
                    field,
                    ErrorCode::BadPath,
                    format!("{path:?} has a `..` component: give the path without it"),
                ));
            }
        }
    }
    Ok(clean)
}

impl ExecRequest {
    /// The argv to run: `argv` as given, or `/bin/bash -lc command`.
    pub fn program(&self) -> Result<Vec<String>, InvalidField> {
        match (&self.command, self.argv.is_empty()) {
            (Some(_), false) => Err(InvalidField::bad(
                "argv",
                "give either argv or command, not both",
            )),
            (Some(command), true) => Ok(vec!["/bin/bash".into(), "-lc".into(), command.clone()]),
            (None, true) => Err(InvalidField::bad(
                "argv",
                "is empty: give argv (a list with the program first) or command (a shell line)",
            )),
            (None, false) => Ok(self.argv.clone()),
        }
    }

    /// Checks every field; the guest runs nothing that fails this.
    pub fn validate(&self) -> Result<(), InvalidField> {
        let argv = self.program()?;
        if argv.len() > MAX_ARGS {
            return Err(InvalidField::bad(
                "argv",
                format!("has over {MAX_ARGS} items"),
            ));
        }
        if argv[0].is_empty() {
            return Err(InvalidField::bad("argv", "the program (argv[0]) is empty"));
        }
        if argv.iter().any(|arg| arg.contains('\0')) {
            let field = if self.command.is_some() {
                "command"
            } else {
                "argv"
            };
            return Err(InvalidField::bad(field, "contains NUL"));
        }
        if let Some(cwd) = &self.cwd {
            normalise_path("cwd", cwd)?;
        }
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TIMEOUT_MS {
            return Err(InvalidField::bad(
                "timeout_ms",
                format!(
                    "must be 1..={MAX_TIMEOUT_MS} milliseconds, not {}",
                    self.timeout_ms
                ),
            ));
        }
        validate_env(&self.env)
    }
}

fn validate_env(env: &BTreeMap<String, String>) -> Result<(), InvalidField> {
    if env.len() > MAX_ENV {
        return Err(InvalidField::bad(
            "env",
            format!("has over {MAX_ENV} variables"),
        ));
    }
    for (key, value) in env {
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            return Err(InvalidField::bad(
                "env",
                format!("{key:?}: names must be non-empty without `=` or NUL, values without NUL"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(path: &str) -> ErrorCode {
        normalise_path("path", path).unwrap_err().code
    }

    #[test]
    fn paths_are_absolute_and_normalised() {
        assert_eq!(
            normalise_path("path", "/home//user/./a/").unwrap(),
            PathBuf::from("/home/user/a")
        );
        assert_eq!(normalise_path("path", "/").unwrap(), PathBuf::from("/"));
        assert_eq!(code("home/user"), ErrorCode::NotAbsolute);
        assert_eq!(code(""), ErrorCode::NotAbsolute);
        assert_eq!(code("./a"), ErrorCode::NotAbsolute);
        assert_eq!(code("/home/user/../../etc"), ErrorCode::BadPath);
        assert_eq!(code("/tmp/.."), ErrorCode::BadPath);
        assert_eq!(code("/tmp/a\0b"), ErrorCode::BadPath);
        assert_eq!(
            code(&format!("/{}", "a".repeat(MAX_PATH))),
            ErrorCode::BadPath
        );
        // `..` inside a name is just a name.
        assert!(normalise_path("path", "/tmp/a..b").is_ok());
        let err = normalise_path("cwd", "tmp").unwrap_err();
        assert!(err.to_string().starts_with("cwd: "), "{err}");
    }

    #[test]
    fn exec_requests_are_checked_field_by_field() {
        let ok = ExecRequest {
            argv: vec!["true".into()],
            timeout_ms: 1000,
            ..ExecRequest::default()
        };
        assert!(ok.validate().is_ok());
        let field = |request: ExecRequest| request.validate().unwrap_err().field;
        assert_eq!(
            field(ExecRequest {
                argv: vec![],
                ..ok.clone()
            }),
            "argv"
        );
        assert_eq!(
            field(ExecRequest {
                argv: vec![String::new()],
                ..ok.clone()
            }),
            "argv"
        );
        let both = ExecRequest {
            command: Some("x".into()),
            ..ok.clone()
        };
        assert_eq!(field(both), "argv");
        assert_eq!(
            field(ExecRequest {
                timeout_ms: 0,
                ..ok.clone()
            }),
            "timeout_ms"
        );
        let huge = ExecRequest {
            timeout_ms: MAX_TIMEOUT_MS + 1,
            ..ok.clone()
        };
        assert_eq!(field(huge), "timeout_ms");
        assert_eq!(
            field(ExecRequest {
                cwd: Some("rel".into()),
                ..ok.clone()
            }),
            "cwd"
        );
        let env = BTreeMap::from([("A=B".to_owned(), "1".to_owned())]);
        assert_eq!(field(ExecRequest { env, ..ok.clone() }), "env");
        let shell = ExecRequest {
            argv: vec![],
            command: Some("echo hi".into()),
            ..ok
        };
        assert_eq!(shell.program().unwrap(), ["/bin/bash", "-lc", "echo hi"]);
    }

    #[test]
    fn requests_round_trip_with_op_tags() {
        let line = r#"{"op":"exec","argv":["id","-u"]}"#;
        let Request::Exec(exec) = serde_json::from_str(line).unwrap() else {
            panic!("not exec");
        };
        assert_eq!(exec.timeout_ms, DEFAULT_TIMEOUT_MS);
        let request = Request::Delete(DeletePath {
            path: "/tmp/x".into(),
            recursive: true,
        });
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(text, r#"{"op":"delete","path":"/tmp/x","recursive":true}"#);
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        let health: Request = serde_json::from_str(r#"{"op":"health"}"#).unwrap();
        assert_eq!(health, Request::Health);
        let event = serde_json::to_string(&ExecEvent::Exit(ExecExit::default())).unwrap();
        assert!(
            event.starts_with(r#"{"event":"exit","exit_code":null"#),
            "{event}"
        );
        let old: ErrorReply = serde_json::from_str(r#"{"error":"x"}"#).unwrap();
        assert_eq!(old.code, None);
    }
}
