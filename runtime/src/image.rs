//! The desktop image on disk: built from the recipe in `desktop-image/recipe`
//! and cached under a key that is the hash of that recipe.
//!
//! A build runs in a temporary directory next to the cache and is renamed into
//! place only when it completed, so a failed or interrupted build never leaves
//! a half image under the final name. A second build of the same recipe finds
//! the finished directory and returns at once.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

/// The recipe, compiled into the binary so the daemon carries what it builds.
const PACKAGES: &str = cubicle_image::recipe::PACKAGES;
const BUILD_SCRIPT: &str = cubicle_image::recipe::BUILD_ROOTFS;
/// Bumped when the layout of a built image changes.
const FORMAT: &str = "cubicle-image-v1";
const STEPS: u64 = 5;

/// What can go wrong building or finding an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image cache {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot run {tool}: {source}. Install it (apt-get install {package}) and run the build again"
    )]
    MissingTool {
        tool: &'static str,
        package: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("image build failed at step {step:?} ({status}); last output: {tail}. Full log: {log}")]
    BuildFailed {
        step: String,
        status: String,
        tail: String,
        log: String,
    },
    #[error(
        "building the image needs root (debootstrap and chroot); run `cubicle image build` as root"
    )]
    NotRoot,
    #[error(transparent)]
    Modes(#[from] crate::rootfs_modes::RootfsModesError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A built image.
#[derive(Debug, Clone)]
pub struct Image {
    /// The image's key: hash of the recipe.
    pub key: String,
    /// The root filesystem folder (used read-only by the jail backend).
    pub rootfs: PathBuf,
}

/// The first 16 hex digits of SHA-256 over each part, length first (so no
/// byte can move from one part to the next unseen).
fn key_of(parts: [&str; 3]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())[..16].to_owned()
}

/// The image cache directory.
#[derive(Debug, Clone)]
pub struct ImageStore {
    cache: PathBuf,
}

impl ImageStore {
    pub fn new(cache: PathBuf) -> Self {
        Self { cache }
    }

    /// The hash of the recipe: package list, build script and format.
    pub fn recipe_key() -> String {
        key_of([FORMAT, PACKAGES, BUILD_SCRIPT])
    }

    fn image_dir(&self, key: &str) -> PathBuf {
        self.cache.join("images").join(key)
    }

    /// The image for the current recipe, if it was built.
    pub fn find(&self) -> Option<Image> {
        let key = Self::recipe_key();
        let rootfs = self.image_dir(&key).join("rootfs");
        // The folder exists only once a build completed (it is renamed into
        // place last), so its presence is the whole check.
        rootfs.is_dir().then_some(Image { key, rootfs })
    }

    /// Returns the image for the current recipe, building it if needed,
    /// with its rootfs hardened for the host ([`crate::rootfs_modes`]).
    pub fn ensure(&self) -> Result<Image, ImageError> {
        let image = self.ensure_built()?;
        let dir = self.image_dir(&image.key);
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 && !dir.join(crate::rootfs_modes::RECORD).exists() {
            // Under the build lock: two daemons starting at once must not
            // both walk (the second would record nothing to restore).
            let _lock = self.lock()?;
            crate::rootfs_modes::harden(&dir)?;
        }
        Ok(image)
    }

    /// The cache's lock, held until the returned file is dropped.
    fn lock(&self) -> Result<File, ImageError> {
        let images = self.cache.join("images");
        std::fs::create_dir_all(&images).map_err(io_err(&images))?;
        let lock_path = images.join(".lock");
        let lock = File::create(&lock_path).map_err(io_err(&lock_path))?;
        lock.lock().map_err(io_err(&lock_path))?;
        Ok(lock)
    }

    fn ensure_built(&self) -> Result<Image, ImageError> {
        if let Some(image) = self.find() {
            return Ok(image);
        }
        // One build at a time per cache; a second builder waits, then finds it.
        let _lock = self.lock()?;
        if let Some(image) = self.find() {
            return Ok(image);
        }
        self.build()
    }

    fn build(&self) -> Result<Image, ImageError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(ImageError::NotRoot);
        }
        let key = Self::recipe_key();
        let images = self.cache.join("images");
        let work = images.join(format!(".build-{key}"));
        if work.exists() {
            // Left by a build that was interrupted; we hold the lock.
            std::fs::remove_dir_all(&work).map_err(io_err(&work))?;
        }
        std::fs::create_dir_all(&work).map_err(io_err(&work))?;
        let script = work.join("build-rootfs.sh");
        let packages = work.join("packages.txt");
        std::fs::write(&script, BUILD_SCRIPT).map_err(io_err(&script))?;
        std::fs::write(&packages, PACKAGES).map_err(io_err(&packages))?;
        let log = work.join("build.log");
        run_recipe(
            &script,
            &work.join("rootfs"),
            &packages,
            &self.cache.join("apt"),
            &log,
        )?;
        let done = self.image_dir(&key);
        if done.exists() {
            // An earlier build of the same recipe left a folder without a
            // rootfs (interrupted before the rename of an older layout).
            std::fs::remove_dir_all(&done).map_err(io_err(&done))?;
        }
        std::fs::rename(&work, &done).map_err(io_err(&done))?;
        Ok(Image {
            key,
            rootfs: done.join("rootfs"),
        })
    }

    /// The ext4 form of the image with `guest` as `/usr/local/sbin/cubicle-guest`,
    /// for the microVM backend; cached by recipe and guest binary hash.
    pub fn ensure_ext4(&self, image: &Image, guest: &Path) -> Result<PathBuf, ImageError> {
        let guest_bytes = std::fs::read(guest).map_err(io_err(guest))?;
        let guest_key = &hex::encode(Sha256::digest(&guest_bytes))[..16];
        let dir = self.image_dir(&image.key).join("ext4");
        let target = dir.join(format!("{guest_key}.ext4"));
        if target.exists() {
            return Ok(target);
        }
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let partial = dir.join(format!(".{guest_key}.ext4.partial"));
        let _ = std::fs::remove_file(&partial);
        let spinner = spinner("writing the ext4 image (mkfs.ext4 -d)");
        let size_mib = folder_size(&image.rootfs) / (1024 * 1024) * 13 / 10 + 256;
        let mkfs = Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "cubicle", "-d"])
            .arg(&image.rootfs)
            .arg(&partial)
            .arg(format!("{size_mib}M"))
            .status()
            .map_err(|source| ImageError::MissingTool {
                tool: "mkfs.ext4",
                package: "e2fsprogs",
                source,
            })?;
        check_tool(mkfs, "mkfs.ext4", &partial)?;
        // The owners and modes the host copy of the rootfs gave up come back
        // here: in the VM they are the image's own.
        let commands = format!(
            "rm /usr/local/sbin/cubicle-guest\nwrite {} /usr/local/sbin/cubicle-guest\nsif /usr/local/sbin/cubicle-guest mode 0100755\n{}",
            guest.display(),
            crate::rootfs_modes::restore_commands(&self.image_dir(&image.key))
        );
        let mut debugfs = Command::new("debugfs")
            .args(["-w", "-f", "-"])
            .arg(&partial)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| ImageError::MissingTool {
                tool: "debugfs",
                package: "e2fsprogs",
                source,
            })?;
        if let Some(mut stdin) = debugfs.stdin.take() {
            stdin
                .write_all(commands.as_bytes())
                .map_err(io_err(&partial))?;
        }
        check_tool(
            debugfs.wait().map_err(io_err(&partial))?,
            "debugfs",
            &partial,
        )?;
        std::fs::rename(&partial, &target).map_err(io_err(&target))?;
        spinner.finish_with_message(format!("ext4 image {}", target.display()));
        Ok(target)
    }
}

fn check_tool(status: std::process::ExitStatus, step: &str, out: &Path) -> Result<(), ImageError> {
    if status.success() {
        return Ok(());
    }
    let _ = std::fs::remove_file(out);
    Err(ImageError::BuildFailed {
        step: step.to_owned(),
        status: status.to_string(),
        tail: String::new(),
        log: out.display().to_string(),
    })
}

fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message(message.to_owned());
    bar
}

/// Runs the build script, turning its `@@step` lines into a progress bar and
/// keeping all of its output in `log`.
fn run_recipe(
    script: &Path,
    rootfs: &Path,
    packages: &Path,
    apt_cache: &Path,
    log_path: &Path,
) -> Result<(), ImageError> {
    let mut log = File::create(log_path).map_err(io_err(log_path))?;
    let mut child = Command::new("bash")
        .arg(script)
        .arg(rootfs)
        .arg(packages)
        .arg(apt_cache)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ImageError::MissingTool {
            tool: "bash",
            package: "bash",
            source,
        })?;
    // stderr goes to the log through its own thread so neither pipe fills.
    let stderr = child.stderr.take();
    let mut err_log = log.try_clone().map_err(io_err(log_path))?;
    let err_thread = std::thread::spawn(move || {
        if let Some(stderr) = stderr {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(err_log, "{line}");
            }
        }
    });
    let bar = ProgressBar::new(STEPS);
    bar.set_style(
        ProgressStyle::with_template(
            "image [{elapsed_precise}] {bar:20} {pos}/{len} {prefix}: {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let started = Instant::now();
    let mut step = String::from("start");
    let mut tail: Vec<String> = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            if let Some(rest) = line.strip_prefix("@@step ") {
                let (n, name) = rest.split_once(' ').unwrap_or(("0", rest));
                bar.set_position(n.parse::<u64>().unwrap_or(1).saturating_sub(1));
                step = name.to_owned();
                bar.set_prefix(step.clone());
                tracing::info!(step = %step, elapsed = ?started.elapsed(), "image build step");
            } else {
                bar.set_message(line.clone());
                tail.push(line);
                if tail.len() > 5 {
                    tail.remove(0);
                }
            }
        }
    }
    let status = child.wait().map_err(io_err(log_path))?;
    let _ = err_thread.join();
    if !status.success() {
        bar.abandon_with_message(format!("failed at {step}"));
        return Err(ImageError::BuildFailed {
            step,
            status: status.to_string(),
            tail: tail.join(" | "),
            log: log_path.display().to_string(),
        });
    }
    bar.set_position(STEPS);
    bar.finish_with_message(format!("built in {:.0?}", started.elapsed()));
    Ok(())
}

/// Bytes in regular files under `dir` (symlinks not followed).
fn folder_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => folder_size(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key names the recipe as it is on disk now: the package list and
    /// the build script under `desktop-image/recipe/`, read here at run
    /// time (not the copies compiled in), hashed as the module says.
    #[test]
    fn the_key_is_the_hash_of_the_recipe_files() {
        let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../desktop-image/recipe");
        let mut hasher = Sha256::new();
        for part in [
            FORMAT.as_bytes().to_vec(),
            std::fs::read(recipe.join("packages.txt")).unwrap(),
            std::fs::read(recipe.join("build-rootfs.sh")).unwrap(),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(&part);
        }
        let expected = hex::encode(hasher.finalize());
        assert_eq!(ImageStore::recipe_key(), expected[..16]);
        // A known vector: three empty parts are 24 zero bytes
        // (`head -c 24 /dev/zero | sha256sum`).
        assert_eq!(key_of(["", "", ""]), "9d908ecfb6b256de");
    }

    /// Any change to the recipe is a new image, never the cached one.
    #[test]
    fn any_change_to_the_recipe_changes_the_key() {
        let original = key_of([FORMAT, PACKAGES, BUILD_SCRIPT]);
        let more_packages = format!("{PACKAGES}cowsay\n");
        let other_script = BUILD_SCRIPT.replacen('e', "E", 1);
        for changed in [
            key_of(["cubicle-image-v2", PACKAGES, BUILD_SCRIPT]),
            key_of([FORMAT, &more_packages, BUILD_SCRIPT]),
            key_of([FORMAT, PACKAGES, &other_script]),
        ] {
            assert_ne!(changed, original);
        }
        // The same bytes split differently between parts are another recipe.
        assert_ne!(key_of(["ab", "c", ""]), key_of(["a", "bc", ""]));
    }

    #[test]
    fn missing_image_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ImageStore::new(dir.path().to_owned()).find().is_none());
    }
}
