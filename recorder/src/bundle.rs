//! The exported bundle: one tar file (or the folder it unpacks to) holding
//! everything an auditor needs to check one workspace's chain offline.
//!
//! ```text
//! manifest.json        {"format", "chain", "workspace", "exported_at"}
//! audit-key.pub        the Ed25519 public key, hex
//! events.jsonl         one line per record: {"hash", "record": <canonical bytes>}
//! checkpoints.jsonl    one signed checkpoint per line
//! segments/<file>.mp4  every closed video segment the chain names
//! traffic.har          the workspace's traffic as HAR 1.2, made from the
//!                      chain's `egress.request` records (verify remakes it
//!                      from the verified records and compares)
//! ```
//!
//! Segments are hashed while the bundle is read and never held in memory.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::audit_chain::Hash;
use crate::checkpoint::Checkpoint;

/// The bundle layout's name and version, in the manifest.
pub const FORMAT: &str = "cubicle-audit-bundle/1";
pub const MANIFEST: &str = "manifest.json";
pub const PUBLIC_KEY: &str = "audit-key.pub";
pub const EVENTS: &str = "events.jsonl";
pub const CHECKPOINTS: &str = "checkpoints.jsonl";
pub const SEGMENTS: &str = "segments/";
pub const HAR: &str = "traffic.har";

/// What can go wrong reading or writing a bundle.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read the bundle {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the bundle: {0}")]
    Write(#[source] std::io::Error),
    #[error("the bundle has no {0}: is it a Cubicle audit bundle?")]
    Missing(&'static str),
    #[error("the bundle's manifest.json is not valid: {0}")]
    Manifest(#[source] serde_json::Error),
    #[error("the bundle's format is {0:?}; this cubicle reads {FORMAT:?}")]
    Format(String),
    #[error("the bundle holds an unexpected entry {0:?}")]
    Entry(String),
}

/// What the bundle is of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    /// The chain's name (the workspace id).
    pub chain: String,
    pub workspace: Option<String>,
    /// Unix milliseconds.
    pub exported_at: i64,
}

/// A segment file as read: its hash and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentDigest {
    pub sha256: Hash,
    pub bytes: u64,
}

/// A bundle as read back.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub manifest: Manifest,
    pub public_key: String,
    /// `events.jsonl`, verbatim.
    pub events: Vec<u8>,
    /// `checkpoints.jsonl`, verbatim.
    pub checkpoints: Vec<u8>,
    /// By file name (without `segments/`).
    pub segments: BTreeMap<String, SegmentDigest>,
    /// `traffic.har`, verbatim, if the bundle has one (bundles of before
    /// it was added have none).
    pub har: Option<Vec<u8>>,
}

/// SHA-256 and length of everything `reader` yields.
pub fn digest_reader(mut reader: impl Read) -> std::io::Result<SegmentDigest> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(SegmentDigest {
        sha256: hasher.finalize().into(),
        bytes,
    })
}

/// Whether `name` is a plain file name a segment may have.
pub fn is_segment_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

impl Bundle {
    /// Reads a bundle from a tar file or from the folder it was unpacked to.
    pub fn open(path: &Path) -> Result<Self, BundleError> {
        let read_error = |source| BundleError::Read {
            path: path.to_owned(),
            source,
        };
        let mut parts = Parts::default();
        if path.is_dir() {
            for name in [MANIFEST, PUBLIC_KEY, EVENTS, CHECKPOINTS, HAR] {
                match std::fs::File::open(path.join(name)) {
                    Ok(file) => parts.take(name, file).map_err(read_error)?,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                    Err(err) => return Err(read_error(err)),
                }
            }
            let segments = path.join(SEGMENTS);
            if segments.is_dir() {
                for entry in std::fs::read_dir(&segments).map_err(read_error)? {
                    let entry = entry.map_err(read_error)?;
                    let name = format!("{SEGMENTS}{}", entry.file_name().to_string_lossy());
                    let file = std::fs::File::open(entry.path()).map_err(read_error)?;
                    parts.take(&name, file).map_err(read_error)?;
                }
            }
        } else {
            let file = std::fs::File::open(path).map_err(read_error)?;
            return Self::from_tar(file).map_err(|err| match err {
                BundleError::Read { source, .. } => read_error(source),
                other => other,
            });
        }
        parts.finish()
    }

    /// Reads a bundle from a tar stream.
    pub fn from_tar(reader: impl Read) -> Result<Self, BundleError> {
        let read_error = |source| BundleError::Read {
            path: PathBuf::from("<tar stream>"),
            source,
        };
        let mut parts = Parts::default();
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries().map_err(read_error)? {
            let entry = entry.map_err(read_error)?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = entry
                .path()
                .map_err(read_error)?
                .to_string_lossy()
                .into_owned();
            parts.take(&name, entry).map_err(read_error)?;
        }
        parts.finish()
    }
}

#[derive(Default)]
struct Parts {
    manifest: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
    events: Option<Vec<u8>>,
    checkpoints: Option<Vec<u8>>,
    har: Option<Vec<u8>>,
    segments: BTreeMap<String, SegmentDigest>,
    unexpected: Option<String>,
}

impl Parts {
    fn take(&mut self, name: &str, mut reader: impl Read) -> std::io::Result<()> {
        let name = name.trim_start_matches("./");
        let slot = match name {
            MANIFEST => &mut self.manifest,
            PUBLIC_KEY => &mut self.key,
            EVENTS => &mut self.events,
            CHECKPOINTS => &mut self.checkpoints,
            HAR => &mut self.har,
            _ => {
                match name.strip_prefix(SEGMENTS).filter(|n| is_segment_name(n)) {
                    Some(file) => {
                        let digest = digest_reader(reader)?;
                        self.segments.insert(file.to_owned(), digest);
                    }
                    None => {
                        self.unexpected.get_or_insert_with(|| name.to_owned());
                    }
                }
                return Ok(());
            }
        };
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        *slot = Some(bytes);
        Ok(())
    }

    fn finish(self) -> Result<Bundle, BundleError> {
        if let Some(name) = self.unexpected {
            return Err(BundleError::Entry(name));
        }
        let manifest = self.manifest.ok_or(BundleError::Missing(MANIFEST))?;
        let manifest: Manifest =
            serde_json::from_slice(&manifest).map_err(BundleError::Manifest)?;
        if manifest.format != FORMAT {
            return Err(BundleError::Format(manifest.format));
        }
        let key = self.key.ok_or(BundleError::Missing(PUBLIC_KEY))?;
        Ok(Bundle {
            manifest,
            public_key: String::from_utf8_lossy(&key).trim().to_owned(),
            events: self.events.ok_or(BundleError::Missing(EVENTS))?,
            checkpoints: self.checkpoints.ok_or(BundleError::Missing(CHECKPOINTS))?,
            segments: self.segments,
            har: self.har,
        })
    }
}

/// Writes a bundle as a tar stream.
pub struct BundleWriter<W: Write> {
    tar: tar::Builder<W>,
}

impl<W: Write> BundleWriter<W> {
    /// Starts a bundle with its manifest, public key, records (lines made
    /// by [`crate::audit_chain::export_line`]) and checkpoints.
    pub fn new(
        out: W,
        manifest: &Manifest,
        public_key: &str,
        events: &[u8],
        checkpoints: &[Checkpoint],
    ) -> Result<Self, BundleError> {
        let mut writer = Self {
            tar: tar::Builder::new(out),
        };
        let manifest = serde_json::to_vec_pretty(manifest).map_err(BundleError::Manifest)?;
        writer.bytes(MANIFEST, &manifest)?;
        writer.bytes(PUBLIC_KEY, format!("{public_key}\n").as_bytes())?;
        writer.bytes(EVENTS, events)?;
        let mut lines = Vec::new();
        for checkpoint in checkpoints {
            serde_json::to_writer(&mut lines, checkpoint).map_err(BundleError::Manifest)?;
            lines.push(b'\n');
        }
        writer.bytes(CHECKPOINTS, &lines)?;
        Ok(writer)
    }

    fn bytes(&mut self, name: &str, bytes: &[u8]) -> Result<(), BundleError> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        self.tar
            .append_data(&mut header, name, bytes)
            .map_err(BundleError::Write)
    }

    /// Adds the workspace's traffic as `traffic.har`
    /// ([`crate::har::of_records`] of the records written).
    pub fn har(&mut self, har: &serde_json::Value) -> Result<(), BundleError> {
        let bytes = serde_json::to_vec_pretty(har).map_err(BundleError::Manifest)?;
        self.bytes(HAR, &bytes)
    }

    /// Adds segment file `path` as `segments/<name>`.
    pub fn segment(&mut self, name: &str, path: &Path) -> Result<(), BundleError> {
        let mut file = std::fs::File::open(path).map_err(BundleError::Write)?;
        self.tar
            .append_file(format!("{SEGMENTS}{name}"), &mut file)
            .map_err(BundleError::Write)
    }

    pub fn finish(self) -> Result<W, BundleError> {
        self.tar.into_inner().map_err(BundleError::Write)
    }
}
