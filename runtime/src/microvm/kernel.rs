//! Finding the microVM guest kernel that `desktop-image/kernel/build.sh`
//! built, and making it readable by the workspaces' unprivileged uids.
//!
//! The script caches the vmlinux at
//! `<cache>/<key>/vmlinux`, where `<cache>` is `$CUBICLE_KERNEL_CACHE`, else
//! `${XDG_CACHE_HOME:-$HOME/.cache}/cubicle/kernel`, and `<key>` is the first
//! 16 hex digits of SHA-256 over `microvm.config` followed by the kernel
//! source version and a newline (`{ cat microvm.config; echo
//! linux-source-X; } | sha256sum`). [`find`] computes the same path, so a
//! kernel built from another config is never picked up by mistake; a unit
//! test checks it against `build.sh --print-path`. The source tarball is
//! looked for in `$CUBICLE_KERNEL_SOURCE_DIR` (default `/usr/src`), as the
//! script does. `CUBICLE_VMLINUX` overrides the search, as in the VMM's
//! boot test.

use std::cmp::Ordering;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The kernel configuration fragment `build.sh` builds from.
const CONFIG: &str = cubicle_image::recipe::KERNEL_CONFIG;

/// What can go wrong finding or staging the guest kernel.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("CUBICLE_VMLINUX={0} does not exist; point it at a vmlinux or unset it")]
    OverrideMissing(PathBuf),
    #[error(
        "no kernel source in {0} (linux-source-*.tar.xz): run `apt-get install linux-source`, then `desktop-image/kernel/build.sh` to build the microVM guest kernel (about 20 minutes on 2 cores)"
    )]
    NoSource(PathBuf),
    #[error(
        "the microVM guest kernel is not built (expected {0}): run `desktop-image/kernel/build.sh` (about 20 minutes on 2 cores, cached afterwards), or set CUBICLE_VMLINUX to a vmlinux"
    )]
    NotBuilt(PathBuf),
    #[error("cannot copy the guest kernel to {path} for the workspaces' uids: {source}")]
    Stage {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where to look for the kernel.
#[derive(Debug, Clone)]
pub struct KernelSearch {
    /// `CUBICLE_VMLINUX`: use this file and search nothing.
    pub vmlinux: Option<PathBuf>,
    /// The build cache root (see the module docs).
    pub cache_root: PathBuf,
    /// Where Debian puts `linux-source-*.tar.xz`.
    pub source_dir: PathBuf,
}

impl KernelSearch {
    /// The same places `build.sh` uses, from the environment.
    pub fn from_env() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let cache_root = var("CUBICLE_KERNEL_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                var("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        PathBuf::from(var("HOME").unwrap_or_default()).join(".cache")
                    })
                    .join("cubicle/kernel")
            });
        Self {
            vmlinux: var("CUBICLE_VMLINUX").map(PathBuf::from),
            cache_root,
            source_dir: var("CUBICLE_KERNEL_SOURCE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/usr/src")),
        }
    }
}

/// The built guest kernel, or why there is none and how to build it.
pub fn find(search: &KernelSearch) -> Result<PathBuf, KernelError> {
    if let Some(vmlinux) = &search.vmlinux {
        return match vmlinux.is_file() {
            true => Ok(vmlinux.clone()),
            false => Err(KernelError::OverrideMissing(vmlinux.clone())),
        };
    }
    let version = source_version(&search.source_dir)
        .ok_or_else(|| KernelError::NoSource(search.source_dir.clone()))?;
    let vmlinux = search
        .cache_root
        .join(cache_key(CONFIG, &version))
        .join("vmlinux");
    match vmlinux.is_file() {
        true => Ok(vmlinux),
        false => Err(KernelError::NotBuilt(vmlinux)),
    }
}

/// `build.sh`'s cache key for `config` and a source version.
fn cache_key(config: &str, version: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(config.as_bytes());
    hasher.update(version.as_bytes());
    hasher.update(b"\n");
    hex::encode(hasher.finalize())[..16].to_owned()
}

/// The newest `linux-source-*.tar.xz` in `dir` (as `sort -V | tail -n 1`),
/// without its extension.
fn source_version(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let version = name.strip_suffix(".tar.xz")?;
            version
                .starts_with("linux-source-")
                .then(|| version.to_owned())
        })
        .max_by(|a, b| version_cmp(a, b))
}

/// Compares runs of digits as numbers and the rest as text (enough of
/// `sort -V` for `linux-source-6.1` against `linux-source-6.12`).
fn version_cmp(a: &str, b: &str) -> Ordering {
    let chunks = |s: &str| -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let digit = c.is_ascii_digit();
            match out.last_mut() {
                Some((d, run)) if *d == digit => run.push(c),
                _ => out.push((digit, c.to_string())),
            }
        }
        out
    };
    for (x, y) in chunks(a).iter().zip(chunks(b).iter()) {
        let order = match (x, y) {
            ((true, x), (true, y)) => x
                .trim_start_matches('0')
                .len()
                .cmp(&y.trim_start_matches('0').len())
                .then_with(|| x.trim_start_matches('0').cmp(y.trim_start_matches('0'))),
            ((_, x), (_, y)) => x.cmp(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// Whether every uid can read `path`: the file is world-readable and every
/// directory above it world-searchable.
pub fn world_readable(path: &Path) -> bool {
    others_can(path, 0o004)
}

/// Whether every uid can execute `path` (the VMM binary).
pub fn world_executable(path: &Path) -> bool {
    others_can(path, 0o001)
}

fn others_can(path: &Path, bit: u32) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    meta.is_file()
        && meta.mode() & bit != 0
        && path.ancestors().skip(1).all(|dir| {
            dir.as_os_str().is_empty()
                || std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0)
        })
}

/// The kernel as the workspaces' uids can open it: `kernel` itself when it
/// is world-readable, else a copy under `<data_dir>/kernel/` (the build
/// cache usually sits in root's private home).
pub fn stage(kernel: &Path, data_dir: &Path) -> Result<PathBuf, KernelError> {
    if world_readable(kernel) {
        return Ok(kernel.to_owned());
    }
    let stage_err = |path: &Path| {
        let path = path.to_owned();
        move |source| KernelError::Stage { path, source }
    };
    let meta = std::fs::metadata(kernel).map_err(stage_err(kernel))?;
    let mut hasher = Sha256::new();
    hasher.update(kernel.as_os_str().as_encoded_bytes());
    hasher.update(meta.len().to_le_bytes());
    hasher.update(meta.mtime().to_le_bytes());
    let dir = data_dir.join("kernel");
    let target = dir.join(format!("vmlinux-{}", &hex::encode(hasher.finalize())[..16]));
    if std::fs::metadata(&target).is_ok_and(|m| m.len() == meta.len()) {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(stage_err(&dir))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .map_err(stage_err(&dir))?;
    let partial = dir.join(".vmlinux.partial");
    std::fs::copy(kernel, &partial).map_err(stage_err(&partial))?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o644))
        .map_err(stage_err(&partial))?;
    std::fs::rename(&partial, &target).map_err(stage_err(&target))?;
    Ok(target)
}

impl From<KernelError> for crate::backend::BackendError {
    fn from(err: KernelError) -> Self {
        Self::Unavailable("microvm", err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(root: &Path) -> KernelSearch {
        KernelSearch {
            vmlinux: None,
            cache_root: root.join("cache"),
            source_dir: root.join("src"),
        }
    }

    #[test]
    fn missing_source_and_missing_build_say_how_to_build() {
        let root = tempfile::tempdir().unwrap();
        let err = find(&search(root.path())).unwrap_err().to_string();
        assert!(err.contains("apt-get install linux-source"), "{err}");
        assert!(err.contains("desktop-image/kernel/build.sh"), "{err}");

        std::fs::create_dir_all(root.path().join("src")).unwrap();
        std::fs::write(root.path().join("src/linux-source-6.1.tar.xz"), "").unwrap();
        let err = find(&search(root.path())).unwrap_err();
        let KernelError::NotBuilt(expected) = &err else {
            panic!("{err}");
        };
        let message = err.to_string();
        assert!(message.contains("about 20 minutes"), "{message}");
        assert!(
            message.contains("desktop-image/kernel/build.sh"),
            "{message}"
        );

        std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
        std::fs::write(expected, "ELF").unwrap();
        assert_eq!(&find(&search(root.path())).unwrap(), expected);
    }

    #[test]
    fn override_wins_and_must_exist() {
        let root = tempfile::tempdir().unwrap();
        let mut search = search(root.path());
        search.vmlinux = Some(root.path().join("nope"));
        assert!(matches!(
            find(&search),
            Err(KernelError::OverrideMissing(_))
        ));
        std::fs::write(root.path().join("nope"), "ELF").unwrap();
        assert_eq!(find(&search).unwrap(), root.path().join("nope"));
    }

    #[test]
    fn newest_source_wins_like_sort_v() {
        let root = tempfile::tempdir().unwrap();
        for name in [
            "linux-source-6.1.tar.xz",
            "linux-source-6.12.tar.xz",
            "other.tar.xz",
        ] {
            std::fs::write(root.path().join(name), "").unwrap();
        }
        assert_eq!(
            source_version(root.path()).as_deref(),
            Some("linux-source-6.12")
        );
        assert_eq!(
            version_cmp("linux-source-6.9", "linux-source-6.10"),
            Ordering::Less
        );
    }

    /// The path computed here is the one the script prints, for the same
    /// (fake, empty) source tarballs: the newest of two versions, so the
    /// version ordering of both sides is compared too.
    #[test]
    fn same_path_as_build_sh_print_path() {
        let root = tempfile::tempdir().unwrap();
        let sources = root.path().join("src");
        std::fs::create_dir(&sources).unwrap();
        for name in ["linux-source-6.9.tar.xz", "linux-source-6.10.tar.xz"] {
            std::fs::write(sources.join(name), "").unwrap();
        }
        let version = source_version(&sources).unwrap();
        assert_eq!(version, "linux-source-6.10");
        let cache = root.path().join("cache");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../desktop-image/kernel/build.sh"
        );
        let out = std::process::Command::new("bash")
            .args([script, "--print-path"])
            .env("CUBICLE_KERNEL_CACHE", &cache)
            .env("CUBICLE_KERNEL_SOURCE_DIR", &sources)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let ours = find(&KernelSearch {
            vmlinux: None,
            cache_root: cache,
            source_dir: sources,
        });
        let Err(KernelError::NotBuilt(ours)) = ours else {
            panic!("nothing is built yet: {ours:?}");
        };
        assert_eq!(PathBuf::from(printed), ours);
    }

    #[test]
    fn private_kernel_is_staged_world_readable() {
        let root = tempfile::tempdir().unwrap();
        let private = root.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let kernel = private.join("vmlinux");
        std::fs::write(&kernel, "ELF kernel").unwrap();
        let data = root.path().join("data");
        let staged = stage(&kernel, &data).unwrap();
        assert!(staged.starts_with(data.join("kernel")));
        assert_eq!(std::fs::read(&staged).unwrap(), b"ELF kernel");
        assert_eq!(std::fs::metadata(&staged).unwrap().mode() & 0o777, 0o644);
        assert_eq!(
            stage(&kernel, &data).unwrap(),
            staged,
            "second call reuses the copy"
        );
    }
}
