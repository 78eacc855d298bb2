//! Guest memory in a snapshot: one file holding every RAM region back to
//! back (region i at the sum of the sizes before it), sparse — pages that
//! read as zero are holes — and, at restore, mapped `MAP_PRIVATE` so a
//! restored VM reads the file's pages from the page cache and copies only
//! what it writes: N VMs restored from one file share every page none of
//! them has written.
//!
//! Which pages to look at: in an anonymous mapping a page that is neither
//! present nor swapped out (`/proc/self/pagemap`) was never written and is
//! zero, so it is skipped unread; a file-backed mapping (a VM that was
//! itself restored) is read whole. Without `/proc` (the jail mounts none)
//! every page is read, which is slower, never wrong.
//!
//! A diff snapshot of a restored VM writes only the pages the VM has
//! written since: in its `MAP_PRIVATE` file mapping those are exactly the
//! pages that became private copies (pagemap: present or swapped, not a
//! file page), whoever wrote them — the guest through KVM or a device
//! through vm-memory. Its image names the base image it applies to; a
//! restore maps the base copy-on-write and reads the diff's pages over it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use vm_memory::mmap::MmapRegionBuilder;
use vm_memory::{
    FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    GuestRegionMmap,
};

use super::{SnapshotError, io};
use crate::arch::x86_64::layout;

const PAGE: usize = 4096;
/// Pagemap entries read at once (32 KiB).
const PAGEMAP_CHUNK: usize = 4096;
const PM_PRESENT: u64 = 1 << 63;
const PM_SWAPPED: u64 = 1 << 62;
/// "File page or shared anonymous": a private copy has this bit clear.
const PM_FILE: u64 = 1 << 61;
/// Bytes read at once when checking the file's digest.
const VERIFY_CHUNK: usize = 1 << 20;

/// `/proc/self/pagemap`, opened before the jail hides `/proc` (the kernel
/// checks access at open; the descriptor keeps working after the uid drop).
static PAGEMAP: std::sync::OnceLock<Option<File>> = std::sync::OnceLock::new();

/// Opens this process's pagemap for later snapshots (call before entering
/// the jail; later calls change nothing).
pub fn open_pagemap() {
    PAGEMAP.get_or_init(|| File::open("/proc/self/pagemap").ok());
}

/// A memory file opened for a restore, with its path for messages. Opened
/// before the jail (as root, never through a symlink): the jailed VMM
/// needs no view of the snapshot directory and no permission on the file.
#[derive(Debug)]
pub struct OpenFile {
    /// The open file.
    pub file: File,
    /// Where it was opened.
    pub path: std::path::PathBuf,
}

impl OpenFile {
    /// Opens `path` read-only, refusing a symlink.
    pub fn open(path: &Path) -> Result<OpenFile, SnapshotError> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io("opening the memory file", path))?;
        Ok(OpenFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The file's size, refused unless it is `expected` (a truncated file,
    /// or another snapshot's).
    fn check_size(&self, expected: u64) -> Result<u64, SnapshotError> {
        let found = self
            .file
            .metadata()
            .map_err(io("reading the memory file's size", &self.path))?
            .len();
        if found != expected {
            return Err(SnapshotError::MemorySize {
                path: self.path.clone(),
                expected,
                found,
            });
        }
        Ok(found)
    }
}

/// Where one RAM region sits in the guest and in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionImage {
    /// Guest-physical start.
    pub guest_addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset in the memory file.
    pub file_offset: u64,
}

/// The memory file as the snapshot's state describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryImage {
    /// The file's length: every region back to back.
    pub size: u64,
    /// The RAM regions.
    pub regions: Vec<RegionImage>,
    /// Runs of data, `(offset, length)` in the file; everything else is zero.
    pub extents: Vec<(u64, u64)>,
    /// CRC-32 of the extents' bytes, in order.
    pub crc32: u32,
    /// For a diff: the full image its extents apply to.
    #[serde(default)]
    pub base: Option<Box<MemoryImage>>,
}

impl MemoryImage {
    /// Bytes of data (not holes) in the file.
    pub fn data_bytes(&self) -> u64 {
        self.extents.iter().map(|e| e.1).sum()
    }
}

/// Which pages of `[start, start + len)` (host addresses) pass `keep`
/// (given each one's pagemap entry). None when pagemap cannot be read.
fn pages_where(
    pagemap: &File,
    start: usize,
    len: usize,
    keep: fn(u64) -> bool,
) -> Option<Vec<bool>> {
    let pages = len / PAGE;
    let mut touched = Vec::with_capacity(pages);
    let mut raw = vec![0u8; PAGEMAP_CHUNK * 8];
    let mut page = 0;
    while page < pages {
        let n = (pages - page).min(PAGEMAP_CHUNK);
        let offset = ((start / PAGE + page) * 8) as u64;
        pagemap.read_exact_at(&mut raw[..n * 8], offset).ok()?;
        touched.extend(
            raw[..n * 8]
                .chunks_exact(8)
                .map(|e| keep(u64::from_le_bytes(e.try_into().expect("chunks of 8 bytes")))),
        );
        page += n;
    }
    Some(touched)
}

/// Marks in `pages` (one flag per page of the region at `region_offset`
/// in the file) every page the base image has data in.
fn mark_extents(pages: &mut [bool], base: &MemoryImage, region_offset: u64) {
    let region_end = region_offset + (pages.len() * PAGE) as u64;
    for &(offset, len) in &base.extents {
        let (from, to) = (offset.max(region_offset), (offset + len).min(region_end));
        if from >= to {
            continue;
        }
        let first = ((from - region_offset) / PAGE as u64) as usize;
        let last = (to - region_offset).div_ceil(PAGE as u64) as usize;
        pages[first..last].iter_mut().for_each(|p| *p = true);
    }
}

/// In an anonymous mapping: the page was ever touched.
fn touched(entry: u64) -> bool {
    entry & (PM_PRESENT | PM_SWAPPED) != 0
}

/// In a private file mapping: the page is the VM's own copy.
fn private_copy(entry: u64) -> bool {
    touched(entry) && entry & PM_FILE == 0
}

/// Which pages a memory file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Every page that is not zero: a full snapshot.
    All,
    /// Only the pages written since the VM was restored from its base.
    Dirty,
}

fn is_zero(page: &[u8]) -> bool {
    page.iter().fold(0u8, |acc, &b| acc | b) == 0
}

/// Writes guest memory to `path` (created, sparse): `pages` says which.
/// The vCPUs must be parked and the devices locked: nothing may write guest
/// memory meanwhile.
pub fn write(
    guest: &GuestMemoryMmap,
    path: &Path,
    pages: Pages,
    base: Option<&MemoryImage>,
) -> Result<MemoryImage, SnapshotError> {
    let file = File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io("creating the memory file", path))?;
    open_pagemap();
    let pagemap = PAGEMAP.get().and_then(Option::as_ref);
    let mut crc = crc32fast::Hasher::new();
    let mut regions = Vec::new();
    let mut extents: Vec<(u64, u64)> = Vec::new();
    let mut file_offset = 0u64;
    for region in guest.iter() {
        let len = region.len() as usize;
        let host = region.as_ptr();
        // SAFETY: `host` and `len` are a live mapping that `guest` owns for
        // the whole call, and nothing writes it meanwhile (the caller's
        // contract: vCPUs parked, devices locked).
        let bytes = unsafe { std::slice::from_raw_parts(host, len) };
        let anonymous = region.file_offset().is_none();
        let wanted = match (pages, anonymous, base) {
            (Pages::All, true, _) => {
                pagemap.and_then(|pm| pages_where(pm, host as usize, len, touched))
            }
            // A restored VM's page is data if it is its own copy or the
            // base file has data there; the rest is zero, left unread
            // (reading it would fill the page cache with the file's holes).
            (Pages::All, false, Some(base)) => pagemap
                .and_then(|pm| pages_where(pm, host as usize, len, private_copy))
                .map(|mut own| {
                    mark_extents(&mut own, base, file_offset);
                    own
                }),
            (Pages::All, false, None) => None,
            (Pages::Dirty, ..) => Some(
                pagemap
                    .filter(|_| !anonymous)
                    .and_then(|pm| pages_where(pm, host as usize, len, private_copy))
                    .ok_or(SnapshotError::NoDiff)?,
            ),
        };
        let mut run: Option<usize> = None;
        let mut flush = |from: usize, to: usize| -> Result<(), SnapshotError> {
            let data = &bytes[from..to];
            file.write_all_at(data, file_offset + from as u64)
                .map_err(io("writing the memory file", path))?;
            crc.update(data);
            extents.push((file_offset + from as u64, (to - from) as u64));
            Ok(())
        };
        for (i, page) in bytes.chunks(PAGE).enumerate() {
            // A dirty page is kept even when zero: a hole in a diff means
            // "the base's page".
            let skip =
                wanted.as_ref().is_some_and(|w| !w[i]) || (pages == Pages::All && is_zero(page));
            match (skip, run) {
                (false, None) => run = Some(i * PAGE),
                (true, Some(from)) => {
                    flush(from, i * PAGE)?;
                    run = None;
                }
                _ => {}
            }
        }
        if let Some(from) = run {
            flush(from, len)?;
        }
        regions.push(RegionImage {
            guest_addr: region.start_addr().0,
            len: len as u64,
            file_offset,
        });
        file_offset += len as u64;
    }
    file.set_len(file_offset)
        .map_err(io("sizing the memory file", path))?;
    file.sync_all()
        .map_err(io("syncing the memory file", path))?;
    Ok(MemoryImage {
        size: file_offset,
        regions,
        extents,
        crc32: crc.finalize(),
        base: None,
    })
}

/// Refuses data whose CRC is not the image's.
fn check_crc(found: u32, image: &MemoryImage, path: &Path) -> Result<(), SnapshotError> {
    if found != image.crc32 {
        return Err(SnapshotError::MemoryCorrupt {
            path: path.to_path_buf(),
            expected: image.crc32,
            found,
        });
    }
    Ok(())
}

/// Checks the file's extents against the image's CRC.
fn verify(file: &File, image: &MemoryImage, path: &Path) -> Result<(), SnapshotError> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; VERIFY_CHUNK];
    for &(offset, len) in &image.extents {
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(VERIFY_CHUNK as u64) as usize;
            file.read_exact_at(&mut buf[..n], offset + done)
                .map_err(io("reading the memory file", path))?;
            crc.update(&buf[..n]);
            done += n as u64;
        }
    }
    check_crc(crc.finalize(), image, path)
}

/// Maps `path` as the guest memory of a VM of `memory_mib` MiB, copy-on-write.
pub fn map(
    open: &OpenFile,
    image: &MemoryImage,
    memory_mib: u64,
    check_data: bool,
) -> Result<GuestMemoryMmap, SnapshotError> {
    let (file, path) = (&open.file, open.path.as_path());
    let found = open.check_size(image.size)?;
    let expected: Vec<(u64, u64)> = layout::ram_ranges(memory_mib << 20);
    let saved: Vec<(u64, u64)> = image
        .regions
        .iter()
        .map(|r| (r.guest_addr, r.len))
        .collect();
    let contiguous = image
        .regions
        .iter()
        .scan(0u64, |at, r| {
            let ok = r.file_offset == *at;
            *at += r.len;
            Some(ok)
        })
        .all(|ok| ok);
    if saved != expected || !contiguous || image.regions.iter().map(|r| r.len).sum::<u64>() != found
    {
        return Err(SnapshotError::Damaged(format!(
            "the memory layout {saved:?} does not fit a {memory_mib} MiB VM"
        )));
    }
    if check_data {
        verify(file, image, path)?;
    }
    let regions = image
        .regions
        .iter()
        .map(|r| {
            let handle = file
                .try_clone()
                .map_err(io("opening the memory file", path))?;
            let mapping = MmapRegionBuilder::new(r.len as usize)
                .with_file_offset(FileOffset::new(handle, r.file_offset))
                .with_mmap_prot(libc::PROT_READ | libc::PROT_WRITE)
                .with_mmap_flags(libc::MAP_PRIVATE | libc::MAP_NORESERVE)
                .build()
                .map_err(|e| SnapshotError::Map {
                    path: path.to_path_buf(),
                    why: e.to_string(),
                })?;
            GuestRegionMmap::new(mapping, GuestAddress(r.guest_addr)).ok_or_else(|| {
                SnapshotError::Damaged(format!("region at {:#x} overflows", r.guest_addr))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    GuestMemoryMmap::from_regions(regions).map_err(|e| SnapshotError::Map {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Reads a diff's pages over guest memory mapped from its base (they
/// become the VM's private copies), checking the diff's CRC as it goes.
pub fn apply_diff(
    guest: &GuestMemoryMmap,
    open: &OpenFile,
    image: &MemoryImage,
) -> Result<(), SnapshotError> {
    let (file, path) = (&open.file, open.path.as_path());
    open.check_size(image.size)?;
    let mut crc = crc32fast::Hasher::new();
    for &(offset, len) in &image.extents {
        let (region, at) = image
            .regions
            .iter()
            .zip(guest.iter())
            .find(|(r, _)| offset >= r.file_offset && offset + len <= r.file_offset + r.len)
            .map(|(r, g)| (g, offset - r.file_offset))
            .ok_or_else(|| {
                SnapshotError::Damaged(format!(
                    "diff extent at {offset:#x} lies outside guest memory"
                ))
            })?;
        // SAFETY: the extent lies inside this region (checked above), a live
        // mapping of `guest`'s that no vCPU runs on yet.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(region.as_ptr().add(at as usize), len as usize)
        };
        file.read_exact_at(bytes, offset)
            .map_err(io("reading the diff memory file", path))?;
        crc.update(bytes);
    }
    check_crc(crc.finalize(), image, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::Bytes;

    #[test]
    fn memory_round_trips_through_a_sparse_file_and_maps_copy_on_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let guest = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 2 << 20)]).expect("memory");
        guest
            .write_slice(b"first page", GuestAddress(0x10))
            .expect("write");
        guest
            .write_slice(b"far page", GuestAddress(0x1f_f000))
            .expect("write");
        let image = write(&guest, &path, Pages::All, None).expect("written");
        assert_eq!(image.size, 2 << 20);
        assert_eq!(image.data_bytes(), 2 * PAGE as u64, "{:?}", image.extents);
        let open = || OpenFile::open(&path).expect("opens");
        let restored = map(&open(), &image, 2, true).expect("mapped");
        let mut back = [0u8; 10];
        restored
            .read_slice(&mut back, GuestAddress(0x10))
            .expect("read");
        assert_eq!(&back, b"first page");
        restored
            .write_slice(b"changed", GuestAddress(0x10))
            .expect("write");
        let again = map(&open(), &image, 2, true).expect("the file is unchanged");
        again
            .read_slice(&mut back, GuestAddress(0x10))
            .expect("read");
        assert_eq!(&back, b"first page", "writes stay private to the VM");
    }

    #[test]
    fn a_restored_vms_full_snapshot_holds_the_bases_data_and_its_own_pages_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let guest = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 2 << 20)]).expect("memory");
        guest
            .write_slice(b"from the base", GuestAddress(0x3000))
            .expect("write");
        let base = write(&guest, &dir.path().join("base"), Pages::All, None).expect("written");
        let open = OpenFile::open(&dir.path().join("base")).expect("opens");
        let restored = map(&open, &base, 2, false).expect("mapped");
        restored
            .write_slice(b"its own", GuestAddress(0x10_0000))
            .expect("write");
        let again = dir.path().join("again");
        let image = write(&restored, &again, Pages::All, Some(&base)).expect("written");
        let offsets: Vec<u64> = image.extents.iter().map(|e| e.0).collect();
        assert_eq!(offsets, vec![0x3000, 0x10_0000], "{:?}", image.extents);
        let back = map(&OpenFile::open(&again).expect("opens"), &image, 2, true).expect("mapped");
        let mut text = [0u8; 13];
        back.read_slice(&mut text, GuestAddress(0x3000))
            .expect("read");
        assert_eq!(&text, b"from the base");
        back.read_slice(&mut text[..7], GuestAddress(0x10_0000))
            .expect("read");
        assert_eq!(&text[..7], b"its own");
    }

    #[test]
    fn a_changed_or_truncated_memory_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let guest = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 2 << 20)]).expect("memory");
        guest
            .write_slice(b"data", GuestAddress(0x2000))
            .expect("write");
        let image = write(&guest, &path, Pages::All, None).expect("written");
        let file = File::options().write(true).open(&path).expect("open");
        file.write_all_at(b"X", 0x2001).expect("corrupt");
        let open = || OpenFile::open(&path).expect("opens");
        let err = map(&open(), &image, 2, true).expect_err("corrupt");
        assert!(matches!(err, SnapshotError::MemoryCorrupt { .. }), "{err}");
        file.set_len(1 << 20).expect("truncate");
        let err = map(&open(), &image, 2, true).expect_err("truncated");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
