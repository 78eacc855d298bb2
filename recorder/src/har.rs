//! A workspace's traffic as HAR 1.2, made from its sealed `egress.request`
//! records: one entry per request its egress proxy saw (plain HTTP, and
//! HTTPS it intercepted), with method, URL, status, headers (credentials
//! and cookies redacted when the record was written), when it started and
//! how long the response's head took. It says what the sealed record says
//! and nothing more: no bodies (the proxy keeps none), no sizes but the
//! `Content-Length` a response declared, and no requests inside tunnels it
//! did not open (passthrough hosts).
//!
//! The same code makes `GET /v1/workspaces/{id}/har`, the bundle's
//! `traffic.har`, and what `verify` compares that file with: a bundle's
//! HAR is checked against the records it was made from, like its video.

use serde_json::{Value, json};

use crate::audit_chain::Record;

/// The records a HAR entry is made of.
pub const REQUEST_KIND: &str = "egress.request";

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

/// One HAR entry from an `egress.request` record's detail, if the proxy
/// wrote what an entry needs; `source` names the record (`{"event": id}`
/// in the daemon's log, `{"seq": n}` in a chain) under `_cubicle`.
pub fn entry(source: (&str, i64), detail: &Value) -> Option<Value> {
    let url = detail["url"].as_str()?;
    let status = detail["status"].as_u64()?;
    let started = detail["started_ms"].as_i64()?;
    let wait = detail["wait_ms"].as_u64().unwrap_or(0);
    let request_headers = &detail["request_headers"];
    let response_headers = &detail["response_headers"];
    let length = header(response_headers, "content-length").and_then(|l| l.parse::<i64>().ok());
    let reason = u16::try_from(status)
        .ok()
        .and_then(|s| http::StatusCode::from_u16(s).ok())
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut cubicle = json!({
        "mode": detail["mode"],
        "download": detail["download"],
        "secrets": detail.get("secrets").cloned().unwrap_or_else(|| json!([])),
    });
    // Where each value went; only in records that say (older ones do not,
    // and their HAR must stay as it was made).
    if let Some(swaps) = detail.get("swaps") {
        cubicle["swaps"] = swaps.clone();
    }
    cubicle[source.0] = json!(source.1);
    Some(json!({
        "startedDateTime": rfc3339(started),
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
        "_cubicle": cubicle,
    }))
}

/// A HAR document of `entries` about workspace `workspace`.
pub fn document(workspace: &str, entries: Vec<Value>) -> Value {
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "cubicle", "version": env!("CARGO_PKG_VERSION") },
            "pages": [],
            "entries": entries,
            "comment": format!("workspace {workspace}: requests its egress proxy saw (credentials and cookies redacted; no bodies; tunnels it did not open are not in it)"),
        }
    })
}

/// The HAR of a chain's records (in chain order), entries named by seq.
pub fn of_records<'a>(workspace: &str, records: impl IntoIterator<Item = &'a Record>) -> Value {
    let entries = records
        .into_iter()
        .filter(|record| record.kind == REQUEST_KIND)
        .filter_map(|record| entry(("seq", record.seq as i64), &record.detail))
        .collect();
    document(workspace, entries)
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_made_of_what_the_record_kept() {
        let detail = json!({
            "event": "request", "host": "origin.test", "port": 443, "method": "GET",
            "path": "/a?x=1&y", "url": "https://origin.test/a?x=1&y", "status": 302,
            "mode": "intercepted", "started_ms": 1_700_000_000_123_i64, "wait_ms": 12,
            "request_headers": [["accept", "*/*"], ["authorization", "[redacted]"]],
            "response_headers": [["location", "/b"], ["content-length", "5"], ["content-type", "text/plain"]],
            "download": null,
        });
        let e = entry(("event", 7), &detail).unwrap();
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
        assert!(
            e["_cubicle"].get("swaps").is_none(),
            "none said, none made up"
        );
        let mut swapped = detail.clone();
        swapped["swaps"] = json!([{"secret": "sec-1", "place": "body"}]);
        let e = entry(("event", 8), &swapped).unwrap();
        assert_eq!(e["_cubicle"]["swaps"][0]["place"], "body");
        // A record of before the proxy kept URLs and times makes no entry.
        assert!(entry(("seq", 1), &json!({"status": 200})).is_none());
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
