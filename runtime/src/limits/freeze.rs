//! Pausing a workspace through its cgroup's freezer: v2 `cgroup.freeze`
//! (confirmed by `frozen 1` in `cgroup.events`), v1 `freezer.state`
//! (`FROZEN` once every task is; `FREEZING` while some are not yet).
//!
//! A frozen task keeps its memory and gets no CPU time; it cannot even die
//! until thawed (v1), which is why a stop thaws first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroup::WorkspaceCgroup;

/// How long freezing may take before it is given up (and undone).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
const SETTLE_POLL: Duration = Duration::from_millis(5);

/// What can go wrong freezing or thawing.
#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    #[error(
        "this host has no cgroup freezer for workspaces (mount the v1 freezer controller or use cgroup v2)"
    )]
    NoFreezer,
    #[error("the workspace has no cgroup (is it running?): {0} is missing")]
    NoCgroup(String),
    #[error("cgroup freezer file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} did not reach {wanted} within {SETTLE_TIMEOUT:?} (last: {last})")]
    Timeout {
        path: String,
        wanted: &'static str,
        last: String,
    },
}

/// Whether a workspace cgroup's tasks are frozen or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frozen {
    Yes,
    No,
}

/// Freezes every task of `cgroup`; returns once all are frozen. On a
/// timeout the cgroup is thawed again, so it is never left half frozen.
pub async fn freeze(cgroup: &WorkspaceCgroup) -> Result<(), FreezeError> {
    let result = set(cgroup, Frozen::Yes).await;
    if result.is_err() {
        let _ = set(cgroup, Frozen::No).await;
    }
    result
}

/// Thaws every task of `cgroup`; returns once none is frozen.
pub async fn thaw(cgroup: &WorkspaceCgroup) -> Result<(), FreezeError> {
    set(cgroup, Frozen::No).await
}

/// Whether `cgroup` is frozen now (`None`: no freezer, or no cgroup).
pub fn state(cgroup: &WorkspaceCgroup) -> Option<Frozen> {
    let (file, _, _) = cgroup.freeze_file()?;
    match reached(&file, Frozen::Yes) {
        Ok((true, _)) => Some(Frozen::Yes),
        Ok((false, _)) => Some(Frozen::No),
        Err(_) => None,
    }
}

async fn set(cgroup: &WorkspaceCgroup, wanted: Frozen) -> Result<(), FreezeError> {
    let (file, on, off) = cgroup.freeze_file().ok_or(FreezeError::NoFreezer)?;
    if !file.exists() {
        return Err(FreezeError::NoCgroup(file.display().to_string()));
    }
    let value = match wanted {
        Frozen::Yes => on,
        Frozen::No => off,
    };
    write(&file, value)?;
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let (done, last) = reached(&file, wanted)?;
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(FreezeError::Timeout {
                path: file.display().to_string(),
                wanted: value,
                last,
            });
        }
        // v1 retries a stuck FREEZING when FROZEN is written again.
        if last == "FREEZING" {
            write(&file, value)?;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

fn write(path: &Path, value: &str) -> Result<(), FreezeError> {
    std::fs::write(path, value).map_err(|source| FreezeError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Whether the freezer behind `file` is in the `wanted` state, and what it
/// last said.
fn reached(file: &Path, wanted: Frozen) -> Result<(bool, String), FreezeError> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|source| FreezeError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    if file.file_name().is_some_and(|n| n == "cgroup.freeze") {
        let events = file.with_file_name("cgroup.events");
        let text = read(&events)?;
        let frozen = text
            .lines()
            .find_map(|l| l.strip_prefix("frozen "))
            .map(str::trim)
            .unwrap_or("0")
            .to_owned();
        let done = (frozen == "1") == (wanted == Frozen::Yes);
        return Ok((done, format!("frozen {frozen}")));
    }
    let text = read(&file.to_path_buf())?.trim().to_owned();
    let done = match wanted {
        Frozen::Yes => text == "FROZEN",
        Frozen::No => text == "THAWED",
    };
    Ok((done, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_hierarchies() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("freezer.state");
        std::fs::write(&v1, "FREEZING\n").unwrap();
        assert_eq!(
            reached(&v1, Frozen::Yes).unwrap(),
            (false, "FREEZING".into())
        );
        std::fs::write(&v1, "FROZEN\n").unwrap();
        assert!(reached(&v1, Frozen::Yes).unwrap().0);
        assert!(!reached(&v1, Frozen::No).unwrap().0);
        let v2 = dir.path().join("cgroup.freeze");
        std::fs::write(&v2, "1\n").unwrap();
        std::fs::write(dir.path().join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        assert!(!reached(&v2, Frozen::Yes).unwrap().0, "asked, not yet done");
        std::fs::write(dir.path().join("cgroup.events"), "populated 1\nfrozen 1\n").unwrap();
        assert!(reached(&v2, Frozen::Yes).unwrap().0);
    }

    /// On the real host (root only): a busy child in a frozen cgroup uses
    /// no CPU, and continues after the thaw.
    #[tokio::test]
    async fn a_frozen_child_uses_no_cpu_and_continues_after_thaw() {
        use super::super::cgroup::{Hierarchy, join_from_child, raw_fds};
        use std::os::unix::process::CommandExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to make cgroups");
            return;
        }
        let hierarchy = Hierarchy::detect().unwrap();
        hierarchy.prepare().unwrap();
        let cgroup = hierarchy.workspace(&format!("freeze-{}", std::process::id()));
        if cgroup.freeze_file().is_none() {
            eprintln!("skipped: no freezer on this host");
            return;
        }
        cgroup.create(&Default::default()).unwrap();
        let files = cgroup.open_join_files().unwrap();
        let fds = raw_fds(&files);
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "while :; do :; done"]);
        // SAFETY: the hook only calls write(2) on open descriptors.
        unsafe {
            command.pre_exec(move || join_from_child(&fds));
        }
        let mut child = command.spawn().unwrap();
        drop(files);
        tokio::time::sleep(Duration::from_millis(200)).await;
        freeze(&cgroup).await.unwrap();
        assert_eq!(state(&cgroup), Some(Frozen::Yes));
        let before = cgroup.usage().cpu_usage_usec;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = cgroup.usage().cpu_usage_usec;
        if before.is_some() {
            assert_eq!(before, after, "a frozen cgroup used CPU");
        }
        thaw(&cgroup).await.unwrap();
        assert_eq!(state(&cgroup), Some(Frozen::No));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let later = cgroup.usage().cpu_usage_usec;
        if after.is_some() {
            assert!(later > after, "the thawed child runs again");
        }
        assert!(child.try_wait().unwrap().is_none(), "still alive");
        cgroup.remove().unwrap();
        let _ = child.wait();
    }
}
