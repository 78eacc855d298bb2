//! Web origins on the host's loopback for the egress tests: plain HTTP and
//! HTTPS with a test CA of their own (given to the daemon with
//! `--egress-extra-ca`), serving a page, files offered as downloads, and
//! bodies of any size for the benchmarks.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;

/// The EICAR anti-malware test file.
pub const EICAR: &[u8] = cubicle_runtime::quarantine::scan::EICAR;

/// When the last `/bytes` body of this process was sent in full (wall
/// clock, comparable with `date` inside a workspace on the same host).
static LAST_BYTE: std::sync::Mutex<Option<std::time::SystemTime>> = std::sync::Mutex::new(None);

fn note_last_byte() {
    if let Ok(mut last) = LAST_BYTE.lock() {
        *last = Some(std::time::SystemTime::now());
    }
}

/// When the origin last finished sending a `/bytes` body (for the
/// quarantine benchmark), if it did.
pub fn last_byte() -> Option<std::time::SystemTime> {
    LAST_BYTE.lock().ok().and_then(|last| *last)
}

/// The page's background colour, as a screenshot shows it.
pub const PAGE_BLUE: [u8; 3] = [30, 144, 255];

/// The page the browser tests load.
pub const PAGE: &str = "<!doctype html><title>Origin page</title>\
<body style=\"background:#1e90ff\">\
<h1 id=hello>Allowed origin</h1>\
<p><a id=eicar href=\"/eicar.com\" download>EICAR test file</a></p>\
<p><a id=report href=\"/report.txt\">Quarterly report</a></p>";

type Body = BoxBody<Bytes, std::io::Error>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

fn answer(req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or_default();
    let with = |body: Body, headers: &[(&str, &str)]| {
        let mut response = Response::new(body);
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                hyper::header::HeaderValue::from_str(value),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    };
    match path {
        "/page" => with(full(PAGE), &[("content-type", "text/html; charset=utf-8")]),
        "/eicar.com" => with(
            full(EICAR),
            &[
                ("content-type", "application/octet-stream"),
                ("content-disposition", "attachment; filename=\"eicar.com\""),
            ],
        ),
        "/report.txt" => with(
            full("quarterly numbers: all fine\n"),
            &[
                ("content-type", "text/plain"),
                (
                    "content-disposition",
                    "attachment; filename=\"../../.bashrc\u{202e}txt.sh\"",
                ),
            ],
        ),
        "/bytes" => {
            // `?n=BYTES`, streamed in 64 KiB frames; `&download=1` offers
            // it as a file.
            let mut n: u64 = 0;
            let mut download = false;
            for pair in query.split('&') {
                match pair.split_once('=') {
                    Some(("n", v)) => n = v.parse().unwrap_or(0),
                    Some(("download", "1")) => download = true,
                    _ => {}
                }
            }
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let frames = futures_util::stream::unfold(n, move |left| {
                let chunk = chunk.clone();
                async move {
                    if left == 0 {
                        note_last_byte();
                        return None;
                    }
                    let take = left.min(chunk.len() as u64);
                    if take == left {
                        note_last_byte();
                    }
                    Some((Ok(Frame::data(chunk.slice(..take as usize))), left - take))
                }
            });
            let length = n.to_string();
            let mut headers = vec![("content-length", length.as_str())];
            if download {
                headers.push(("content-type", "application/octet-stream"));
                headers.push(("content-disposition", "attachment; filename=\"blob.bin\""));
            } else {
                headers.push(("content-type", "text/plain"));
            }
            with(StreamBody::new(frames).boxed(), &headers)
        }
        _ => with(
            full("hello from origin\n"),
            &[("content-type", "text/plain")],
        ),
    }
}

/// A test CA and a server certificate for `names`.
pub struct TestPki {
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

impl TestPki {
    pub fn new(names: &[&str]) -> Self {
        let ca_key = KeyPair::generate().expect("key generation");
        let mut ca_params = CertificateParams::default();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Cubicle test origin CA");
        let ca = ca_params.self_signed(&ca_key).expect("self-signed CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("key generation");
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("valid names");
        let cert = params.signed_by(&key, &issuer).expect("signed leaf");
        let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    }
}

/// An origin on `127.0.0.1:<port>`, HTTPS when `tls` is given; it serves
/// until the test process ends. `/ws` is a WebSocket answering each text
/// message with `echo: ` and the message.
pub async fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // As web servers do: with Nagle on, the response behind the
            // TLS session tickets waits for the peer's delayed ACK (~40 ms),
            // which a proxy in the path, with nothing to answer, always makes.
            let _ = stream.set_nodelay(true);
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|mut req: Request<Incoming>| async move {
                    if req.uri().path() == "/ws" {
                        return Ok::<_, std::convert::Infallible>(websocket_echo(&mut req));
                    }
                    Ok(answer(&req))
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder.timer(hyper_util::rt::TokioTimer::new());
                builder.header_read_timeout(Duration::from_secs(30));
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

/// Switches `/ws` to a WebSocket that echoes text messages; 400 to a
/// request that does not ask to switch.
fn websocket_echo(req: &mut Request<Incoming>) -> Response<Body> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::Role;
    let Some(key) = req.headers().get("sec-websocket-key") else {
        let mut refused = Response::new(full("not a websocket request"));
        *refused.status_mut() = hyper::StatusCode::BAD_REQUEST;
        return refused;
    };
    let accept = derive_accept_key(key.as_bytes());
    let upgraded = hyper::upgrade::on(req);
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
    let mut response = Response::new(full(""));
    *response.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-accept", accept.as_str()),
    ] {
        if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
