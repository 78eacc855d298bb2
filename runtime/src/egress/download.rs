//! Which responses go to quarantine ([`judge`]): by their bytes first — an
//! executable, a script, an archive or a document
//! ([`crate::quarantine::sniff`]), whatever the status and headers say —,
//! then what a browser would save (a disposition other than `inline`, a
//! download type such as octet-stream), then text named like a file that
//! runs once saved (`install.sh`, `setup.py`). Pages, text, images and
//! media pass.

use hyper::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderMap};

use crate::quarantine::sniff::{self, Kind};

/// What the response offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The file name the server suggested (raw; cleaned before use), or
    /// the last segment of the URL path.
    pub name: String,
    /// The media type the server claimed.
    pub claimed_type: Option<String>,
}

/// Media types (and prefixes ending in `*`) that are downloads whatever
/// the disposition.
const DOWNLOAD_TYPES: &[&str] = &[
    "application/octet-stream",
    "application/zip",
    "application/x-zip-compressed",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/x-bzip2",
    "application/x-xz",
    "application/x-7z-compressed",
    "application/vnd.rar",
    "application/x-rar-compressed",
    "application/java-archive",
    "application/x-msdownload",
    "application/x-msdos-program",
    "application/x-msi",
    "application/x-executable",
    "application/x-elf",
    "application/x-sharedlib",
    "application/x-sh",
    "application/x-debian-package",
    "application/x-rpm",
    "application/x-apple-diskimage",
    "application/x-iso9660-image",
    "application/vnd.microsoft.portable-executable",
    "application/msword",
    "application/vnd.ms-*",
    "application/vnd.openxmlformats-officedocument.*",
    "application/vnd.oasis.opendocument.*",
    "application/rtf",
];

fn is_download_type(media: &str) -> bool {
    DOWNLOAD_TYPES
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => media.starts_with(prefix),
            None => media == *pattern,
        })
}

/// A response the quarantine takes instead of the client, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub offer: Offer,
    /// In words, for the page the client gets and the event.
    pub because: String,
}

/// Every media type the response claims (each `Content-Type` header, and
/// each of a comma-separated list), lower case, without parameters.
fn claimed_types(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(CONTENT_TYPE)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .flat_map(|v| {
            v.split(',')
                .map(|t| {
                    t.split(';')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_ascii_lowercase()
                })
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Why a browser would save this response to disk rather than show it,
/// by its headers: a disposition other than `inline` (an unknown type is
/// an attachment, RFC 6266), more than one disposition, or a claimed type
/// that is a download.
fn saved_by_headers(headers: &HeaderMap, claimed: &[String]) -> Option<String> {
    let dispositions: Vec<String> = headers
        .get_all(CONTENT_DISPOSITION)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    if dispositions.len() > 1 {
        return Some("it came with more than one Content-Disposition".into());
    }
    if let Some(disposition) = dispositions.first() {
        let kind = disposition.split(';').next().unwrap_or_default().trim();
        if !kind.eq_ignore_ascii_case("inline") {
            return Some(format!(
                "Content-Disposition `{}` makes a browser save it",
                kind.chars().take(40).collect::<String>()
            ));
        }
    }
    claimed
        .iter()
        .find(|media| is_download_type(media))
        .map(|media| format!("it was served as {media}, which a browser saves"))
}

/// Whether the response to a request for `path`, with `headers`, whose
/// (decoded) body sniffed as `kind`, goes to quarantine, and why. The bytes
/// come first: an executable, a script, an archive or a document is held
/// whatever the headers say; then what a browser would save; then text or
/// unknown bytes named like something that runs once saved (`install.sh`).
pub fn judge(path: &str, headers: &HeaderMap, kind: Kind) -> Option<Held> {
    let claimed = claimed_types(headers);
    let name = held(path, headers, String::new()).offer.name;
    let named = || {
        let by_name = matches!(kind, Kind::Text | Kind::Binary | Kind::Empty);
        by_name
            .then(|| sniff::runnable_name(&name))
            .flatten()
            .map(|what| format!("it is named {name}, {what}"))
    };
    let because = if kind.held() {
        Some(format!("the bytes are {}", kind.describe()))
    } else {
        saved_by_headers(headers, &claimed).or_else(named)
    }?;
    Some(held(path, headers, because))
}

/// Whether the headers alone send the response to quarantine (what a
/// browser would save): then its bytes need not be read first.
pub fn by_headers(path: &str, headers: &HeaderMap) -> Option<Held> {
    saved_by_headers(headers, &claimed_types(headers)).map(|because| held(path, headers, because))
}

/// The response held for `because`, whatever its bytes.
pub fn held(path: &str, headers: &HeaderMap, because: String) -> Held {
    let name = headers
        .get(CONTENT_DISPOSITION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .as_deref()
        .and_then(disposition_name)
        .unwrap_or_else(|| url_name(path));
    Held {
        offer: Offer {
            name,
            claimed_type: claimed_types(headers).into_iter().next(),
        },
        because,
    }
}

/// `filename*=UTF-8''...` (percent-decoded) or `filename="..."`.
fn disposition_name(disposition: &str) -> Option<String> {
    let mut plain = None;
    for part in disposition.split(';').skip(1) {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        if key == "filename*" {
            let encoded = value.split_once("''").map_or(value, |(_, v)| v);
            return Some(percent_decode(encoded));
        }
        if key == "filename" {
            plain = Some(value.trim_matches('"').to_owned());
        }
    }
    plain
}

fn url_name(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    percent_decode(path.rsplit('/').next().unwrap_or_default())
}

/// `text` with its `%XX` escapes undone (a `%` that starts none is kept).
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&hyper::header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert((*name).clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn because(
        path: &str,
        pairs: &[(&hyper::header::HeaderName, &str)],
        kind: Kind,
    ) -> Option<String> {
        judge(path, &headers(pairs), kind).map(|held| held.because)
    }

    #[test]
    fn the_bytes_decide_whatever_the_headers_say() {
        let exe = Kind::Executable("ELF");
        for claimed in ["text/plain", "image/png", "text/html; charset=utf-8"] {
            let held = because("/x", &[(&CONTENT_TYPE, claimed)], exe).unwrap();
            assert!(held.contains("an executable (ELF)"), "{held}");
        }
        assert!(because("/x", &[], exe).is_some(), "no type");
        assert!(because("/x", &[(&CONTENT_DISPOSITION, "inline")], Kind::Script).is_some());
        assert!(because("/a.zip", &[], Kind::Archive("zip")).is_some());
        assert!(
            because(
                "/a.pdf",
                &[(&CONTENT_TYPE, "application/pdf")],
                Kind::Document("PDF")
            )
            .is_some()
        );
        // Pages, text and media pass.
        assert_eq!(
            because("/", &[(&CONTENT_TYPE, "text/html")], Kind::Page),
            None
        );
        assert_eq!(
            because("/app.js", &[(&CONTENT_TYPE, "text/javascript")], Kind::Text),
            None
        );
        assert_eq!(
            because("/a.png", &[(&CONTENT_TYPE, "image/png")], Kind::Media),
            None
        );
        assert_eq!(
            because("/api", &[(&CONTENT_TYPE, "application/json")], Kind::Text),
            None
        );
        assert_eq!(because("/index.php", &[], Kind::Text), None);
    }

    #[test]
    fn what_a_browser_would_save_is_held_too() {
        let page = Kind::Page;
        let held = because(
            "/x",
            &[(&CONTENT_DISPOSITION, "attachment; filename=a.html")],
            page,
        );
        assert!(held.unwrap().contains("`attachment`"));
        let held = because(
            "/x",
            &[(&CONTENT_DISPOSITION, "x-unknown-kind")],
            Kind::Text,
        );
        assert!(
            held.unwrap().contains("`x-unknown-kind`"),
            "unknown is attachment"
        );
        let mut two = headers(&[(&CONTENT_DISPOSITION, "inline")]);
        two.append(CONTENT_DISPOSITION, HeaderValue::from_static("inline"));
        assert!(judge("/x", &two, Kind::Text).is_some());
        let mut types = headers(&[(&CONTENT_TYPE, "text/plain")]);
        types.append(
            CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        assert!(
            judge("/x", &types, Kind::Binary)
                .unwrap()
                .because
                .contains("octet-stream")
        );
        assert!(
            because(
                "/x",
                &[(&CONTENT_TYPE, "text/plain, application/zip")],
                Kind::Text
            )
            .is_some()
        );
        assert!(
            because("/install.sh", &[(&CONTENT_TYPE, "text/plain")], Kind::Text)
                .unwrap()
                .contains("a script")
        );
        assert!(
            because(
                "/x",
                &[(&CONTENT_DISPOSITION, "inline; filename=\"run.py\"")],
                Kind::Text
            )
            .is_some()
        );
        assert_eq!(
            because("/install.sh", &[], Kind::Page),
            None,
            "a page named .sh is a page"
        );
    }

    #[test]
    fn the_offer_names_the_file() {
        let held = judge(
            "/files/a%20b.zip?x=1",
            &headers(&[(&CONTENT_TYPE, "application/zip")]),
            Kind::Archive("zip"),
        )
        .unwrap();
        assert_eq!(held.offer.name, "a b.zip");
        assert_eq!(held.offer.claimed_type.as_deref(), Some("application/zip"));
        let utf8 = headers(&[(
            &CONTENT_DISPOSITION,
            "attachment; filename=\"plain.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt",
        )]);
        let held = judge("/", &utf8, Kind::Text).unwrap();
        assert_eq!(held.offer.name, "€ rates.txt");
        assert_eq!(held.offer.claimed_type, None);
    }

    #[test]
    fn percent_decoding_survives_truncated_escapes() {
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%41%42"), "AB");
    }
}
