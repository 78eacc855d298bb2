//! The forward proxy of one workspace, on hyper (HTTP/1.1): `CONNECT
//! host:port` (TLS intercepted by default, or tunnelled untouched for
//! passthrough hosts) and absolute-URI `http://` requests. Each destination
//! is decided ([`super::decide`]), recorded ([`super::events`]), and only
//! then connected — to exactly the address that was checked. Every response
//! body it sees is judged by its first bytes ([`super::peek`],
//! [`super::download::judge`]) before any of it reaches the client;
//! executables, scripts, archives, documents and what a browser would save
//! go to [`crate::quarantine`] instead of the workspace.
//!
//! Hostile clients are the normal case: headers are capped in size and in
//! time, connections per workspace are capped, malformed requests get a
//! 400 and the connection closes; none of it affects other connections.
//! What goes upstream is what was decided: the `Host` a server sees is the
//! authority the decision was about (a request naming another gets 421),
//! and a request whose length could be read two ways (`Transfer-Encoding`
//! with `Content-Length`, two lengths, a coding other than `chunked`) gets
//! 400 before anything is connected ([`ambiguous`]).

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cubicle_image::splice::{splice, splice_sockets};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::address::Walls;
use super::counted::{Counted, Prefixed, Tally};
use super::decide::{Decision, Destination, Inputs, decide};
use super::download;
use super::events::{EgressEvent, EgressEvents, Mode};
use super::framing::{Verdicts, Watched};
use super::gate::{Answer, Ask, EgressGate, Verdict};
use super::peek::{self, Replayed};
use super::policy::{AllowRule, EgressPolicy};
use super::request_body::{self, Read};
use super::resolve::Resolve;
use super::secrets::{self, Channel, SecretCell};
use super::tls::Interception;
use crate::quarantine::decode::{self, Coding, Codings};
use crate::quarantine::{self, HoldError, Quarantine, sniff};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body of every response the proxy sends.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// Caps on what one client may make the proxy hold.
#[derive(Debug, Clone)]
pub struct ProxyLimits {
    /// A request's headers must arrive within this.
    pub header_timeout: Duration,
    /// Largest request head, in bytes.
    pub max_header_bytes: usize,
    pub connect_timeout: Duration,
    pub tls_timeout: Duration,
    /// Open client connections per workspace.
    pub max_connections: usize,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            connect_timeout: Duration::from_secs(10),
            tls_timeout: Duration::from_secs(10),
            max_connections: 256,
        }
    }
}

/// What every workspace's proxy shares.
pub struct Egress {
    pub resolver: Arc<dyn Resolve>,
    /// `None`: no CA, so `CONNECT` is always tunnelled.
    pub interception: Option<Arc<Interception>>,
    /// `None`: downloads are not captured.
    pub quarantine: Option<Quarantine>,
    pub events: Arc<dyn EgressEvents>,
    /// The egress rules of each workspace's policy, and the people who
    /// decide a `confirm`.
    pub gate: Arc<dyn EgressGate>,
    /// What no rule opens (the gateway's ports, the host's services).
    pub walls: Arc<Walls>,
    pub limits: ProxyLimits,
}

/// A workspace's policy, replaced whole when it changes.
#[derive(Debug, Clone, Default)]
pub struct PolicyCell(Arc<RwLock<Arc<EgressPolicy>>>);

impl PolicyCell {
    pub fn new(policy: EgressPolicy) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(policy))))
    }

    pub fn get(&self) -> Arc<EgressPolicy> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, policy: EgressPolicy) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(policy);
    }

    /// Adds `rule` to the allowlist unless it is there (one write, so a
    /// concurrent [`PolicyCell::set`] is not undone).
    pub fn add(&self, rule: AllowRule) {
        let mut cell = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cell.allow.iter().all(|r| r.text != rule.text) {
            let mut wider = (**cell).clone();
            wider.allow.push(rule);
            *cell = Arc::new(wider);
        }
    }
}

/// How a request reached the proxy, for [`WorkspaceProxy::exchange`].
#[derive(Clone, Copy)]
struct Way<'a> {
    mode: Mode,
    scheme: &'a str,
    channel: Channel,
}

/// One workspace's proxy: its policy, its connections, their owner.
pub struct WorkspaceProxy {
    egress: Arc<Egress>,
    workspace: String,
    policy: PolicyCell,
    /// The secrets bound to it, swapped in on the way out.
    secrets: SecretCell,
    cancel: CancellationToken,
    tasks: TaskTracker,
    connections: Arc<Semaphore>,
    /// Its upstream TLS side, with its own session cache (see
    /// [`Interception::client_for_workspace`]); `None` without interception.
    upstream_tls: Option<Arc<rustls::ClientConfig>>,
}

fn full(status: StatusCode, content_type: &str, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("text/plain")),
    );
    response
}

/// A refusal: the reason in the body and in `x-cubicle-egress-reason`.
fn refusal(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let mut response = full(
        status,
        "text/plain; charset=utf-8",
        format!("cubicle egress: {reason}\n"),
    );
    let printable: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(400)
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-cubicle-egress-reason"), value);
    }
    response
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    for name in HOP_BY_HOP
        .iter()
        .copied()
        .chain(listed.iter().map(String::as_str))
    {
        headers.remove(name);
    }
}

/// The protocol a message asks to switch to (`Connection: upgrade` with an
/// `Upgrade` header), e.g. `websocket`.
fn upgrade_asked(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|name| name.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
}

/// The page that asked for a request, as its `Referer` (or `Origin`) says
/// (shown to the person deciding; the client wrote it).
fn page_of(headers: &HeaderMap) -> Option<String> {
    [header::REFERER, header::ORIGIN]
        .iter()
        .filter_map(|name| headers.get(name)?.to_str().ok())
        .map(|value| value.chars().take(500).collect::<String>())
        .find(|value| !value.is_empty() && value != "null")
}

/// Why a request's framing or target could be read two ways (so a server
/// behind the proxy might see another request than the proxy judged), if
/// it can: `Transfer-Encoding` with `Content-Length`, a coding other than
/// one `chunked`, more than one or a malformed `Content-Length`, more than
/// one `Host`. (Folded header lines and bare CRs are refused by the parser
/// itself.)
pub fn ambiguous(headers: &HeaderMap) -> Option<&'static str> {
    let te: Vec<&HeaderValue> = headers.get_all(header::TRANSFER_ENCODING).iter().collect();
    let cl: Vec<&HeaderValue> = headers.get_all(header::CONTENT_LENGTH).iter().collect();
    if !te.is_empty() && !cl.is_empty() {
        return Some("the request has both Transfer-Encoding and Content-Length");
    }
    if te.len() > 1
        || te
            .first()
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Some("the request's Transfer-Encoding is not one `chunked`");
    }
    if cl.len() > 1 {
        return Some("the request has more than one Content-Length");
    }
    if cl
        .first()
        .is_some_and(|v| v.is_empty() || !v.as_bytes().iter().all(u8::is_ascii_digit))
    {
        return Some("the request's Content-Length is not a number");
    }
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Some("the request has more than one Host");
    }
    None
}

/// Whether the `Host` header (if any) names `dest`: the same host, and the
/// same port when it gives one. `Err` when it is not an authority at all.
fn host_names(headers: &HeaderMap, dest: &Destination) -> Result<bool, ()> {
    let Some(value) = headers.get(header::HOST) else {
        return Ok(true);
    };
    let authority: hyper::http::uri::Authority =
        value.to_str().map_err(|_| ())?.parse().map_err(|_| ())?;
    if authority.as_str().contains('@') {
        return Err(());
    }
    Ok(authority_names(&authority, dest))
}

fn authority_names(authority: &hyper::http::uri::Authority, dest: &Destination) -> bool {
    let same_host = Destination::new(authority.host(), dest.port).host == dest.host;
    same_host && authority.port_u16().is_none_or(|port| port == dest.port)
}

/// The codings a client asked for that the quarantine can undo (with
/// their weights), or `identity`.
fn acceptable_encodings(asked: &HeaderValue) -> HeaderValue {
    let kept: Vec<&str> = asked
        .to_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|item| {
            let coding = item.split(';').next().unwrap_or_default().trim();
            ["gzip", "x-gzip", "deflate", "br", "identity"]
                .iter()
                .any(|known| coding.eq_ignore_ascii_case(known))
        })
        .collect();
    if kept.is_empty() {
        return HeaderValue::from_static("identity");
    }
    HeaderValue::from_str(&kept.join(", ")).unwrap_or(HeaderValue::from_static(decode::ACCEPTED))
}

/// Where one tunnel or request goes, once decided.
struct Target {
    dest: Destination,
    mode: Mode,
}

/// A connection upstream that is re-made (to the same checked address)
/// when the server closed it between two requests.
struct Upstream {
    address: std::net::SocketAddr,
    tally: Arc<Tally>,
    tls: Option<(
        Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
    sender: Option<SendRequest<ProxyBody>>,
    /// Protocol switches (WebSockets) relayed over this tunnel: its close
    /// is recorded once they end, with their bytes.
    relays: TaskTracker,
}

impl WorkspaceProxy {
    pub fn new(egress: Arc<Egress>, workspace: &str, policy: PolicyCell) -> Arc<Self> {
        let max = egress.limits.max_connections;
        let upstream_tls = egress
            .interception
            .as_ref()
            .map(|interception| interception.client_for_workspace());
        Arc::new(Self {
            egress,
            workspace: workspace.to_owned(),
            policy,
            secrets: SecretCell::default(),
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
            connections: Arc::new(Semaphore::new(max)),
            upstream_tls,
        })
    }

    pub fn workspace(&self) -> &str {
        &self.workspace
    }

    pub fn policy(&self) -> &PolicyCell {
        &self.policy
    }

    pub fn secrets(&self) -> &SecretCell {
        &self.secrets
    }

    /// Ends every connection and download in flight (their partial files
    /// go with them) and waits for their tasks.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    pub fn is_shut_down(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when [`WorkspaceProxy::shutdown`] begins.
    pub async fn closed(&self) {
        self.cancel.cancelled().await;
    }

    /// Runs `future` as a task of this workspace, ended at shutdown.
    fn spawn(&self, future: impl std::future::Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = future => {}
            }
        });
    }

    /// Serves one client connection (already peer-checked).
    pub fn serve<IO>(self: &Arc<Self>, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Ok(permit) = self.connections.clone().try_acquire_owned() else {
            tracing::warn!(
                workspace = self.workspace,
                "egress: too many open proxy connections; closing a new one"
            );
            return;
        };
        let this = self.clone();
        self.spawn(async move {
            let _permit = permit;
            let service_owner = this.clone();
            let verdicts = Verdicts::default();
            let io = Watched::new(io, verdicts.clone());
            let service = service_fn(move |req| {
                let this = service_owner.clone();
                let framing = verdicts.next();
                async move { Ok::<_, Infallible>(this.handle(req, framing).await) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(this.egress.limits.header_timeout)
                .max_buf_size(this.egress.limits.max_header_bytes.max(8192))
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades()
                .await;
            if let Err(err) = served {
                tracing::debug!(workspace = this.workspace, %err, "egress client connection ended");
            }
        });
    }

    async fn record(&self, event: EgressEvent) -> Result<(), String> {
        let recorded = self.egress.events.record(&self.workspace, event).await;
        if let Err(err) = &recorded {
            tracing::error!(workspace = self.workspace, %err, "cannot record an egress event");
        }
        recorded
    }

    /// One request from a client; `framing`: why its framing was
    /// ambiguous as sent ([`super::framing`]), if it was.
    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        framing: Option<&'static str>,
    ) -> Response<ProxyBody> {
        if let Some(why) = framing.or_else(|| ambiguous(req.headers())) {
            tracing::warn!(
                workspace = self.workspace,
                why,
                "egress: ambiguous request refused"
            );
            return refusal(StatusCode::BAD_REQUEST, why);
        }
        if let Some(authority) = req.uri().authority()
            && let Some(blocked) = secrets::in_authority(&self.secrets.get(), authority.as_str())
        {
            let dest = Destination::new(authority.host(), authority.port_u16().unwrap_or(0));
            let method = req.method().to_string();
            return self
                .refuse_secret(&dest, method, String::new(), blocked)
                .await;
        }
        if req.method() == Method::CONNECT {
            return self.connect(req).await;
        }
        let (scheme, authority) = (req.uri().scheme_str(), req.uri().authority());
        match (scheme, authority) {
            (Some("http"), Some(authority)) => {
                let dest = Destination::new(authority.host(), authority.port_u16().unwrap_or(80));
                match host_names(req.headers(), &dest) {
                    Ok(true) => self.forward_http(req, dest).await,
                    Ok(false) => refusal(
                        StatusCode::MISDIRECTED_REQUEST,
                        &format!(
                            "the Host header names another server than the URL ({}:{})",
                            dest.host, dest.port
                        ),
                    ),
                    Err(()) => refusal(
                        StatusCode::BAD_REQUEST,
                        "the Host header is not host[:port]",
                    ),
                }
            }
            (Some(_), Some(_)) => refusal(
                StatusCode::BAD_REQUEST,
                "only http:// URLs are forwarded as requests; https:// goes through CONNECT",
            ),
            _ => refusal(
                StatusCode::BAD_REQUEST,
                "this is a forward proxy: send absolute-URI requests (GET http://host/path) or CONNECT host:port",
            ),
        }
    }

    /// The joined decision on `ask` (allowlist, policy, walls); a
    /// `confirm` waits here for a person, then is decided again with the
    /// approval (the policy may have changed meanwhile). The approval's id
    /// comes with it.
    async fn decide(&self, ask: &Ask, dest: &Destination) -> (Decision, Option<String>) {
        let gate = &*self.egress.gate;
        let ruling = gate.rule(&self.workspace, ask).await;
        let policy = self.policy.get();
        let inputs = Inputs {
            allowlist: &policy,
            ruling: ruling.as_ref(),
            approved: None,
            walls: &self.egress.walls,
        };
        let decision = decide(&inputs, &*self.egress.resolver, dest).await;
        let (Verdict::Confirm, Some(ruling)) = (decision.verdict, ruling) else {
            return (decision, None);
        };
        let approval = match gate
            .confirm(&self.workspace, ask, &ruling, &policy.to_doc())
            .await
        {
            Answer::Denied { approval, reason } => {
                let rule = match &approval {
                    Some(id) => format!("approval:{id} ({})", ruling.rule),
                    None => ruling.rule.clone(),
                };
                let denied = Decision {
                    verdict: Verdict::Deny,
                    rule,
                    reason,
                    ..decision
                };
                return (denied, approval);
            }
            Answer::Once { approval } => approval,
            Answer::Workspace { approval, rule } => {
                self.widen(ask, &rule, &approval).await;
                approval
            }
        };
        let ruling = gate.rule(&self.workspace, ask).await;
        let policy = self.policy.get();
        let inputs = Inputs {
            allowlist: &policy,
            ruling: ruling.as_ref(),
            approved: Some(&approval),
            walls: &self.egress.walls,
        };
        let decision = decide(&inputs, &*self.egress.resolver, dest).await;
        (decision, Some(approval))
    }

    /// Adds `rule` to this workspace's allowlist (the gateway stored it),
    /// with its event.
    async fn widen(&self, ask: &Ask, rule: &str, approval: &str) {
        match AllowRule::parse(rule) {
            Ok(parsed) => {
                let _ = self
                    .record(EgressEvent::Widened {
                        host: ask.host.clone(),
                        port: ask.port,
                        rule: rule.to_owned(),
                        approval: approval.to_owned(),
                    })
                    .await;
                self.policy.add(parsed);
            }
            Err(why) => {
                tracing::error!(workspace = self.workspace, rule, %why, "egress: an approved rule does not parse; allowed once only")
            }
        }
    }

    /// Decides, connects to a checked address and records the decision;
    /// the response to send instead when any of it fails.
    async fn open(
        &self,
        target: &Target,
        method: &Method,
        page: Option<String>,
    ) -> Result<(TcpStream, std::net::SocketAddr), Response<ProxyBody>> {
        let ask = Ask {
            host: target.dest.host.clone(),
            port: target.dest.port,
            mode: target.mode,
            page,
        };
        let (decision, approval) = self.decide(&ask, &target.dest).await;
        let event = |decision: &Decision, address: Option<std::net::SocketAddr>, reason: String| {
            EgressEvent::Decision {
                host: target.dest.host.clone(),
                port: target.dest.port,
                method: method.to_string(),
                mode: target.mode,
                allowed: decision.allowed() && address.is_some(),
                rule: decision.rule.clone(),
                reason,
                page: ask.page.clone(),
                approval: approval.clone(),
                resolved: decision.resolved.clone(),
                address,
            }
        };
        let unrecorded = || {
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "the event log cannot be written, so nothing was connected",
            )
        };
        let refused = format!(
            "refused {}:{}: {}",
            target.dest.host, target.dest.port, decision.reason
        );
        if !decision.allowed() {
            self.record(event(&decision, None, decision.reason.clone()))
                .await
                .map_err(|_| unrecorded())?;
            return Err(refusal(StatusCode::FORBIDDEN, &refused));
        }
        let mut failures = Vec::new();
        for &address in &decision.targets {
            let attempt = tokio::time::timeout(
                self.egress.limits.connect_timeout,
                TcpStream::connect(address),
            )
            .await;
            match attempt {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    self.record(event(&decision, Some(address), decision.reason.clone()))
                        .await
                        .map_err(|_| unrecorded())?;
                    return Ok((stream, address));
                }
                Ok(Err(err)) => failures.push(format!("{address}: {err}")),
                Err(_) => failures.push(format!("{address}: no answer in time")),
            }
        }
        let reason = format!("allowed, but cannot connect: {}", failures.join("; "));
        self.record(event(&decision, None, reason.clone()))
            .await
            .map_err(|_| unrecorded())?;
        Err(refusal(
            StatusCode::BAD_GATEWAY,
            &format!("{}:{} {reason}", target.dest.host, target.dest.port),
        ))
    }

    async fn connect(self: Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let Some(authority) = req.uri().authority().cloned() else {
            return refusal(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let Some(port) = authority.port_u16() else {
            return refusal(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let dest = Destination::new(authority.host(), port);
        let policy = self.policy.get();
        let intercept = policy.intercept
            && self.egress.interception.is_some()
            && !policy.passes_through(&dest.host);
        let mode = if intercept {
            Mode::Intercepted
        } else {
            Mode::Tunnel
        };
        let target = Target { dest, mode };
        // A CONNECT is decided before any request inside it is seen: the
        // page that asked is not known.
        let (stream, address) = match self.open(&target, req.method(), None).await {
            Ok(opened) => opened,
            Err(response) => return response,
        };
        let this = self.clone();
        self.spawn(async move {
            let started = Instant::now();
            let client = match hyper::upgrade::on(req).await {
                Ok(upgraded) => upgraded,
                Err(err) => {
                    tracing::debug!(%err, "egress: CONNECT never upgraded");
                    return;
                }
            };
            let tally = Arc::new(Tally::default());
            if intercept {
                let upstream = Counted::new(stream, tally.clone());
                this.intercept(
                    TokioIo::new(client),
                    upstream,
                    &target,
                    address,
                    tally.clone(),
                )
                .await;
            } else {
                pass_through(client, stream, &tally).await;
            }
            let _ = this
                .record(EgressEvent::Close {
                    host: target.dest.host.clone(),
                    port: target.dest.port,
                    address,
                    mode,
                    bytes_up: tally.written(),
                    bytes_down: tally.read(),
                    duration_ms: started.elapsed().as_millis() as u64,
                })
                .await;
        });
        Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed())
    }

    /// Terminates the client's TLS with a leaf for the host, verifies the
    /// upstream's, and serves the requests in between.
    async fn intercept<C>(
        self: &Arc<Self>,
        client: C,
        upstream_io: Counted<TcpStream>,
        target: &Target,
        address: std::net::SocketAddr,
        tally: Arc<Tally>,
    ) where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (Some(interception), Some(upstream_config)) =
            (self.egress.interception.clone(), self.upstream_tls.clone())
        else {
            return;
        };
        let limit = self.egress.limits.tls_timeout;
        // The client speaks first in HTTP and TLS alike: a first byte that
        // is not a TLS handshake record (0x16) is plain HTTP in the tunnel
        // (Chromium sends ws:// and http:// to a proxy this way), served and
        // seen the same way, upstream without TLS.
        let mut client = client;
        let mut first = [0u8; 1];
        let Ok(Ok(1)) = tokio::time::timeout(limit, client.read(&mut first)).await else {
            return;
        };
        let client = Prefixed::new(first.to_vec(), client);
        if first[0] != 0x16 {
            let relays = TaskTracker::new();
            let mut upstream = Upstream {
                address,
                tally,
                tls: None,
                sender: None,
                relays: relays.clone(),
            };
            match self.handshake(TokioIo::new(upstream_io)).await {
                Ok(sender) => upstream.sender = Some(sender),
                Err(err) => tracing::debug!(%err, "egress: upstream HTTP handshake failed"),
            }
            let upstream = Ok(Arc::new(tokio::sync::Mutex::new(upstream)));
            self.serve_tunnel(client, &target.dest, upstream, Channel::Plain)
                .await;
            relays.close();
            relays.wait().await;
            return;
        }
        let relays = TaskTracker::new();
        let upstream = upstream_io;
        let server_name = match rustls::pki_types::ServerName::try_from(target.dest.host.clone()) {
            Ok(name) => name,
            Err(err) => {
                tracing::debug!(%err, host = target.dest.host, "egress: not a TLS server name");
                return;
            }
        };
        let server_config = match interception.ca.server_config(&target.dest.host) {
            Ok(config) => config,
            Err(err) => {
                tracing::error!(%err, host = target.dest.host, "egress: cannot make a leaf certificate");
                return;
            }
        };
        // Both handshakes at once: neither needs the other, and a request
        // waits for the slower one instead of the two in turn.
        let connector = tokio_rustls::TlsConnector::from(upstream_config.clone());
        let upstream_handshake = async {
            match tokio::time::timeout(limit, connector.connect(server_name.clone(), upstream))
                .await
            {
                Ok(Ok(tls)) => Ok(tls),
                Ok(Err(err)) => Err(err.to_string()),
                Err(_) => Err(format!("no TLS handshake within {limit:?}")),
            }
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(server_config);
        let client_handshake = tokio::time::timeout(limit, acceptor.accept(client));
        let (upstream_tls, client_tls) = tokio::join!(upstream_handshake, client_handshake);
        let Ok(Ok(client_tls)) = client_tls else {
            return;
        };
        // A secret goes only where the client itself asked for its host.
        let named = client_tls.get_ref().1.server_name().map(|name| {
            name.trim_end_matches('.')
                .eq_ignore_ascii_case(&target.dest.host)
        });
        let channel = if named == Some(true) {
            Channel::Tls
        } else {
            Channel::TlsOtherName
        };
        let upstream = match upstream_tls {
            Ok(tls) => {
                let mut upstream = Upstream {
                    address,
                    tally,
                    tls: Some((upstream_config, server_name)),
                    sender: None,
                    relays: relays.clone(),
                };
                match self.handshake(TokioIo::new(tls)).await {
                    Ok(sender) => upstream.sender = Some(sender),
                    Err(err) => tracing::debug!(%err, "egress: upstream HTTP handshake failed"),
                }
                Ok(Arc::new(tokio::sync::Mutex::new(upstream)))
            }
            Err(reason) => {
                let reason = format!("upstream certificate refused: {reason}");
                let _ = self
                    .record(EgressEvent::UpstreamRefused {
                        host: target.dest.host.clone(),
                        port: target.dest.port,
                        address,
                        reason: reason.clone(),
                    })
                    .await;
                Err(reason)
            }
        };
        self.serve_tunnel(client_tls, &target.dest, upstream, channel)
            .await;
        relays.close();
        relays.wait().await;
    }

    /// Serves the HTTP requests a client sends inside a tunnel (after TLS,
    /// or plain), each forwarded upstream, or refused with `upstream`'s
    /// reason.
    async fn serve_tunnel<C>(
        self: &Arc<Self>,
        client: C,
        dest: &Destination,
        upstream: Result<Arc<tokio::sync::Mutex<Upstream>>, String>,
        channel: Channel,
    ) where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let this = self.clone();
        let dest = dest.clone();
        let verdicts = Verdicts::default();
        let client = Watched::new(client, verdicts.clone());
        let service = service_fn(move |req: Request<Incoming>| {
            let this = this.clone();
            let dest = dest.clone();
            let upstream = upstream.clone();
            let framing = verdicts.next();
            async move {
                let response = match (framing, upstream) {
                    (Some(why), _) => refusal(StatusCode::BAD_REQUEST, why),
                    (None, Ok(upstream)) => {
                        this.forward_intercepted(req, dest, upstream, channel).await
                    }
                    (None, Err(reason)) => refusal(StatusCode::BAD_GATEWAY, &reason),
                };
                Ok::<_, Infallible>(response)
            }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.egress.limits.header_timeout)
            .max_buf_size(self.egress.limits.max_header_bytes.max(8192))
            .serve_connection(TokioIo::new(client), service)
            .with_upgrades()
            .await;
    }

    /// An HTTP/1.1 client connection over `io`, driven by a task of this
    /// workspace.
    async fn handshake<I>(&self, io: I) -> Result<SendRequest<ProxyBody>, hyper::Error>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
        self.spawn(async move {
            let _ = connection.with_upgrades().await;
        });
        Ok(sender)
    }

    async fn forward_intercepted(
        self: Arc<Self>,
        req: Request<Incoming>,
        dest: Destination,
        upstream: Arc<tokio::sync::Mutex<Upstream>>,
        channel: Channel,
    ) -> Response<ProxyBody> {
        // The request must be for the host and port the tunnel was decided
        // for, in its target (absolute form) and in its Host header alike.
        if let Some(why) = ambiguous(req.headers()) {
            return refusal(StatusCode::BAD_REQUEST, why);
        }
        let target_names = req
            .uri()
            .authority()
            .is_none_or(|authority| authority_names(authority, &dest));
        match (target_names, host_names(req.headers(), &dest)) {
            (true, Ok(true)) => {}
            (_, Err(())) => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    "the Host header is not host[:port]",
                );
            }
            _ => {
                return refusal(
                    StatusCode::MISDIRECTED_REQUEST,
                    &format!(
                        "this tunnel was allowed for {}:{} only",
                        dest.host, dest.port
                    ),
                );
            }
        }
        let mut upstream = upstream.lock().await;
        let scheme = if upstream.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let relays = upstream.relays.clone();
        let sender = match upstream.ready(&self).await {
            Ok(sender) => sender,
            Err(reason) => {
                return refusal(StatusCode::BAD_GATEWAY, &format!("{}: {reason}", dest.host));
            }
        };
        let way = Way {
            mode: Mode::Intercepted,
            scheme,
            channel,
        };
        self.exchange(req, &dest, way, sender, &relays).await
    }

    async fn forward_http(
        self: Arc<Self>,
        req: Request<Incoming>,
        dest: Destination,
    ) -> Response<ProxyBody> {
        let target = Target {
            dest,
            mode: Mode::Http,
        };
        let page = page_of(req.headers());
        let (stream, address) = match self.open(&target, req.method(), page).await {
            Ok(opened) => opened,
            Err(response) => return response,
        };
        let started = Instant::now();
        let tally = Arc::new(Tally::default());
        let io = TokioIo::new(Counted::new(stream, tally.clone()));
        let (mut sender, connection) = match hyper::client::conn::http1::handshake(io).await {
            Ok(pair) => pair,
            Err(err) => return refusal(StatusCode::BAD_GATEWAY, &err.to_string()),
        };
        // One request per upstream connection: when it ends, so does the
        // connection, and its close is recorded with the bytes.
        let this = self.clone();
        let closing = Target {
            dest: target.dest.clone(),
            mode: Mode::Http,
        };
        let relays = TaskTracker::new();
        let relayed = relays.clone();
        self.spawn(async move {
            let _ = connection.with_upgrades().await;
            relayed.close();
            relayed.wait().await;
            let _ = this
                .record(EgressEvent::Close {
                    host: closing.dest.host,
                    port: closing.dest.port,
                    address,
                    mode: Mode::Http,
                    bytes_up: tally.written(),
                    bytes_down: tally.read(),
                    duration_ms: started.elapsed().as_millis() as u64,
                })
                .await;
        });
        let mut req = req;
        if upgrade_asked(req.headers()).is_none() {
            req.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        let way = Way {
            mode: Mode::Http,
            scheme: "http",
            channel: Channel::Plain,
        };
        self.exchange(req, &target.dest, way, &mut sender, &relays)
            .await
    }

    /// Sends one request upstream and answers it, unless the answer is a
    /// download: then it goes to quarantine and the client gets a page
    /// saying so.
    async fn exchange(
        &self,
        mut req: Request<Incoming>,
        dest: &Destination,
        way: Way<'_>,
        sender: &mut SendRequest<ProxyBody>,
        relays: &TaskTracker,
    ) -> Response<ProxyBody> {
        let Way {
            mode,
            scheme,
            channel,
        } = way;
        let (method, path) = method_and_path(&req);
        let started = Instant::now();
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // As the client sent them: placeholders, never values.
        let request_headers = super::events::shown_headers(req.headers());
        // Placeholders: swapped for their values, or the request refused
        // before anything of it leaves.
        let bound = self.secrets.get();
        let mut used = match secrets::apply(&bound, &path, req.headers_mut(), &dest.host, channel) {
            Ok(used) => used,
            Err(blocked) => {
                return self
                    .refuse_secret(dest, method.clone(), path.clone(), blocked)
                    .await;
            }
        };
        // The body too, read only where a secret bound here goes in bodies.
        let mut req = match self
            .body_swapped(req, &bound, dest, channel, &mut used)
            .await
        {
            Ok(req) => req,
            Err(refused) => return refused,
        };
        let mut ids: Vec<String> = Vec::new();
        for swap in &used {
            if !ids.contains(&swap.secret) {
                ids.push(swap.secret.clone());
            }
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        let authority = match (dest.host.contains(':'), dest.port == default_port) {
            (true, true) => format!("[{}]", dest.host),
            (true, false) => format!("[{}]:{}", dest.host, dest.port),
            (false, true) => dest.host.clone(),
            (false, false) => format!("{}:{}", dest.host, dest.port),
        };
        let url = format!("{scheme}://{authority}{path}");
        let keep_close =
            req.headers().get(header::CONNECTION) == Some(&HeaderValue::from_static("close"));
        let upgrade = upgrade_asked(req.headers());
        strip_hop_by_hop(req.headers_mut());
        if keep_close {
            req.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        // A protocol switch (WebSocket) asked by the client goes upstream as
        // asked; its two halves are joined once the server agrees (101).
        let client_side = upgrade.as_ref().map(|protocol| {
            let headers = req.headers_mut();
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(header::UPGRADE, protocol.clone());
            hyper::upgrade::on(&mut req)
        });
        match path.parse() {
            Ok(uri) => *req.uri_mut() = uri,
            Err(_) => return refusal(StatusCode::BAD_REQUEST, "the request path is not valid"),
        }
        // The server sees exactly the authority that was decided.
        match HeaderValue::from_str(&authority) {
            Ok(host) => {
                req.headers_mut().insert(header::HOST, host);
            }
            Err(_) => return refusal(StatusCode::BAD_REQUEST, "the host is not a valid authority"),
        }
        // Only codings the quarantine can undo to look at the body.
        if let Some(asked) = req.headers().get(header::ACCEPT_ENCODING) {
            let kept = acceptable_encodings(asked);
            req.headers_mut().insert(header::ACCEPT_ENCODING, kept);
        }
        let bodiless = req.method() == Method::HEAD;
        let no_answer = HeaderMap::new();
        let request_event = |status: StatusCode, download: Option<String>, answer: &HeaderMap| {
            EgressEvent::Request {
                host: dest.host.clone(),
                port: dest.port,
                method: method.clone(),
                path: path.clone(),
                url: url.clone(),
                status: status.as_u16(),
                mode,
                started_ms,
                wait_ms: started.elapsed().as_millis() as u64,
                request_headers: request_headers.clone(),
                response_headers: super::events::shown_headers(answer),
                download,
                secrets: ids.clone(),
                swaps: used.clone(),
            }
        };
        let mut response = match sender.send_request(req).await {
            Ok(response) => response,
            Err(err) => {
                // It may have reached the server: an event all the same.
                let _ = self
                    .record(request_event(StatusCode::BAD_GATEWAY, None, &no_answer))
                    .await;
                return refusal(
                    StatusCode::BAD_GATEWAY,
                    &format!("{}: the server did not answer: {err}", dest.host),
                );
            }
        };
        let status = response.status();
        let bodiless = bodiless
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        if let (Some(quarantine), false) = (&self.egress.quarantine, bodiless) {
            let (parts, body) = response.into_parts();
            let judged = self.judge(&path, &parts.headers, body).await;
            let (held, body, codings) = match judged {
                Ok(judged) => judged,
                Err(reason) => {
                    let _ = self
                        .record(request_event(StatusCode::BAD_GATEWAY, None, &no_answer))
                        .await;
                    return refusal(StatusCode::BAD_GATEWAY, &format!("{}: {reason}", dest.host));
                }
            };
            if let Some(held) = held {
                let (answer, id) = self.hold(quarantine, &url, &held, body, &codings).await;
                let _ = self.record(request_event(status, id, &parts.headers)).await;
                return answer;
            }
            if self
                .record(request_event(status, None, &parts.headers))
                .await
                .is_err()
            {
                return refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the event log cannot be written, so the response was not delivered",
                );
            }
            let mut response =
                Response::from_parts(parts, body.map_err(|e| Box::new(e) as BoxError).boxed());
            strip_hop_by_hop(response.headers_mut());
            return response;
        }
        if self
            .record(request_event(status, None, response.headers()))
            .await
            .is_err()
        {
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "the event log cannot be written, so the response was not delivered",
            );
        }
        let switched = match (status, client_side, upgrade_asked(response.headers())) {
            (StatusCode::SWITCHING_PROTOCOLS, Some(client_side), Some(protocol)) => {
                let server_side = hyper::upgrade::on(&mut response);
                let relaying = relays.token();
                // Both halves already passed the policy (this request's
                // host and port); from here on they are bytes, counted on
                // the upstream connection, whose close waits for this.
                self.spawn(async move {
                    if let (Ok(client), Ok(server)) = (client_side.await, server_side.await) {
                        let (mut client, mut server) = (TokioIo::new(client), TokioIo::new(server));
                        let _ = splice(&mut client, &mut server).await;
                    }
                    drop(relaying);
                });
                Some(protocol)
            }
            _ => None,
        };
        strip_hop_by_hop(response.headers_mut());
        if let Some(protocol) = switched {
            let headers = response.headers_mut();
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(header::UPGRADE, protocol);
        }
        response.map(|body| body.map_err(|e| Box::new(e) as BoxError).boxed())
    }

    /// The request with its body as it goes upstream: read and given the
    /// values of the `body` secrets bound to `dest` where
    /// [`secrets::reads_body`] says so (where they went added to `used`),
    /// else untouched and unread. A body with a `Content-Encoding`, or
    /// longer than [`secrets::MAX_BODY`], is sent as it came. `Err`: the
    /// refusal to answer instead, nothing of it sent.
    async fn body_swapped(
        &self,
        req: Request<Incoming>,
        bound: &[secrets::Bound],
        dest: &Destination,
        channel: Channel,
        used: &mut Vec<secrets::Swap>,
    ) -> Result<Request<ProxyBody>, Response<ProxyBody>> {
        let encoded = req
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_some_and(|c| !c.as_bytes().eq_ignore_ascii_case(b"identity"));
        if !secrets::reads_body(bound, &dest.host, channel)
            || hyper::body::Body::is_end_stream(req.body())
            || encoded
            || upgrade_asked(req.headers()).is_some()
        {
            return Ok(req.map(|body| body.map_err(|e| Box::new(e) as BoxError).boxed()));
        }
        let (method, path) = method_and_path(&req);
        let (mut parts, body) = req.into_parts();
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        let whole = match request_body::read(body, declared, secrets::MAX_BODY).await {
            Ok(Read::Whole(whole)) => whole,
            Ok(Read::TooLong(body)) => {
                tracing::info!(
                    workspace = self.workspace,
                    host = dest.host,
                    path,
                    "egress: a request body over {} bytes goes as it came, its placeholders untouched",
                    secrets::MAX_BODY
                );
                let body = body.map_err(|e| Box::new(e) as BoxError).boxed();
                return Ok(Request::from_parts(parts, body));
            }
            Err(reason) => return Err(refusal(StatusCode::BAD_REQUEST, &reason)),
        };
        let whole = match secrets::swap_body(bound, &whole, &dest.host, channel, used) {
            Ok(Some(swapped)) => Bytes::from(swapped),
            Ok(None) => whole,
            Err(blocked) => return Err(self.refuse_secret(dest, method, path, blocked).await),
        };
        parts.headers.remove(header::TRANSFER_ENCODING);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(whole.len()));
        let body = Full::new(whole).map_err(|never| match never {}).boxed();
        Ok(Request::from_parts(parts, body))
    }

    /// Refuses a request that carried a secret's placeholder where it may
    /// not go, after its event is written.
    async fn refuse_secret(
        &self,
        dest: &Destination,
        method: String,
        path: String,
        blocked: secrets::Blocked,
    ) -> Response<ProxyBody> {
        let why = format!("{} ({})", blocked.reason, blocked.place);
        let recorded = self
            .record(EgressEvent::SecretBlocked {
                host: dest.host.clone(),
                port: dest.port,
                method,
                path,
                secret: blocked.secret,
                place: blocked.place,
                reason: blocked.reason,
            })
            .await;
        if recorded.is_err() {
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "the event log cannot be written, so the request was not sent",
            );
        }
        refusal(StatusCode::FORBIDDEN, &why)
    }

    /// Reads the head of a response body and judges it; whether it is
    /// held (and why), the whole body, and its codings to undo. `Err`: it
    /// cannot be judged (it broke off, or does not decode), and nothing of
    /// it may pass.
    async fn judge(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: Incoming,
    ) -> Result<(Option<download::Held>, Replayed<Incoming>, Vec<Coding>), String> {
        let codings = match decode::codings(headers) {
            Codings::Known(codings) => codings,
            Codings::Unsupported(name) => {
                let because = format!(
                    "its Content-Encoding `{name}` is one the proxy cannot undo to look inside"
                );
                let held = download::held(path, headers, because);
                return Ok((Some(held), Replayed::whole(body), Vec::new()));
            }
        };
        if let Some(held) = download::by_headers(path, headers) {
            return Ok((Some(held), Replayed::whole(body), codings));
        }
        let peeked = peek::peek(body, &codings)
            .await
            .map_err(|e| format!("cannot judge the response: {e}"))?;
        let (kind, _) = sniff::sniff(&peeked.head);
        Ok((download::judge(path, headers, kind), peeked.body, codings))
    }

    /// Holds a download; the page the browser gets, and the id when held.
    async fn hold(
        &self,
        quarantine: &Quarantine,
        url: &str,
        held: &download::Held,
        body: Replayed<Incoming>,
        codings: &[Coding],
    ) -> (Response<ProxyBody>, Option<String>) {
        let offer = &held.offer;
        let meta = quarantine::Incoming {
            workspace: &self.workspace,
            url,
            offered_name: &offer.name,
            claimed_type: offer.claimed_type.as_deref(),
            codings,
        };
        match quarantine.hold(meta, body).await {
            Ok(record) => {
                let event = EgressEvent::DownloadHeld {
                    id: record.id.clone(),
                    url: url.to_owned(),
                    name: record.name.clone(),
                    size: record.size,
                    sha256: record.sha256.clone(),
                    sniffed_type: record.sniffed_type.clone(),
                    claimed_type: record.claimed_type.clone(),
                    hits: record.hits.iter().map(|h| h.rule.clone()).collect(),
                    because: held.because.clone(),
                };
                let _ = self.record(event).await;
                let hits = if record.hits.is_empty() {
                    "no rule matched".to_owned()
                } else {
                    let names: Vec<&str> = record.hits.iter().map(|h| h.rule.as_str()).collect();
                    format!("rules matched: {}", names.join(", "))
                };
                let page = format!(
                    "<!doctype html><meta charset=utf-8><title>Download held</title>\
                     <h1>Download held in quarantine</h1>\
                     <p><b>{}</b> ({} bytes, {}) is held for review as <code>{}</code>: {}; {}.</p>\
                     <p>An operator can release it into ~/Downloads.</p>",
                    html_escape(&record.name),
                    record.size,
                    html_escape(record.sniffed_type.as_deref().unwrap_or("unknown type")),
                    record.id,
                    html_escape(&held.because),
                    html_escape(&hits),
                );
                let mut response = full(StatusCode::FORBIDDEN, "text/html; charset=utf-8", page);
                if let Ok(id) = HeaderValue::from_str(&record.id) {
                    response
                        .headers_mut()
                        .insert(HeaderName::from_static("x-cubicle-download"), id);
                }
                (response, Some(record.id))
            }
            Err(err) => {
                let status = match err {
                    HoldError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                    HoldError::Disk(_) => StatusCode::INSUFFICIENT_STORAGE,
                    _ => StatusCode::BAD_GATEWAY,
                };
                let reason = err.to_string();
                let _ = self
                    .record(EgressEvent::DownloadRefused {
                        url: url.to_owned(),
                        name: quarantine::names::clean(&offer.name),
                        reason: reason.clone(),
                    })
                    .await;
                (
                    refusal(status, &format!("download refused: {reason}")),
                    None,
                )
            }
        }
    }
}

impl Upstream {
    /// The sender, re-connected to the same checked address if the server
    /// closed the last connection.
    async fn ready(
        &mut self,
        proxy: &WorkspaceProxy,
    ) -> Result<&mut SendRequest<ProxyBody>, String> {
        let usable = match self.sender.as_mut() {
            Some(sender) if !sender.is_closed() => sender.ready().await.is_ok(),
            _ => false,
        };
        if !usable {
            self.sender = None;
            let limits = &proxy.egress.limits;
            let stream =
                tokio::time::timeout(limits.connect_timeout, TcpStream::connect(self.address))
                    .await
                    .map_err(|_| format!("{}: no answer in time", self.address))?
                    .map_err(|e| format!("{}: {e}", self.address))?;
            let _ = stream.set_nodelay(true);
            let counted = Counted::new(stream, self.tally.clone());
            let sender = match &self.tls {
                Some((config, name)) => {
                    let connector = tokio_rustls::TlsConnector::from(config.clone());
                    let tls = tokio::time::timeout(
                        limits.tls_timeout,
                        connector.connect(name.clone(), counted),
                    )
                    .await
                    .map_err(|_| "no TLS handshake in time".to_owned())?
                    .map_err(|e| format!("upstream certificate refused: {e}"))?;
                    proxy.handshake(TokioIo::new(tls)).await
                }
                None => proxy.handshake(TokioIo::new(counted)).await,
            }
            .map_err(|e| e.to_string())?;
            self.sender = Some(sender);
        }
        self.sender
            .as_mut()
            .ok_or_else(|| "no upstream connection".to_owned())
    }
}

/// The bytes of a passed-through tunnel, both ways until both end, counted
/// into `tally`. A client on a Unix socket (the reverse channel's always
/// is) is relayed in the kernel ([`splice_sockets`]): a download passed
/// through costs the daemon no copy of its bytes.
async fn pass_through(client: Upgraded, mut upstream: TcpStream, tally: &Arc<Tally>) {
    let parts = match client.downcast::<TokioIo<Watched<UnixStream>>>() {
        Ok(parts) => parts,
        Err(client) => {
            let mut upstream = Counted::new(upstream, tally.clone());
            let _ = splice(&mut TokioIo::new(client), &mut upstream).await;
            return;
        }
    };
    // What the client sent after its CONNECT that hyper had already read.
    if !parts.read_buf.is_empty() {
        if upstream.write_all(&parts.read_buf).await.is_err() {
            return;
        }
        tally
            .written
            .fetch_add(parts.read_buf.len() as u64, Ordering::Relaxed);
    }
    let mut client = parts.io.into_inner().into_inner();
    let (up, down) = splice_sockets(&mut client, &mut upstream).await;
    tally.written.fetch_add(up.bytes, Ordering::Relaxed);
    tally.read.fetch_add(down.bytes, Ordering::Relaxed);
}

/// A request's method and path (with its query), as events name them.
fn method_and_path<B>(req: &Request<B>) -> (String, String) {
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    (req.method().to_string(), path.to_owned())
}
