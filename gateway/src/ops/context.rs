//! The operation context: who is asking (their token, role and scope), which
//! request this is and where it came from. Every door builds one, and every
//! operation of the core takes one.

use std::net::SocketAddr;
use std::time::Duration;

use cubicle_runtime::events::Actor;
use cubicle_runtime::state::WorkspaceRecord;
use cubicle_runtime::tokens::{Role, Scope, Token};
use tokio::sync::mpsc;

use super::permission::{self, Permission};
use crate::error::OpError;

/// The caller of one operation.
#[derive(Debug, Clone)]
pub struct OpContext {
    pub token: Token,
    /// The request's id (`x-request-id`), on its response, log lines and events.
    pub request_id: String,
    /// The client's address, where the transport knows it.
    pub client: Option<SocketAddr>,
    /// How the caller waits when a policy holds the operation.
    pub hold: Hold,
}

impl OpContext {
    /// Refuses the operation unless the caller's role has `permission`.
    pub fn require(&self, permission: Permission) -> Result<(), OpError> {
        if permission::granted(self.token.role, permission) {
            return Ok(());
        }
        Err(OpError::forbidden(format!(
            "a token with role {} cannot {}",
            self.token.role.as_str(),
            permission.action()
        )))
    }

    /// Whether the caller may see workspace `record` at all: its own, or
    /// within its scope. Anything else is answered as if it did not exist.
    pub fn sees(&self, record: &WorkspaceRecord) -> bool {
        if record.owner_token.as_deref() == Some(self.token.id.as_str()) {
            return true;
        }
        match &self.token.scope {
            Scope::Only(ids) => ids.contains(&record.id),
            _ => self.sees_all(),
        }
    }

    /// Whether the caller's scope covers every workspace (and so every
    /// event, including those of no workspace).
    pub fn sees_all(&self) -> bool {
        match self.token.scope {
            Scope::All => true,
            Scope::Default => self.token.role != Role::Agent,
            Scope::Only(_) => false,
        }
    }

    /// The host's root at the command line (`cubicle token ...` on the
    /// data dir): an admin of every workspace, named so in the event log.
    pub fn host_cli() -> Self {
        OpContext {
            token: Token {
                id: "host-cli".into(),
                name: "cubicle CLI (root on the host)".into(),
                role: Role::Admin,
                scope: Scope::All,
            },
            request_id: format!("cli-{}", std::process::id()),
            client: None,
            hold: Hold::default(),
        }
    }

    /// `token`'s view, for what the daemon does on its behalf later (a
    /// webhook delivering the events the token may see).
    pub fn daemon_for(token: Token) -> Self {
        OpContext {
            request_id: format!("daemon-for-{}", token.id),
            token,
            client: None,
            hold: Hold::default(),
        }
    }

    pub fn actor(&self) -> Actor {
        Actor::from(&self.token)
    }
}

/// The longest a caller may ask to wait in one request.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// How the caller of one operation waits when it is held.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    /// How long to wait for a decision before answering 202 (HTTP `?wait=`).
    pub wait: Duration,
    /// An approval the caller holds for this operation (`?approval=`).
    pub approval: Option<String>,
    /// Told every few seconds while the call waits (MCP progress).
    pub progress: Option<mpsc::Sender<Progress>>,
}

impl Hold {
    /// From a query's `wait` (seconds, capped at [`MAX_WAIT`]) and `approval`.
    pub fn from_query(raw: Option<&str>) -> Result<Self, OpError> {
        let mut hold = Hold::default();
        for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "wait" => {
                    let secs: f64 = value
                        .parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                        .ok_or_else(|| {
                            OpError::bad_request(format!(
                                "wait: {value:?} is not a number of seconds"
                            ))
                        })?;
                    // Capped before the conversion, which panics past
                    // u64::MAX seconds (schemathesis sent `wait=1.8e19`).
                    hold.wait = Duration::from_secs_f64(secs.min(MAX_WAIT.as_secs_f64()));
                }
                "approval" => hold.approval = Some(value.into_owned()),
                _ => {}
            }
        }
        Ok(hold)
    }
}

/// A note to a waiting caller.
#[derive(Debug, Clone)]
pub struct Progress {
    pub approval: String,
    pub waited: Duration,
    pub expires_at: i64,
}
