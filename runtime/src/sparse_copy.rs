//! Copies of sparse files that keep their holes exactly where they are.
//!
//! A microVM's overlay means "read the base here" by a hole and "this
//! chunk was written" by data (see `cubicle_vmm`'s block device), so a copy
//! that turned written zeros into holes, or holes into zeros, would change
//! the disk the guest sees. `cp --sparse` guesses holes from zero runs;
//! this walks the source's real extents (`SEEK_DATA`/`SEEK_HOLE`) and
//! writes each at its own offset, hashing what it copies on the way, so a
//! snapshot's file is read once to be both kept and named.
//!
//! Why not `copy_file_range`: it does not promise to keep holes, and the
//! bytes must pass through the hash anyway.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use sha2::{Digest, Sha256};

/// Bytes read and written per step.
const CHUNK: usize = 1024 * 1024;

/// What a copy moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// The file's length (holes included).
    pub size: u64,
    /// Bytes in data extents (what the copy occupies on disk).
    pub data_bytes: u64,
    /// SHA-256 over each data extent as `offset` and `length` (8 bytes
    /// each, little-endian) then its bytes, and last the length: two files
    /// with the same digest read the same and have their holes in the
    /// same places.
    pub sha256: String,
}

/// Copies `from` into `to` (empty, opened for writing) extent by extent.
pub fn copy_extents(from: &File, to: &File) -> std::io::Result<Copied> {
    let size = from.metadata()?.len();
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; CHUNK];
    let mut data_bytes = 0u64;
    let mut at = 0u64;
    while at < size {
        let Some(start) = seek(from, at, libc::SEEK_DATA)? else {
            break;
        };
        let end = seek(from, start, libc::SEEK_HOLE)?
            .unwrap_or(size)
            .min(size);
        hash.update(start.to_le_bytes());
        hash.update((end - start).to_le_bytes());
        let mut pos = start;
        while pos < end {
            let want = usize::try_from(end - pos).unwrap_or(CHUNK).min(CHUNK);
            let read = from.read_at(&mut buffer[..want], pos)?;
            if read == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the file shrank while it was copied",
                ));
            }
            to.write_all_at(&buffer[..read], pos)?;
            hash.update(&buffer[..read]);
            pos += read as u64;
        }
        data_bytes += end - start;
        at = end;
    }
    to.set_len(size)?;
    hash.update(size.to_le_bytes());
    Ok(Copied {
        size,
        data_bytes,
        sha256: hex::encode(hash.finalize()),
    })
}

/// `lseek` with `SEEK_DATA`/`SEEK_HOLE`; `None` past the last data.
fn seek(file: &File, offset: u64, whence: libc::c_int) -> std::io::Result<Option<u64>> {
    let offset = libc::off_t::try_from(offset).map_err(std::io::Error::other)?;
    // SAFETY: lseek on a descriptor we own; it only moves its offset.
    let at = unsafe { libc::lseek(file.as_raw_fd(), offset, whence) };
    if at >= 0 {
        return Ok(Some(at as u64));
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENXIO) => Ok(None),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets of data extents, as the filesystem reports them.
    fn extents(file: &File) -> Vec<(u64, u64)> {
        let size = file.metadata().unwrap().len();
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(start) = seek(file, at, libc::SEEK_DATA).unwrap() {
            let end = seek(file, start, libc::SEEK_HOLE).unwrap().unwrap_or(size);
            out.push((start, end));
            at = end;
            if at >= size {
                break;
            }
        }
        out
    }

    #[test]
    fn holes_and_written_zeros_stay_what_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let from = File::create_new(dir.path().join("from")).unwrap();
        // Written zeros at 1 MiB, data at 8 MiB, a hole between and after.
        from.write_all_at(&vec![0u8; 64 * 1024], 1 << 20).unwrap();
        from.write_all_at(b"the guest wrote this", 8 << 20).unwrap();
        from.set_len(32 << 20).unwrap();
        let to = File::create_new(dir.path().join("to")).unwrap();
        let copied = copy_extents(&from, &to).unwrap();
        assert_eq!(copied.size, 32 << 20);
        assert_eq!(to.metadata().unwrap().len(), 32 << 20);
        assert_eq!(extents(&to), extents(&from));
        assert!(copied.data_bytes < 1 << 20, "{copied:?}");
        let mut word = [0u8; 20];
        to.read_exact_at(&mut word, 8 << 20).unwrap();
        assert_eq!(&word, b"the guest wrote this");
        // The same bytes with a hole where the zeros were name differently.
        let other = File::create_new(dir.path().join("other")).unwrap();
        other
            .write_all_at(b"the guest wrote this", 8 << 20)
            .unwrap();
        other.set_len(32 << 20).unwrap();
        let again = File::create_new(dir.path().join("again")).unwrap();
        assert_ne!(copy_extents(&other, &again).unwrap().sha256, copied.sha256);
        let twice = File::create_new(dir.path().join("twice")).unwrap();
        assert_eq!(copy_extents(&to, &twice).unwrap().sha256, copied.sha256);
    }
}
