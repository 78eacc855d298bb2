//! A workspace's sealed record as one bundle (the layout is
//! `cubicle_recorder::bundle`'s): its chain up to a signed head, the
//! checkpoints, the video segments the chain seals, and the public key.
//! Built in an unnamed temporary file under the data directory, so a large
//! recording is streamed out, never held in memory.

use std::io::Seek;
use std::path::PathBuf;

use cubicle_recorder::audit_chain::export_line;
use cubicle_recorder::bundle::{self, BundleError, BundleWriter, Manifest};
use cubicle_recorder::verify::Report;
use cubicle_runtime::chain_store;
use cubicle_runtime::state::{StateError, now_ms};

use super::Replay;

/// What can go wrong making a bundle.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot read the audit chain: {0}")]
    Store(#[from] StateError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("cannot make the bundle's temporary file in {dir}: {source}")]
    Temp {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the bundle writer stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Replay {
    /// Where bundles are built (root only).
    fn exports_dir(&self) -> Result<PathBuf, ExportError> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.config.data_dir.join("audit").join("exports");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| ExportError::Temp {
                dir: dir.clone(),
                source,
            })?;
        Ok(dir)
    }

    /// The bundle of workspace `id`'s chain up to seq `upto` (a signed
    /// head), as a tar in an unnamed file, rewound to its start.
    pub async fn export(&self, id: &str, upto: u64) -> Result<std::fs::File, ExportError> {
        let store = self.store();
        let rows = chain_store::sealed_records(store, id, upto).await?;
        let events: String = rows
            .iter()
            .map(|row| export_line(&row.hash, &row.bytes))
            .collect();
        // The traffic, from the same records (verify remakes it from them).
        let records: Vec<cubicle_recorder::audit_chain::Record> = rows
            .iter()
            .filter_map(|row| serde_json::from_str(&row.bytes).ok())
            .collect();
        let har = cubicle_recorder::har::of_records(id, &records);
        let checkpoints: Vec<_> = chain_store::checkpoints(store, id)
            .await?
            .into_iter()
            .filter(|c| c.seq <= upto)
            .collect();
        let dir = self.config.recordings_of(id);
        let segments: Vec<(String, PathBuf)> = chain_store::segments(store, Some(id))
            .await?
            .into_iter()
            .filter(|s| s.seq <= upto)
            .filter_map(|s| s.detail["file"].as_str().map(str::to_owned))
            .filter(|file| bundle::is_segment_name(file))
            .map(|file| (file.clone(), dir.join(file)))
            // A segment removed by retention is named missing by verify.
            .filter(|(_, path)| path.is_file())
            .collect();
        let manifest = Manifest {
            format: bundle::FORMAT.into(),
            chain: id.to_owned(),
            workspace: Some(id.to_owned()),
            exported_at: now_ms(),
        };
        let public_key = self.key.public_hex();
        let exports = self.exports_dir()?;
        let file = tokio::task::spawn_blocking(move || -> Result<std::fs::File, ExportError> {
            let file = tempfile::tempfile_in(&exports).map_err(|source| ExportError::Temp {
                dir: exports.clone(),
                source,
            })?;
            let mut writer = BundleWriter::new(
                std::io::BufWriter::new(file),
                &manifest,
                &public_key,
                events.as_bytes(),
                &checkpoints,
            )?;
            writer.har(&har)?;
            for (name, path) in &segments {
                writer.segment(name, path)?;
            }
            let mut file = writer
                .finish()?
                .into_inner()
                .map_err(|err| BundleError::Write(err.into_error()))?;
            file.rewind().map_err(BundleError::Write)?;
            Ok(file)
        })
        .await??;
        Ok(file)
    }

    /// Signs the head of `id`'s chain, exports it and verifies the bundle
    /// with the same code as `cubicle audit verify`, against this daemon's
    /// key.
    pub async fn verify(&self, id: &str) -> Result<Report, ExportError> {
        let upto = self.checkpoint(id).await?;
        let file = self.export(id, upto).await?;
        let key = self.key.public_hex();
        let report = tokio::task::spawn_blocking(move || -> Result<Report, ExportError> {
            let bundle = bundle::Bundle::from_tar(std::io::BufReader::new(file))?;
            // The head was signed just above, so nothing may be unsigned.
            Ok(cubicle_recorder::verify::verify(
                &bundle,
                Some(&key),
                cubicle_recorder::verify::Tail::Signed,
            ))
        })
        .await??;
        Ok(report)
    }
}
