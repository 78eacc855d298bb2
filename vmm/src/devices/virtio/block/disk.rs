//! The host side of a virtio-blk device: a raw image file, optionally under a
//! copy-on-write overlay. The overlay is a sparse file the size of the base;
//! a 4 KiB chunk that holds data in the overlay (found with SEEK_DATA at open,
//! then tracked in a bitmap) replaces the base's chunk. The base is never
//! written. No metadata file: the overlay's allocation *is* the map.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::SECTOR_SIZE;

const CHUNK: u64 = 4096;

/// Errors opening a disk.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The image cannot be opened.
    #[error("cannot open disk image {path}: check that it exists and is readable{}", if *.writable { " and writable" } else { "" })]
    Open {
        /// The image.
        path: PathBuf,
        /// Whether write access was needed.
        writable: bool,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The image is smaller than one sector.
    #[error("disk image {0} is smaller than one 512-byte sector")]
    TooSmall(PathBuf),
    /// The overlay could not be prepared.
    #[error("cannot prepare copy-on-write overlay {path}")]
    Overlay {
        /// The overlay.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

struct Overlay {
    file: File,
    present: Vec<u64>,
}

/// A disk image as the guest sees it.
pub struct Disk {
    base: File,
    overlay: Option<Overlay>,
    read_only: bool,
    size: u64,
}

impl Disk {
    /// Opens `path`; with `overlay`, writes go there and the base is opened
    /// read-only.
    pub fn open(path: &Path, read_only: bool, overlay: Option<&Path>) -> Result<Disk, DiskError> {
        let writable = !read_only && overlay.is_none();
        let base = OpenOptions::new().read(true).write(writable).open(path);
        let base = base.map_err(|source| DiskError::Open {
            path: path.into(),
            writable,
            source,
        })?;
        let len = base
            .metadata()
            .map_err(|source| DiskError::Open {
                path: path.into(),
                writable,
                source,
            })?
            .len();
        let size = len - len % SECTOR_SIZE;
        if size == 0 {
            return Err(DiskError::TooSmall(path.into()));
        }
        let overlay = match overlay {
            Some(p) => Some(Overlay::open(p, size).map_err(|source| DiskError::Overlay {
                path: p.into(),
                source,
            })?),
            None => None,
        };
        Ok(Disk {
            base,
            overlay,
            read_only,
            size,
        })
    }

    /// Size in bytes (a whole number of sectors).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the guest may write.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let Some(overlay) = &self.overlay else {
            return self.base.read_exact_at(buf, offset);
        };
        for_each_chunk(offset, buf.len(), |chunk, range, at| {
            let file = if overlay.has(chunk) {
                &overlay.file
            } else {
                &self.base
            };
            file.read_exact_at(&mut buf[range], at)
        })
    }

    /// Writes `buf` at `offset`.
    pub fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        let Some(overlay) = &mut self.overlay else {
            return self.base.write_all_at(buf, offset);
        };
        let base = &self.base;
        for_each_chunk(offset, buf.len(), |chunk, range, at| {
            let fresh = !overlay.has(chunk);
            if fresh && range.len() as u64 != CHUNK {
                overlay.copy_up(base, chunk)?;
            }
            overlay.file.write_all_at(&buf[range], at)?;
            // Only a chunk whose write landed is the overlay's: after a
            // failed one (the disk full) reads still come from the base.
            if fresh {
                overlay.mark(chunk);
            }
            Ok(())
        })
    }

    /// Makes written data durable.
    pub fn flush(&self) -> io::Result<()> {
        match &self.overlay {
            Some(o) => o.file.sync_data(),
            None if !self.read_only => self.base.sync_data(),
            None => Ok(()),
        }
    }
}

/// Calls `f(chunk index, range in the buffer, file offset)` per 4 KiB chunk.
fn for_each_chunk(
    offset: u64,
    len: usize,
    mut f: impl FnMut(u64, std::ops::Range<usize>, u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let n = ((CHUNK - at % CHUNK) as usize).min(len - done);
        f(at / CHUNK, done..done + n, at)?;
        done += n;
    }
    Ok(())
}

impl Overlay {
    fn open(path: &Path, size: u64) -> io::Result<Overlay> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.len() < size {
            file.set_len(size)?;
        }
        let chunks = size.div_ceil(CHUNK);
        let mut overlay = Overlay {
            file,
            present: vec![0; chunks.div_ceil(64) as usize],
        };
        overlay.scan(size)?;
        Ok(overlay)
    }

    /// Marks every chunk that holds data in the sparse file.
    fn scan(&mut self, size: u64) -> io::Result<()> {
        let mut pos = 0u64;
        while pos < size {
            let Some(data) = seek(&self.file, pos, libc::SEEK_DATA)? else {
                break;
            };
            let hole = seek(&self.file, data, libc::SEEK_HOLE)?
                .unwrap_or(size)
                .min(size);
            for chunk in data / CHUNK..hole.div_ceil(CHUNK) {
                self.mark(chunk);
            }
            pos = hole.max(data + 1);
        }
        Ok(())
    }

    fn has(&self, chunk: u64) -> bool {
        self.present
            .get((chunk / 64) as usize)
            .is_some_and(|w| w & (1 << (chunk % 64)) != 0)
    }

    fn mark(&mut self, chunk: u64) {
        if let Some(w) = self.present.get_mut((chunk / 64) as usize) {
            *w |= 1 << (chunk % 64);
        }
    }

    /// Before a partial write to a chunk not yet in the overlay, copies the
    /// base's chunk up so the rest of it stays correct.
    fn copy_up(&self, base: &File, chunk: u64) -> io::Result<()> {
        let mut buf = vec![0u8; CHUNK as usize];
        let n = read_upto(base, &mut buf, chunk * CHUNK)?;
        self.file.write_all_at(&buf[..n], chunk * CHUNK)
    }
}

fn read_upto(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// lseek with SEEK_DATA/SEEK_HOLE; `None` when there is no more data.
fn seek(file: &File, pos: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let pos =
        libc::off_t::try_from(pos).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: lseek on a file descriptor we own; it has no memory effects.
    let r = unsafe { libc::lseek(file.as_raw_fd(), pos, whence) };
    if r >= 0 {
        return Ok(Some(r as u64));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ENXIO) {
        Ok(None)
    } else {
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cubicle-disk-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn overlay_keeps_base_and_survives_reopen() {
        let dir = temp("cow");
        let base = dir.join("base.img");
        let over = dir.join("over.img");
        std::fs::write(&base, vec![0xaau8; 3 * CHUNK as usize]).expect("write base");
        let mut disk = Disk::open(&base, false, Some(&over)).expect("open");
        disk.write_at(b"hello", CHUNK + 10).expect("write");
        let mut buf = vec![0u8; 20];
        disk.read_at(&mut buf, CHUNK + 5).expect("read");
        assert_eq!(&buf[..5], &[0xaa; 5]);
        assert_eq!(&buf[5..10], b"hello");
        assert_eq!(
            std::fs::read(&base).expect("base")[CHUNK as usize + 10],
            0xaa
        );
        drop(disk);
        let disk = Disk::open(&base, false, Some(&over)).expect("reopen");
        disk.read_at(&mut buf, CHUNK + 5).expect("read again");
        assert_eq!(&buf[5..10], b"hello");
        let mut first = [0u8; 4];
        disk.read_at(&mut first, 0).expect("read chunk 0");
        assert_eq!(first, [0xaa; 4]);
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn read_only_refuses_writes() {
        let dir = temp("ro");
        let base = dir.join("base.img");
        std::fs::write(&base, vec![1u8; 1024]).expect("write base");
        let mut disk = Disk::open(&base, true, None).expect("open");
        assert!(disk.write_at(b"x", 0).is_err());
        assert!(Disk::open(&dir.join("missing"), true, None).is_err());
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
