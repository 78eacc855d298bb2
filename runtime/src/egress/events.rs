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
        /// The whole URL the server was asked for.
        url: String,
        status: u16,
        mode: Mode,
        /// Unix milliseconds when the proxy got the request's head.
        started_ms: u64,
        /// From then to the response's head (or the failure).
        wait_ms: u64,
        /// The request's headers as the client sent them (placeholders, not
        /// values) and the response's, by [`shown_headers`].
        request_headers: Vec<(String, String)>,
        response_headers: Vec<(String, String)>,
        /// Set when the response went to quarantine instead.
        download: Option<String>,
        /// The secrets whose values went in place of their placeholders
        /// (ids; never a value).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<String>,
        /// Where each went: `header <name>` or `body` (never a value).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        swaps: Vec<super::secrets::Swap>,
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
        /// `url`, `header <name>`, `body` or `host`.
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

/// Most headers an event keeps of one message.
const MAX_SHOWN: usize = 64;
/// Most bytes an event keeps of one header's value.
const MAX_VALUE: usize = 512;

/// Whether a header's value is a credential or a cookie, by its name.
fn is_credential(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || [
        "token",
        "secret",
        "key",
        "auth",
        "session",
        "password",
        "csrf",
        "signature",
    ]
    .iter()
    .any(|part| name.contains(part))
}

/// `headers` as an event (and the HAR made of events) keeps them: in
/// order, credentials and cookies redacted (`[redacted]`), each value cut
/// at [`MAX_VALUE`] bytes, at most [`MAX_SHOWN`] of them.
pub fn shown_headers(headers: &hyper::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .take(MAX_SHOWN)
        .map(|(name, value)| {
            let name = name.as_str().to_owned();
            let value = if is_credential(&name) {
                "[redacted]".to_owned()
            } else {
                let bytes = value.as_bytes();
                let mut text =
                    String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_VALUE)]).into_owned();
                if bytes.len() > MAX_VALUE {
                    text.push('…');
                }
                text
            };
            (name, value)
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_cookies_are_redacted_and_long_values_cut() {
        let mut headers = hyper::HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer abc"),
            ("cookie", "sid=1"),
            ("x-api-key", "k"),
            ("x-auth-token", "t"),
            ("accept", "text/html"),
        ] {
            headers.insert(
                hyper::header::HeaderName::from_static(name),
                value.parse().unwrap(),
            );
        }
        headers.insert("x-long", "a".repeat(600).parse().unwrap());
        let shown = shown_headers(&headers);
        let get = |n: &str| shown.iter().find(|(k, _)| k == n).unwrap().1.clone();
        for name in ["authorization", "cookie", "x-api-key", "x-auth-token"] {
            assert_eq!(get(name), "[redacted]", "{name}");
        }
        assert_eq!(get("accept"), "text/html");
        assert_eq!(get("x-long").chars().count(), MAX_VALUE + 1);
    }
}
