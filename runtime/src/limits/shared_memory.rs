//! Identical memory pages shared between workspaces (`serve
//! --share-memory`): the kernel's same-page merging (KSM) folds pages with
//! the same content into one copy-on-write page. Desktops of one image hold
//! many such pages (Chromium's and XFCE's heaps after the same start, a
//! microVM's guest kernel and page cache), which the page cache cannot share
//! because they are anonymous.
//!
//! The daemon marks itself with `PR_SET_MEMORY_MERGE` before any workspace
//! starts: the mark is kept across fork and exec, so every shim and every
//! process of every workspace (a jail's desktop, a VMM with its guest's RAM)
//! is merged, and so are the daemon's own buffers (the recorders' encoders of
//! screens that look alike). It then makes sure the kernel's merging thread
//! runs, paced by the kernel's own advisor (`scan-time`) where it has one.
//!
//! Off by default: merged pages let a process tell, by how long a write
//! takes, whether another process holds a page with the same content — a
//! known side channel between tenants. Turn it on where the workspaces of a
//! host belong to one tenant.

use std::path::Path;

/// Where the kernel's KSM switches are.
const KSM: &str = "/sys/kernel/mm/ksm";

/// Why memory sharing could not be turned on.
#[derive(Debug, thiserror::Error)]
pub enum SharingError {
    #[error(
        "--share-memory: this kernel has no same-page merging ({KSM} is missing: CONFIG_KSM); run without it"
    )]
    NoKsm,
    #[error(
        "--share-memory: the kernel refused PR_SET_MEMORY_MERGE ({0}); it needs Linux 6.4 or later"
    )]
    Prctl(std::io::Error),
    #[error("--share-memory: cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// Marks this process (and so everything it starts from now on) for
/// merging and starts the kernel's merging thread; what it did, in a line.
pub fn enable() -> Result<String, SharingError> {
    enable_in(Path::new(KSM))
}

fn enable_in(ksm: &Path) -> Result<String, SharingError> {
    if !ksm.join("run").exists() {
        return Err(SharingError::NoKsm);
    }
    // SAFETY: prctl with integer arguments only; it changes a flag of this
    // process's memory map and reads no memory of ours.
    let marked = unsafe { libc::prctl(libc::PR_SET_MEMORY_MERGE, 1, 0, 0, 0) };
    if marked != 0 {
        return Err(SharingError::Prctl(std::io::Error::last_os_error()));
    }
    let write = |name: &str, value: &str| {
        let path = ksm.join(name);
        std::fs::write(&path, value).map_err(|source| SharingError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    let was_running = read(ksm, "run").as_deref() == Some("1");
    if !was_running {
        write("run", "1")?;
    }
    // The advisor sizes each scan so a full pass takes its target time,
    // within its CPU budget (Linux 6.7 and later); without it the kernel's
    // fixed pace stands.
    let paced = ksm.join("advisor_mode").exists() && write("advisor_mode", "scan-time").is_ok();
    Ok(format!(
        "memory sharing: on (KSM {}, {}; see README, \"Shared memory\")",
        if was_running {
            "was already running"
        } else {
            "started"
        },
        if paced {
            "paced by the kernel's advisor"
        } else {
            "at the kernel's pace"
        }
    ))
}

fn read(ksm: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(ksm.join(name))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Pages the kernel merged so far (`pages_sharing`: the copies saved), if
/// it has KSM.
pub fn pages_saved() -> Option<u64> {
    read(Path::new(KSM), "pages_sharing")?.parse().ok()
}

/// Full scans the merging thread finished so far, if the kernel has KSM.
pub fn full_scans() -> Option<u64> {
    read(Path::new(KSM), "full_scans")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_ksm_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = enable_in(&dir.path().join("ksm")).unwrap_err();
        assert!(matches!(err, SharingError::NoKsm), "{err}");
        assert!(err.to_string().contains("CONFIG_KSM"));
    }

    #[test]
    fn the_switches_are_set_where_they_were_off() {
        if !Path::new(KSM).join("run").exists() {
            return cubicle_skip::skip("this kernel has no KSM (CONFIG_KSM)");
        }
        // A stand-in for the sysfs folder: the process mark is real (and
        // harmless in a test process), the switches are files.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run"), "0\n").unwrap();
        std::fs::write(dir.path().join("advisor_mode"), "none\n").unwrap();
        let said = enable_in(dir.path()).unwrap();
        assert_eq!(read(dir.path(), "run").as_deref(), Some("1"));
        assert_eq!(
            read(dir.path(), "advisor_mode").as_deref(),
            Some("scan-time")
        );
        assert!(said.contains("started"), "{said}");
        // SAFETY: prctl with integer arguments only.
        let marked = unsafe { libc::prctl(libc::PR_GET_MEMORY_MERGE, 0, 0, 0, 0) };
        assert_eq!(marked, 1, "this process is marked for merging");
    }
}
