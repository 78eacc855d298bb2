//! What the proxy reports: every decision, every request it saw (with
//! interception), every close with bytes and duration, every download it
//! held. The sink is the gateway's event log; a decision whose event cannot
//! be written is refused (no event, no connection).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;

use serde::Serialize;

/// How a connection went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `CONNECT` with TLS intercepted: requests are seen.
    Intercepted,
    /// `CONNECT` passed through (a passthrough host, or interception off).
    Tunnel,
    /// A plain-HTTP absolute-URI request.
    Http,
}

/// One thing the proxy reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EgressEvent {
    /// Allowed or refused, and why: one per new destination, after a
    /// person decided when the policy said `confirm`.
    Decision {
        host: String,
        port: u16,
        method: String,
        mode: Mode,
        allowed: bool,
        /// The rule that decided (see [`super::decide::Decision::rule`]).
        rule: String,
        reason: String,
        /// The page that asked, when the proxy saw it.
        page: Option<String>,
        /// The approval a person decided, when the policy said `confirm`.
        approval: Option<String>,
        resolved: Vec<IpAddr>,
        /// The checked address it connected to (when allowed).
        address: Option<SocketAddr>,
    },
    /// One HTTP request and its answer (plain HTTP, or intercepted TLS).
    Request {
        host: String,
        port: u16,
        method: String,
        path: String,
        status: u16,
        mode: Mode,
        /// Set when the response went to quarantine instead.
        download: Option<String>,
        /// The secrets whose values went in place of their placeholders
        /// (ids; never a value).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<String>,
    },
    /// A request carrying a secret's placeholder where it may not go was
    /// refused before anything of it was sent.
    SecretBlocked {
        host: String,
        port: u16,
        method: String,
        path: String,
        /// The secret it belongs to; `None`: not one of this workspace's.
        secret: Option<String>,
        /// `url` or `header <name>`.
        place: String,
        reason: String,
    },
    /// The upstream's TLS certificate was not accepted.
    UpstreamRefused {
        host: String,
        port: u16,
        address: SocketAddr,
        reason: String,
    },
    /// A connection ended.
    Close {
        host: String,
        port: u16,
        address: SocketAddr,
        mode: Mode,
        bytes_up: u64,
        bytes_down: u64,
        duration_ms: u64,
    },
    /// An operator allowed a held destination for the rest of the
    /// workspace's life: `rule` joined its allowlist (an `egress.policy`
    /// event, like every other change of it).
    Widened {
        host: String,
        port: u16,
        rule: String,
        approval: String,
    },
    /// A download went to quarantine.
    DownloadHeld {
        id: String,
        url: String,
        name: String,
        size: u64,
        sha256: String,
        sniffed_type: Option<String>,
        claimed_type: Option<String>,
        hits: Vec<String>,
        /// Why the proxy held it (its bytes, its headers, its name).
        because: String,
    },
    /// A download was refused (over the size cap, quarantine disk full...);
    /// nothing of it was kept.
    DownloadRefused {
        url: String,
        name: String,
        reason: String,
    },
}

impl EgressEvent {
    /// The event's kind in the log.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Decision { .. } => "egress.decision",
            Self::Request { .. } => "egress.request",
            Self::SecretBlocked { .. } => "egress.secret_blocked",
            Self::UpstreamRefused { .. } => "egress.upstream_refused",
            Self::Close { .. } => "egress.close",
            Self::Widened { .. } => "egress.policy",
            Self::DownloadHeld { .. } => "download.held",
            Self::DownloadRefused { .. } => "download.refused",
        }
    }

    /// The outcome column: `allowed`/`denied` for decisions.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Decision { allowed: true, .. } => "allowed",
            Self::Decision { allowed: false, .. }
            | Self::UpstreamRefused { .. }
            | Self::SecretBlocked { .. }
            | Self::DownloadRefused { .. } => "denied",
            Self::DownloadHeld { .. } => "held",
            Self::Request { .. } | Self::Close { .. } | Self::Widened { .. } => "ok",
        }
    }
}

pub type Recorded<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Where the proxy's events go.
pub trait EgressEvents: Send + Sync {
    /// Writes `event` of `workspace`; an error means it was not written.
    fn record<'a>(&'a self, workspace: &'a str, event: EgressEvent) -> Recorded<'a>;
}

/// Keeps events in memory, for tests.
#[derive(Debug, Default)]
pub struct MemoryEvents {
    pub events: std::sync::Mutex<Vec<(String, EgressEvent)>>,
}

impl MemoryEvents {
    pub fn all(&self) -> Vec<EgressEvent> {
        self.events
            .lock()
            .expect("never held across a panic")
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }
}

impl EgressEvents for MemoryEvents {
    fn record<'a>(&'a self, workspace: &'a str, event: EgressEvent) -> Recorded<'a> {
        self.events
            .lock()
            .expect("never held across a panic")
            .push((workspace.to_owned(), event));
        Box::pin(async { Ok(()) })
    }
}
