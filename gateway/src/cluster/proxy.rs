//! An edge's hop to a node: the request as it came (REST, SSE, a WebSocket
//! upgrade), with the caller's secret taken off and the edge's credential
//! put on, over HTTP/1.1 connections to the node that hyper's pooled client
//! keeps open; the answer streamed back as it comes. An upgrade is joined
//! byte for byte: the edge reads nothing of a WebSocket's frames, so every
//! door that is a WebSocket (live view, CDP, exec streams, MCP) works
//! through it as it does direct.
//!
//! The header rules are written here, not taken from a reverse-proxy
//! crate: what must be done is small and must be exact (which credentials
//! go, what is put on).

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, COOKIE, HOST};
use axum::http::{HeaderValue, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::credential;

/// How long connecting to a node may take before it counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a request did not reach its node.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot reach node {node} at {address}: {reason}")]
    Connect {
        node: String,
        address: String,
        reason: String,
    },
}

/// The query without `access_token` (the caller's secret stays at the edge).
pub fn without_secret(uri: &Uri) -> String {
    let path = uri.path();
    let Some(query) = uri.query() else {
        return path.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| pair.split('=').next() != Some("access_token"))
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// The edge's client to its nodes: connections kept open between requests
/// (an idle one for 30 s), no delay on small writes.
pub type NodeClient = Client<HttpConnector, Body>;

/// A new [`NodeClient`].
pub fn client() -> NodeClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// Sends `request` to the node `node` at `address` as `path_and_query`
/// with `credential`; the node's answer, upgrades joined.
pub async fn forward(
    client: &NodeClient,
    mut request: Request<Body>,
    node: &str,
    address: &str,
    path_and_query: &str,
    credential: &str,
) -> Result<Response<Body>, ProxyError> {
    let incoming = hyper::upgrade::on(&mut request);
    let (mut parts, body) = request.into_parts();
    parts.uri = format!("http://{address}{path_and_query}")
        .parse()
        .map_err(|_| ProxyError::Connect {
            node: node.to_owned(),
            address: address.to_owned(),
            reason: "its address is not a host:port".into(),
        })?;
    let headers = &mut parts.headers;
    headers.remove(AUTHORIZATION);
    headers.remove(COOKIE);
    headers.remove(credential::HEADER);
    headers.insert(
        credential::HEADER,
        HeaderValue::from_str(credential).expect("the credential is base64url and a dot"),
    );
    if let Ok(host) = HeaderValue::from_str(address) {
        headers.insert(HOST, host);
    }
    let answer = client
        .request(Request::from_parts(parts, body))
        .await
        .map_err(|err| ProxyError::Connect {
            node: node.to_owned(),
            address: address.to_owned(),
            reason: if err.is_connect() {
                format!(
                    "{err}: {}",
                    std::error::Error::source(&err)
                        .map(ToString::to_string)
                        .unwrap_or_default()
                )
            } else {
                err.to_string()
            },
        })?;
    if answer.status() == StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        let mut answer = Response::from_parts(parts, body);
        let outgoing = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            match tokio::try_join!(incoming, outgoing) {
                Ok((client, node)) => {
                    let mut client = TokioIo::new(client);
                    let mut node = TokioIo::new(node);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut node).await;
                }
                Err(err) => tracing::debug!(%err, "an upgrade through the edge failed"),
            }
        });
        let (parts, _) = answer.into_parts();
        return Ok(Response::from_parts(parts, Body::empty()));
    }
    Ok(answer.map(Body::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_secret_stays_at_the_edge() {
        let cases = [
            (
                "/v1/workspaces/ws-1/vnc?access_token=cubicle_x",
                "/v1/workspaces/ws-1/vnc",
            ),
            ("/a?x=1&access_token=s&y=2", "/a?x=1&y=2"),
            ("/a?access_token_not=1", "/a?access_token_not=1"),
            ("/a", "/a"),
        ];
        for (uri, want) in cases {
            assert_eq!(without_secret(&uri.parse().unwrap()), want, "{uri}");
        }
    }
}
