//! A workspace's traffic as the egress proxy saw it, as HAR 1.2: one entry
//! per `egress.request` event (plain HTTP, and HTTPS the proxy
//! intercepted), with its method, URL, status, headers (credentials and
//! cookies redacted when the event was written), when it started and how
//! long the response's head took. Made from the event log, so it says what
//! the sealed record says and nothing more: no bodies (the proxy keeps
//! none), no sizes but the `Content-Length` a response declared, and no
//! requests inside tunnels it did not open (passthrough hosts).

use cubicle_runtime::events;
use serde_json::{Value, json};

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::OpError;
use crate::ops::Core;

/// Events read per page while the HAR is made.
const PAGE: u32 = 1000;

/// `[[name, value]]` as HAR's `[{name, value}]`.
fn pairs(list: &Value) -> Vec<Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| {
            let name = pair.get(0)?.as_str()?;
            let value = pair.get(1)?.as_str()?;
            Some(json!({ "name": name, "value": value }))
        })
        .collect()
}

fn header<'a>(list: &'a Value, wanted: &str) -> Option<&'a str> {
    list.as_array()?.iter().find_map(|pair| {
        (pair.get(0)?.as_str()? == wanted)
            .then(|| pair.get(1)?.as_str())
            .flatten()
    })
}

fn query_string(url: &str) -> Vec<Value> {
    let Some((_, query)) = url.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            json!({ "name": name, "value": value })
        })
        .collect()
}

/// One HAR entry from an `egress.request` event's detail, if it is one the
/// proxy wrote with what an entry needs.
pub fn entry(event_id: i64, detail: &Value) -> Option<Value> {
    let url = detail["url"].as_str()?;
    let status = detail["status"].as_u64()?;
    let started = detail["started_ms"].as_i64()?;
    let wait = detail["wait_ms"].as_u64().unwrap_or(0);
    let request_headers = &detail["request_headers"];
    let response_headers = &detail["response_headers"];
    let length = header(response_headers, "content-length").and_then(|l| l.parse::<i64>().ok());
    let reason = u16::try_from(status)
        .ok()
        .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    Some(json!({
        "startedDateTime": crate::control::rfc3339(started),
        "time": wait,
        "request": {
            "method": detail["method"],
            "url": url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": pairs(request_headers),
            "queryString": query_string(url),
            "headersSize": -1,
            "bodySize": -1,
        },
        "response": {
            "status": status,
            "statusText": reason,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": pairs(response_headers),
            "content": {
                "size": length.unwrap_or(0).max(0),
                "mimeType": header(response_headers, "content-type").unwrap_or(""),
            },
            "redirectURL": header(response_headers, "location").unwrap_or(""),
            "headersSize": -1,
            "bodySize": length.unwrap_or(-1),
        },
        "cache": {},
        "timings": { "send": 0, "wait": wait, "receive": 0 },
        "_cubicle": {
            "event": event_id,
            "mode": detail["mode"],
            "download": detail["download"],
            "secrets": detail.get("secrets").cloned().unwrap_or_else(|| json!([])),
        },
    }))
}

/// Workspace `id`'s HAR: every request its proxy saw, oldest first. For
/// those who may read the event log (operators, auditors, admins); the
/// export is an event.
pub async fn har(core: &Core, ctx: &OpContext, id: &str) -> Result<Value, OpError> {
    access::any_workspace(core, ctx, id, Permission::EventsRead).await?;
    let store = &core.store;
    let run = async {
        let mut entries = Vec::new();
        let mut after = 0;
        loop {
            let page = events::list(store, Some(id), after, PAGE)
                .await
                .map_err(|e| OpError::internal(e.to_string()))?;
            let Some(last) = page.last() else { break };
            after = last.id;
            entries.extend(
                page.iter()
                    .filter(|e| e.kind == EventKind::EgressRequest.as_str())
                    .filter_map(|e| entry(e.id, &e.detail)),
            );
        }
        Ok(json!({
            "log": {
                "version": "1.2",
                "creator": { "name": "cubicle", "version": env!("CARGO_PKG_VERSION") },
                "pages": [],
                "entries": entries,
                "comment": format!("workspace {id}: requests its egress proxy saw (credentials and cookies redacted; no bodies; tunnels it did not open are not in it)"),
            }
        }))
    };
    core.audit
        .run(
            ctx,
            EventKind::EventsRead,
            Some(id),
            json!({ "format": "har" }),
            run,
            |har: &Value| json!({ "entries": har["log"]["entries"].as_array().map_or(0, Vec::len) }),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_made_of_what_the_event_kept() {
        let detail = json!({
            "event": "request", "host": "origin.test", "port": 443, "method": "GET",
            "path": "/a?x=1&y", "url": "https://origin.test/a?x=1&y", "status": 302,
            "mode": "intercepted", "started_ms": 1_700_000_000_123_i64, "wait_ms": 12,
            "request_headers": [["accept", "*/*"], ["authorization", "[redacted]"]],
            "response_headers": [["location", "/b"], ["content-length", "5"], ["content-type", "text/plain"]],
            "download": null,
        });
        let e = entry(7, &detail).unwrap();
        assert_eq!(e["startedDateTime"], "2023-11-14T22:13:20.123Z");
        assert_eq!(
            e["request"]["queryString"][1],
            json!({"name": "y", "value": ""})
        );
        assert_eq!(e["request"]["headers"][1]["value"], "[redacted]");
        assert_eq!(e["response"]["statusText"], "Found");
        assert_eq!(e["response"]["redirectURL"], "/b");
        assert_eq!(
            e["response"]["content"],
            json!({"size": 5, "mimeType": "text/plain"})
        );
        assert_eq!(e["_cubicle"]["event"], 7);
        // An event of before the proxy kept URLs and times makes no entry.
        assert!(entry(1, &json!({"status": 200})).is_none());
    }
}
