//! Looking inside held archives: zip (and what is built on it: jar, apk,
//! OOXML), tar, gzip (a `.tar.gz` is both), nested up to [`MAX_DEPTH`]. Each
//! member is sniffed ([`super::sniff`]), named ([`super::sniff::runnable_name`])
//! and scanned with the YARA rules. What it finds becomes hits on the record,
//! so a policy never releases such an archive by itself:
//!
//! - `archive_contains_executable`: a member is an executable or a script
//!   (by its bytes or its name), with the member's path;
//! - `archive_not_inspected`: something was not seen — a format the scanner
//!   cannot open (7z, rar, xz, bzip2, zstd, cab, ISO, ...), an encrypted
//!   member, a member that does not unpack, more than [`MAX_MEMBERS`]
//!   members or [`MAX_UNPACKED`] bytes unpacked (a "zip bomb").
//!
//! An archive without hits had every member seen and found clean.

use std::cell::Cell;
use std::io::{Read, Seek};
use std::path::Path;
use std::rc::Rc;

use super::scan::{Hit, Scanner};
use super::sniff::{self, Kind, SNIFF_BYTES};

/// Archives inside archives, at most.
pub const MAX_DEPTH: usize = 4;
/// Members looked at, at most, in all.
pub const MAX_MEMBERS: usize = 10_000;
/// Bytes unpacked, at most, in all.
pub const MAX_UNPACKED: u64 = 2 << 30;
/// A member's bytes scanned by the YARA rules, and a nested zip read into
/// memory, at most.
const MAX_IN_MEMORY: u64 = 64 << 20;

pub const CONTAINS_EXECUTABLE: &str = "archive_contains_executable";
pub const NOT_INSPECTED: &str = "archive_not_inspected";

/// What is left of the limits while walking one archive.
struct Walk<'a> {
    scanner: &'a Scanner,
    members: usize,
    /// Bytes unpacked so far, counted by every [`Counting`] reader.
    unpacked: Rc<Cell<u64>>,
    /// At most this many bytes unpacked.
    limit: u64,
    hits: Vec<Hit>,
}

impl Walk<'_> {
    fn hit(&mut self, rule: &str, description: String) {
        if self.hits.len() < 100 {
            self.hits.push(Hit {
                rule: rule.to_owned(),
                description: Some(description),
                severity: Some(
                    if rule == CONTAINS_EXECUTABLE {
                        "high"
                    } else {
                        "medium"
                    }
                    .to_owned(),
                ),
            });
        }
    }

    fn counting<R: Read>(&self, inner: R) -> Counting<R> {
        Counting {
            inner,
            unpacked: self.unpacked.clone(),
            limit: self.limit,
        }
    }

    fn unseen(&mut self, path: &str, why: impl std::fmt::Display) {
        self.hit(NOT_INSPECTED, format!("{path}: {why}"));
    }

    fn over_limits(&mut self, path: &str) -> bool {
        if self.members > MAX_MEMBERS {
            self.unseen(
                path,
                format!("more than {MAX_MEMBERS} members; the rest were not looked at"),
            );
            return true;
        }
        if self.unpacked.get() > self.limit {
            let limit = self.limit;
            self.unseen(
                path,
                format!("more than {limit} bytes unpacked; the rest were not looked at"),
            );
            return true;
        }
        false
    }
}

/// Counts what is read through it into the walk's budget, and stops when
/// it is spent.
struct Counting<R> {
    inner: R,
    unpacked: Rc<Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.unpacked.get() > self.limit {
            return Err(std::io::Error::other(format!(
                "more than {} bytes unpacked",
                self.limit
            )));
        }
        let n = self.inner.read(buf)?;
        self.unpacked.set(self.unpacked.get() + n as u64);
        Ok(n)
    }
}

/// The hits of the archive stored at `path` (blocking: call from a
/// blocking thread). Empty when it is no archive, or every member was seen
/// and clean.
pub fn inspect(path: &Path, scanner: &Scanner) -> std::io::Result<Vec<Hit>> {
    inspect_within(path, scanner, MAX_UNPACKED)
}

fn inspect_within(path: &Path, scanner: &Scanner, limit: u64) -> std::io::Result<Vec<Hit>> {
    let mut file = std::fs::File::open(path)?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    file.rewind()?;
    let mut walk = Walk {
        scanner,
        members: 0,
        unpacked: Rc::new(Cell::new(0)),
        limit,
        hits: Vec::new(),
    };
    let (kind, _) = sniff::sniff(&head);
    if !matches!(kind, Kind::Archive(_) | Kind::Document(_)) {
        return Ok(Vec::new());
    }
    if head.starts_with(b"PK") {
        zip(&mut walk, "", file, 0);
    } else {
        member(&mut walk, "", &mut file, 0, false);
    }
    Ok(walk.hits)
}

/// Walks a zip's members.
fn zip<R: Read + Seek>(walk: &mut Walk<'_>, path: &str, reader: R, depth: usize) {
    let mut archive = match zip::ZipArchive::new(reader) {
        Ok(archive) => archive,
        Err(err) => return walk.unseen(or_top(path), format!("the zip does not open: {err}")),
    };
    for index in 0..archive.len() {
        walk.members += 1;
        if walk.over_limits(or_top(path)) {
            return;
        }
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(err) => {
                walk.unseen(
                    &format!("{path}#{index}"),
                    format!("does not unpack: {err}"),
                );
                continue;
            }
        };
        let name = entry
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_else(|_| format!("#{index}"));
        let inner = format!("{path}/{name}");
        if entry.is_dir() {
            continue;
        }
        if entry.encrypted() {
            walk.unseen(&inner, "encrypted");
            continue;
        }
        let mut counted = walk.counting(&mut entry);
        member(walk, &inner, &mut counted, depth, true);
    }
}

fn or_top(path: &str) -> &str {
    if path.is_empty() { "the archive" } else { path }
}

/// Judges one member (or the whole stored file when `path` is empty):
/// sniffs it, names it, unpacks what it can, scans the rest.
/// (Readers are `dyn`: members nest readers in readers, as deep as the
/// archive goes.)
fn member(walk: &mut Walk<'_>, path: &str, reader: &mut dyn Read, depth: usize, scan: bool) {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    if let Err(err) = reader.take(SNIFF_BYTES as u64).read_to_end(&mut head) {
        return walk.unseen(or_top(path), format!("does not unpack: {err}"));
    }
    let (kind, _) = sniff::sniff(&head);
    let name = path.rsplit('/').next().unwrap_or_default();
    match kind {
        Kind::Executable(what) => {
            return walk.hit(
                CONTAINS_EXECUTABLE,
                format!("{path}: an executable ({what})"),
            );
        }
        Kind::Script => {
            return walk.hit(CONTAINS_EXECUTABLE, format!("{path}: a script (#!)"));
        }
        _ => {}
    }
    if !path.is_empty()
        && !kind.held()
        && let Some(what) = sniff::runnable_name(name)
    {
        walk.hit(CONTAINS_EXECUTABLE, format!("{path}: named as {what}"));
    }
    let mut rest = std::io::Cursor::new(head.clone()).chain(reader);
    if let Kind::Archive(what) = kind {
        if depth >= MAX_DEPTH {
            return walk.unseen(or_top(path), format!("nested more than {MAX_DEPTH} deep"));
        }
        if head.starts_with(&[0x1F, 0x8B]) {
            let mut decoded = walk.counting(flate2::read::MultiGzDecoder::new(&mut rest));
            let stem = name
                .strip_suffix(".gz")
                .or_else(|| name.strip_suffix(".tgz"))
                .unwrap_or(name);
            let inner = if path.is_empty() {
                format!(
                    "/{}",
                    if stem.is_empty() {
                        "(gzip content)"
                    } else {
                        stem
                    }
                )
            } else {
                format!("{path}!gunzip")
            };
            return member(walk, &inner, &mut decoded, depth + 1, true);
        }
        if what == "tar" || head.get(257..262) == Some(b"ustar") {
            return tar(walk, path, &mut rest, depth + 1);
        }
        if head.starts_with(b"PK") {
            let mut bytes = Vec::new();
            match rest.take(MAX_IN_MEMORY + 1).read_to_end(&mut bytes) {
                Ok(n) if n as u64 <= MAX_IN_MEMORY => {
                    return zip(walk, path, std::io::Cursor::new(bytes), depth + 1);
                }
                Ok(_) => return walk.unseen(or_top(path), "a nested zip over 64 MiB"),
                Err(err) => return walk.unseen(or_top(path), format!("does not unpack: {err}")),
            }
        }
        return walk.unseen(
            or_top(path),
            format!("the scanner cannot open {what} archives"),
        );
    }
    if scan && !path.is_empty() {
        let mut bytes = Vec::new();
        if let Err(err) = rest.take(MAX_IN_MEMORY).read_to_end(&mut bytes) {
            return walk.unseen(path, format!("does not unpack: {err}"));
        }
        match walk.scanner.scan_bytes(&bytes) {
            Ok(hits) => {
                for hit in hits {
                    let description = format!(
                        "{path}: {}",
                        hit.description.as_deref().unwrap_or(hit.rule.as_str())
                    );
                    walk.hit(&hit.rule, description);
                }
            }
            Err(err) => walk.unseen(path, err),
        }
    }
}

/// Walks a tar's members.
fn tar(walk: &mut Walk<'_>, path: &str, reader: &mut dyn Read, depth: usize) {
    let mut archive = tar::Archive::new(reader);
    let entries = match archive.entries() {
        Ok(entries) => entries,
        Err(err) => return walk.unseen(or_top(path), format!("the tar does not open: {err}")),
    };
    for entry in entries {
        walk.members += 1;
        if walk.over_limits(or_top(path)) {
            return;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => return walk.unseen(or_top(path), format!("the tar breaks off: {err}")),
        };
        let name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "(unreadable name)".into());
        let inner = format!("{path}/{name}");
        let kind = entry.header().entry_type();
        if kind.is_dir() || kind.is_symlink() || kind.is_hard_link() {
            continue;
        }
        if !kind.is_file() {
            continue; // devices and fifos carry no bytes
        }
        let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
        if executable {
            walk.hit(CONTAINS_EXECUTABLE, format!("{inner}: marked executable"));
        }
        let mut counted = walk.counting(entry);
        member(walk, &inner, &mut counted, depth, true);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn scanner() -> &'static Scanner {
        static SCANNER: std::sync::OnceLock<Scanner> = std::sync::OnceLock::new();
        SCANNER.get_or_init(|| Scanner::new(None).unwrap())
    }

    fn elf() -> Vec<u8> {
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        elf
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn tar_of(members: &[(&str, &[u8], u32)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data, mode) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(*mode);
            header.set_cksum();
            builder.append_data(&mut header, name, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in members {
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            writer.start_file(*name, options).unwrap();
            writer.write_all(data).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    fn rules_of(bytes: &[u8]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        std::fs::write(&path, bytes).unwrap();
        let mut rules: Vec<String> = inspect(&path, scanner())
            .unwrap()
            .into_iter()
            .map(|h| format!("{} {}", h.rule, h.description.unwrap_or_default()))
            .collect();
        rules.sort();
        rules
    }

    #[test]
    fn an_executable_inside_is_found_through_every_layer() {
        let gz = gzip(&elf());
        assert_eq!(
            rules_of(&gz),
            ["archive_contains_executable /(gzip content): an executable (ELF)"]
        );
        let tgz = gzip(&tar_of(&[
            ("docs/readme.txt", b"hello", 0o644),
            ("bin/tool", &elf(), 0o644),
        ]));
        let found = rules_of(&tgz);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("bin/tool: an executable (ELF)"),
            "{found:?}"
        );
        let nested = zip_of(&[
            ("a.txt", b"plain"),
            ("inner.zip", &zip_of(&[("x.sh", b"echo hi")])),
        ]);
        let found = rules_of(&nested);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("inner.zip/x.sh: named as a script"),
            "{found:?}"
        );
        let marked = tar_of(&[("run", b"echo hi", 0o755)]);
        assert!(rules_of(&marked)[0].contains("marked executable"));
        let eicar = zip_of(&[("test.txt", crate::quarantine::scan::EICAR)]);
        assert!(rules_of(&eicar)[0].starts_with("eicar_test_file /test.txt"));
    }

    #[test]
    fn clean_archives_have_no_hits_and_unopened_ones_are_said() {
        assert!(rules_of(&zip_of(&[("a.txt", b"plain"), ("b.css", b"p{}")])).is_empty());
        assert!(rules_of(&gzip(&tar_of(&[("a.txt", b"hello", 0o644)]))).is_empty());
        assert!(rules_of(b"<!doctype html>").is_empty(), "not an archive");
        let mut xz = vec![0xFD, b'7', b'z', b'X', b'Z', 0];
        xz.resize(64, 0);
        assert_eq!(rules_of(&xz).len(), 1);
        assert!(
            rules_of(&xz)[0].starts_with(NOT_INSPECTED),
            "{:?}",
            rules_of(&xz)
        );
        let broken = gzip(&elf())[..10].to_vec();
        assert!(rules_of(&broken)[0].starts_with(NOT_INSPECTED));
        let mut cut_zip = zip_of(&[("a.txt", b"plain")]);
        cut_zip.truncate(cut_zip.len() - 10);
        assert!(rules_of(&cut_zip)[0].starts_with(NOT_INSPECTED));
    }

    #[test]
    fn a_bomb_is_stopped_and_said() {
        let bomb = gzip(&gzip(&vec![0u8; 8 << 20]));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        std::fs::write(&path, &bomb).unwrap();
        let hits = inspect_within(&path, scanner(), 1 << 20).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].rule, NOT_INSPECTED);
        assert!(
            hits[0]
                .description
                .as_deref()
                .unwrap()
                .contains("bytes unpacked"),
            "{hits:?}"
        );
        let many: Vec<(String, &[u8])> = (0..50)
            .map(|i| (format!("f{i}.txt"), b"x".as_slice()))
            .collect();
        let many: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), *d)).collect();
        assert!(rules_of(&zip_of(&many)).is_empty());
    }
}
