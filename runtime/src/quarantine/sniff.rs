//! What a body is, by its first bytes, whatever its headers claim.
//!
//! The quarantine holds what runs or opens by itself once saved: an
//! executable (ELF, PE/MZ, Mach-O, Java class, DEX, a Windows shortcut), a
//! script that names its interpreter (`#!`), an archive (zip and everything
//! built on it, gzip, bzip2, xz, zstd, 7z, rar, tar, cpio, ar/deb, rpm, cab,
//! xar, ISO 9660) and a document (PDF, RTF, PostScript, OLE — old Office and
//! MSI —, OpenDocument/OOXML, e-books, SQLite). Web content passes: HTML,
//! XML, text (CSS, JavaScript, JSON are text), images, audio, video, fonts,
//! WebAssembly. JavaScript is page script here: any text can be handed to an
//! interpreter, so text without a `#!` is judged by its name instead (see
//! [`crate::egress::download`]).

/// Bytes looked at, at most.
pub const SNIFF_BYTES: usize = 64 * 1024;

/// What the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Runs by itself; what it is.
    Executable(&'static str),
    /// A script naming its interpreter (`#!`).
    Script,
    /// A container of files; what it is.
    Archive(&'static str),
    /// A document an office suite or reader opens; what it is.
    Document(&'static str),
    /// HTML or XML.
    Page,
    /// Images, audio, video, fonts, WebAssembly.
    Media,
    /// Text with no magic (CSS, JavaScript, JSON, prose, scripts without `#!`).
    Text,
    /// Bytes of no known kind.
    Binary,
    /// Nothing.
    Empty,
}

impl Kind {
    /// Whether the bytes alone are reason to hold them.
    pub fn held(self) -> bool {
        matches!(
            self,
            Self::Executable(_) | Self::Script | Self::Archive(_) | Self::Document(_)
        )
    }

    /// In words, for the held page and the event.
    pub fn describe(self) -> String {
        match self {
            Self::Executable(what) => format!("an executable ({what})"),
            Self::Script => "a script naming its interpreter (#!)".into(),
            Self::Archive(what) => format!("an archive ({what})"),
            Self::Document(what) => format!("a document ({what})"),
            Self::Page => "a page".into(),
            Self::Media => "media".into(),
            Self::Text => "text".into(),
            Self::Binary => "binary data of no known kind".into(),
            Self::Empty => "empty".into(),
        }
    }
}

/// The kind and media type of `head`, the first bytes of a body (the whole
/// body when it is shorter than [`SNIFF_BYTES`]).
pub fn sniff(head: &[u8]) -> (Kind, String) {
    if head.is_empty() {
        return (Kind::Empty, "application/x-empty".into());
    }
    if let Some(found) = magic(head) {
        return found;
    }
    if let Some(kind) = infer::get(head) {
        let mime = kind.mime_type().to_owned();
        return (by_infer(kind.matcher_type(), &mime), mime);
    }
    if is_tar(head) {
        return (Kind::Archive("tar"), "application/x-tar".into());
    }
    if is_iso9660(head) {
        return (
            Kind::Archive("ISO 9660 image"),
            "application/x-iso9660-image".into(),
        );
    }
    if is_text(head) {
        return (Kind::Text, "text/plain".into());
    }
    (Kind::Binary, "application/octet-stream".into())
}

/// Magic numbers `infer` misses or files under a kind that is not ours.
fn magic(head: &[u8]) -> Option<(Kind, String)> {
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let found = |kind, mime: &str| Some((kind, mime.to_owned()));
    if body.starts_with(b"#!") {
        return found(Kind::Script, "text/x-shellscript");
    }
    if head.starts_with(b"\x7FELF") {
        return found(Kind::Executable("ELF"), "application/x-executable");
    }
    if head.starts_with(b"MZ") {
        return found(
            Kind::Executable("Windows MZ/PE"),
            "application/vnd.microsoft.portable-executable",
        );
    }
    const MACH_O: &[[u8; 4]] = &[
        [0xFE, 0xED, 0xFA, 0xCE],
        [0xCE, 0xFA, 0xED, 0xFE],
        [0xFE, 0xED, 0xFA, 0xCF],
        [0xCF, 0xFA, 0xED, 0xFE],
        [0xCA, 0xFE, 0xBA, 0xBE],
        [0xBE, 0xBA, 0xFE, 0xCA],
    ];
    if MACH_O.iter().any(|m| head.starts_with(m)) {
        return found(
            Kind::Executable("Mach-O or Java class"),
            "application/x-mach-binary",
        );
    }
    if head.starts_with(&[0x4C, 0, 0, 0, 0x01, 0x14, 0x02, 0]) {
        return found(
            Kind::Executable("Windows shortcut"),
            "application/x-ms-shortcut",
        );
    }
    if head.starts_with(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) {
        return found(
            Kind::Document("OLE compound file: Office, MSI"),
            "application/x-ole-storage",
        );
    }
    if head.starts_with(b"xar!") {
        return found(Kind::Archive("xar"), "application/x-xar");
    }
    let cpio = [
        b"070707".as_slice(),
        b"070701",
        b"070702",
        &[0xC7, 0x71],
        &[0x71, 0xC7],
    ];
    if cpio.iter().any(|m| head.starts_with(m)) {
        return found(Kind::Archive("cpio"), "application/x-cpio");
    }
    if body.starts_with(b"{\\rtf") {
        return found(Kind::Document("RTF"), "application/rtf");
    }
    if head.starts_with(b"%!PS") {
        return found(Kind::Document("PostScript"), "application/postscript");
    }
    None
}

fn by_infer(matcher: infer::MatcherType, mime: &str) -> Kind {
    use infer::MatcherType as M;
    match matcher {
        M::App if mime == "application/wasm" => Kind::Media,
        M::App => Kind::Executable("program"),
        M::Archive => match mime {
            "application/pdf" => Kind::Document("PDF"),
            "application/rtf" => Kind::Document("RTF"),
            "application/postscript" => Kind::Document("PostScript"),
            "application/vnd.sqlite3" | "application/x-sqlite3" => Kind::Document("SQLite"),
            "application/vnd.ms-fontobject" => Kind::Media,
            "application/x-tar" => Kind::Archive("tar"),
            _ => Kind::Archive("compressed or packed"),
        },
        M::Book => Kind::Document("e-book"),
        M::Doc => Kind::Document("office"),
        M::Image | M::Video | M::Audio | M::Font => Kind::Media,
        M::Text if mime == "text/x-shellscript" => Kind::Script,
        M::Text => Kind::Page,
        M::Custom => Kind::Binary,
    }
}

/// A tar header (old v7 ones have no magic): its checksum adds up.
fn is_tar(head: &[u8]) -> bool {
    let Some(header) = head.get(..512) else {
        return false;
    };
    let field = &header[148..156];
    let digits: String = field
        .iter()
        .take_while(|&&b| b != 0 && b != b' ')
        .map(|&b| b as char)
        .skip_while(|c| *c == ' ')
        .collect();
    let Ok(recorded) = u32::from_str_radix(digits.trim(), 8) else {
        return false;
    };
    let sum: u32 = header
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    header[0] != 0 && recorded == sum
}

/// `CD001` in one of the first volume descriptors.
fn is_iso9660(head: &[u8]) -> bool {
    [0x8001usize, 0x8801, 0x9001]
        .iter()
        .any(|&at| head.get(at..at + 5) == Some(b"CD001"))
}

/// UTF-8 (a character cut at the end counts), or UTF-16 with a BOM, and no
/// NUL or control bytes but whitespace and escape.
fn is_text(head: &[u8]) -> bool {
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return true;
    }
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(err) => err.error_len().is_none(),
    };
    valid
        && !head
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0C | 0x1B))
}

/// Bytes after which a kind other than [`Kind::Binary`] is final (a tar
/// header is 512; an ISO 9660 image shows at 32 KiB, after a system area
/// of no known kind, so binary bytes are read on to [`SNIFF_BYTES`]).
pub const SETTLED_BYTES: usize = 1024;

/// Whether `head` is enough to judge the body.
pub fn enough(head: &[u8]) -> bool {
    head.len() >= SNIFF_BYTES || (head.len() >= SETTLED_BYTES && sniff(head).0 != Kind::Binary)
}

/// Whether `head` may be judged now although it is short (the server
/// paused: a stream of events, a slow page): its kind is known and no
/// magic that starts as text could still follow. Binary bytes of no known
/// kind wait for more.
pub fn settled(head: &[u8]) -> bool {
    const TEXT_MAGICS: &[&[u8]] = &[
        b"#!",
        b"\xEF\xBB\xBF#!",
        b"MZ",
        b"%PDF",
        b"{\\rtf",
        b"%!PS",
        b"!<arch>",
        b"070707",
        b"070701",
        b"070702",
        b"xar!",
        b"Rar!",
        b"PK",
        b"BZh",
    ];
    let kind = sniff(head).0;
    let magic_may_follow = kind == Kind::Text && TEXT_MAGICS.iter().any(|m| m.starts_with(head));
    !head.is_empty() && kind != Kind::Binary && !magic_may_follow
}

/// Extensions of files that run, or open as archives or documents, once
/// saved; what they are. JavaScript (`.js`, `.mjs`) is page script and not
/// listed; nor are server-side page names (`.php`, `.asp`, `.cgi`) whose
/// answers are pages.
const RUNNABLE: &[(&str, &[&str])] = &[
    (
        "a program",
        &[
            "exe", "com", "scr", "msi", "msp", "msix", "appx", "dll", "so", "dylib", "app",
            "appimage", "run", "bin", "elf", "out", "deb", "rpm", "apk", "ipa", "jar", "pkg",
            "dmg", "iso", "img", "vhd", "vhdx", "lnk", "desktop", "cpl", "msc", "reg", "hta",
            "chm", "sys", "ko", "xpi", "crx", "flatpak", "snap",
        ],
    ),
    (
        "a script",
        &[
            "sh",
            "bash",
            "zsh",
            "ksh",
            "csh",
            "tcsh",
            "fish",
            "command",
            "tool",
            "py",
            "pyw",
            "pyc",
            "pl",
            "pm",
            "rb",
            "ps1",
            "psm1",
            "psd1",
            "bat",
            "cmd",
            "vbs",
            "vbe",
            "jse",
            "wsf",
            "wsh",
            "ws",
            "scpt",
            "applescript",
            "lua",
            "tcl",
        ],
    ),
    (
        "an archive",
        &[
            "zip", "tar", "gz", "tgz", "bz2", "tbz", "tbz2", "xz", "txz", "zst", "lz", "lzma", "z",
            "7z", "rar", "cab", "ar", "cpio", "xar",
        ],
    ),
    (
        "a document",
        &[
            "doc", "docx", "docm", "dot", "dotm", "xls", "xlsx", "xlsm", "xlsb", "ppt", "pptx",
            "pptm", "odt", "ods", "odp", "rtf", "pdf", "one",
        ],
    ),
];

/// What a file of this name is when saved, if its extension says it runs,
/// is an archive or a document (case, trailing dots and spaces aside).
pub fn runnable_name(name: &str) -> Option<&'static str> {
    let name = name.trim_end_matches(['.', ' ']);
    let (_, ext) = name.rsplit_once('.')?;
    let ext = ext.to_ascii_lowercase();
    RUNNABLE
        .iter()
        .find(|(_, exts)| exts.contains(&ext.as_str()))
        .map(|(what, _)| *what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(bytes: &[u8]) -> Kind {
        sniff(bytes).0
    }

    fn tar_with(name: &str, data: &[u8]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o755);
        header.set_cksum();
        builder.append_data(&mut header, name, data).unwrap();
        builder.into_inner().unwrap()
    }

    #[test]
    fn executables_scripts_archives_and_documents_are_held() {
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        assert_eq!(kind(&elf), Kind::Executable("ELF"));
        assert!(kind(b"MZ\x90\0\x03").held());
        assert!(kind(&[0xCF, 0xFA, 0xED, 0xFE, 7, 0, 0, 1]).held());
        assert_eq!(kind(b"#!/bin/sh\necho hi\n"), Kind::Script);
        assert_eq!(kind(b"\xEF\xBB\xBF#!/usr/bin/env python3\n"), Kind::Script);
        assert!(matches!(kind(b"PK\x03\x04\x14\0\0\0"), Kind::Archive(_)));
        assert!(matches!(
            kind(&[0x1F, 0x8B, 8, 0, 0, 0, 0, 0]),
            Kind::Archive(_)
        ));
        assert!(matches!(kind(b"BZh91AY&SY"), Kind::Archive(_)));
        assert!(matches!(
            kind(&[0xFD, b'7', b'z', b'X', b'Z', 0]),
            Kind::Archive(_)
        ));
        assert!(matches!(
            kind(b"!<arch>\ndebian-binary   "),
            Kind::Archive(_)
        ));
        assert_eq!(kind(&tar_with("run.sh", b"echo hi")), Kind::Archive("tar"));
        let mut old_tar = tar_with("x", b"y");
        old_tar[257..265].fill(0); // no ustar magic: a v7 header
        let mut header = tar::Header::from_byte_slice(&old_tar[..512]).clone();
        header.set_cksum();
        old_tar[..512].copy_from_slice(header.as_bytes());
        assert_eq!(kind(&old_tar), Kind::Archive("tar"));
        let mut iso = vec![0u8; 0x8010];
        iso[0x8001..0x8006].copy_from_slice(b"CD001");
        assert!(matches!(kind(&iso), Kind::Archive(_)));
        assert_eq!(kind(b"%PDF-1.7\n"), Kind::Document("PDF"));
        assert!(matches!(kind(b"{\\rtf1\\ansi"), Kind::Document(_)));
        let mut ole = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
        ole.resize(512, 0);
        assert!(matches!(kind(&ole), Kind::Document(_)));
    }

    #[test]
    fn web_content_passes() {
        assert_eq!(kind(b"<!doctype html><title>x</title>"), Kind::Page);
        assert_eq!(kind(b"<?xml version=\"1.0\"?><a/>"), Kind::Page);
        assert_eq!(kind(b"body { color: red }"), Kind::Text);
        assert_eq!(kind(b"function f() { return 1 }"), Kind::Text);
        assert_eq!(kind(b"{\"a\": [1, 2]}"), Kind::Text);
        assert_eq!(kind(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Kind::Media);
        assert_eq!(kind(b"\0asm\x01\0\0\0"), Kind::Media);
        assert_eq!(kind("é".repeat(10).as_bytes()), Kind::Text);
        assert_eq!(kind(&"é".as_bytes()[..1]), Kind::Text, "a cut character");
        assert_eq!(kind(b"\0\x01\x02\xff"), Kind::Binary);
        assert_eq!(kind(b""), Kind::Empty);
        assert!(!kind(b"<!doctype html>").held());
    }

    #[test]
    fn names_that_run_or_open_once_saved() {
        assert_eq!(runnable_name("install.SH"), Some("a script"));
        assert_eq!(runnable_name("setup.exe. "), Some("a program"));
        assert_eq!(runnable_name("a.tar.gz"), Some("an archive"));
        assert_eq!(runnable_name("report.pdf"), Some("a document"));
        assert_eq!(runnable_name("app.js"), None, "page script");
        assert_eq!(runnable_name("index.php"), None);
        assert_eq!(runnable_name("README"), None);
        assert_eq!(runnable_name(""), None);
    }

    #[test]
    fn short_bodies_wait_only_while_a_magic_may_follow() {
        assert!(!settled(b"#"));
        assert!(!settled(b"M"));
        assert!(!settled(b"%PD"));
        assert!(!settled(b"\0\x01"), "binary of no known kind");
        assert!(!settled(b""));
        assert!(settled(b"data: hello\n\n"), "an event stream's first event");
        assert!(settled(b"#!"), "held at once");
        assert!(!enough(b"<html>"));
        assert!(enough("x".repeat(SETTLED_BYTES).as_bytes()));
        assert!(!enough(&[0u8; SETTLED_BYTES]), "an ISO's system area");
        assert!(enough(&vec![0u8; SNIFF_BYTES]));
    }
}
