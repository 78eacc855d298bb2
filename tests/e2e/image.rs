//! The built image as host users see it (README "Isolation": the rootfs
//! holds nothing group/world-writable, set-id or non-root owned). The unit
//! tests of `runtime/src/rootfs_modes.rs` prove the rule on a made-up tree;
//! this scans the image every workspace of this run bind-mounts.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cubicle_runtime::image::ImageStore;
use cubicle_runtime::rootfs_modes::RECORD;

/// Where `cubicle` keeps images unless told otherwise (`--image-cache`).
fn image_cache() -> PathBuf {
    std::env::var_os("CUBICLE_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/cubicle"))
}

/// Every entry under `dir` that a host user other than root could write,
/// that is a set-id file, or that is not root's, as `mode uid:gid path`.
fn exposed(dir: &Path, found: &mut Vec<String>, scanned: &mut usize) {
    for entry in std::fs::read_dir(dir).expect("read a folder of the rootfs") {
        let entry = entry.expect("read a folder entry of the rootfs");
        let meta = entry.metadata().expect("lstat an entry of the rootfs");
        *scanned += 1;
        let mode = meta.mode();
        let link = meta.file_type().is_symlink();
        let writable = !link && mode & 0o022 != 0;
        // On a folder, set-gid only passes its group (root here) to new
        // entries, which no one but root can make: not a privilege.
        let setid = !link && !meta.is_dir() && mode & 0o6000 != 0;
        if writable || setid || meta.uid() != 0 || meta.gid() != 0 {
            found.push(format!(
                "{:o} {}:{} {}",
                mode & 0o7777,
                meta.uid(),
                meta.gid(),
                entry.path().display()
            ));
        }
        if meta.is_dir() {
            exposed(&entry.path(), found, scanned);
        }
    }
}

#[test]
fn the_built_image_is_root_owned_with_nothing_writable_or_set_id() {
    // /proc/self belongs to the process's effective uid.
    let euid = std::fs::metadata("/proc/self")
        .expect("stat /proc/self")
        .uid();
    if euid != 0 {
        return cubicle_tests::skip("the image is hardened only by a root build");
    }
    let cache = image_cache();
    let image = ImageStore::new(cache.clone()).find().unwrap_or_else(|| {
        panic!(
            "no image for the current recipe under {} (scripts/test builds it first)",
            cache.display()
        )
    });
    let mut found = Vec::new();
    let mut scanned = 0;
    exposed(&image.rootfs, &mut found, &mut scanned);
    assert!(
        scanned > 10_000,
        "only {scanned} entries under {}: not a desktop image",
        image.rootfs.display()
    );
    assert!(
        found.is_empty(),
        "{} of {scanned} entries of the image a host user could misuse, first: {:?}",
        found.len(),
        &found[..found.len().min(20)]
    );
    // The control: the Debian packages did make such entries (a world-
    // writable /tmp, set-uid programs, files of service users), and the
    // record of what hardening changed names them, so the scan above had
    // something to find.
    let record = std::fs::read_to_string(image.rootfs.with_file_name(RECORD))
        .expect("the hardening record beside the rootfs");
    let line_of = |path: &str| {
        record
            .lines()
            .find(|line| line.ends_with(&format!(" {path}")))
            .unwrap_or_else(|| panic!("{path} is not in the hardening record"))
            .to_owned()
    };
    let tmp = line_of("/tmp");
    let mode = u32::from_str_radix(tmp.split(' ').nth(2).expect("a mode field"), 8)
        .expect("an octal mode");
    assert_eq!(mode & 0o7777, 0o1777, "the image's /tmp as built: {tmp}");
    assert!(
        record
            .lines()
            .filter_map(|line| line.split(' ').nth(2))
            .filter_map(|mode| u32::from_str_radix(mode, 8).ok())
            .any(|mode| mode & 0o4000 != 0),
        "no set-uid program in the record: the packages' su/passwd were not seen"
    );
}
