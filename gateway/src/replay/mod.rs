//! What an auditor replays, on the gateway's side: the checkpoint signer
//! ([`seal`]), each running workspace's video recorder ([`record`]) and the
//! export of a workspace's sealed record as one bundle ([`export`]).
//!
//! The chain itself is made by the runtime as each event is appended, and
//! the formats and the verification live in `cubicle-recorder`; this module
//! holds the signing key and decides when to sign and what to record.

pub mod export;
pub mod record;
pub mod retention;
pub mod seal;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cubicle_recorder::checkpoint::{AuditKey, CheckpointError};
use cubicle_runtime::state::Store;

/// How the daemon records and seals.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The data directory: the key under `audit/`, videos under `recordings/`.
    pub data_dir: PathBuf,
    /// Whether workspaces are recorded at all (a workspace can opt out too).
    pub record: bool,
    /// Frames per second at most (frames are taken only when the screen
    /// changed, plus one per keyframe interval).
    pub fps: u32,
    /// Length of one video segment.
    pub segment: Duration,
    /// A checkpoint after this many records of a chain...
    pub checkpoint_records: u64,
    /// ...or this long after the last one, whichever comes first.
    pub checkpoint_every: Duration,
    /// How long segment files are kept (`None`: for ever).
    pub retention: Option<Duration>,
}

impl ReplayConfig {
    /// The defaults: recording on, 10 fps, one-minute segments, a
    /// checkpoint every 100 records or 10 seconds.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_owned(),
            record: true,
            fps: 10,
            segment: Duration::from_secs(60),
            checkpoint_records: 100,
            checkpoint_every: Duration::from_secs(10),
            retention: None,
        }
    }

    /// Where the videos of workspace `id` go.
    pub fn recordings_of(&self, id: &str) -> PathBuf {
        self.data_dir.join("recordings").join(id)
    }
}

/// The gateway's replay side, shared by every door.
pub struct Replay {
    pub config: ReplayConfig,
    pub key: AuditKey,
    store: Store,
}

impl Replay {
    /// Loads (or makes, at first start) the checkpoint signing key under
    /// `<data>/audit/`.
    pub fn open(store: Store, config: ReplayConfig) -> Result<Self, CheckpointError> {
        let key = AuditKey::load_or_create(&config.data_dir.join("audit").join("signing.key"))?;
        Ok(Self { config, key, store })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}
