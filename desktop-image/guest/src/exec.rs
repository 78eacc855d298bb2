//! `exec` and `exec_stream`: run a command as the workspace user (uid 1000,
//! no capabilities; the supervisor itself runs as the services' id, see
//! [`crate::user`]) in its own process group, with the desktop session's
//! environment, a bounded run time and bounded output.
//!
//! A timeout kills the whole process group. After the command exits, output
//! still held open by its background children is read for [`GRACE`] more,
//! then the reply is sent (the children keep running).

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{
    ErrorCode, ErrorReply, ExecExit, ExecRequest, ExecResult, InvalidField, MAX_OUTPUT, MAX_STDIN,
    normalise_path,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long output is still read after the command exited.
pub const GRACE: Duration = Duration::from_millis(250);
/// The workspace user's home, the default working directory.
const HOME: &str = "/home/user";

/// What can stop an exec before its command runs.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("stdin is not valid base64: {0}")]
    Stdin(#[from] base64::DecodeError),
    #[error("stdin is {0} bytes, over the {MAX_STDIN}-byte limit: use the streaming form")]
    StdinTooLarge(usize),
    #[error("cwd {path}: {source}")]
    Cwd {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cwd {0} is not a directory")]
    CwdNotDir(String),
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<ExecError> for ErrorReply {
    fn from(err: ExecError) -> Self {
        let code = match &err {
            ExecError::Invalid(invalid) => invalid.code,
            ExecError::Stdin(_) => ErrorCode::BadRequest,
            ExecError::StdinTooLarge(_) => ErrorCode::TooLarge,
            ExecError::Cwd { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorCode::NotFound
            }
            ExecError::Cwd { .. } => ErrorCode::PermissionDenied,
            ExecError::CwdNotDir(_) => ErrorCode::NotADirectory,
            ExecError::Spawn { .. } => ErrorCode::NotExecutable,
        };
        ErrorReply::new(code, err.to_string())
    }
}

/// A started command and what it needs to be waited for.
pub struct Running {
    pub child: Child,
    pgid: Option<libc::pid_t>,
    started: Instant,
    deadline: Instant,
    /// The command's exit was seen; its group is left alone from then on.
    reaped: bool,
}

/// Validates `request` and starts its command.
pub fn spawn(request: &ExecRequest, stdin: bool) -> Result<Running, ExecError> {
    request.validate()?;
    let argv = request.program()?;
    // Checked with the user's file ids: a folder only the user may enter
    // is a fine cwd, one the user may not is not.
    let cwd = {
        let _as_user = crate::user::FilesAsUser::begin().map_err(|source| ExecError::Cwd {
            path: request.cwd.clone().unwrap_or_else(|| HOME.to_owned()),
            source,
        })?;
        working_dir(request.cwd.as_deref())?
    };
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .envs(session_env())
        .envs(&request.env)
        .current_dir(cwd)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::user::run_as_user(&mut command);
    let started = Instant::now();
    let child = command.spawn().map_err(|source| ExecError::Spawn {
        program: argv[0].clone(),
        source,
    })?;
    let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
    Ok(Running {
        child,
        pgid,
        started,
        deadline: started + Duration::from_millis(request.timeout_ms),
        reaped: false,
    })
}

fn working_dir(cwd: Option<&str>) -> Result<PathBuf, ExecError> {
    let Some(cwd) = cwd else {
        return Ok(PathBuf::from(HOME));
    };
    let path = normalise_path("cwd", cwd)?;
    let meta = std::fs::metadata(&path).map_err(|source| ExecError::Cwd {
        path: cwd.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(ExecError::CwdNotDir(cwd.to_owned()));
    }
    Ok(path)
}

/// The desktop session's environment, which the request's `env` extends.
fn session_env() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("DISPLAY", ":0"),
        ("HOME", HOME),
        ("USER", "user"),
        ("LOGNAME", "user"),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("XDG_RUNTIME_DIR", crate::user::RUNTIME_DIR),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ])
    .into_iter()
    .chain(crate::egress_relay::proxy_env())
    .collect()
}

impl Running {
    /// Waits for the command to exit, killing its process group at the
    /// deadline or when `hangup` fires; returns how it ended.
    pub async fn wait(
        &mut self,
        hangup: impl std::future::Future<Output = ()>,
    ) -> (Option<ExitStatus>, bool) {
        let timed_out = tokio::select! {
            status = self.child.wait() => {
                self.reaped = true;
                return (status.ok(), false);
            }
            () = tokio::time::sleep_until(self.deadline) => true,
            () = hangup => false,
        };
        self.kill_group();
        let status = self.child.wait().await.ok();
        self.reaped = true;
        (status, timed_out)
    }

    fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal to the group the command
            // leads; a group already gone fails with ESRCH, which is fine.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    /// The report of how the command ended.
    pub fn exit(&self, status: Option<ExitStatus>, timed_out: bool) -> ExecExit {
        ExecExit {
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            timed_out,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl Drop for Running {
    /// A command abandoned before it exited (its host went away) is killed
    /// with its whole process group.
    fn drop(&mut self) {
        if !self.reaped {
            self.kill_group();
        }
    }
}

/// Reads the next chunk of `pipe` into `buf`; `None` at EOF, on error, or
/// once the command has ended (`ended` holds when) and [`GRACE`] has passed.
pub async fn next_chunk(
    pipe: &mut (impl AsyncRead + Unpin),
    buf: &mut [u8],
    ended: &mut watch::Receiver<Option<Instant>>,
) -> Option<usize> {
    loop {
        let at = *ended.borrow_and_update();
        let read = match at {
            Some(at) => tokio::time::timeout_at(at + GRACE, pipe.read(buf))
                .await
                .ok()?,
            None => tokio::select! {
                read = pipe.read(buf) => read,
                changed = ended.changed() => {
                    changed.ok()?;
                    continue;
                }
            },
        };
        return match read {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        };
    }
}

/// Reads `pipe` to its end, keeping the first [`MAX_OUTPUT`] bytes.
async fn collect(
    pipe: Option<impl AsyncRead + Unpin>,
    mut ended: watch::Receiver<Option<Instant>>,
) -> (Vec<u8>, bool) {
    let (mut kept, mut truncated) = (Vec::new(), false);
    let Some(mut pipe) = pipe else {
        return (kept, truncated);
    };
    let mut buf = vec![0u8; 16 * 1024];
    while let Some(n) = next_chunk(&mut pipe, &mut buf, &mut ended).await {
        let room = MAX_OUTPUT - kept.len();
        truncated |= n > room;
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    (kept, truncated)
}

async fn feed(stdin: Option<ChildStdin>, bytes: Vec<u8>) {
    if let Some(mut stdin) = stdin {
        // A command that exits without reading its stdin is not an error.
        let _ = stdin.write_all(&bytes).await;
    }
}

/// `exec`: runs the command to its end and returns its bounded output.
pub async fn run(request: ExecRequest) -> Result<ExecResult, ErrorReply> {
    let stdin = match &request.stdin {
        Some(text) => Some(B64.decode(text).map_err(ExecError::from)?),
        None => None,
    };
    if let Some(bytes) = &stdin
        && bytes.len() > MAX_STDIN
    {
        return Err(ExecError::StdinTooLarge(bytes.len()).into());
    }
    let mut running = spawn(&request, stdin.is_some())?;
    let (ended_tx, ended_rx) = watch::channel(None);
    let stdout = collect(running.child.stdout.take(), ended_rx.clone());
    let stderr = collect(running.child.stderr.take(), ended_rx);
    let feeder = feed(running.child.stdin.take(), stdin.unwrap_or_default());
    let waiter = async {
        let mut feeder = std::pin::pin!(feeder);
        let mut fed = false;
        // Feeding stops when the command ends, even if a child of it still
        // holds stdin open without reading.
        let ended = loop {
            tokio::select! {
                ended = running.wait(std::future::pending()) => break ended,
                () = &mut feeder, if !fed => fed = true,
            }
        };
        let _ = ended_tx.send(Some(Instant::now()));
        ended
    };
    let ((status, timed_out), (out, out_cut), (err, err_cut)) =
        tokio::join!(waiter, stdout, stderr);
    Ok(ExecResult {
        exit: running.exit(status, timed_out),
        stdout: B64.encode(out),
        stderr: B64.encode(err),
        stdout_truncated: out_cut,
        stderr_truncated: err_cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(command: &str, timeout_ms: u64) -> ExecRequest {
        ExecRequest {
            command: Some(command.into()),
            cwd: Some("/".into()),
            timeout_ms,
            ..ExecRequest::default()
        }
    }

    fn text(b64: &str) -> String {
        String::from_utf8(B64.decode(b64).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn exit_code_and_both_streams() {
        let mut request = shell("cat; echo err >&2; exit 3", 5000);
        request.stdin = Some(B64.encode("in\n"));
        let result = run(request).await.unwrap();
        assert_eq!(result.exit.exit_code, Some(3));
        assert_eq!(text(&result.stdout), "in\n");
        assert_eq!(text(&result.stderr), "err\n");
        assert!(!result.exit.timed_out);
    }

    #[tokio::test]
    async fn timeout_kills_the_group_and_background_output_is_not_awaited() {
        let started = std::time::Instant::now();
        let result = run(shell("sleep 30 & sleep 30", 300)).await.unwrap();
        assert!(result.exit.timed_out);
        assert_eq!(result.exit.signal, Some(libc::SIGKILL));
        assert!(started.elapsed() < Duration::from_secs(5));
        let result = run(shell("sleep 30 & echo done", 5000)).await.unwrap();
        assert_eq!(text(&result.stdout), "done\n");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn output_is_capped() {
        let result = run(shell("head -c 2000000 /dev/zero", 5000)).await.unwrap();
        assert!(result.stdout_truncated);
        assert_eq!(B64.decode(result.stdout).unwrap().len(), MAX_OUTPUT);
        assert_eq!(result.exit.exit_code, Some(0));
    }
}
