//! Chromium's discovery JSON as the agent must see it: every
//! `webSocketDebuggerUrl` points at the gateway instead of the workspace's
//! own loopback, and the DevTools frontend links (served by Chromium, not
//! proxied) are dropped.

use axum::http::header::HOST;
use axum::http::{HeaderMap, Uri};
use serde_json::Value;

use super::CdpError;

/// The longest `Host` accepted.
const MAX_HOST: usize = 255;
/// The longest target id accepted (Chromium's are 32 hex digits).
const MAX_TARGET: usize = 128;

/// Where the client reached the gateway: the origin of rewritten URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicOrigin {
    scheme: &'static str,
    host: String,
}

impl PublicOrigin {
    /// The request's `Host` (or its URI's authority), `wss` when it came
    /// over TLS as a proxy in front says with `X-Forwarded-Proto: https`.
    pub fn of_request(headers: &HeaderMap, uri: &Uri) -> Result<Self, CdpError> {
        let host = headers
            .get(HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))
            .ok_or_else(|| CdpError::BadHost("the request has no Host header".into()))?;
        if !valid_host(&host) {
            return Err(CdpError::BadHost(format!("{host:.80?}")));
        }
        let tls = uri.scheme_str() == Some("https")
            || headers
                .get("x-forwarded-proto")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(',').next())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
        let scheme = if tls { "wss" } else { "ws" };
        Ok(Self { scheme, host })
    }

    /// The browser endpoint of `workspace` through the gateway.
    pub fn browser_url(&self, workspace: &str) -> String {
        format!(
            "{}://{}/v1/workspaces/{workspace}/cdp",
            self.scheme, self.host
        )
    }

    /// The endpoint of one page target of `workspace` through the gateway.
    pub fn page_url(&self, workspace: &str, target: &str) -> String {
        format!("{}/page/{target}", self.browser_url(workspace))
    }
}

fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= MAX_HOST
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b))
}

/// Whether `target` may be a Chromium target id (also what keeps it from
/// changing the path it is put into).
pub fn valid_target(target: &str) -> bool {
    !target.is_empty()
        && target.len() <= MAX_TARGET
        && target
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The path of the browser endpoint in Chromium's `/json/version` (e.g.
/// `/devtools/browser/<uuid>`).
pub fn browser_path(version: &Value) -> Result<String, CdpError> {
    let bad = |what: &str| CdpError::Discovery {
        path: "/json/version".into(),
        reason: what.to_owned(),
    };
    let url = version
        .get("webSocketDebuggerUrl")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no webSocketDebuggerUrl"))?;
    let path = url
        .strip_prefix("ws://")
        .and_then(|rest| rest.find('/').map(|slash| &rest[slash..]))
        .ok_or_else(|| bad("webSocketDebuggerUrl is not a ws:// URL"))?;
    let id = path
        .strip_prefix("/devtools/browser/")
        .filter(|id| valid_target(id))
        .ok_or_else(|| bad("webSocketDebuggerUrl is not /devtools/browser/<id>"))?;
    Ok(format!("/devtools/browser/{id}"))
}

/// `/json/version` with the browser endpoint on the gateway.
pub fn version(mut version: Value, origin: &PublicOrigin, workspace: &str) -> Value {
    if let Value::Object(fields) = &mut version {
        drop_frontend_links(fields);
        if fields.contains_key("webSocketDebuggerUrl") {
            fields.insert(
                "webSocketDebuggerUrl".into(),
                Value::String(origin.browser_url(workspace)),
            );
        }
    }
    version
}

/// `/json/list` with each target's endpoint on the gateway. A target whose
/// endpoint is not `/devtools/page/<its id>` loses the field rather than
/// showing an address inside the workspace.
pub fn list(mut targets: Value, origin: &PublicOrigin, workspace: &str) -> Value {
    let Value::Array(items) = &mut targets else {
        return Value::Array(Vec::new());
    };
    for item in items.iter_mut() {
        let Value::Object(fields) = item else {
            continue;
        };
        drop_frontend_links(fields);
        let id = fields.get("id").and_then(Value::as_str).map(str::to_owned);
        let Some(url) = fields.remove("webSocketDebuggerUrl") else {
            continue;
        };
        let expected = id.as_deref().filter(|id| valid_target(id)).filter(|id| {
            url.as_str()
                .is_some_and(|url| url.ends_with(&format!("/devtools/page/{id}")))
        });
        if let Some(id) = expected {
            let rewritten = origin.page_url(workspace, id);
            fields.insert("webSocketDebuggerUrl".into(), Value::String(rewritten));
        }
    }
    targets
}

fn drop_frontend_links(fields: &mut serde_json::Map<String, Value>) {
    fields.retain(|key, _| !key.starts_with("devtoolsFrontendUrl"));
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn origin(host: &str, proto: Option<&str>) -> Result<PublicOrigin, CdpError> {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(host).unwrap());
        if let Some(proto) = proto {
            headers.insert("x-forwarded-proto", HeaderValue::from_str(proto).unwrap());
        }
        PublicOrigin::of_request(&headers, &Uri::from_static("/v1/x"))
    }

    #[test]
    fn origin_follows_the_host_and_tls() {
        let plain = origin("gw.example:7878", None).unwrap();
        assert_eq!(
            plain.browser_url("ws-1"),
            "ws://gw.example:7878/v1/workspaces/ws-1/cdp"
        );
        let tls = origin("[::1]:443", Some("https, http")).unwrap();
        assert_eq!(
            tls.page_url("ws-1", "AB12"),
            "wss://[::1]:443/v1/workspaces/ws-1/cdp/page/AB12"
        );
        assert!(origin("evil/path", None).is_err());
        assert!(origin("a b", None).is_err());
        let none = PublicOrigin::of_request(&HeaderMap::new(), &Uri::from_static("/v1/x"));
        assert!(matches!(none, Err(CdpError::BadHost(_))));
    }

    #[test]
    fn version_points_at_the_gateway() {
        let chromium = json!({
            "Browser": "Chrome/156.0",
            "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/browser/0b7c-11",
        });
        assert_eq!(
            browser_path(&chromium).unwrap(),
            "/devtools/browser/0b7c-11"
        );
        let origin = origin("127.0.0.1:7878", None).unwrap();
        let seen = version(chromium, &origin, "ws-a");
        assert_eq!(
            seen["webSocketDebuggerUrl"],
            "ws://127.0.0.1:7878/v1/workspaces/ws-a/cdp"
        );
        assert_eq!(seen["Browser"], "Chrome/156.0");
    }

    #[test]
    fn browser_path_refuses_odd_urls() {
        for url in [
            "http://127.0.0.1:9222/devtools/browser/x",
            "ws://127.0.0.1:9222/devtools/page/x",
            "ws://127.0.0.1:9222/devtools/browser/../../etc",
            "ws://127.0.0.1:9222",
        ] {
            assert!(
                browser_path(&json!({ "webSocketDebuggerUrl": url })).is_err(),
                "{url}"
            );
        }
        assert!(browser_path(&json!({})).is_err());
    }

    #[test]
    fn list_rewrites_pages_and_drops_frontend_links() {
        let chromium = json!([
            {
                "id": "A1B2",
                "type": "page",
                "title": "t",
                "devtoolsFrontendUrl": "/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/A1B2",
                "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/page/A1B2",
            },
            { "id": "C3", "type": "page", "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/page/OTHER" },
            { "id": "D4", "type": "service_worker" },
        ]);
        let origin = origin("h:1", None).unwrap();
        let seen = list(chromium, &origin, "ws-a");
        assert_eq!(
            seen[0]["webSocketDebuggerUrl"],
            "ws://h:1/v1/workspaces/ws-a/cdp/page/A1B2"
        );
        assert!(seen[0].get("devtoolsFrontendUrl").is_none());
        assert_eq!(seen[0]["title"], "t");
        assert!(seen[1].get("webSocketDebuggerUrl").is_none());
        assert!(seen[2].get("webSocketDebuggerUrl").is_none());
        assert_eq!(list(json!({"not": "a list"}), &origin, "ws-a"), json!([]));
    }

    #[test]
    fn target_ids_are_plain() {
        assert!(valid_target("5F1C9A0D3B2E4F60718293A4B5C6D7E8"));
        for bad in ["", "../x", "a/b", "a?b", "a%2F", &"x".repeat(129)] {
            assert!(!valid_target(bad), "{bad}");
        }
    }
}
