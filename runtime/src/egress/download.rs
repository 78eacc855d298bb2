//! Which responses are downloads: a `Content-Disposition: attachment`, or
//! a type Chromium would not render (archives, executables, office
//! documents, octet-stream). PDFs and images are rendered, so they pass
//! unless sent as attachments.

use hyper::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderMap};

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

/// Whether a response with `headers` to a request for `path` is a download.
pub fn offer(path: &str, headers: &HeaderMap) -> Option<Offer> {
    let claimed_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty());
    let disposition = headers
        .get(CONTENT_DISPOSITION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let attachment = disposition.as_deref().is_some_and(|d| {
        d.split(';')
            .next()
            .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("attachment"))
    });
    if !attachment && !claimed_type.as_deref().is_some_and(is_download_type) {
        return None;
    }
    let name = disposition
        .as_deref()
        .and_then(disposition_name)
        .unwrap_or_else(|| url_name(path));
    Some(Offer { name, claimed_type })
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

fn percent_decode(text: &str) -> String {
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

    #[test]
    fn attachments_and_binary_types_are_downloads() {
        let pdf_inline = headers(&[(&CONTENT_TYPE, "application/pdf")]);
        assert_eq!(offer("/a.pdf", &pdf_inline), None);
        let html = headers(&[(&CONTENT_TYPE, "text/html; charset=utf-8")]);
        assert_eq!(offer("/", &html), None);
        let pdf_saved = headers(&[
            (&CONTENT_TYPE, "application/pdf"),
            (&CONTENT_DISPOSITION, "attachment; filename=\"report.pdf\""),
        ]);
        assert_eq!(
            offer("/x", &pdf_saved),
            Some(Offer {
                name: "report.pdf".into(),
                claimed_type: Some("application/pdf".into())
            })
        );
        let zip = headers(&[(&CONTENT_TYPE, "application/zip")]);
        assert_eq!(offer("/files/a%20b.zip?x=1", &zip).unwrap().name, "a b.zip");
        let docx = headers(&[(
            &CONTENT_TYPE,
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )]);
        assert!(offer("/d.docx", &docx).is_some());
        let utf8 = headers(&[(
            &CONTENT_DISPOSITION,
            "attachment; filename=\"plain.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt",
        )]);
        assert_eq!(offer("/", &utf8).unwrap().name, "€ rates.txt");
        assert_eq!(offer("/", &utf8).unwrap().claimed_type, None);
        let inline = headers(&[(&CONTENT_DISPOSITION, "inline; filename=a.exe")]);
        assert_eq!(offer("/", &inline), None);
    }

    #[test]
    fn percent_decoding_survives_truncated_escapes() {
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%41%42"), "AB");
    }
}
