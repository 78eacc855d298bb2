//! The download quarantine, host-side: a response the egress proxy held
//! (by its bytes, [`sniff`], or because a browser would save it) never
//! reaches the workspace. Its body is decoded as the browser would
//! ([`decode`]) and streamed into a content-addressed store
//! (`<data>/quarantine/<sha256>`, root's, 0600), its type sniffed from the
//! bytes, scanned with YARA rules ([`scan`]), looked inside when it is an
//! archive ([`archive`]), and recorded ([`records`]) as `held` until an
//! operator (or the workspace's policy, for clean files of listed types)
//! releases or rejects it. Nothing partial is ever kept: an over-size body,
//! a full disk, a dropped upstream or a cancelled workspace leave no file.
//!
//! Read [`Quarantine::hold`] first.

pub mod archive;
pub mod decode;
pub mod names;
pub mod records;
pub mod scan;
pub mod sniff;

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bytes::Buf;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

pub use records::{DownloadRecord, DownloadState};
pub use scan::{Hit, Scanner};

use crate::state::Store;

/// Default cap on one download.
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
use sniff::SNIFF_BYTES;

/// Why a download was not held.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("the download is over the {limit}-byte cap; nothing was kept")]
    TooLarge { limit: u64 },
    #[error("the quarantine store cannot take it ({0}); nothing was kept")]
    Disk(#[source] std::io::Error),
    #[error("the server's response broke off: {0}; nothing was kept")]
    Upstream(String),
    #[error("{0}; nothing was kept")]
    Decode(#[from] decode::DecodeError),
    #[error("cannot scan it: {0}; nothing was kept")]
    Scan(String),
    #[error("cannot record it: {0}; nothing was kept")]
    Record(String),
}

/// What the proxy knows about a download it holds.
#[derive(Debug, Clone)]
pub struct Incoming<'a> {
    pub workspace: &'a str,
    pub url: &'a str,
    pub offered_name: &'a str,
    pub claimed_type: Option<&'a str>,
    /// The `Content-Encoding` the body came with, undone before it is kept.
    pub codings: &'a [decode::Coding],
}

/// The store, the scanner and the records.
#[derive(Clone)]
pub struct Quarantine {
    dir: PathBuf,
    store: Store,
    scanner: Scanner,
    max_bytes: u64,
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine")
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Quarantine {
    /// The quarantine under `data_dir/quarantine` (made root-only).
    pub fn open(
        data_dir: &Path,
        store: Store,
        scanner: Scanner,
        max_bytes: u64,
    ) -> std::io::Result<Self> {
        let dir = data_dir.join("quarantine");
        for d in [&dir, &dir.join("tmp")] {
            match std::fs::DirBuilder::new().mode(0o700).create(d) {
                Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => return Err(err),
                _ => {}
            }
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
        // Partial files of a daemon that died mid-download.
        for entry in std::fs::read_dir(dir.join("tmp"))?.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        Ok(Self {
            dir,
            store,
            scanner,
            max_bytes,
        })
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where the content of `sha256` is kept.
    pub fn content_path(&self, sha256: &str) -> Option<PathBuf> {
        let valid = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| self.dir.join(sha256.to_ascii_lowercase()))
    }

    /// Streams `body` into the store, sniffs, scans and records it as held.
    /// Dropping the future (the workspace went away) leaves nothing behind:
    /// the partial file is a temporary file that removes itself.
    pub async fn hold<B>(
        &self,
        meta: Incoming<'_>,
        mut body: B,
    ) -> Result<DownloadRecord, HoldError>
    where
        B: hyper::body::Body + Unpin,
        B::Error: std::fmt::Display,
    {
        let partial = tempfile::Builder::new()
            .prefix("dl-")
            .tempfile_in(self.dir.join("tmp"))
            .map_err(HoldError::Disk)?;
        let (mut file, partial_path) = partial.into_parts();
        let mut kept = Kept {
            file: &mut file,
            hasher: Sha256::new(),
            head: Vec::with_capacity(SNIFF_BYTES),
            size: 0,
            max_bytes: self.max_bytes,
        };
        let mut decoder = decode::Decoder::new(meta.codings);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| HoldError::Upstream(e.to_string()))?;
            let Ok(mut data) = frame.into_data() else {
                continue; // trailers
            };
            while data.has_remaining() {
                let chunk = data.chunk();
                let decoded = decoder.push(chunk)?;
                kept.add(&decoded)?;
                let n = chunk.len();
                data.advance(n);
            }
        }
        kept.add(&decoder.finish()?)?;
        let Kept {
            hasher, head, size, ..
        } = kept;
        file.sync_all().map_err(HoldError::Disk)?;
        drop(file);
        let sha256 = hex::encode(hasher.finalize());
        let scanner = self.scanner.clone();
        let scan_path = partial_path.to_path_buf();
        let hits = tokio::task::spawn_blocking(move || {
            let mut hits = scanner.scan_file(&scan_path)?;
            let inside =
                archive::inspect(&scan_path, &scanner).map_err(|e| scan::ScanError::Scan {
                    path: scan_path.display().to_string(),
                    message: e.to_string(),
                })?;
            hits.extend(inside);
            Ok::<_, scan::ScanError>(hits)
        })
        .await
        .map_err(|e| HoldError::Scan(e.to_string()))?
        .map_err(|e| HoldError::Scan(e.to_string()))?;
        let target = self.dir.join(&sha256);
        if target.exists() {
            drop(partial_path); // the same bytes are already held
        } else {
            partial_path
                .persist(&target)
                .map_err(|e| HoldError::Disk(e.error))?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))
                .map_err(HoldError::Disk)?;
        }
        let record = DownloadRecord {
            id: records::new_id(),
            workspace_id: meta.workspace.to_owned(),
            url: meta.url.to_owned(),
            name: names::clean(meta.offered_name),
            offered_name: meta.offered_name.chars().take(1000).collect(),
            size,
            sha256,
            sniffed_type: Some(sniff::sniff(&head).1),
            claimed_type: meta.claimed_type.map(str::to_owned),
            hits,
            state: DownloadState::Held,
            reason: None,
            created_at: crate::state::now_ms(),
            decided_at: None,
            decided_by: None,
            released_path: None,
        };
        if let Err(err) = records::insert(&self.store, &record).await {
            self.forget_content(&record.sha256).await;
            return Err(HoldError::Record(err.to_string()));
        }
        Ok(record)
    }

    /// What the quarantine finds in `bytes` that a caller hands to a page
    /// (an upload): the type sniffed from them and the scanner's hits,
    /// archives looked into as a download's are. Nothing is kept.
    pub async fn examine(&self, bytes: &[u8]) -> Result<(String, Vec<Hit>), HoldError> {
        let mut partial = tempfile::Builder::new()
            .prefix("up-")
            .tempfile_in(self.dir.join("tmp"))
            .map_err(HoldError::Disk)?;
        std::io::Write::write_all(&mut partial, bytes).map_err(HoldError::Disk)?;
        let scanner = self.scanner.clone();
        let hits = tokio::task::spawn_blocking(move || {
            let path = partial.path();
            let mut hits = scanner.scan_file(path)?;
            let inside = archive::inspect(path, &scanner).map_err(|e| scan::ScanError::Scan {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            hits.extend(inside);
            Ok::<_, scan::ScanError>(hits)
        })
        .await
        .map_err(|e| HoldError::Scan(e.to_string()))?
        .map_err(|e| HoldError::Scan(e.to_string()))?;
        let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
        Ok((sniff::sniff(head).1, hits))
    }

    /// Removes the content of `sha256` unless a held or released record
    /// still refers to it.
    pub async fn forget_content(&self, sha256: &str) {
        let still_used = records::content_in_use(&self.store, sha256)
            .await
            .unwrap_or(true);
        if !still_used && let Some(path) = self.content_path(sha256) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The decoded bytes on their way to the store: hashed, counted against
/// the cap, their head kept for sniffing.
struct Kept<'f> {
    file: &'f mut std::fs::File,
    hasher: Sha256,
    head: Vec<u8>,
    size: u64,
    max_bytes: u64,
}

impl Kept<'_> {
    fn add(&mut self, bytes: &[u8]) -> Result<(), HoldError> {
        self.size += bytes.len() as u64;
        if self.size > self.max_bytes {
            return Err(HoldError::TooLarge {
                limit: self.max_bytes,
            });
        }
        if self.head.len() < SNIFF_BYTES {
            let take = (SNIFF_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        self.hasher.update(bytes);
        // Blocking writes of at most one frame's decoding: small, and on
        // the daemon's own disk.
        self.file.write_all(bytes).map_err(HoldError::Disk)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{Full, StreamBody};

    use super::*;

    async fn quarantine(max: u64) -> (Quarantine, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let q = Quarantine::open(dir.path(), store, Scanner::new(None).unwrap(), max).unwrap();
        (q, dir)
    }

    fn meta<'a>(name: &'a str) -> Incoming<'a> {
        Incoming {
            workspace: "ws-1",
            url: "https://example.org/x",
            offered_name: name,
            claimed_type: Some("application/octet-stream"),
            codings: &[],
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[tokio::test]
    async fn a_download_is_stored_by_hash_sniffed_scanned_and_recorded() {
        let (q, dir) = quarantine(DEFAULT_MAX_BYTES).await;
        let eicar = scan::EICAR;
        let record = q
            .hold(
                meta("../eicar\u{202E}moc.txt"),
                Full::new(Bytes::from_static(eicar)),
            )
            .await
            .unwrap();
        assert_eq!(record.name, "eicarmoc.txt");
        assert_eq!(record.size, eicar.len() as u64);
        assert_eq!(record.state, DownloadState::Held);
        assert_eq!(record.hits[0].rule, "eicar_test_file");
        assert_eq!(record.sniffed_type.as_deref(), Some("text/plain"));
        let stored = dir.path().join("quarantine").join(&record.sha256);
        assert_eq!(std::fs::read(&stored).unwrap(), eicar);
        let mode = std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = records::get(q.store(), &record.id).await.unwrap().unwrap();
        assert_eq!(again, record);
        assert!(files(&dir.path().join("quarantine/tmp")).is_empty());
    }

    #[tokio::test]
    async fn over_the_cap_or_broken_off_keeps_nothing() {
        let (q, dir) = quarantine(1000).await;
        let chunks = (0..5).map(|_| {
            Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![7u8; 300])))
        });
        let body = StreamBody::new(futures_util::stream::iter(chunks));
        let err = q.hold(meta("big.bin"), body).await.unwrap_err();
        assert!(matches!(err, HoldError::TooLarge { limit: 1000 }), "{err}");
        let broken = [
            Ok(hyper::body::Frame::data(Bytes::from_static(b"abc"))),
            Err(std::io::Error::other("connection reset")),
        ];
        let body = StreamBody::new(futures_util::stream::iter(broken));
        let err = q.hold(meta("cut.bin"), body).await.unwrap_err();
        assert!(err.to_string().contains("connection reset"), "{err}");
        assert!(files(&dir.path().join("quarantine")).is_empty());
        assert!(files(&dir.path().join("quarantine/tmp")).is_empty());
        assert!(
            records::list(q.store(), None, None)
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// Unmounts a test tmpfs when dropped.
    struct Mounted(std::path::PathBuf);

    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }

    #[tokio::test]
    async fn a_full_disk_refuses_the_download_and_keeps_nothing() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return cubicle_skip::skip("needs root to mount a small tmpfs");
        }
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&data)
            .status()
            .unwrap();
        assert!(mounted.success(), "mount a 1 MiB tmpfs");
        let _unmount = Mounted(data.clone());
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let q = Quarantine::open(&data, store, Scanner::new(None).unwrap(), 64 << 20).unwrap();
        let chunks = (0..48).map(|_| {
            Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![9u8; 64 * 1024])))
        });
        let body = StreamBody::new(futures_util::stream::iter(chunks));
        let err = q.hold(meta("big.iso"), body).await.unwrap_err();
        assert!(matches!(err, HoldError::Disk(_)), "{err}");
        assert!(err.to_string().contains("nothing was kept"), "{err}");
        assert!(files(&data.join("quarantine")).is_empty());
        assert!(files(&data.join("quarantine/tmp")).is_empty());
        assert!(
            records::list(q.store(), None, None)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn media_types_of_the_record() {
        let sniff = |b: &[u8]| sniff::sniff(b).1;
        assert_eq!(sniff(b"%PDF-1.7\n"), "application/pdf");
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        assert_eq!(sniff(&elf), "application/x-executable");
        assert_eq!(sniff(b"PK\x03\x04\x14\0\0\0"), "application/zip");
        assert_eq!(sniff(b"plain words"), "text/plain");
        assert_eq!(sniff(b"#!/bin/sh\n"), "text/x-shellscript");
        assert_eq!(sniff(b"\0\x01\x02\xff"), "application/octet-stream");
        assert_eq!(sniff(b""), "application/x-empty");
    }

    #[tokio::test]
    async fn a_gzip_encoded_body_is_kept_decoded_and_a_gzipped_executable_is_a_hit() {
        let (q, _dir) = quarantine(DEFAULT_MAX_BYTES).await;
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        let gz = |bytes: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        };
        let mut m = meta("tool");
        let gzip = [decode::Coding::Gzip];
        m.codings = &gzip;
        let record = q.hold(m, Full::new(Bytes::from(gz(&elf)))).await.unwrap();
        assert_eq!(record.size, 64, "kept decoded, as the browser saves it");
        assert_eq!(
            record.sniffed_type.as_deref(),
            Some("application/x-executable")
        );
        let record = q
            .hold(meta("tool.gz"), Full::new(Bytes::from(gz(&elf))))
            .await
            .unwrap();
        assert_eq!(record.sniffed_type.as_deref(), Some("application/gzip"));
        assert!(
            record
                .hits
                .iter()
                .any(|h| h.rule == archive::CONTAINS_EXECUTABLE),
            "{:?}",
            record.hits
        );
        let mut m = meta("bomb");
        m.codings = &gzip;
        let (small, _dir) = quarantine(1 << 20).await;
        let err = small
            .hold(m, Full::new(Bytes::from(gz(&vec![0u8; 8 << 20]))))
            .await
            .unwrap_err();
        assert!(matches!(err, HoldError::TooLarge { .. }), "{err}");
    }
}
