//! Host-bound secrets: a workspace holds a placeholder
//! (`cubicle_secret_` and 32 hex digits), never the value. The proxy puts
//! the value in place of the placeholder in a request's headers (basic
//! auth's password included), and in its body when the secret says so
//! ([`Bound::body`]), only when all of these hold:
//!
//! - the request came through an intercepted TLS tunnel (never plain HTTP,
//!   never a passthrough tunnel, whose bytes the proxy does not see);
//! - the tunnel's host is a name the secret is bound to, which the proxy
//!   itself resolved and checked before connecting (a `CONNECT` to an
//!   address literal matches no name);
//! - the client's TLS server name and the request's `Host` are that name
//!   (the proxy checks `Host` for every intercepted request; the server
//!   name is checked here).
//!
//! Any other request carrying a placeholder — to another host, in a host
//! name (where a lookup would carry it out through DNS), in plain
//! HTTP, in the URL of a host it is not bound to, one this workspace was
//! never given — is refused before anything is sent, and the refusal is
//! an event.
//!
//! Bodies ([`reads_body`], [`swap_body`]): the proxy reads a request's body
//! only when the swap is allowed (the three conditions above) and a secret
//! bound to that host says `body`; every other body streams through unread,
//! at no cost. A body it reads is held whole up to [`MAX_BODY`] and judged
//! like a URL: a placeholder of a `body` secret bound to this host becomes
//! the value; one of a secret bound here that is for headers only stays as
//! it is (the host it may reach gets the placeholder, never the value: the
//! operator said headers only); any other whole placeholder (bound
//! elsewhere, not this workspace's) refuses the request. The value goes in
//! as it is, not escaped for JSON or a form: store one that needs no
//! escaping where it goes. Something placeholder-shaped that is not a
//! whole one (cut short) is data and passes.
//!
//! What the proxy cannot see it cannot judge: a placeholder the workspace
//! encodes (base64 outside basic auth, split, reversed, compressed with a
//! `Content-Encoding`), sends in a body the proxy does not read (to a host
//! with no `body` secret, or longer than [`MAX_BODY`]) or through a
//! passthrough tunnel, is not found. The value never leaves this module but
//! in the swapped header or body.

use std::sync::{Arc, RwLock};

use base64::Engine;
use hyper::header::{self, HeaderMap, HeaderValue};
use serde::Serialize;

/// What every placeholder starts with.
pub const PREFIX: &str = "cubicle_secret_";

/// Hex digits after [`PREFIX`].
const DIGITS: usize = 32;

/// The longest request body searched for placeholders (1 MiB); a longer
/// one is sent as it came, unread past this.
pub const MAX_BODY: usize = 1 << 20;

/// A fresh placeholder: [`PREFIX`] and 128 random bits in hex.
pub fn placeholder() -> String {
    let mut bits = [0u8; DIGITS / 2];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bits);
    format!("{PREFIX}{}", hex::encode(bits))
}

/// One secret as a workspace's proxy holds it.
#[derive(Clone)]
pub struct Bound {
    /// The secret's id (`sec-…`), what events name.
    pub id: String,
    /// What the workspace holds instead of the value.
    pub placeholder: String,
    /// The value; shown to nothing but the upstream server.
    pub value: String,
    /// The lowercase host names it may go to.
    pub hosts: Vec<String>,
    /// Whether it goes into request bodies too, not only headers.
    pub body: bool,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("id", &self.id)
            .field("placeholder", &self.placeholder)
            .field("hosts", &self.hosts)
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

/// A workspace's bound secrets, replaced whole when one is bound or a
/// secret is deleted.
#[derive(Debug, Clone, Default)]
pub struct SecretCell(Arc<RwLock<Arc<Vec<Bound>>>>);

impl SecretCell {
    pub fn get(&self) -> Arc<Vec<Bound>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, bound: Vec<Bound>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(bound);
    }
}

/// How the request reached the proxy, as far as a swap is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Inside an intercepted TLS tunnel whose client named the tunnel's
    /// host as its server name.
    Tls,
    /// Inside an intercepted TLS tunnel whose client named another server
    /// (or none).
    TlsOtherName,
    /// Plain HTTP (a request, or a plain tunnel).
    Plain,
}

/// Where a secret's value went in place of its placeholder: what a
/// request's event says (never the value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Swap {
    /// The secret's id.
    pub secret: String,
    /// `header <name>` or `body`.
    pub place: String,
}

/// Notes that `secret`'s value went to `place`, once.
fn note(used: &mut Vec<Swap>, secret: &Bound, place: &str) {
    if !used
        .iter()
        .any(|s| s.secret == secret.id && s.place == place)
    {
        used.push(Swap {
            secret: secret.id.clone(),
            place: place.to_owned(),
        });
    }
}

/// Why a request carrying a placeholder was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The secret whose placeholder it was; `None`: not one of this
    /// workspace's.
    pub secret: Option<String>,
    /// Where it was: `url`, `header <name>`, `body` or `host`.
    pub place: String,
    pub reason: String,
}

/// Every placeholder-shaped string in `text`: the prefix and the digits
/// after it (fewer than [`DIGITS`] when cut short).
fn found(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.match_indices(PREFIX).map(move |(at, _)| {
        let digits = text[at + PREFIX.len()..]
            .bytes()
            .take(DIGITS)
            .take_while(u8::is_ascii_hexdigit)
            .count();
        (at, &text[at..at + PREFIX.len() + digits])
    })
}

/// Whether `text` holds anything placeholder-shaped, in any case.
fn mentions(text: &[u8]) -> bool {
    text.windows(PREFIX.len())
        .any(|w| w.eq_ignore_ascii_case(PREFIX.as_bytes()))
}

/// The verdict on one placeholder bound for `host` over `channel`: the
/// secret to swap in, or why not.
fn judge<'a>(
    bound: &'a [Bound],
    text: &str,
    host: &str,
    channel: Channel,
    place: &str,
) -> Result<&'a Bound, Blocked> {
    let Some(secret) = bound.iter().find(|b| b.placeholder == text) else {
        return Err(Blocked {
            secret: None,
            place: place.to_owned(),
            reason: "a secret placeholder this workspace was not given".into(),
        });
    };
    let refuse = |reason: String| Blocked {
        secret: Some(secret.id.clone()),
        place: place.to_owned(),
        reason,
    };
    if !secret.hosts.iter().any(|h| h == host) {
        return Err(refuse(format!(
            "secret {} may go to {} only, not {host}",
            secret.id,
            secret.hosts.join(", ")
        )));
    }
    match channel {
        Channel::Tls => Ok(secret),
        Channel::TlsOtherName => Err(refuse(format!(
            "the TLS server name the client sent is not {host}"
        ))),
        Channel::Plain => Err(refuse(format!(
            "secret {} goes over intercepted TLS only, not plain HTTP",
            secret.id
        ))),
    }
}

/// `text` with each placeholder replaced by its value, if every one of
/// them may go to `host`; where the values went, in `used`.
fn swap_text(
    bound: &[Bound],
    text: &str,
    host: &str,
    channel: Channel,
    place: &str,
    used: &mut Vec<Swap>,
) -> Result<String, Blocked> {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (at, placeholder) in found(text) {
        let secret = judge(bound, placeholder, host, channel, place)?;
        out.push_str(&text[rest..at]);
        out.push_str(&secret.value);
        rest = at + placeholder.len();
        note(used, secret, place);
    }
    out.push_str(&text[rest..]);
    Ok(out)
}

/// Puts the values of `bound` in place of their placeholders in `headers`
/// and checks the request's `path` (which keeps any placeholder as it is),
/// for a request to `host` over `channel`: where values were swapped in,
/// or why the request must be refused. A header holding something
/// placeholder-shaped that is not a whole placeholder (another case, cut
/// short) is refused too: it can only be an attempt to slip one past.
pub fn apply(
    bound: &[Bound],
    path: &str,
    headers: &mut HeaderMap,
    host: &str,
    channel: Channel,
) -> Result<Vec<Swap>, Blocked> {
    let mut used = Vec::new();
    // A placeholder in the URL is never swapped: it may reach only a host
    // it is bound to, unchanged.
    let decoded = super::download::percent_decode(path);
    if mentions(decoded.as_bytes()) {
        if found(&decoded).count() == 0
            || found(&decoded).any(|(_, p)| p.len() != PREFIX.len() + DIGITS)
        {
            return Err(malformed("url"));
        }
        for (_, placeholder) in found(&decoded) {
            judge(bound, placeholder, host, Channel::Tls, "url")?;
        }
    }
    let names: Vec<header::HeaderName> = headers.keys().cloned().collect();
    for name in names {
        let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
        if !values
            .iter()
            .any(|v| mentions(v.as_bytes()) || is_basic(&name, v))
        {
            continue;
        }
        let place = format!("header {name}");
        let mut swapped = Vec::with_capacity(values.len());
        for value in values {
            swapped.push(swap_value(
                bound, &name, &value, host, channel, &place, &mut used,
            )?);
        }
        headers.remove(&name);
        for value in swapped {
            headers.append(name.clone(), value);
        }
    }
    Ok(used)
}

/// Why a request whose target names `authority` must be refused, if it
/// holds anything placeholder-shaped: a host name is never a place for
/// one (a lookup of it would carry it out through DNS, bound or not).
pub fn in_authority(bound: &[Bound], authority: &str) -> Option<Blocked> {
    if !mentions(authority.as_bytes()) {
        return None;
    }
    let lower = authority.to_ascii_lowercase();
    let secret = found(&lower)
        .find_map(|(_, p)| bound.iter().find(|b| b.placeholder == p))
        .map(|b| b.id.clone());
    Some(Blocked {
        secret,
        place: "host".into(),
        reason: "a secret placeholder in the host name".into(),
    })
}

/// Whether the body of a request to `host` over `channel` is read for
/// [`swap_body`]: only where a swap is allowed and a secret bound to
/// `host` says `body`. Every other body passes unread.
pub fn reads_body(bound: &[Bound], host: &str, channel: Channel) -> bool {
    channel == Channel::Tls
        && bound
            .iter()
            .any(|b| b.body && b.hosts.iter().any(|h| h == host))
}

/// `body` (a request to `host` over `channel`, read whole) with the
/// placeholder of each `body` secret bound to `host` replaced by its
/// value, and where values went added to `used`; `None` when nothing
/// changed. A placeholder of a secret bound here for headers only stays as
/// it is; any other whole placeholder refuses the request.
pub fn swap_body(
    bound: &[Bound],
    body: &[u8],
    host: &str,
    channel: Channel,
    used: &mut Vec<Swap>,
) -> Result<Option<Vec<u8>>, Blocked> {
    let mut out: Option<Vec<u8>> = None;
    // Copied up to here.
    let mut copied = 0;
    let mut from = 0;
    while let Some(at) = find(body, from) {
        let digits = body[at + PREFIX.len()..]
            .iter()
            .take(DIGITS)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let end = at + PREFIX.len() + digits;
        from = end;
        // Cut short: data, not a placeholder. Whole: ASCII, so text.
        if digits < DIGITS {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&body[at..end]) else {
            continue;
        };
        let secret = judge(bound, text, host, channel, "body")?;
        if !secret.body {
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(body.len()));
        out.extend_from_slice(&body[copied..at]);
        out.extend_from_slice(secret.value.as_bytes());
        copied = end;
        note(used, secret, "body");
    }
    Ok(out.map(|mut out| {
        out.extend_from_slice(&body[copied..]);
        out
    }))
}

/// Where [`PREFIX`] next starts in `bytes`, from `from` on.
fn find(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(PREFIX.len())
        .position(|w| w == PREFIX.as_bytes())
        .map(|at| from + at)
}

fn malformed(place: &str) -> Blocked {
    Blocked {
        secret: None,
        place: place.to_owned(),
        reason: "something shaped like a secret placeholder that is not a whole one".into(),
    }
}

fn is_basic(name: &header::HeaderName, value: &HeaderValue) -> bool {
    (name == header::AUTHORIZATION || name == header::PROXY_AUTHORIZATION)
        && value
            .as_bytes()
            .get(..6)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"basic "))
}

/// One header value with its placeholders swapped; basic auth's
/// credentials are decoded, swapped and encoded again.
fn swap_value(
    bound: &[Bound],
    name: &header::HeaderName,
    value: &HeaderValue,
    host: &str,
    channel: Channel,
    place: &str,
    used: &mut Vec<Swap>,
) -> Result<HeaderValue, Blocked> {
    let bad_value = || Blocked {
        secret: None,
        place: place.to_owned(),
        reason: "the value is not text".into(),
    };
    if is_basic(name, value) {
        let encoded = value.to_str().map_err(|_| bad_value())?[6..].trim();
        if let Ok(credentials) = base64::engine::general_purpose::STANDARD.decode(encoded)
            && let Ok(credentials) = String::from_utf8(credentials)
            && mentions(credentials.as_bytes())
        {
            if found(&credentials).any(|(_, p)| p.len() != PREFIX.len() + DIGITS) {
                return Err(malformed(place));
            }
            let swapped = swap_text(bound, &credentials, host, channel, place, used)?;
            let encoded = base64::engine::general_purpose::STANDARD.encode(swapped);
            return HeaderValue::from_str(&format!("Basic {encoded}")).map_err(|_| bad_value());
        }
    }
    if !mentions(value.as_bytes()) {
        return Ok(value.clone());
    }
    let text = value.to_str().map_err(|_| bad_value())?;
    if found(text).count() == 0 || found(text).any(|(_, p)| p.len() != PREFIX.len() + DIGITS) {
        return Err(malformed(place));
    }
    let swapped = swap_text(bound, text, host, channel, place, used)?;
    let mut out = HeaderValue::from_str(&swapped).map_err(|_| bad_value())?;
    // A value a secret carries is not for logs or caches on the way.
    out.set_sensitive(true);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> Vec<Bound> {
        vec![Bound {
            id: "sec-1".into(),
            placeholder: format!("{PREFIX}{}", "ab".repeat(16)),
            value: "s3cret-value".into(),
            hosts: vec!["api.example.com".into()],
            body: false,
        }]
    }

    fn swapped(id: &str, place: &str) -> Swap {
        Swap {
            secret: id.into(),
            place: place.into(),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_placeholder_becomes_the_value_only_for_its_host_over_tls() {
        let b = bound();
        let p = b[0].placeholder.clone();
        let mut h = headers(&[("authorization", &format!("Bearer {p}")), ("x-a", "plain")]);
        let used = apply(&b, "/v1", &mut h, "api.example.com", Channel::Tls).unwrap();
        assert_eq!(used, [swapped("sec-1", "header authorization")]);
        assert_eq!(h["authorization"], "Bearer s3cret-value");
        assert_eq!(h["x-a"], "plain");

        for (host, channel) in [
            ("evil.example.com", Channel::Tls),
            ("api.example.com", Channel::Plain),
            ("api.example.com", Channel::TlsOtherName),
        ] {
            let mut h = headers(&[("authorization", &format!("Bearer {p}"))]);
            let blocked = apply(&b, "/", &mut h, host, channel).unwrap_err();
            assert_eq!(
                blocked.secret.as_deref(),
                Some("sec-1"),
                "{host} {channel:?}"
            );
            assert_eq!(blocked.place, "header authorization");
            assert_eq!(h["authorization"], format!("Bearer {p}").as_str());
        }
    }

    #[test]
    fn basic_auth_passwords_are_swapped_inside_their_encoding() {
        let b = bound();
        let p = &b[0].placeholder;
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("me:{p}"));
        let mut h = headers(&[("authorization", &format!("Basic {encoded}"))]);
        apply(&b, "/", &mut h, "api.example.com", Channel::Tls).unwrap();
        let want = base64::engine::general_purpose::STANDARD.encode("me:s3cret-value");
        assert_eq!(h["authorization"], format!("Basic {want}").as_str());
        // Toward another host, hidden in basic auth, it is still found.
        let mut h = headers(&[("authorization", &format!("Basic {encoded}"))]);
        assert!(apply(&b, "/", &mut h, "other.test", Channel::Tls).is_err());
    }

    #[test]
    fn unknown_cut_short_or_recased_placeholders_and_urls_are_refused() {
        let b = bound();
        let p = b[0].placeholder.clone();
        let other = placeholder();
        let cases = [
            ("x-k", other.clone()),
            ("x-k", p[..p.len() - 3].to_owned()),
            ("x-k", p.to_uppercase()),
            (
                "cookie",
                format!("a=1; t={}", p.replace("cubicle", "CUBICLE")),
            ),
        ];
        for (name, value) in cases {
            let mut h = headers(&[(name, &value)]);
            let blocked = apply(&b, "/", &mut h, "api.example.com", Channel::Tls);
            assert!(blocked.is_err(), "{value} passed");
        }
        // In a host name: refused, in any case.
        let named = format!("{}.api.example.com:443", p.to_uppercase());
        let blocked = in_authority(&b, &named).unwrap();
        assert_eq!(
            (blocked.secret.as_deref(), blocked.place.as_str()),
            (Some("sec-1"), "host")
        );
        assert_eq!(in_authority(&b, "api.example.com:443"), None);
        // In the URL: allowed to its host unchanged, refused elsewhere,
        // percent-encoded or not.
        let mut h = HeaderMap::new();
        let url = format!("/q?k={p}");
        assert_eq!(
            apply(&b, &url, &mut h, "api.example.com", Channel::Tls),
            Ok(vec![])
        );
        let escaped = format!("/q?k=%63ubicle_secret_{}", &p[PREFIX.len()..]);
        let blocked = apply(&b, &escaped, &mut h, "elsewhere.test", Channel::Tls).unwrap_err();
        assert_eq!(blocked.place, "url");
    }

    #[test]
    fn requests_without_placeholders_pass_untouched_and_debug_never_shows_the_value() {
        let b = bound();
        let mut h = headers(&[("authorization", "Basic bWU6cGFzcw=="), ("x", "cubicle")]);
        let before = h.clone();
        assert_eq!(
            apply(&b, "/", &mut h, "any.test", Channel::Plain),
            Ok(vec![])
        );
        assert_eq!(h, before);
        assert!(!format!("{b:?}").contains("s3cret"));
        assert!(placeholder().starts_with(PREFIX));
        assert_eq!(placeholder().len(), PREFIX.len() + DIGITS);
    }

    #[test]
    fn a_body_gets_the_values_of_body_secrets_only_and_refuses_strangers() {
        let mut b = bound();
        b[0].body = true;
        b.push(Bound {
            id: "sec-2".into(),
            placeholder: format!("{PREFIX}{}", "cd".repeat(16)),
            value: "headers-only".into(),
            hosts: vec!["api.example.com".into()],
            body: false,
        });
        let (p, q) = (b[0].placeholder.clone(), b[1].placeholder.clone());
        assert!(reads_body(&b, "api.example.com", Channel::Tls));
        for (host, channel) in [
            ("other.test", Channel::Tls),
            ("api.example.com", Channel::Plain),
            ("api.example.com", Channel::TlsOtherName),
        ] {
            assert!(!reads_body(&b, host, channel), "{host} {channel:?}");
        }
        b[0].body = false;
        assert!(!reads_body(&b, "api.example.com", Channel::Tls));
        b[0].body = true;

        let body = format!(r#"{{"a":"{p}","b":"{q}","c":"{p}","d":"{PREFIX}ab"}}"#);
        let mut used = Vec::new();
        let out = swap_body(
            &b,
            body.as_bytes(),
            "api.example.com",
            Channel::Tls,
            &mut used,
        )
        .unwrap()
        .unwrap();
        let want =
            format!(r#"{{"a":"s3cret-value","b":"{q}","c":"s3cret-value","d":"{PREFIX}ab"}}"#);
        assert_eq!(String::from_utf8(out).unwrap(), want);
        assert_eq!(used, [swapped("sec-1", "body")]);
        // Nothing to swap: nothing copied.
        let mut used = Vec::new();
        let plain = format!("x={q}&y=1");
        assert_eq!(
            swap_body(
                &b,
                plain.as_bytes(),
                "api.example.com",
                Channel::Tls,
                &mut used
            ),
            Ok(None)
        );
        assert!(used.is_empty());
        // Another workspace's placeholder, or one bound elsewhere: refused.
        let mut elsewhere = b.clone();
        elsewhere[1].hosts = vec!["other.test".into()];
        for (bound, text) in [(&b, placeholder()), (&elsewhere, q.clone())] {
            let blocked = swap_body(
                bound,
                format!("k={text}").as_bytes(),
                "api.example.com",
                Channel::Tls,
                &mut Vec::new(),
            )
            .unwrap_err();
            assert_eq!(blocked.place, "body");
        }
        // Bytes around it need not be text.
        let mut raw = vec![0xff, 0x00];
        raw.extend_from_slice(p.as_bytes());
        raw.push(0xfe);
        let out = swap_body(&b, &raw, "api.example.com", Channel::Tls, &mut Vec::new())
            .unwrap()
            .unwrap();
        assert_eq!(out, [&[0xff, 0][..], b"s3cret-value", &[0xfe]].concat());
    }
}
