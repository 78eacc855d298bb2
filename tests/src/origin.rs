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

/// Marks the test executables: found on a workspace's disk only if one
/// got through.
pub const EXE_MARKER: &str = "CUBICLE-TEST-EXECUTABLE-MARKER";

/// `/exe/<variant>`: an executable served as each header trick of the
/// outside attack run (issue 17, class 2); `tgz` is a gzip'd tar holding
/// one, served as an image.
pub const EXE_VARIANTS: &[&str] = &[
    "text-plain",
    "image-png",
    "text-html",
    "no-type",
    "two-types",
    "unknown-disposition",
    "gzip-encoded",
    "404",
    "500",
    "tgz",
];

/// A small ELF file with [`EXE_MARKER`] in it.
pub fn executable() -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\0".to_vec();
    elf.resize(64, 0);
    elf.extend_from_slice(EXE_MARKER.as_bytes());
    elf.resize(4096, 0);
    elf
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

fn executable_variant(variant: &str) -> Option<Response<Body>> {
    let mut response = Response::new(full(executable()));
    let headers = response.headers_mut();
    let value = hyper::header::HeaderValue::from_static;
    match variant {
        "text-plain" => {
            headers.insert("content-type", value("text/plain"));
        }
        "image-png" => {
            headers.insert("content-type", value("image/png"));
        }
        "text-html" => {
            headers.insert("content-type", value("text/html; charset=utf-8"));
        }
        "no-type" => {}
        "two-types" => {
            headers.append("content-type", value("text/html"));
            headers.append("content-type", value("text/plain"));
        }
        "unknown-disposition" => {
            headers.insert("content-type", value("text/plain"));
            headers.insert("content-disposition", value("x-whatever; filename=tool"));
        }
        "gzip-encoded" => {
            headers.insert("content-type", value("text/plain"));
            headers.insert("content-encoding", value("gzip"));
            *response.body_mut() = full(gzip(&executable()));
        }
        "404" | "500" => {
            headers.insert("content-type", value("text/html"));
            *response.status_mut() = if variant == "404" {
                hyper::StatusCode::NOT_FOUND
            } else {
                hyper::StatusCode::INTERNAL_SERVER_ERROR
            };
        }
        "tgz" => {
            let mut builder = tar::Builder::new(Vec::new());
            let mut header = tar::Header::new_gnu();
            header.set_size(4096);
            header.set_mode(0o644);
            header.set_cksum();
            let _ = builder.append_data(&mut header, "pkg/bin/tool", &executable()[..]);
            headers.insert("content-type", value("image/png"));
            *response.body_mut() = full(gzip(&builder.into_inner().unwrap_or_default()));
        }
        _ => return None,
    }
    Some(response)
}

/// Every request path the origins of this process were asked for, with
/// the `Host` headers they got (joined by ` | `).
static SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The bodies of the forms posted to `/login`, in order.
static POSTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The bodies (`application/x-www-form-urlencoded`) of the forms posted to
/// `/login` so far.
pub fn posted() -> Vec<String> {
    POSTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// A login form: a user name (`autocomplete=username`), a password, a
/// one-time code (`autocomplete=one-time-code`) and a plain note.
const LOGIN: &str = "<!doctype html><title>Log in</title>\
<form method=post action=/login><input id=user name=user autocomplete=username>\
<input id=pw name=pw type=password><input id=otp name=otp autocomplete=one-time-code>\
<input id=note name=note><button id=go type=submit>Log in</button></form>";

/// A page with a file input that shows the chosen file's name and text.
const UPLOAD_FORM: &str = "<!doctype html><title>Upload</title>\
<input id=f type=file><input id=t><pre id=got></pre><script>\
document.getElementById('f').onchange = async (e) => { const file = e.target.files[0];\
document.getElementById('got').textContent = file.name + ':' + await file.text(); };</script>";

/// The `Host` headers the origins got for `path`, one entry a request.
pub fn seen(path: &str) -> Vec<String> {
    SEEN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|(p, _)| p == path)
        .map(|(_, host)| host.clone())
        .collect()
}

fn answer(req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let host = req
        .headers()
        .get_all("host")
        .iter()
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(" | ");
    SEEN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((path.to_owned(), host.clone()));
    if let Some(variant) = path.strip_prefix("/exe/")
        && let Some(response) = executable_variant(variant)
    {
        return response;
    }
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
        "/login" => with(full(LOGIN), &[("content-type", "text/html; charset=utf-8")]),
        "/upload-form" => with(
            full(UPLOAD_FORM),
            &[("content-type", "text/html; charset=utf-8")],
        ),
        "/echo-host" => with(full(host), &[("content-type", "text/plain")]),
        "/headers" => {
            // Every request header as the origin got it, one per line.
            let mut seen = String::new();
            for (name, value) in req.headers() {
                seen.push_str(&format!(
                    "{name}: {}\n",
                    String::from_utf8_lossy(value.as_bytes())
                ));
            }
            with(full(seen), &[("content-type", "text/plain")])
        }
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
/// message with `echo: ` and the message; `/echo-body` answers with the
/// request body and how it was framed.
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
                    if req.uri().path() == "/echo-body" {
                        return Ok(echo_body(req).await);
                    }
                    if req.uri().path() == "/login" && req.method() == hyper::Method::POST {
                        let (_, body) = req.into_parts();
                        let bytes = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        POSTED
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(String::from_utf8_lossy(&bytes).into_owned());
                        let mut signed =
                            Response::new(full("<!doctype html><p id=result>signed in</p>"));
                        signed.headers_mut().insert(
                            "content-type",
                            hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
                        );
                        return Ok(signed);
                    }
                    Ok(answer(&req))
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder.timer(hyper_util::rt::TokioTimer::new());
                builder.header_read_timeout(crate::guard(Duration::from_secs(30)));
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

/// `/echo-body`: the request body's framing as it came (`content-length`,
/// `transfer-encoding`, `-` for none), a blank line, then the body.
async fn echo_body(req: Request<Incoming>) -> Response<Body> {
    let header = |name: &str| {
        req.headers().get(name).map_or_else(
            || "-".to_owned(),
            |v| String::from_utf8_lossy(v.as_bytes()).into_owned(),
        )
    };
    let framing = format!(
        "content-length: {}\ntransfer-encoding: {}\n\n",
        header("content-length"),
        header("transfer-encoding")
    );
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut echoed = framing.into_bytes();
    echoed.extend_from_slice(&body);
    let mut response = Response::new(full(echoed));
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    response
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
