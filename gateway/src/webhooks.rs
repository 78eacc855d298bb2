//! Webhooks: each new event of the kinds a subscription names goes to its
//! URL as signed JSON, in the order of the event log, retried with backoff.
//!
//! The layout is Standard Webhooks' (standardwebhooks.com), so receivers
//! verify with its libraries: headers `webhook-id` (the same on every
//! retry), `webhook-timestamp` (Unix seconds of the attempt) and
//! `webhook-signature` (`v1,` + base64 of HMAC-SHA256 over
//! `{id}.{timestamp}.{body}`, keyed with the base64 part of the
//! subscription's `whsec_` secret); the body is
//! `{"type": kind, "timestamp": RFC 3339, "data": the event as GET /v1/events shows it}`.
//!
//! Deliveries run off the event log, never inside an operation: a slow or
//! unreachable receiver delays only its own subscription. Each subscription
//! keeps a cursor (the last event dealt with) in the store, so deliveries
//! resume after a restart where they stopped: at least once, in order. An
//! event whose delivery failed [`RETRY_AFTER`]`.len() + 1` times is given
//! up on (`webhook.failed` with `gave_up`) and the next one goes; while the
//! receiver stays down each further event is tried once, until one gets
//! through.
//!
//! Where deliveries may go: the gateway sits inside the operator's network,
//! and a subscription is a request it makes on a token holder's behalf, so
//! by default only public addresses are reached (checked at create, and at
//! each delivery on the addresses the name resolves to then, so a name
//! that later resolves inward is refused too). `serve
//! --webhooks-to-private-addresses` lifts that for a closed network.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cubicle_runtime::events::{Event, EventKind};
use rand::RngCore;
use serde_json::json;
use tokio::sync::Notify;

/// What every secret starts with (Standard Webhooks).
pub const SECRET_PREFIX: &str = "whsec_";

/// How long after a failed attempt the next one is made; after the last,
/// the event is given up on.
pub const RETRY_AFTER: [Duration; 5] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(120),
    Duration::from_secs(600),
];

/// Longest one attempt may take, connect to last byte.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// A subscription's signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// 32 random bytes.
    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Self(key)
    }

    /// `whsec_` + base64 of 24..=64 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "secret: must be \"{SECRET_PREFIX}\" followed by the base64 of 24 to 64 random bytes \
                 (or left out, and one is made)"
            )
        };
        let encoded = text.strip_prefix(SECRET_PREFIX).ok_or_else(bad)?;
        let key = BASE64.decode(encoded).map_err(|_| bad())?;
        if !(24..=64).contains(&key.len()) {
            return Err(bad());
        }
        Ok(Self(key))
    }

    /// As stored and shown: `whsec_` + base64.
    pub fn encoded(&self) -> String {
        format!("{SECRET_PREFIX}{}", BASE64.encode(&self.0))
    }

    /// The `webhook-signature` header's value for message `id` sent at
    /// `timestamp` (Unix seconds) with `body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0);
        let mut context = ring::hmac::Context::with_key(&key);
        context.update(id.as_bytes());
        context.update(b".");
        context.update(timestamp.to_string().as_bytes());
        context.update(b".");
        context.update(body);
        format!("v1,{}", BASE64.encode(context.sign().as_ref()))
    }
}

/// Why `ip` is not a public address, if it is not.
pub fn not_public(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() {
                Some("a private address")
            } else if v4.is_link_local() {
                Some("a link-local address (cloud metadata lives there)")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else if v4.is_unspecified() || a == 0 {
                Some("an unspecified address")
            } else if v4.is_multicast() || v4.is_broadcast() || a >= 240 {
                Some("a multicast or reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("an unspecified address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a private (unique local) address")
            } else if first & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// The webhook service's settings and its HTTP client.
pub struct Webhooks {
    /// Whether deliveries may go to loopback, private and link-local
    /// addresses (`serve --webhooks-to-private-addresses`).
    pub to_private: bool,
    client: reqwest::Client,
    /// Poked when a subscription is made or removed.
    changed: Notify,
}

impl Default for Webhooks {
    fn default() -> Self {
        Self::new(false)
    }
}

impl Webhooks {
    pub fn new(to_private: bool) -> Self {
        let client = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver { to_private }))
            .user_agent(concat!("cubicle-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("an HTTP client with no TLS roots to load builds");
        Self {
            to_private,
            client,
            changed: Notify::new(),
        }
    }

    /// Tells the delivery task the set of subscriptions changed.
    pub fn changed(&self) {
        self.changed.notify_one();
    }

    /// Until the set of subscriptions changes.
    pub async fn wait_changed(&self) {
        self.changed.notified().await;
    }

    /// Checks that `url` may be a subscription's: http or https, a host, no
    /// credentials, and (unless private addresses are allowed) every
    /// address its host resolves to now is public.
    pub async fn check_url(&self, text: &str) -> Result<url::Url, String> {
        if text.len() > 2048 {
            return Err("url: at most 2048 characters".into());
        }
        let url = url::Url::parse(text).map_err(|e| {
            format!(
                "url: not an absolute URL ({e}); give one such as https://example.com/hooks/cubicle"
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "url: scheme {:?} is not http or https",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "url: credentials in the URL would be shown with it; authenticate the delivery by its signature instead".into(),
            );
        }
        let Some(host) = url.host_str() else {
            return Err("url: no host".into());
        };
        if self.to_private {
            return Ok(url);
        }
        let port = url.port_or_known_default().unwrap_or(443);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::lookup_host((host, port)),
        )
        .await
        .map_err(|_| format!("url: resolving {host} took over 5 s"))?
        .map_err(|e| format!("url: cannot resolve {host}: {e}"))?
        .collect();
        if addresses.is_empty() {
            return Err(format!("url: {host} resolves to no address"));
        }
        for address in addresses {
            if let Some(why) = not_public(address.ip()) {
                return Err(format!(
                    "url: {host} is {}, {why}: webhooks go only to public addresses \
                     (a server started with --webhooks-to-private-addresses allows others)",
                    address.ip()
                ));
            }
        }
        Ok(url)
    }
}

/// Resolves names for deliveries, keeping only the addresses deliveries
/// may go to: the check at create is made again on every connection.
struct CheckedResolver {
    to_private: bool,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let to_private = self.to_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| to_private || not_public(a.ip()).is_none())
                .collect();
            if found.is_empty() {
                let why: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves to no public address").into();
                return Err(why);
            }
            let addresses: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addresses)
        })
    }
}

/// Whether `kind` is one `pattern` names: `*`, a kind, or `family.*`.
pub fn matches(pattern: &str, kind: &str) -> bool {
    if kind.starts_with("webhook.") {
        return false; // never delivered: a failing delivery would make more
    }
    match pattern.strip_suffix(".*") {
        _ if pattern == "*" => true,
        Some(family) => kind
            .strip_prefix(family)
            .is_some_and(|rest| rest.starts_with('.')),
        None => pattern == kind,
    }
}

/// Checks a subscription's list of kinds: 1..=64 patterns, each `*`, a
/// kind there is, or `family.*` of a family there is; none of `webhook.`.
pub fn check_kinds(kinds: &[String]) -> Result<(), String> {
    if kinds.is_empty() || kinds.len() > 64 {
        return Err(
            "kinds: give 1 to 64 event kinds, such as [\"workspace.*\", \"approval.request\"] (\"*\" is every kind)".into(),
        );
    }
    for pattern in kinds {
        if pattern.starts_with("webhook.") {
            return Err(format!(
                "kinds: {pattern:?}: webhook events are not delivered by webhooks (a failing delivery would make more); GET /v1/webhooks shows each subscription's last delivery"
            ));
        }
        let known = pattern == "*"
            || EventKind::ALL
                .iter()
                .any(|kind| matches(pattern, kind.as_str()));
        if !known {
            return Err(format!(
                "kinds: {pattern:?} names no event kind (kinds are listed in README, \"Events\"; \"family.*\" takes a family such as workspace.*)"
            ));
        }
    }
    Ok(())
}

/// The message id of `event` for subscription `webhook`: the same on
/// every retry, so a receiver can drop duplicates.
pub fn message_id(webhook: &str, event: i64) -> String {
    format!("{webhook}-{event}")
}

/// The body delivered for `event`.
pub fn body(event: &Event) -> Vec<u8> {
    let body = json!({
        "type": event.kind,
        "timestamp": crate::control::rfc3339(event.at),
        "data": event,
    });
    body.to_string().into_bytes()
}

/// Why one attempt failed.
#[derive(Debug)]
pub struct Failure {
    /// The receiver's status, if it answered.
    pub status: Option<u16>,
    pub error: String,
}

impl Webhooks {
    /// One signed POST of `body` as message `message` to `url`: the
    /// receiver's status when it is 2xx.
    pub async fn attempt(
        &self,
        url: &str,
        secret: &Secret,
        message: &str,
        body: &[u8],
    ) -> Result<u16, Failure> {
        let url = url::Url::parse(url).map_err(|e| Failure {
            status: None,
            error: format!("the stored URL does not parse: {e}"),
        })?;
        // A literal address never reaches the resolver: checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            _ => None,
        };
        if let Some(ip) = literal
            && !self.to_private
            && let Some(why) = not_public(ip)
        {
            return Err(Failure {
                status: None,
                error: format!("{ip} is {why}: webhooks go only to public addresses"),
            });
        }
        let timestamp = cubicle_runtime::state::now_ms() / 1000;
        let answer = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", message)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", secret.sign(message, timestamp, body))
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| Failure {
                status: None,
                error: describe(&e),
            })?;
        let status = answer.status().as_u16();
        if answer.status().is_success() {
            Ok(status)
        } else {
            Err(Failure {
                status: Some(status),
                error: format!("the receiver answered {status}"),
            })
        }
    }
}

/// A reqwest error with its causes, on one line.
fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_kinds_families_or_all_and_never_webhook_events() {
        assert!(matches("*", "workspace.create"));
        assert!(matches("workspace.*", "workspace.create"));
        assert!(!matches("workspace.*", "workspaces.x"));
        assert!(!matches("work.*", "workspace.create"));
        assert!(matches("approval.request", "approval.request"));
        assert!(!matches("approval.request", "approval.deny"));
        assert!(!matches("*", "webhook.failed"));
        assert!(check_kinds(&["workspace.*".into(), "action".into(), "*".into()]).is_ok());
        for bad in [
            "webhook.*",
            "webhook.failed",
            "nope",
            "workspace",
            "action.*",
            "",
        ] {
            assert!(check_kinds(&[bad.into()]).is_err(), "{bad:?} passed");
        }
        assert!(check_kinds(&[]).is_err());
    }

    #[test]
    fn secrets_round_trip_and_bad_ones_are_refused() {
        let secret = Secret::generate();
        assert_eq!(Secret::parse(&secret.encoded()).unwrap(), secret);
        assert!(Secret::parse("whsec_AAAA").is_err(), "too short");
        assert!(Secret::parse("sec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").is_err());
        assert!(Secret::parse("whsec_not base64!").is_err());
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    fn the_signature_is_hmac_sha256_over_id_timestamp_and_body() {
        // The value was computed independently, with Python's hmac module:
        // base64(hmac.new(b"0123456789abcdefghijklmn", b"wh-1-7.1700000000.{}", sha256).digest())
        let secret = Secret(b"0123456789abcdefghijklmn".to_vec());
        assert_eq!(
            secret.sign("wh-1-7", 1_700_000_000, b"{}"),
            "v1,HZ9qWskwTmbUAyhylsMNUthVmDuihHY0P6SNW+icD64="
        );
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::",
        ] {
            assert!(not_public(private.parse().unwrap()).is_some(), "{private}");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700::1111"] {
            assert_eq!(not_public(public.parse().unwrap()), None, "{public}");
        }
    }
}
