//! `POST /v1/workspaces/{id}/exec` and the MCP `exec` tool.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{ExecRequest, MAX_TIMEOUT_MS};
use cubicle_runtime::guest_ops::{ExecOutput, GuestOpError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::OpError;

/// A command to run as the workspace user: `argv`, or `command` (a shell
/// line run by `/bin/bash -lc`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    /// The program and its arguments.
    #[serde(default)]
    pub argv: Vec<String>,
    /// A shell line, run by `/bin/bash -lc`.
    pub command: Option<String>,
    /// Added to the session's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Absolute working directory; the home by default.
    pub cwd: Option<String>,
    /// 1..=600000 milliseconds, default 30000; the process group is killed after it.
    #[schema(minimum = 1, maximum = 600000)]
    pub timeout_ms: Option<u64>,
    /// Text for stdin.
    pub stdin: Option<String>,
    /// Bytes for stdin, base64.
    pub stdin_base64: Option<String>,
}

impl ExecBody {
    pub fn parse(body: &[u8]) -> Result<ExecRequest, OpError> {
        super::parse::<Self>(body)?.into_request()
    }

    pub fn into_request(self) -> Result<ExecRequest, OpError> {
        let mut request = ExecRequest {
            argv: self.argv,
            command: self.command,
            env: self.env,
            cwd: self.cwd,
            ..ExecRequest::default()
        };
        if let Some(ms) = self.timeout_ms {
            if !(1..=MAX_TIMEOUT_MS).contains(&ms) {
                return Err(OpError::bad_request(format!(
                    "timeout_ms: must be a whole number of milliseconds in 1..={MAX_TIMEOUT_MS}, not {ms}"
                )));
            }
            request.timeout_ms = ms;
        }
        request.stdin = match (self.stdin, self.stdin_base64) {
            (Some(_), Some(_)) => {
                return Err(OpError::bad_request(
                    "stdin: give stdin (text) or stdin_base64, not both",
                ));
            }
            (Some(text), None) => Some(B64.encode(text)),
            (None, Some(encoded)) => {
                B64.decode(&encoded).map_err(|e| {
                    OpError::bad_request(format!("stdin_base64: not valid base64: {e}"))
                })?;
                Some(encoded)
            }
            (None, None) => None,
        };
        request
            .validate()
            .map_err(|e| OpError::from(GuestOpError::from(e)))?;
        Ok(request)
    }
}

/// What a command did; each output is kept up to 1 MiB, as UTF-8 text
/// (lossy), plus `*_base64` with the exact bytes when they are not UTF-8.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_base64: Option<String>,
}

/// Text (lossy) and, when the bytes are not UTF-8, their base64.
pub fn text_and_bytes(bytes: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let exact = std::str::from_utf8(bytes)
        .is_err()
        .then(|| B64.encode(bytes));
    (text, exact)
}

impl From<&ExecOutput> for ExecResult {
    fn from(output: &ExecOutput) -> Self {
        let (stdout, stdout_base64) = text_and_bytes(&output.stdout);
        let (stderr, stderr_base64) = text_and_bytes(&output.stderr);
        Self {
            exit_code: output.exit.exit_code,
            signal: output.exit.signal,
            timed_out: output.exit.timed_out,
            duration_ms: output.exit.duration_ms,
            stdout,
            stderr,
            stdout_truncated: output.stdout_truncated,
            stderr_truncated: output.stderr_truncated,
            stdout_base64,
            stderr_base64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        ExecBody::parse(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn bad_input_names_the_field() {
        for (body, field) in [
            (r#"{"argv":"ls"}"#, "argv"),
            (r#"{"argv":["ls",1]}"#, "argv[1]"),
            (r#"{"command":"ls","timeout_ms":0}"#, "timeout_ms"),
            (r#"{"command":"ls","timeout_ms":"5"}"#, "timeout_ms"),
            (r#"{"command":"ls","env":{"A":1}}"#, "env.A"),
            (r#"{"command":"ls","stdin_base64":"!!"}"#, "stdin_base64"),
            (r#"{"command":"ls","colour":1}"#, "colour"),
        ] {
            let message = message(body);
            assert!(message.contains(field), "{body}: {message}");
        }
    }

    #[test]
    fn a_good_body_becomes_the_guest_request() {
        let request =
            ExecBody::parse(br#"{"argv":["echo","hi"],"stdin":"x","timeout_ms":5}"#).unwrap();
        assert_eq!(request.argv, ["echo", "hi"]);
        assert_eq!(request.timeout_ms, 5);
        assert_eq!(request.stdin.as_deref(), Some("eA=="));
    }
}
