//! The proxy end to end inside one process: real origins on 127.0.0.1
//! (plain HTTP, and HTTPS with their own test CA given as an extra CA),
//! real hyper and rustls clients, a scripted resolver, the real quarantine
//! and YARA rules. What a client sees is asserted, and the events.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use super::address::Walls;
use super::events::{EgressEvent, MemoryEvents, Mode};
use super::gate::{EgressGate, NoRules};
use super::policy::{EgressPolicy, EgressPolicyDoc};
use super::proxy::{Egress, PolicyCell, ProxyLimits, WorkspaceProxy};
use super::resolve::ScriptedResolver;
use super::tls::{CertificateAuthority, Interception, client_config};
use crate::quarantine::{self, Quarantine, Scanner};
use crate::state::Store;

/// A test CA and a server certificate for the origin names.
struct TestPki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki(names: &[&str]) -> TestPki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "origin test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    TestPki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn text(body: &'static [u8]) -> Body {
    Full::new(Bytes::from_static(body))
        .map_err(|never| match never {})
        .boxed()
}

/// `/ws`: a WebSocket that answers each text message with `echo: ` and it.
fn websocket_echo(mut req: Request<Incoming>) -> Response<Body> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::Role;
    let Some(key) = req.headers().get("sec-websocket-key") else {
        let mut refused = Response::new(text(b"not a websocket request"));
        *refused.status_mut() = StatusCode::BAD_REQUEST;
        return refused;
    };
    let accept = derive_accept_key(key.as_bytes());
    let upgraded = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgraded.await else { return };
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        while let Some(Ok(Message::Text(said))) = ws.next().await {
            if ws
                .send(Message::text(format!("echo: {said}")))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let mut response = Response::new(text(b""));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert("connection", "upgrade".parse().unwrap());
    headers.insert("upgrade", "websocket".parse().unwrap());
    headers.insert("sec-websocket-accept", accept.parse().unwrap());
    response
}

async fn origin_answer(req: Request<Incoming>) -> Result<Response<Body>, std::convert::Infallible> {
    if req.uri().path() == "/ws" {
        return Ok(websocket_echo(req));
    }
    let mut response = Response::new(text(b"hello from origin"));
    match req.uri().path() {
        "/eicar.com" => {
            *response.body_mut() = text(quarantine::scan::EICAR);
            response.headers_mut().insert(
                "content-disposition",
                "attachment; filename=\"../eicar.com\"".parse().unwrap(),
            );
        }
        "/big.bin" => {
            *response.body_mut() = Full::new(Bytes::from(vec![1u8; 3000]))
                .map_err(|never| match never {})
                .boxed();
            response
                .headers_mut()
                .insert("content-type", "application/octet-stream".parse().unwrap());
        }
        "/slow.bin" => {
            let frames = futures_util::stream::unfold(0u32, |n| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some((Ok(Frame::data(Bytes::from(vec![0u8; 100]))), n + 1))
            });
            *response.body_mut() = StreamBody::new(frames).boxed();
            response
                .headers_mut()
                .insert("content-type", "application/zip".parse().unwrap());
        }
        _ => {}
    }
    Ok(response)
}

/// An origin on 127.0.0.1:port, HTTPS when `tls` is given.
pub(super) async fn origin(tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(origin_answer);
                let builder = hyper::server::conn::http1::Builder::new();
                match tls {
                    Some(config) => {
                        let Ok(stream) =
                            tokio_rustls::TlsAcceptor::from(config).accept(stream).await
                        else {
                            return;
                        };
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades()
                            .await;
                    }
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades()
                            .await;
                    }
                }
            });
        }
    });
    port
}

pub(super) struct Harness {
    pub(super) proxy: Arc<WorkspaceProxy>,
    pub(super) events: Arc<MemoryEvents>,
    pub(super) dns: Arc<ScriptedResolver>,
    quarantine: Quarantine,
    /// The workspace's view: it trusts the installation CA.
    workspace_tls: Arc<rustls::ClientConfig>,
    dir: tempfile::TempDir,
}

async fn harness(allow: &[&str], passthrough: &[&str], extra_ca: &str, cap: u64) -> Harness {
    // The test origins are on the host's loopback: the host's services are
    // open here, as `cubicle serve --egress-allow-host-services` opens them.
    let walls = Arc::new(Walls::new(true));
    harness_with(allow, passthrough, extra_ca, cap, Arc::new(NoRules), walls).await
}

/// A proxy over `gate` (the workspace policy's egress rules) and `walls`.
pub(super) async fn harness_with(
    allow: &[&str],
    passthrough: &[&str],
    extra_ca: &str,
    cap: u64,
    gate: Arc<dyn EgressGate>,
    walls: Arc<Walls>,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.pem");
    std::fs::write(&extra, extra_ca).unwrap();
    let ca = CertificateAuthority::load_or_create(&dir.path().join("ca")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice_compat(ca.cert_pem()))
        .unwrap();
    let workspace_tls = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let store = Store::open(&dir.path().join("s.db")).await.unwrap();
    let quarantine = Quarantine::open(dir.path(), store, Scanner::new(None).unwrap(), cap).unwrap();
    let events = Arc::new(MemoryEvents::default());
    let dns = Arc::new(ScriptedResolver::new());
    let egress = Arc::new(Egress {
        resolver: dns.clone(),
        interception: Some(Arc::new(Interception {
            ca,
            client: client_config(if extra_ca.is_empty() {
                &[]
            } else {
                std::slice::from_ref(&extra)
            })
            .unwrap(),
        })),
        quarantine: Some(quarantine.clone()),
        events: events.clone(),
        gate,
        walls,
        limits: ProxyLimits {
            header_timeout: Duration::from_millis(500),
            ..ProxyLimits::default()
        },
    });
    let policy = EgressPolicy::from_doc(&EgressPolicyDoc {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        passthrough: passthrough.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .unwrap();
    let proxy = WorkspaceProxy::new(egress, "ws-test", PolicyCell::new(policy));
    Harness {
        proxy,
        events,
        dns,
        quarantine,
        workspace_tls,
        dir,
    }
}

trait PemCompat {
    fn from_pem_slice_compat(pem: &str) -> CertificateDer<'static>;
}

impl PemCompat for CertificateDer<'static> {
    fn from_pem_slice_compat(pem: &str) -> CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }
}

impl Harness {
    /// A client connection into the proxy (as the guest relay makes one).
    pub(super) fn client(&self) -> UnixStream {
        let (ours, theirs) = UnixStream::pair().unwrap();
        self.proxy.serve(theirs);
        ours
    }

    /// `GET url` as an absolute-URI request.
    pub(super) async fn get(&self, url: &str) -> (StatusCode, hyper::HeaderMap, Bytes) {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(self.client()))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::get(url).body(Full::new(Bytes::new())).unwrap();
        let response = sender.send_request(req).await.unwrap();
        let (parts, body) = response.into_parts();
        (
            parts.status,
            parts.headers,
            body.collect().await.unwrap().to_bytes(),
        )
    }

    /// `CONNECT authority`; the status line and headers, and the stream.
    pub(super) async fn connect(&self, authority: &str) -> (String, UnixStream) {
        let mut stream = self.client();
        stream
            .write_all(
                format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            if stream.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        (String::from_utf8_lossy(&head).into_owned(), stream)
    }

    /// GET `path` over TLS to `name` through a CONNECT tunnel, trusting `tls`.
    async fn https_get(
        &self,
        authority: &str,
        name: &str,
        path: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<(StatusCode, hyper::HeaderMap, Bytes), String> {
        let (head, stream) = self.connect(authority).await;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(head);
        }
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        let tls = tokio_rustls::TlsConnector::from(tls)
            .connect(server_name, stream)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = Request::get(path)
            .header("host", authority)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        Ok((
            parts.status,
            parts.headers,
            body.collect().await.unwrap().to_bytes(),
        ))
    }

    pub(super) fn decisions(&self) -> Vec<EgressEvent> {
        self.events
            .all()
            .into_iter()
            .filter(|e| matches!(e, EgressEvent::Decision { .. }))
            .collect()
    }

    async fn wait_for(&self, what: impl Fn(&EgressEvent) -> bool) -> EgressEvent {
        for _ in 0..100 {
            if let Some(found) = self.events.all().into_iter().find(|e| what(e)) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no such event in {:?}", self.events.all());
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn plain_http_allowed_origin_works_and_another_port_is_refused_with_the_reason() {
    let port = origin(None).await;
    let other = origin(None).await;
    let h = harness(&[&format!("127.0.0.1/32:{port}")], &[], "", 1 << 20).await;
    let (status, _, body) = h.get(&format!("http://127.0.0.1:{port}/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body[..], b"hello from origin");
    let (status, headers, body) = h.get(&format!("http://127.0.0.1:{other}/")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let reason = headers["x-cubicle-egress-reason"].to_str().unwrap();
    assert!(reason.contains("loopback"), "{reason}");
    assert!(String::from_utf8_lossy(&body).contains("refused"));
    let decisions = h.decisions();
    assert!(
        matches!(&decisions[0], EgressEvent::Decision { allowed: true, address: Some(a), mode: Mode::Http, .. } if a.port() == port)
    );
    assert!(matches!(
        &decisions[1],
        EgressEvent::Decision {
            allowed: false,
            address: None,
            ..
        }
    ));
    let request = h
        .wait_for(|e| matches!(e, EgressEvent::Request { .. }))
        .await;
    assert!(matches!(request, EgressEvent::Request { status: 200, ref path, .. } if path == "/"));
    let close = h.wait_for(|e| matches!(e, EgressEvent::Close { .. })).await;
    assert!(
        matches!(close, EgressEvent::Close { bytes_down, bytes_up, .. } if bytes_down > 17 && bytes_up > 10)
    );
}

#[tokio::test]
async fn https_is_intercepted_verified_upstream_and_seen() {
    let origin_pki = pki(&["origin.test", "127.0.0.1"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    let authority = format!("origin.test:{port}");
    let (status, _, body) = h
        .https_get(
            &authority,
            "origin.test",
            "/page?q=1",
            h.workspace_tls.clone(),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body[..], b"hello from origin");
    let seen = h
        .wait_for(|e| matches!(e, EgressEvent::Request { .. }))
        .await;
    assert!(
        matches!(&seen, EgressEvent::Request { mode: Mode::Intercepted, path, method, status: 200, .. } if path == "/page?q=1" && method == "GET"),
        "{seen:?}"
    );
    // The workspace trusts the installation CA only: the origin's own
    // certificate would not do, so what it saw was the proxy's leaf.
    let direct = h
        .https_get(
            &format!("127.0.0.1:{port}"),
            "127.0.0.1",
            "/",
            h.workspace_tls.clone(),
        )
        .await;
    assert!(direct.is_ok(), "an IP address gets a leaf too: {direct:?}");
}

/// Sends `hello` on a WebSocket and returns the answer.
async fn websocket_round_trip<S>(url: &str, stream: S) -> Result<String, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "sec-websocket-extensions",
        "permessage-deflate; client_max_window_bits"
            .parse()
            .unwrap(),
    );
    request
        .headers_mut()
        .insert("origin", "https://origin.test".parse().unwrap());
    request
        .headers_mut()
        .insert("cache-control", "no-cache".parse().unwrap());
    let (mut ws, answer) = tokio_tungstenite::client_async(request, stream)
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(answer.status(), StatusCode::SWITCHING_PROTOCOLS);
    ws.send(Message::text("hello"))
        .await
        .map_err(|e| e.to_string())?;
    let said = match tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
        Ok(Some(Ok(Message::Text(said)))) => Ok(said.to_string()),
        other => Err(format!("no echo: {other:?}")),
    };
    // Held open a while: the tunnel's close comes after this, not at the
    // switch.
    tokio::time::sleep(Duration::from_millis(300)).await;
    said
}

#[tokio::test]
async fn websockets_cross_the_proxy_intercepted_and_plain() {
    let origin_pki = pki(&["origin.test"]);
    let tls_port = origin(Some(origin_pki.server.clone())).await;
    let plain_port = origin(None).await;
    let h = harness(
        &[
            &format!("origin.test:{tls_port},{plain_port}"),
            &format!("127.0.0.1/32:{tls_port},{plain_port}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);

    // wss:// inside an intercepted tunnel: the proxy's leaf, then the switch.
    let authority = format!("origin.test:{tls_port}");
    let (head, stream) = h.connect(&authority).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let tls = tokio_rustls::TlsConnector::from(h.workspace_tls.clone())
        .connect(ServerName::try_from("origin.test").unwrap(), stream)
        .await
        .unwrap();
    let said = websocket_round_trip(&format!("wss://{authority}/ws"), tls).await;
    assert_eq!(said.as_deref(), Ok("echo: hello"));
    let seen = h
        .wait_for(|e| matches!(e, EgressEvent::Request { path, .. } if path == "/ws"))
        .await;
    assert!(
        matches!(&seen, EgressEvent::Request { mode: Mode::Intercepted, status: 101, method, .. } if method == "GET"),
        "{seen:?}"
    );
    let closed = h
        .wait_for(|e| matches!(e, EgressEvent::Close { port, .. } if *port == tls_port))
        .await;
    assert!(
        matches!(&closed, EgressEvent::Close { duration_ms, bytes_up, .. } if *duration_ms >= 300 && *bytes_up > 0),
        "the tunnel's close waits for the WebSocket over it: {closed:?}"
    );

    // ws:// through CONNECT, as Chromium sends it to a proxy: plain HTTP
    // inside the tunnel, seen the same way.
    let authority = format!("origin.test:{plain_port}");
    let (head, stream) = h.connect(&authority).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let said = websocket_round_trip(&format!("ws://{authority}/ws"), stream).await;
    assert_eq!(said.as_deref(), Ok("echo: hello"));
    let seen = h
        .wait_for(
            |e| matches!(e, EgressEvent::Request { port, status: 101, .. } if *port == plain_port),
        )
        .await;
    assert!(
        matches!(&seen, EgressEvent::Request { mode: Mode::Intercepted, path, .. } if path == "/ws"),
        "{seen:?}"
    );

    // The control: the same origin refuses a request that does not ask to
    // switch, so the echo above came through the relayed upgrade.
    let (status, _, _) = h.get(&format!("http://origin.test:{plain_port}/ws")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_upstream_with_a_certificate_nobody_trusts_is_refused_and_said_why() {
    let origin_pki = pki(&["origin.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    // No extra CA: the origin's test CA is unknown to the proxy.
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        "",
        1 << 20,
    )
    .await;
    let extra_ca_missing = pki(&["x"]).ca_pem;
    drop(extra_ca_missing);
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    let (status, headers, _) = h
        .https_get(
            &format!("origin.test:{port}"),
            "origin.test",
            "/",
            h.workspace_tls.clone(),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let reason = headers["x-cubicle-egress-reason"].to_str().unwrap();
    assert!(reason.contains("certificate"), "{reason}");
    let refused = h
        .wait_for(|e| matches!(e, EgressEvent::UpstreamRefused { .. }))
        .await;
    assert!(
        matches!(refused, EgressEvent::UpstreamRefused { reason, .. } if reason.contains("certificate"))
    );
}

#[tokio::test]
async fn passthrough_hosts_are_tunnelled_untouched() {
    let origin_pki = pki(&["origin.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &["origin.test"],
        "",
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    // The client must trust the origin's own CA: nothing was intercepted.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice_compat(&origin_pki.ca_pem))
        .unwrap();
    let origin_trust = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let (status, _, _) = h
        .https_get(
            &format!("origin.test:{port}"),
            "origin.test",
            "/",
            origin_trust,
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(matches!(
        &h.decisions()[0],
        EgressEvent::Decision {
            mode: Mode::Tunnel,
            allowed: true,
            ..
        }
    ));
    let close = h.wait_for(|e| matches!(e, EgressEvent::Close { .. })).await;
    assert!(matches!(
        close,
        EgressEvent::Close {
            mode: Mode::Tunnel,
            ..
        }
    ));
    assert!(
        !h.events
            .all()
            .iter()
            .any(|e| matches!(e, EgressEvent::Request { .. }))
    );
}

#[tokio::test]
async fn connect_to_a_denied_host_gets_403_and_no_lookup() {
    let h = harness(&["allowed.test"], &[], "", 1 << 20).await;
    h.dns.script("denied.test", vec![vec![ip("127.0.0.1")]]);
    let (head, _) = h.connect("denied.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("no rule allows denied.test:443"), "{head}");
    assert_eq!(h.dns.lookups("denied.test"), 0);
    assert!(matches!(
        &h.decisions()[0],
        EgressEvent::Decision { allowed: false, .. }
    ));
}

#[tokio::test]
async fn dns_rebinding_gets_the_checked_address_only() {
    let port = origin(None).await;
    let h = harness(
        &[
            &format!("rebind.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        "",
        1 << 20,
    )
    .await;
    // First answer allowed (loopback named explicitly); any later answer
    // points elsewhere. The proxy asks once and connects to what it checked.
    h.dns.script(
        "rebind.test",
        vec![vec![ip("127.0.0.1")], vec![ip("127.0.0.2")]],
    );
    let (status, _, body) = h.get(&format!("http://rebind.test:{port}/")).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    assert_eq!(h.dns.lookups("rebind.test"), 1);
    let decision = &h.decisions()[0];
    assert!(
        matches!(decision, EgressEvent::Decision { address: Some(a), .. } if *a == SocketAddr::new(ip("127.0.0.1"), port))
    );
    // The reverse order: refused at once, whatever a second lookup would say.
    h.dns.script(
        "rebind.test",
        vec![vec![ip("127.0.0.2")], vec![ip("127.0.0.1")]],
    );
    let (status, headers, _) = h.get(&format!("http://rebind.test:{port}/")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        headers["x-cubicle-egress-reason"]
            .to_str()
            .unwrap()
            .contains("127.0.0.2 is loopback")
    );
}

#[tokio::test]
async fn a_download_goes_to_quarantine_not_the_client() {
    let origin_pki = pki(&["origin.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1000,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    let authority = format!("origin.test:{port}");
    let (status, headers, body) = h
        .https_get(
            &authority,
            "origin.test",
            "/eicar.com",
            h.workspace_tls.clone(),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN);
    let page = String::from_utf8_lossy(&body);
    assert!(page.contains("held in quarantine"), "{page}");
    assert!(
        !page.contains("EICAR-STANDARD"),
        "the file itself must not pass"
    );
    let id = headers["x-cubicle-download"].to_str().unwrap().to_owned();
    let record = quarantine::records::get(h.quarantine.store(), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.name, "eicar.com");
    assert_eq!(record.url, format!("https://origin.test:{port}/eicar.com"));
    assert_eq!(record.hits[0].rule, "eicar_test_file");
    let held = h
        .wait_for(|e| matches!(e, EgressEvent::DownloadHeld { .. }))
        .await;
    assert!(matches!(held, EgressEvent::DownloadHeld { hits, .. } if hits == ["eicar_test_file"]));
    // Over the cap: refused, nothing kept.
    let (status, _, _) = h
        .https_get(
            &authority,
            "origin.test",
            "/big.bin",
            h.workspace_tls.clone(),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    h.wait_for(
        |e| matches!(e, EgressEvent::DownloadRefused { reason, .. } if reason.contains("cap")),
    )
    .await;
    let stored: Vec<_> = std::fs::read_dir(h.dir.path().join("quarantine"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .collect();
    assert_eq!(stored.len(), 1, "only the EICAR file is kept");
}

#[tokio::test]
async fn a_download_in_flight_is_cleaned_up_when_the_workspace_goes() {
    let port = origin(None).await;
    let h = harness(&[&format!("127.0.0.1/32:{port}")], &[], "", 1 << 30).await;
    let proxy = h.proxy.clone();
    let url = format!("http://127.0.0.1:{port}/slow.bin");
    let download = tokio::spawn(async move {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new({
            let (ours, theirs) = UnixStream::pair().unwrap();
            proxy.serve(theirs);
            ours
        }))
        .await
        .unwrap();
        tokio::spawn(conn);
        sender
            .send_request(Request::get(url).body(Full::new(Bytes::new())).unwrap())
            .await
    });
    let tmp = h.dir.path().join("quarantine/tmp");
    for _ in 0..100 {
        if std::fs::read_dir(&tmp).unwrap().count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        1,
        "a partial file while it runs"
    );
    tokio::time::timeout(Duration::from_secs(5), h.proxy.shutdown())
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "nothing partial kept"
    );
    assert!(
        download.await.unwrap().is_err(),
        "the client's connection ended"
    );
}

#[tokio::test]
async fn malformed_huge_and_slow_clients_are_closed_and_others_still_served() {
    let port = origin(None).await;
    let h = harness(&[&format!("127.0.0.1/32:{port}")], &[], "", 1 << 20).await;
    let read_all = |mut s: UnixStream| async move {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    };
    let mut garbage = h.client();
    garbage
        .write_all(b"\x16\x03\x01 not http at all\r\n\r\n")
        .await
        .unwrap();
    let answer = read_all(garbage).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    let mut origin_form = h.client();
    origin_form
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_all(origin_form).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("forward proxy"), "{answer}");
    let mut huge = h.client();
    let big = format!(
        "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let _ = huge.write_all(big.as_bytes()).await;
    let answer = read_all(huge).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer:.80}"
    );
    let mut slow = h.client();
    slow.write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let _ = read_all(slow).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a slow client is cut off"
    );
    let (status, _, _) = h.get(&format!("http://127.0.0.1:{port}/")).await;
    assert_eq!(status, StatusCode::OK, "the proxy keeps serving others");
}
