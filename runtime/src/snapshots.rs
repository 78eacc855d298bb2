//! Workspace snapshots of the `disk` kind: the user's files (`/home/user`
//! and `/tmp`) and the browser's profile, taken from a running workspace
//! and put into fresh desktops (forks) or back into the same one (a
//! rollback). The `snapshots` table and two archives per snapshot under
//! `<data_dir>/snapshots/`.
//!
//! Memory is not saved: the jail's processes cannot be checkpointed on this
//! kernel (CRIU does not run here, and cannot checkpoint bubblewrap's nested
//! namespaces), so a fork is a new desktop started from the image with the
//! snapshot's files and browser profile in place, and the programs it runs
//! are the image's, not the parent's.
//!
//! Both archives are made inside the workspace, by its own user (`tar` run
//! through exec) and by its guest agent (the browser profile, see
//! `cubicle-guest`'s `profile` module), and moved through the files door in
//! pieces; the host keeps their bytes and SHA-256 and never unpacks them:
//! the workspace that wrote them is not trusted, and the ones that read them
//! back are the same owner's, unpacking as their own unprivileged user.

use std::io::Write;
use std::path::{Path, PathBuf};

use cubicle_image::control::{ExecExit, ExecRequest, MAX_FILE};
use sha2::{Digest, Sha256};

use crate::channel::GuestChannel;
use crate::guest_ops::GuestOpError;
use crate::state::{StateError, Store};

/// The largest home archive kept (gzip'd); a larger one is refused with
/// the size it had.
pub const MAX_HOME_ARCHIVE: u64 = 512 * 1024 * 1024;
/// How long the workspace's `tar` may run, either way.
const TAR_TIMEOUT_MS: u64 = 600_000;

/// The kind of a snapshot holding a microVM's whole machine.
pub const MEMORY: &str = "memory";
/// The kind of a snapshot holding the user's files and browser profile.
pub const DISK: &str = "disk";

/// One snapshot.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct Row {
    pub id: String,
    pub owner_token: String,
    pub name: String,
    /// The workspace it was taken of (which may be gone since).
    pub workspace_id: String,
    /// The backend that workspace ran on.
    pub backend: String,
    /// `disk`: files and the browser profile, no memory.
    pub kind: String,
    pub home_size: i64,
    pub home_sha256: String,
    pub profile_size: i64,
    pub profile_sha256: String,
    /// SHA-256 over its parts' digests (both archives, or the four files
    /// of a `memory` snapshot): the snapshot's one name for what it holds,
    /// written into the audit chain of every fork.
    pub sha256: String,
    pub created_at: i64,
    /// A `memory` snapshot's files (empty for `disk`).
    #[sqlx(flatten)]
    pub memory: MemoryParts,
}

/// The parts of a `memory` snapshot: a microVM's whole machine, in four
/// files (see [`Files`]) each named by its SHA-256
/// ([`crate::sparse_copy::Copied::sha256`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct MemoryParts {
    /// The VMM's state file (vCPUs, devices, interrupt controllers).
    pub state_sha256: String,
    /// The guest's RAM, bytes; a fork runs with exactly this much.
    pub memory_size: i64,
    /// Bytes of RAM the guest had written (what the memory file holds).
    pub memory_bytes: i64,
    pub memory_sha256: String,
    /// The root disk's overlay: bytes written, digest.
    pub disk_bytes: i64,
    pub disk_sha256: String,
    /// The read-only host disk the guest had mounted.
    pub host_disk_sha256: String,
    /// The desktop image (ext4) the overlay was made over.
    pub base_image: String,
}

impl MemoryParts {
    /// Why a workspace with `memory_bytes` of RAM cannot start from
    /// snapshot `id` with these parts, if it cannot: the machine runs with
    /// the RAM it was taken with.
    pub fn check_ram(&self, id: &str, memory_bytes: u64) -> Result<(), String> {
        let mib = |bytes: u64| bytes >> 20;
        let ram = u64::try_from(self.memory_size).unwrap_or_default();
        if mib(ram) == mib(memory_bytes) {
            return Ok(());
        }
        Err(format!(
            "snapshot {id} is of a machine with {} MiB of RAM, and the workspace has {} MiB: give it the snapshot's (limits.memory_mb {})",
            mib(ram),
            mib(memory_bytes),
            mib(ram)
        ))
    }

    /// The digest naming a `memory` snapshot with these parts.
    pub fn digest(&self) -> String {
        crate::guest_ops::sha256_hex(
            format!(
                "state {}\nmemory {}\ndisk {}\nhost {}\n",
                self.state_sha256, self.memory_sha256, self.disk_sha256, self.host_disk_sha256
            )
            .as_bytes(),
        )
    }
}

/// The columns of [`Row`] (a macro: sqlx takes only static query text).
macro_rules! columns {
    () => {
        "id, owner_token, name, workspace_id, backend, kind, home_size, home_sha256, \
         profile_size, profile_sha256, sha256, created_at, state_sha256, memory_size, \
         memory_bytes, memory_sha256, disk_bytes, disk_sha256, host_disk_sha256, base_image"
    };
}

/// The digest naming a snapshot whose archives have these digests.
pub fn digest_of(home_sha256: &str, profile_sha256: &str) -> String {
    crate::guest_ops::sha256_hex(
        format!("home {home_sha256}\nprofile {profile_sha256}\n").as_bytes(),
    )
}

pub async fn insert(store: &Store, row: &Row) -> Result<(), StateError> {
    sqlx::query(concat!(
        "INSERT INTO snapshots (",
        columns!(),
        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))
    .bind(&row.id)
    .bind(&row.owner_token)
    .bind(&row.name)
    .bind(&row.workspace_id)
    .bind(&row.backend)
    .bind(&row.kind)
    .bind(row.home_size)
    .bind(&row.home_sha256)
    .bind(row.profile_size)
    .bind(&row.profile_sha256)
    .bind(&row.sha256)
    .bind(row.created_at)
    .bind(&row.memory.state_sha256)
    .bind(row.memory.memory_size)
    .bind(row.memory.memory_bytes)
    .bind(&row.memory.memory_sha256)
    .bind(row.memory.disk_bytes)
    .bind(&row.memory.disk_sha256)
    .bind(&row.memory.host_disk_sha256)
    .bind(&row.memory.base_image)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Every snapshot, oldest first.
pub async fn list(store: &Store) -> Result<Vec<Row>, StateError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM snapshots ORDER BY created_at, id"
    ))
    .fetch_all(store.pool())
    .await?)
}

pub async fn get(store: &Store, id: &str) -> Result<Option<Row>, StateError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM snapshots WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(store.pool())
    .await?)
}

/// The snapshot `owner` named `name`.
pub async fn find(store: &Store, owner: &str, name: &str) -> Result<Option<Row>, StateError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM snapshots WHERE owner_token = ? AND name = ?"
    ))
    .bind(owner)
    .bind(name)
    .fetch_optional(store.pool())
    .await?)
}

/// Removes the row; false if there was none.
pub async fn delete(store: &Store, id: &str) -> Result<bool, StateError> {
    let done = sqlx::query("DELETE FROM snapshots WHERE id = ?")
        .bind(id)
        .execute(store.pool())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// What can go wrong taking or putting back a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{what}: {source}")]
    Guest {
        what: &'static str,
        #[source]
        source: GuestOpError,
    },
    #[error("the workspace's tar {what} failed ({how}): {stderr}")]
    Tar {
        what: &'static str,
        how: String,
        stderr: String,
    },
    #[error(
        "the home and /tmp pack to {0} bytes, over the {MAX_HOME_ARCHIVE}-byte limit: remove large files (or keep them outside the workspace) and try again"
    )]
    TooLarge(u64),
    #[error("the host's copy of the archive: {0}")]
    Host(#[from] std::io::Error),
    #[error(
        "the snapshot's {what} archive is {found}, not the {expected} it was taken as: refused"
    )]
    Changed {
        what: &'static str,
        found: String,
        expected: String,
    },
}

fn guest(what: &'static str) -> impl FnOnce(GuestOpError) -> SnapshotError {
    move |source| SnapshotError::Guest { what, source }
}

/// The snapshot's files on the host: `<dir>/<id>.home.tar.gz` and
/// `<dir>/<id>.profile.tar.gz`, in a folder only the daemon's user opens.
#[derive(Debug, Clone)]
pub struct Files {
    dir: PathBuf,
}

impl Files {
    pub fn under(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("snapshots"),
        }
    }

    pub fn home(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.home.tar.gz"))
    }

    pub fn profile(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.profile.tar.gz"))
    }

    /// A `memory` snapshot's VMM state file.
    pub fn state(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.vmstate"))
    }

    /// A `memory` snapshot's guest memory (sparse).
    pub fn memory(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.memory"))
    }

    /// A `memory` snapshot's root disk overlay (sparse; holes are reads of
    /// the base image).
    pub fn disk(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.overlay"))
    }

    /// A `memory` snapshot's host disk, as the guest had it mounted.
    pub fn host_disk(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.host.ext4"))
    }

    /// What a restore of `memory` snapshot `row` reads.
    pub fn image(&self, row: &Row) -> MemoryImage {
        MemoryImage {
            id: row.id.clone(),
            state: self.state(&row.id),
            memory: self.memory(&row.id),
            disk: self.disk(&row.id),
            host_disk: self.host_disk(&row.id),
            parts: row.memory.clone(),
        }
    }

    /// A file of snapshot `id` being written, renamed to `target` by
    /// [`Partial::keep_file`] and removed if dropped before.
    pub(crate) fn partial_file(&self, name: &str, target: PathBuf) -> std::io::Result<Partial> {
        self.partial(name, target)
    }

    fn make_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
    }

    /// A file being written for snapshot `id`, renamed into place by
    /// [`Partial::keep`] and removed if dropped before.
    fn partial(&self, name: &str, target: PathBuf) -> std::io::Result<Partial> {
        use std::os::unix::fs::OpenOptionsExt;
        self.make_dir()?;
        let path = self.dir.join(format!(".{name}.partial"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Partial {
            file,
            path,
            target,
            hash: Sha256::new(),
            size: 0,
            kept: false,
        })
    }

    /// Removes the files of snapshot `id` (any may be missing).
    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        let paths = [
            self.home(id),
            self.profile(id),
            self.state(id),
            self.memory(id),
            self.disk(id),
            self.host_disk(id),
        ];
        for path in paths {
            match std::fs::remove_file(path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        Ok(())
    }
}

/// An archive on its way to the host: hashed as written, synced and
/// renamed whole, so a crash or a full disk never leaves a part listed.
pub(crate) struct Partial {
    file: std::fs::File,
    path: PathBuf,
    target: PathBuf,
    hash: Sha256,
    size: u64,
    kept: bool,
}

impl Partial {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.hash.update(bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// Its size and SHA-256, once it is in place.
    fn keep(mut self) -> std::io::Result<(u64, String)> {
        self.file.sync_all()?;
        std::fs::rename(&self.path, &self.target)?;
        if let Some(dir) = self.target.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        self.kept = true;
        Ok((self.size, hex::encode(self.hash.clone().finalize())))
    }
}

impl Partial {
    /// The file being written (for writes at offsets, which the hash of
    /// [`Partial::write`] does not see).
    pub(crate) fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Synced and renamed into place, for a file written through
    /// [`Partial::file`].
    pub(crate) fn keep_file(self) -> std::io::Result<()> {
        self.keep().map(|_| ())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The files a restore of a `memory` snapshot reads, and what they are.
#[derive(Debug, Clone)]
pub struct MemoryImage {
    /// The snapshot's id.
    pub id: String,
    pub state: PathBuf,
    pub memory: PathBuf,
    pub disk: PathBuf,
    pub host_disk: PathBuf,
    pub parts: MemoryParts,
}

impl MemoryImage {
    /// Why a workspace with `memory_bytes` of RAM cannot start from this
    /// image, if it cannot: the machine runs with the RAM it was taken
    /// with, over the desktop image it was made on, from files that are
    /// there.
    pub fn check_fits(&self, memory_bytes: u64) -> Result<(), String> {
        self.parts.check_ram(&self.id, memory_bytes)?;
        let base = Path::new(&self.parts.base_image);
        if !base.is_file() {
            return Err(format!(
                "the desktop image {} snapshot {} was taken over is gone; its disk cannot be read without it: take a new snapshot",
                base.display(),
                self.id
            ));
        }
        for (what, path) in [
            ("state", &self.state),
            ("memory", &self.memory),
            ("disk", &self.disk),
            ("host disk", &self.host_disk),
        ] {
            if !path.is_file() {
                return Err(format!(
                    "snapshot {}'s {what} file {} is missing: remove the snapshot",
                    self.id,
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

/// What a snapshot taken of a running workspace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Its files and browser profile (every backend).
    Disk(Archives),
    /// Its whole machine (a microVM).
    Memory(MemoryParts),
}

/// What a taken `disk` snapshot's archives are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archives {
    pub home_size: u64,
    pub home_sha256: String,
    pub profile_size: u64,
    pub profile_sha256: String,
}

/// Takes snapshot `id` of the running workspace behind `channel`: its
/// browser profile (the browser is closed for it and opened again) and its
/// user's files. Nothing is left in place if any part fails.
pub async fn take(
    channel: &GuestChannel,
    files: &Files,
    id: &str,
) -> Result<Archives, SnapshotError> {
    let profile = channel
        .save_profile(false)
        .await
        .map_err(guest("saving the browser profile"))?;
    let mut written = files.partial(&format!("{id}.profile"), files.profile(id))?;
    written.write(&profile)?;
    let (profile_size, profile_sha256) = written.keep()?;
    let home = pack_home(channel, files, id).await;
    let (home_size, home_sha256) = match home {
        Ok(home) => home,
        Err(err) => {
            let _ = files.remove(id);
            return Err(err);
        }
    };
    Ok(Archives {
        home_size,
        home_sha256,
        profile_size,
        profile_sha256,
    })
}

/// The command packing the user's files into a fresh file under /tmp
/// (whose path it prints): what the user owns at the top of `/home/user`
/// and `/tmp` (the services' logs and locks in /tmp are theirs, not the
/// user's), and everything below that. The cache folder is left out;
/// sockets are skipped by tar itself; files that vanish or change while it
/// reads are not an error (a running desktop writes as it likes).
const PACK: &str = r#"set -eu
out=$(mktemp /tmp/.cubicle-snapshot.XXXXXXXX)
list=$(mktemp /tmp/.cubicle-snapshot-list.XXXXXXXX)
trap 'rm -f "$list"' EXIT
cd /
find home/user tmp -mindepth 1 -maxdepth 1 -user "$(id -u)" ! -path "${out#/}" \
    ! -path "${list#/}" ! -path home/user/.cache -print0 >"$list"
status=0
tar --create --gzip --file="$out" --null --files-from="$list" --sparse --ignore-failed-read \
    --warning=no-file-changed --warning=no-file-removed --warning=no-file-ignored || status=$?
if [ "$status" -gt 1 ]; then rm -f "$out"; exit "$status"; fi
printf '%s\n' "$out""#;

async fn pack_home(
    channel: &GuestChannel,
    files: &Files,
    id: &str,
) -> Result<(u64, String), SnapshotError> {
    let packed = channel
        .exec(&ExecRequest {
            command: Some(PACK.to_owned()),
            timeout_ms: TAR_TIMEOUT_MS,
            ..ExecRequest::default()
        })
        .await
        .map_err(guest("packing the home"))?;
    if let Some(how) = failed(&packed.exit) {
        return Err(SnapshotError::Tar {
            what: "packing /home/user and /tmp",
            how,
            stderr: String::from_utf8_lossy(&packed.stderr).trim().to_owned(),
        });
    }
    let archive = String::from_utf8_lossy(&packed.stdout).trim().to_owned();
    let fetched = fetch(channel, files, id, &archive).await;
    let _ = channel.delete(&archive, false).await;
    fetched
}

/// Moves the guest's archive at `archive` to the host in pieces.
async fn fetch(
    channel: &GuestChannel,
    files: &Files,
    id: &str,
    archive: &str,
) -> Result<(u64, String), SnapshotError> {
    let mut written = files.partial(&format!("{id}.home"), files.home(id))?;
    let mut offset = 0;
    loop {
        let chunk = channel
            .read_file(archive, offset, Some(MAX_FILE))
            .await
            .map_err(guest("fetching the home archive"))?;
        // The size the guest says, and what it actually sent: a guest that
        // says small and never says the end is cut off at the same limit.
        offset += chunk.bytes.len() as u64;
        if chunk.size.max(offset) > MAX_HOME_ARCHIVE {
            return Err(SnapshotError::TooLarge(chunk.size.max(offset)));
        }
        written.write(&chunk.bytes)?;
        if chunk.eof || chunk.bytes.is_empty() {
            break;
        }
    }
    Ok(written.keep()?)
}

/// Puts snapshot `row` into the running workspace behind `channel`: its
/// user's files unpacked over (with `clear`, in place of) `/home/user` and
/// `/tmp`, then its browser profile loaded (the browser reopens on it).
/// The archives are checked against the digests they were taken with.
pub async fn put(
    channel: &GuestChannel,
    files: &Files,
    row: &Row,
    clear: bool,
) -> Result<(), SnapshotError> {
    let profile = read_checked(
        &files.profile(&row.id),
        "browser profile",
        &row.profile_sha256,
    )?;
    // Checked once, then sent from the same bytes in pieces.
    let home = read_checked(&files.home(&row.id), "home", &row.home_sha256)?;
    let target = format!("/tmp/.cubicle-restore-{}.tar.gz", row.id);
    let mut pieces = home.chunks(MAX_FILE as usize);
    channel
        .write_file(&target, pieces.next().unwrap_or_default(), Some(0o600))
        .await
        .map_err(guest("sending the home archive"))?;
    for piece in pieces {
        channel
            .append_file(&target, piece)
            .await
            .map_err(guest("sending the home archive"))?;
    }
    let unpacked = channel
        .exec(&ExecRequest {
            command: Some(unpack_command(&target, clear)),
            timeout_ms: TAR_TIMEOUT_MS,
            ..ExecRequest::default()
        })
        .await
        .map_err(guest("unpacking the home"));
    let _ = channel.delete(&target, false).await;
    let unpacked = unpacked?;
    if let Some(how) = failed(&unpacked.exit) {
        return Err(SnapshotError::Tar {
            what: "unpacking into /home/user and /tmp",
            how,
            stderr: String::from_utf8_lossy(&unpacked.stderr).trim().to_owned(),
        });
    }
    channel
        .load_profile(&profile)
        .await
        .map_err(guest("loading the browser profile"))
}

/// The command unpacking `archive` at `/` as the workspace's user; with
/// `clear`, what the user owns in `/home/user` and `/tmp` (but the archive)
/// is removed first, so files made after the snapshot are gone too.
fn unpack_command(archive: &str, clear: bool) -> String {
    let clear = if clear {
        format!(
            "find /home/user /tmp -mindepth 1 -maxdepth 1 -user \"$(id -u)\" ! -path '{archive}' \
             ! -name .X11-unix ! -name .ICE-unix -exec rm -rf {{}} + 2>/dev/null || true\n"
        )
    } else {
        String::new()
    };
    format!(
        "set -eu\n{clear}tar --extract --gzip --file='{archive}' --directory=/ --no-same-owner \
         --no-overwrite-dir --delay-directory-restore\n"
    )
}

/// How a command that did not exit 0 ended.
fn failed(exit: &ExecExit) -> Option<String> {
    match (exit.exit_code, exit.signal) {
        _ if exit.timed_out => Some(format!("ran past {TAR_TIMEOUT_MS} ms")),
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("exit {code}")),
        (None, Some(signal)) => Some(format!("signal {signal}")),
        (None, None) => Some("no exit status".into()),
    }
}

/// The whole file at `path`, checked against `sha256`.
fn read_checked(path: &Path, what: &'static str, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
    let bytes = std::fs::read(path)?;
    let found = crate::guest_ops::sha256_hex(&bytes);
    if !found.eq_ignore_ascii_case(sha256) {
        return Err(SnapshotError::Changed {
            what,
            found: format!("SHA-256 {found}"),
            expected: format!("SHA-256 {sha256}"),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, name: &str) -> Row {
        Row {
            id: id.into(),
            owner_token: "tok-1".into(),
            name: name.into(),
            workspace_id: "ws-1".into(),
            backend: "jail".into(),
            kind: "disk".into(),
            home_size: 3,
            home_sha256: "a".into(),
            profile_size: 4,
            profile_sha256: "b".into(),
            sha256: digest_of("a", "b"),
            created_at: 1,
            memory: MemoryParts::default(),
        }
    }

    #[tokio::test]
    async fn rows_are_kept_found_by_name_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        insert(&store, &row("snap-1", "clean")).await.unwrap();
        insert(&store, &row("snap-2", "logged-in")).await.unwrap();
        assert!(
            insert(&store, &row("snap-3", "clean")).await.is_err(),
            "one owner's names are unique"
        );
        assert_eq!(list(&store).await.unwrap().len(), 2);
        let found = find(&store, "tok-1", "logged-in").await.unwrap().unwrap();
        assert_eq!(found.id, "snap-2");
        assert!(find(&store, "tok-2", "clean").await.unwrap().is_none());
        assert!(delete(&store, "snap-1").await.unwrap());
        assert!(!delete(&store, "snap-1").await.unwrap());
        assert!(get(&store, "snap-1").await.unwrap().is_none());
        // A memory snapshot's parts come back as they went in.
        let mut machine = row("snap-4", "booted");
        machine.kind = "memory".into();
        machine.memory = MemoryParts {
            state_sha256: "s".into(),
            memory_size: 2 << 30,
            memory_bytes: 700 << 20,
            memory_sha256: "m".into(),
            disk_bytes: 9,
            disk_sha256: "d".into(),
            host_disk_sha256: "h".into(),
            base_image: "/cache/desktop.ext4".into(),
        };
        machine.sha256 = machine.memory.digest();
        insert(&store, &machine).await.unwrap();
        assert_eq!(get(&store, "snap-4").await.unwrap().unwrap(), machine);
    }

    #[test]
    fn a_memory_image_fits_only_its_ram_base_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::under(dir.path());
        let base = dir.path().join("desktop.ext4");
        let mut machine = row("snap-5", "booted");
        machine.kind = MEMORY.into();
        machine.memory.memory_size = 2 << 30;
        machine.memory.base_image = base.display().to_string();
        let image = files.image(&machine);
        let err = image.check_fits(1 << 30).unwrap_err();
        assert!(
            err.contains("2048 MiB") && err.contains("limits.memory_mb 2048"),
            "{err}"
        );
        let err = image.check_fits(2 << 30).unwrap_err();
        assert!(
            err.contains("desktop image") && err.contains("gone"),
            "{err}"
        );
        std::fs::write(&base, b"ext4").unwrap();
        let err = image.check_fits(2 << 30).unwrap_err();
        assert!(
            err.contains("state file") && err.contains("missing"),
            "{err}"
        );
        files.make_dir().unwrap();
        for path in [&image.state, &image.memory, &image.disk, &image.host_disk] {
            std::fs::write(path, b"x").unwrap();
        }
        image.check_fits(2 << 30).unwrap();
        // Removing the snapshot removes all four.
        files.remove("snap-5").unwrap();
        assert!(!image.state.exists() && !image.memory.exists());
        assert!(!image.disk.exists() && !image.host_disk.exists());
    }

    #[test]
    fn the_digest_names_both_archives() {
        assert_ne!(digest_of("a", "b"), digest_of("b", "a"));
        assert_eq!(digest_of("a", "b"), digest_of("a", "b"));
    }

    #[test]
    fn a_partial_archive_is_never_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::under(dir.path());
        let mut part = files.partial("snap-1.home", files.home("snap-1")).unwrap();
        part.write(b"half").unwrap();
        drop(part);
        assert!(!files.home("snap-1").exists());
        let names: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
            .unwrap()
            .collect();
        assert!(names.is_empty(), "{names:?}");
        let mut part = files.partial("snap-1.home", files.home("snap-1")).unwrap();
        part.write(b"whole").unwrap();
        let (size, sha256) = part.keep().unwrap();
        assert_eq!(size, 5);
        assert_eq!(sha256, crate::guest_ops::sha256_hex(b"whole"));
        assert_eq!(std::fs::read(files.home("snap-1")).unwrap(), b"whole");
        let found = read_checked(&files.home("snap-1"), "home", &sha256).unwrap();
        assert_eq!(found, b"whole");
        let changed = read_checked(&files.home("snap-1"), "home", "00").unwrap_err();
        assert!(changed.to_string().contains("refused"), "{changed}");
        files.remove("snap-1").unwrap();
        files.remove("snap-1").unwrap();
    }
}
