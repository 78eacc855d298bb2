//! Calls that would hand the browser a way to Chromium's own DevTools, or
//! a route around the egress proxy, refused before they reach it.
//!
//! The attack: an agent opened a tab on `http://127.0.0.1:9222/json/version`
//! through the gateway's CDP. In the browser's network namespace that was
//! DevTools itself, and the tab's script (same origin, so DevTools' origin
//! check let it in) opened `ws://127.0.0.1:9222/devtools/browser/…`: full
//! CDP past the gateway's policy and event log. The root fix is in the
//! workspace (DevTools is served over a pipe, no TCP port exists, see
//! `cubicle-guest`'s `devtools_pipe`); this is the gateway's half of the
//! defence in depth:
//!
//! - any call whose parameters hold a URL naming a DevTools endpoint (a
//!   loopback host — `127/8`, `0.0.0.0`, `::1`, `::ffff:127.x`, `localhost`,
//!   `*.localhost`, in any spelling the URL standard accepts — with the CDP
//!   port, in any scheme, also inside `view-source:`, `blob:` and
//!   `filesystem:`) is refused: `Page.navigate`, `Target.createTarget`,
//!   `Fetch.continueRequest`, a redirect's `Location` in
//!   `Fetch.fulfillRequest`, ...;
//! - `Target.createBrowserContext` with `proxyServer` or `proxyBypassList`
//!   is refused: a context of its own proxy would route around the egress
//!   proxy (and its rules and events).
//!
//! A script already in a page can still name such a URL; the pipe is what
//! makes it lead nowhere, and Chromium sends even loopback through the
//! egress proxy (`--proxy-bypass-list=<-loopback>`), which refuses it.

use std::net::IpAddr;

use chromiumoxide_cdp::cdp::browser_protocol::target::CreateBrowserContextParams;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Chromium's DevTools port inside the workspace.
const CDP_PORT: u16 = cubicle_image::ports::CDP;
/// Strings longer than this are not looked at as URLs (page content, base64).
const MAX_URL: usize = 8 * 1024;
/// How deep the parameters are searched for URLs.
const MAX_DEPTH: usize = 8;
/// Schemes that wrap another URL.
const WRAPPERS: &[&str] = &["view-source", "blob", "filesystem"];

/// Why `method` with `params` may not reach the browser, if it may not.
pub fn refuse(method: &str, params: Option<&RawValue>) -> Option<String> {
    let params: Value = serde_json::from_str(params?.get()).ok()?;
    if method == CreateBrowserContextParams::IDENTIFIER
        && CreateBrowserContextParams::deserialize(&params).map_or(true, |own| {
            own.proxy_server.is_some() || own.proxy_bypass_list.is_some()
        })
    {
        return Some(
            "Target.createBrowserContext may not set proxyServer or proxyBypassList: every context goes through the workspace's egress proxy (drop them)".into(),
        );
    }
    let url = find_devtools_url(&params, 0)?;
    Some(format!(
        "{method} names Chromium's own DevTools endpoint ({url:.100}); only the gateway's CDP reaches DevTools"
    ))
}

fn find_devtools_url(value: &Value, depth: usize) -> Option<&str> {
    match value {
        Value::String(text) => names_devtools(text).then_some(text.as_str()),
        Value::Array(items) if depth < MAX_DEPTH => items
            .iter()
            .find_map(|item| find_devtools_url(item, depth + 1)),
        Value::Object(fields) if depth < MAX_DEPTH => fields
            .values()
            .find_map(|item| find_devtools_url(item, depth + 1)),
        _ => None,
    }
}

/// Whether `text`, read as the browser would read a URL, names a loopback
/// host on the CDP port.
pub fn names_devtools(text: &str) -> bool {
    if text.len() > MAX_URL || !text.contains(':') {
        return false;
    }
    let mut text = text.to_owned();
    for _ in 0..=WRAPPERS.len() {
        let Ok(url) = url::Url::parse(&text) else {
            return false;
        };
        if WRAPPERS.contains(&url.scheme()) {
            text = url.as_str()[url.scheme().len() + 1..].to_owned();
            continue;
        }
        return url.port_or_known_default() == Some(CDP_PORT)
            && url.host().is_some_and(|host| is_loopback(&host));
    }
    false
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    let ip = match host {
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            return name == "localhost" || name.ends_with(".localhost");
        }
        url::Host::Ipv4(ip) => IpAddr::V4(*ip),
        url::Host::Ipv6(ip) => ip.to_ipv4_mapped().map_or(IpAddr::V6(*ip), IpAddr::V4),
    };
    ip.is_loopback() || ip.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(value: Value) -> Box<RawValue> {
        RawValue::from_string(value.to_string()).unwrap()
    }

    #[test]
    fn every_spelling_of_the_devtools_endpoint_is_caught() {
        for url in [
            "http://127.0.0.1:9222/json/version",
            "HTTP://127.0.0.1:9222/json",
            "  http://127.0.0.1:9222/",
            "ws://127.0.0.1:9222/devtools/browser/x",
            "wss://localhost:9222/",
            "https://LOCALHOST.:9222/",
            "http://a.b.localhost:9222/",
            "http://127.1:9222/",
            "http://2130706433:9222/",
            "http://0x7f.0.0.1:9222/",
            "http://0177.0.0.1:09222/",
            "http://127.9.9.9:9222/",
            "http://0.0.0.0:9222/",
            "http://0:9222/",
            "http://[::1]:9222/",
            "http://[::ffff:127.0.0.1]:9222/",
            "http://[::]:9222/",
            "view-source:http://127.0.0.1:9222/json",
            "VIEW-SOURCE:view-source:http://127.0.0.1:9222/json",
            "blob:http://127.0.0.1:9222/x",
            "filesystem:http://127.0.0.1:9222/temporary/x",
            "http://user:pw@127.0.0.1:9222/",
            "http://127.0.0.1:9222\\json",
        ] {
            assert!(names_devtools(url), "{url} was not caught");
        }
        for url in [
            "http://127.0.0.1:9223/json",
            "http://example.com:9222/",
            "http://10.0.0.1:9222/",
            "http://127.0.0.1/",
            "data:text/html,127.0.0.1:9222",
            "about:blank",
            "not a url",
            "https://localhost.example:9222/",
        ] {
            assert!(!names_devtools(url), "{url} was refused");
        }
    }

    #[test]
    fn calls_naming_devtools_anywhere_in_their_parameters_are_refused() {
        let navigate = raw(serde_json::json!({"url": "http://127.0.0.1:9222/json/version"}));
        assert!(refuse("Page.navigate", Some(&navigate)).is_some());
        assert!(refuse("Target.createTarget", Some(&navigate)).is_some());
        let redirect = raw(serde_json::json!({"requestId": "1", "responseCode": 302,
            "responseHeaders": [{"name": "Location", "value": "http://localhost:9222/json"}]}));
        assert!(refuse("Fetch.fulfillRequest", Some(&redirect)).is_some());
        let fine = raw(serde_json::json!({"url": "https://example.com/"}));
        assert_eq!(refuse("Page.navigate", Some(&fine)), None);
        assert_eq!(refuse("Page.navigate", None), None);
    }

    #[test]
    fn the_relay_refuses_them_even_through_the_target_tunnel() {
        use crate::cdp::inspect::{Direction, Verdict, inspect, parse};
        let tunnelled = r#"{"id":9,"method":"Target.sendMessageToTarget","params":{"sessionId":"S","message":"{\"id\":1,\"method\":\"Page.navigate\",\"params\":{\"url\":\"http://127.0.0.1:9222/json\"}}"}}"#;
        let call = parse(Direction::ToBrowser, tunnelled).unwrap();
        assert!(matches!(
            inspect(Direction::ToBrowser, &call),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn a_browser_context_may_not_get_its_own_proxy() {
        for params in [
            serde_json::json!({"proxyServer": "direct://"}),
            serde_json::json!({"proxyBypassList": "*"}),
            // Not the protocol's: cannot be read, so cannot be let through.
            serde_json::json!({"proxyServer": ["direct://"]}),
        ] {
            let reason = refuse("Target.createBrowserContext", Some(&raw(params))).unwrap();
            assert!(reason.contains("egress proxy"), "{reason}");
        }
        let plain = raw(serde_json::json!({"disposeOnDetach": true}));
        assert_eq!(refuse("Target.createBrowserContext", Some(&plain)), None);
    }
}
