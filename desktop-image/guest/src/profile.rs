//! The browser's profile as one archive, for the host to keep between
//! workspaces (`profile_save`, `profile_chunk`, `profile_put`,
//! `profile_load`): a gzip'd tar of Chromium's user data directory without
//! its caches, lock links or anything but regular files and folders.
//!
//! Saving closes Chromium first (SIGTERM: it writes its cookies and
//! storage out as it exits) and opens it again after, unless the workspace
//! is stopping. Loading closes it, unpacks the archive beside the profile,
//! swaps the two folders and opens it again; the reply waits for its
//! readiness, so the host hands out a workspace whose browser already runs
//! on the loaded profile.
//!
//! The host keeps the archive as opaque bytes and never unpacks it; this
//! side checks every entry anyway (a plain relative path, a file or a
//! folder, sizes capped), as the archive was made by an earlier workspace.
//! Runs with the services' own ids, as the browser's home is theirs.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{
    ErrorCode, ErrorReply, FileData, MAX_FILE, MAX_PROFILE, ProfileArchive, ProfileChunk,
    ProfilePut, ProfileSave,
};
use sha2::{Digest, Sha256};

use crate::supervisor::Supervisor;

/// The supervised service whose profile this is.
const BROWSER: &str = "chromium";
/// The most a profile may hold unpacked, and the most entries.
const MAX_UNPACKED: u64 = 1024 * 1024 * 1024;
const MAX_ENTRIES: usize = 100_000;
/// How long an opened browser may take to be ready again (minutes under
/// emulated virtualization; the host's own timeout is what the user meets).
const READY_WAIT: Duration = Duration::from_secs(600);
/// Folders Chromium rebuilds by itself: caches, crash dumps, metrics,
/// downloaded components. Left out wherever they are in the tree.
const LEFT_OUT: &[&str] = &[
    "Cache",
    "Code Cache",
    "GPUCache",
    "GrShaderCache",
    "GraphiteDawnCache",
    "DawnCache",
    "DawnGraphiteCache",
    "DawnWebGPUCache",
    "ShaderCache",
    "CacheStorage",
    "ScriptCache",
    "component_crx_cache",
    "extensions_crx_cache",
    "Crashpad",
    "Crash Reports",
    "BrowserMetrics",
    "BrowserMetrics-spare.pma",
    "Safe Browsing",
    "optimization_guide_model_store",
];

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
    #[error("the browser {0}")]
    Browser(String),
}

impl From<ProfileError> for ErrorReply {
    fn from(err: ProfileError) -> Self {
        let code = match err {
            ProfileError::Refused(_) => ErrorCode::BadRequest,
            ProfileError::Io { .. } | ProfileError::Browser(_) => ErrorCode::Io,
        };
        ErrorReply::new(code, err.to_string())
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProfileError {
    let what = what.into();
    move |source| ProfileError::Io { what, source }
}

/// Where the profile and its archives are, under the browser's home.
#[derive(Debug, Clone)]
pub struct Places {
    /// Chromium's user data directory.
    pub profile: PathBuf,
    /// A 0700 folder for the archives on their way out and in.
    pub transfer: PathBuf,
}

impl Places {
    pub fn under(browser_home: &Path) -> Self {
        Self {
            profile: browser_home.join("profile"),
            transfer: browser_home.join("profile-transfer"),
        }
    }

    fn outgoing(&self) -> PathBuf {
        self.transfer.join("out.tgz")
    }

    fn incoming(&self) -> PathBuf {
        self.transfer.join("in.tgz")
    }

    fn make_transfer(&self) -> Result<(), ProfileError> {
        match DirBuilder::new().mode(0o700).create(&self.transfer) {
            Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(io("the transfer folder")(err))
            }
            _ => Ok(()),
        }
    }
}

/// `profile_save`: closes the browser, packs its profile, opens it again
/// unless asked not to.
pub async fn save(
    supervisor: &Supervisor,
    places: &Places,
    request: ProfileSave,
) -> Result<ProfileArchive, ProfileError> {
    close(supervisor).await?;
    let packing = places.clone();
    let packed = tokio::task::spawn_blocking(move || pack(&packing))
        .await
        .map_err(|err| ProfileError::Browser(format!("packing stopped: {err}")))
        .and_then(|packed| packed);
    if !request.stay_closed {
        supervisor.release(BROWSER);
        wait_ready(supervisor).await?;
    }
    packed
}

/// `profile_chunk`: up to [`MAX_FILE`] bytes of the saved archive.
pub fn chunk(places: &Places, request: ProfileChunk) -> Result<FileData, ProfileError> {
    let path = places.outgoing();
    let mut file = File::open(&path).map_err(io("the saved archive (save it first)"))?;
    let size = file.metadata().map_err(io("the saved archive"))?.len();
    file.seek(SeekFrom::Start(request.offset.min(size)))
        .map_err(io("the saved archive"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE)
        .read_to_end(&mut bytes)
        .map_err(io("the saved archive"))?;
    let end = request.offset.min(size) + bytes.len() as u64;
    Ok(FileData {
        data: B64.encode(&bytes),
        offset: request.offset,
        size,
        eof: end >= size,
    })
}

/// `profile_put`: adds bytes to the incoming archive at its end; offset 0
/// starts a new one.
pub fn put(places: &Places, request: ProfilePut) -> Result<ProfileArchive, ProfileError> {
    let bytes = B64
        .decode(&request.data)
        .map_err(|err| ProfileError::Refused(format!("data is not valid base64: {err}")))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(ProfileError::Refused(format!(
            "a piece is at most {MAX_FILE} bytes"
        )));
    }
    places.make_transfer()?;
    let path = places.incoming();
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW);
    if request.offset == 0 {
        options.truncate(true);
    }
    let mut file = options.open(&path).map_err(io("the incoming archive"))?;
    let size = file.metadata().map_err(io("the incoming archive"))?.len();
    if size != request.offset {
        return Err(ProfileError::Refused(format!(
            "the piece is for offset {} but {size} bytes were put so far",
            request.offset
        )));
    }
    if size + bytes.len() as u64 > MAX_PROFILE {
        return Err(ProfileError::Refused(format!(
            "a profile archive is at most {MAX_PROFILE} bytes"
        )));
    }
    file.seek(SeekFrom::End(0))
        .and_then(|_| file.write_all(&bytes))
        .map_err(io("the incoming archive"))?;
    Ok(ProfileArchive {
        size: size + bytes.len() as u64,
        sha256: String::new(),
    })
}

/// `profile_load`: checks the archive put against `expected`, closes the
/// browser, unpacks, swaps, opens it again and waits until it is ready.
pub async fn load(
    supervisor: &Supervisor,
    places: &Places,
    expected: ProfileArchive,
) -> Result<ProfileArchive, ProfileError> {
    let checking = places.incoming();
    let found = tokio::task::spawn_blocking(move || digest(&checking))
        .await
        .map_err(|err| ProfileError::Browser(format!("checking stopped: {err}")))??;
    if found.size != expected.size || !found.sha256.eq_ignore_ascii_case(&expected.sha256) {
        return Err(ProfileError::Refused(format!(
            "the archive put is {} bytes with SHA-256 {}, not the {} bytes with {} announced",
            found.size, found.sha256, expected.size, expected.sha256
        )));
    }
    close(supervisor).await?;
    let unpacking = places.clone();
    let swapped = tokio::task::spawn_blocking(move || unpack_and_swap(&unpacking))
        .await
        .map_err(|err| ProfileError::Browser(format!("unpacking stopped: {err}")))
        .and_then(|swapped| swapped);
    supervisor.release(BROWSER);
    swapped?;
    wait_ready(supervisor).await?;
    Ok(found)
}

/// Closes the browser cleanly (it writes its profile out) and keeps it
/// closed until released.
async fn close(supervisor: &Supervisor) -> Result<(), ProfileError> {
    let devtools = supervisor.endpoints.devtools.clone();
    let politely = async move { devtools.close_browser().await };
    supervisor
        .hold(BROWSER, politely)
        .await
        .map_err(ProfileError::Browser)
}

async fn wait_ready(supervisor: &Supervisor) -> Result<(), ProfileError> {
    if supervisor.wait_ready(BROWSER, READY_WAIT).await {
        Ok(())
    } else {
        Err(ProfileError::Browser(format!(
            "was not ready again within {READY_WAIT:?}"
        )))
    }
}

/// Packs the profile into the outgoing archive; its size and digest.
fn pack(places: &Places) -> Result<ProfileArchive, ProfileError> {
    places.make_transfer()?;
    let path = places.outgoing();
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io("the outgoing archive"))?;
    let gzip = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gzip);
    tar.follow_symlinks(false);
    // Plain entries only: a sparse file (Chromium keeps some) would be a
    // GNU sparse entry, which the loading side refuses.
    tar.sparse(false);
    let mut budget = Budget::default();
    if places.profile.is_dir() {
        add_folder(&mut tar, &places.profile, Path::new(""), &mut budget)?;
    }
    let gzip = tar.into_inner().map_err(io("the outgoing archive"))?;
    gzip.finish()
        .and_then(|file| file.sync_all())
        .map_err(io("the outgoing archive"))?;
    let archive = digest(&path)?;
    if archive.size > MAX_PROFILE {
        return Err(ProfileError::Refused(format!(
            "the profile packs to {} bytes, over the {MAX_PROFILE}-byte limit",
            archive.size
        )));
    }
    Ok(archive)
}

#[derive(Default)]
struct Budget {
    bytes: u64,
    entries: usize,
}

impl Budget {
    fn spend(&mut self, bytes: u64) -> Result<(), ProfileError> {
        self.bytes += bytes;
        self.entries += 1;
        if self.bytes > MAX_UNPACKED || self.entries > MAX_ENTRIES {
            return Err(ProfileError::Refused(format!(
                "the profile holds over {MAX_UNPACKED} bytes or {MAX_ENTRIES} entries (caches left out)"
            )));
        }
        Ok(())
    }
}

/// Adds the regular files and folders under `dir` (named `name` in the
/// archive), leaving out [`LEFT_OUT`] and anything else (links, sockets).
fn add_folder<W: Write>(
    tar: &mut tar::Builder<W>,
    dir: &Path,
    name: &Path,
    budget: &mut Budget,
) -> Result<(), ProfileError> {
    let entries = std::fs::read_dir(dir).map_err(io(format!("{}", dir.display())))?;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let file_name = entry.file_name();
        if LEFT_OUT.iter().any(|left| file_name == *left) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let inner = name.join(&file_name);
        if kind.is_dir() {
            budget.spend(0)?;
            tar.append_dir(&inner, &path)
                .map_err(io(format!("{}", path.display())))?;
            add_folder(tar, &path, &inner, budget)?;
        } else if kind.is_file() {
            // Opened without following a link swapped in since the listing.
            let Ok(mut file) = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
            else {
                continue;
            };
            let size = file
                .metadata()
                .map_err(io(format!("{}", path.display())))?
                .len();
            budget.spend(size)?;
            tar.append_file(&inner, &mut file)
                .map_err(io(format!("{}", path.display())))?;
        }
    }
    Ok(())
}

fn digest(path: &Path) -> Result<ProfileArchive, ProfileError> {
    let mut file = File::open(path).map_err(io("the archive"))?;
    let mut hasher = Sha256::new();
    let size = std::io::copy(&mut file, &mut hasher).map_err(io("the archive"))?;
    Ok(ProfileArchive {
        size,
        sha256: hex(&hasher.finalize()),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Unpacks the incoming archive into a new folder, then puts it where the
/// profile is (the old one removed).
fn unpack_and_swap(places: &Places) -> Result<(), ProfileError> {
    let fresh = places.transfer.join("profile.new");
    let old = places.transfer.join("profile.old");
    for leftover in [&fresh, &old] {
        remove(leftover)?;
    }
    unpack(&places.incoming(), &fresh)?;
    if places.profile.exists() {
        std::fs::rename(&places.profile, &old).map_err(io("the current profile"))?;
    }
    std::fs::rename(&fresh, &places.profile).map_err(io("the loaded profile"))?;
    remove(&old)?;
    let _ = std::fs::remove_file(places.incoming());
    Ok(())
}

fn remove(path: &Path) -> Result<(), ProfileError> {
    match std::fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("{}", path.display()))(err))
        }
        _ => Ok(()),
    }
}

/// Unpacks `archive` into `into` (made here): only folders and regular
/// files, at plain relative paths, within [`MAX_UNPACKED`].
fn unpack(archive: &Path, into: &Path) -> Result<(), ProfileError> {
    let file = File::open(archive).map_err(io("the incoming archive"))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    DirBuilder::new()
        .mode(0o700)
        .create(into)
        .map_err(io("the new profile folder"))?;
    let mut budget = Budget::default();
    let entries = tar.entries().map_err(io("the incoming archive"))?;
    for entry in entries {
        let mut entry = entry.map_err(io("the incoming archive"))?;
        let name = entry.path().map_err(io("an entry's name"))?.into_owned();
        let plain = name.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain || name.as_os_str().is_empty() {
            return Err(ProfileError::Refused(format!(
                "the archive names {}: only plain relative paths are loaded",
                name.display()
            )));
        }
        let target = into.join(&name);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                budget.spend(0)?;
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&target)
                    .map_err(io(format!("{}", name.display())))?;
            }
            tar::EntryType::Regular => {
                budget.spend(entry.size())?;
                if let Some(parent) = target.parent() {
                    DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)
                        .map_err(io(format!("{}", name.display())))?;
                }
                let mut out = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(io(format!("{}", name.display())))?;
                std::io::copy(&mut entry, &mut out).map_err(io(format!("{}", name.display())))?;
            }
            other => {
                return Err(ProfileError::Refused(format!(
                    "the archive's {} is a {other:?}: only files and folders are loaded",
                    name.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(root: &Path) -> Places {
        Places::under(root)
    }

    #[test]
    fn a_profile_packs_without_caches_or_links_and_loads_back() {
        let root = tempfile::tempdir().unwrap();
        let places = places(root.path());
        let default = places.profile.join("Default");
        std::fs::create_dir_all(default.join("Cache/Cache_Data")).unwrap();
        std::fs::write(default.join("Cookies"), b"cookie jar").unwrap();
        std::fs::write(default.join("Cache/Cache_Data/big"), vec![0u8; 4096]).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", places.profile.join("SingletonLock")).unwrap();
        // A file with a hole (Chromium keeps such): a plain entry, loadable.
        File::create(default.join("Holey"))
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let archive = pack(&places).unwrap();
        assert_eq!(archive.sha256.len(), 64);

        // The archive goes in as the host would put it, in two pieces.
        let bytes = std::fs::read(places.outgoing()).unwrap();
        let (a, b) = bytes.split_at(bytes.len() / 2);
        put(
            &places,
            ProfilePut {
                offset: 0,
                data: B64.encode(a),
            },
        )
        .unwrap();
        let wrong = put(
            &places,
            ProfilePut {
                offset: 1,
                data: B64.encode(b),
            },
        );
        assert!(wrong.is_err(), "a piece at the wrong offset is refused");
        let all = put(
            &places,
            ProfilePut {
                offset: a.len() as u64,
                data: B64.encode(b),
            },
        )
        .unwrap();
        assert_eq!(all.size, archive.size);
        std::fs::remove_dir_all(&places.profile).unwrap();
        unpack_and_swap(&places).unwrap();
        let cookies = std::fs::read(places.profile.join("Default/Cookies")).unwrap();
        assert_eq!(cookies, b"cookie jar");
        let holey = std::fs::metadata(places.profile.join("Default/Holey")).unwrap();
        assert_eq!(holey.len(), 1 << 20);
        assert!(
            !places.profile.join("Default/Cache").exists(),
            "caches left out"
        );
        assert!(
            std::fs::symlink_metadata(places.profile.join("SingletonLock")).is_err(),
            "links left out"
        );
    }

    #[test]
    fn an_archive_naming_a_path_outside_or_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let places = places(root.path());
        places.make_transfer().unwrap();
        for (name, kind) in [
            ("../escape", tar::EntryType::Regular),
            ("link", tar::EntryType::Symlink),
        ] {
            let mut raw = Vec::new();
            {
                let gzip = flate2::write::GzEncoder::new(&mut raw, flate2::Compression::fast());
                let mut tar = tar::Builder::new(gzip);
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(kind);
                header.set_size(0);
                // Set by bytes: the builder refuses `..` itself.
                header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                if kind == tar::EntryType::Symlink {
                    header.set_link_name("/etc/shadow").unwrap();
                }
                header.set_cksum();
                tar.append(&header, std::io::empty()).unwrap();
                tar.into_inner().unwrap().finish().unwrap();
            }
            std::fs::write(places.incoming(), &raw).unwrap();
            let err = unpack_and_swap(&places).unwrap_err();
            assert!(matches!(err, ProfileError::Refused(_)), "{name}: {err}");
            assert!(!root.path().join("escape").exists());
        }
    }
}
