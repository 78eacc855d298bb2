//! Snapshots of a paused VM: a state file (every vCPU, the in-kernel
//! irqchip, PIT and kvmclock, COM1, each virtio-mmio device and its queues,
//! the VM's configuration and a description of the memory file) and a
//! memory file (see [`memory`]). A VM is restored from them into a fresh
//! process by [`restore::restore`].
//!
//! The state file is three parts, so that a damaged or foreign file is
//! refused before anything is built from it:
//!
//! ```text
//! cubicle-vmm snapshot <format>\n
//! <the state as JSON>\n
//! sha256 <hex digest of everything above>\n
//! ```
//!
//! `<format>` is [`FORMAT`]; a VMM refuses any other. The digest also names
//! the snapshot (the memory file's CRC is inside the JSON, so it covers
//! both). Both files are written beside their final names, synced and
//! renamed: a snapshot that failed half way leaves nothing behind.
//!
//! vsock streams are not in a snapshot: at restore the device tells the
//! guest its transport was reset (virtio 1.2, 5.10.6.4), and the guest's
//! sockets see a reset while its listeners stay.

pub mod memory;
pub mod restore;

use std::io::Write;
use std::path::{Path, PathBuf};

use kvm_bindings::kvm_cpuid_entry2;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::VmConfig;
use crate::devices::serial::SerialSnapshot;
use crate::devices::virtio::persist::TransportSnapshot;
use crate::vstate::vcpu_state::VcpuState;
use crate::vstate::vm::VmKvmState;

/// The state file's format. Bumped whenever what it holds changes.
pub const FORMAT: u32 = 1;
const MAGIC: &str = "cubicle-vmm snapshot";

/// Errors while taking, reading or restoring a snapshot. Each names the
/// file or part at fault and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The VM is not paused (or not started).
    #[error("cannot snapshot a VM that is {0}; pause it first")]
    NotPaused(&'static str),
    /// A file could not be read or written.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A target file already exists.
    #[error("{0} already exists; snapshots never overwrite a file, choose another path")]
    Exists(PathBuf),
    /// The state file is not a snapshot, or of another format.
    #[error("{path} is not a snapshot this VMM reads: {why}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The state file's digest does not match its content.
    #[error(
        "{0}: the state file's SHA-256 does not match its content; it is damaged or was changed"
    )]
    Checksum(PathBuf),
    /// The memory file has another size than the state says.
    #[error(
        "memory file {path} is {found} bytes, the snapshot says {expected}: it was truncated or is another snapshot's"
    )]
    MemorySize {
        /// The file.
        path: PathBuf,
        /// Size the state records.
        expected: u64,
        /// Size found.
        found: u64,
    },
    /// The memory file's data does not match its CRC.
    #[error(
        "memory file {path}: CRC-32 {found:#010x}, the snapshot says {expected:#010x}; it is damaged or another snapshot's"
    )]
    MemoryCorrupt {
        /// The file.
        path: PathBuf,
        /// CRC the state records.
        expected: u32,
        /// CRC found.
        found: u32,
    },
    /// The memory file could not be mapped.
    #[error("cannot map memory file {path}: {why}")]
    Map {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// What the restore was given does not fit the snapshot.
    #[error("the restore does not fit the snapshot: {0}")]
    Mismatch(String),
    /// The state is internally inconsistent.
    #[error("the snapshot is damaged: {0}")]
    Damaged(String),
    /// This host's CPU lacks something the snapshot's guest uses.
    #[error("this host cannot run the snapshot: {0}; restore it on a host with the same CPU")]
    Cpu(String),
    /// A diff was asked of a VM that was not restored from a snapshot.
    #[error(
        "a diff snapshot needs a VM restored from a snapshot (its memory mapped from the base) and /proc/self/pagemap; take a full snapshot"
    )]
    NoDiff,
    /// A diff was restored without its base, or a full snapshot with one.
    #[error("{0}")]
    Base(&'static str),
    /// A vCPU did not hand over its state.
    #[error("vCPU {0} did not hand over its state (it has left the guest)")]
    VcpuGone(usize),
    /// Reading or writing a vCPU failed.
    #[error(transparent)]
    Vcpu(#[from] crate::vstate::vcpu_state::VcpuStateError),
    /// Reading or writing the VM's in-kernel devices failed.
    #[error(transparent)]
    Vm(#[from] crate::vstate::vm::VmError),
}

/// Everything a snapshot's state file holds.
#[derive(Serialize, Deserialize)]
pub struct Snapshot {
    /// The VMM version that wrote it (for people; [`FORMAT`] decides).
    pub vmm_version: String,
    /// The VM's configuration (paths as the snapshot's VMM saw them).
    pub config: VmConfig,
    /// Each disk's size in bytes, by id: a restored guest's disks must
    /// have the sizes its kernel knows.
    pub disk_sizes: Vec<(String, u64)>,
    /// The memory file.
    pub memory: memory::MemoryImage,
    /// PIT, kvmclock, PICs and IOAPIC.
    pub vm: VmKvmState,
    /// Every vCPU, by index.
    pub vcpus: Vec<VcpuState>,
    /// COM1.
    pub serial: SerialSnapshot,
    /// virtio-mmio devices, by slot.
    pub virtio: Vec<TransportSnapshot>,
}

/// What a snapshot took, for the caller.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotInfo {
    /// SHA-256 of the state file (which covers the memory file's CRC).
    pub sha256: String,
    /// Bytes of the state file.
    pub state_bytes: u64,
    /// Bytes of guest memory written (the rest are holes).
    pub memory_bytes: u64,
    /// Guest memory size.
    pub memory_size: u64,
}

pub(crate) fn io(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> SnapshotError + use<> {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io { what, path, source }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Snapshot {
    /// The state file's bytes and their digest.
    pub fn encode(&self) -> Result<(Vec<u8>, String), SnapshotError> {
        let mut bytes = format!("{MAGIC} {FORMAT}\n").into_bytes();
        serde_json::to_writer(&mut bytes, self)
            .map_err(|e| SnapshotError::Damaged(format!("cannot encode the state: {e}")))?;
        bytes.push(b'\n');
        let digest = hex(&Sha256::digest(&bytes));
        bytes.extend_from_slice(format!("sha256 {digest}\n").as_bytes());
        Ok((bytes, digest))
    }

    /// Reads a state file, checking its format and digest first.
    pub fn read(path: &Path) -> Result<(Snapshot, String), SnapshotError> {
        let bytes = std::fs::read(path).map_err(io("reading the state file", path))?;
        Snapshot::decode(&bytes, path)
    }

    /// Parses a state file's bytes (`path` names it in errors).
    pub fn decode(bytes: &[u8], path: &Path) -> Result<(Snapshot, String), SnapshotError> {
        let format_err = |why: String| SnapshotError::Format {
            path: path.to_path_buf(),
            why,
        };
        let first = bytes
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(bytes.len());
        let header = String::from_utf8_lossy(&bytes[..first]);
        let Some(version) = header.strip_prefix(&format!("{MAGIC} ")) else {
            return Err(format_err(
                "it does not start with \"cubicle-vmm snapshot\"".into(),
            ));
        };
        if version != FORMAT.to_string() {
            return Err(format_err(format!(
                "its format is {version}, this VMM reads format {FORMAT}; take the snapshot again with this VMM"
            )));
        }
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let last = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let Some(digest) = std::str::from_utf8(&body[last..])
            .ok()
            .and_then(|l| l.strip_prefix("sha256 "))
        else {
            return Err(format_err(
                "its last line is not its SHA-256 (truncated?)".into(),
            ));
        };
        if hex(&Sha256::digest(&bytes[..last])) != digest {
            return Err(SnapshotError::Checksum(path.to_path_buf()));
        }
        let json = &bytes[first + 1..last];
        let snapshot: Snapshot = serde_json::from_slice(json)
            .map_err(|e| format_err(format!("its state does not parse: {e}")))?;
        if snapshot.vcpus.len() != usize::from(snapshot.config.vcpus) {
            return Err(SnapshotError::Damaged(format!(
                "{} vCPU states for {} vCPUs",
                snapshot.vcpus.len(),
                snapshot.config.vcpus
            )));
        }
        Ok((snapshot, digest.to_string()))
    }

    /// Writes the state file beside `path`, syncs it and renames it into
    /// place (never over an existing file).
    pub fn write(&self, path: &Path) -> Result<SnapshotInfo, SnapshotError> {
        let (bytes, sha256) = self.encode()?;
        let partial = partial_name(path);
        let result = (|| {
            let mut file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&partial)
                .map_err(io("creating the state file", &partial))?;
            file.write_all(&bytes)
                .map_err(io("writing the state file", &partial))?;
            file.sync_all()
                .map_err(io("syncing the state file", &partial))?;
            publish(&partial, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result?;
        Ok(SnapshotInfo {
            sha256,
            state_bytes: bytes.len() as u64,
            memory_bytes: self.memory.data_bytes(),
            memory_size: self.memory.size,
        })
    }
}

/// Where a file is written before it is renamed to `path`.
pub fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Moves `partial` to `path` unless `path` exists (a hard link then an
/// unlink: unlike a rename, the link fails on an existing file).
pub fn publish(partial: &Path, path: &Path) -> Result<(), SnapshotError> {
    std::fs::hard_link(partial, path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            SnapshotError::Exists(path.to_path_buf())
        } else {
            SnapshotError::Io {
                what: "naming",
                path: path.to_path_buf(),
                source: e,
            }
        }
    })?;
    std::fs::remove_file(partial).map_err(io("removing", partial))
}

/// CPUID registers whose feature bits a guest may have used: (leaf,
/// subleaf, register index eax=0 ebx=1 ecx=2 edx=3, bits the VMM sets or
/// the guest's own CR4 changes, which are not the host's to offer).
const FEATURE_WORDS: &[(u32, u32, usize, u32)] = &[
    // ecx: OSXSAVE (27) and the hypervisor bit (31); edx: HTT (28).
    (1, 0, 2, 1 << 27 | 1 << 31),
    (1, 0, 3, 1 << 28),
    (7, 0, 1, 0),
    // ecx: OSPKE (4).
    (7, 0, 2, 1 << 4),
    (7, 0, 3, 0),
    (0xd, 1, 0, 0),
    (0x8000_0001, 0, 2, 0),
    (0x8000_0001, 0, 3, 0),
];

fn register(e: &kvm_cpuid_entry2, i: usize) -> u32 {
    [e.eax, e.ebx, e.ecx, e.edx][i]
}

fn find(table: &[kvm_cpuid_entry2], leaf: u32, sub: u32) -> Option<&kvm_cpuid_entry2> {
    table
        .iter()
        .find(|e| e.function == leaf && (e.index == sub || leaf != 7 && leaf != 0xd))
}

/// Refuses a snapshot whose guest saw a CPU vendor or a feature this host's
/// KVM does not offer (the guest would fault on the first instruction that
/// uses it).
pub fn check_cpu(
    saved: &[kvm_cpuid_entry2],
    host: &[kvm_cpuid_entry2],
) -> Result<(), SnapshotError> {
    let vendor = |t: &[kvm_cpuid_entry2]| {
        find(t, 0, 0).map(|e| {
            let bytes: Vec<u8> = [e.ebx, e.edx, e.ecx]
                .iter()
                .flat_map(|r| r.to_le_bytes())
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    if vendor(saved) != vendor(host) {
        return Err(SnapshotError::Cpu(format!(
            "the snapshot's CPU is {}, this host's is {}",
            vendor(saved).unwrap_or_default(),
            vendor(host).unwrap_or_default()
        )));
    }
    for &(leaf, sub, reg, ignored) in FEATURE_WORDS {
        let Some(want) = find(saved, leaf, sub).map(|e| register(e, reg) & !ignored) else {
            continue;
        };
        let have = find(host, leaf, sub).map_or(0, |e| register(e, reg));
        let missing = want & !have;
        if missing != 0 {
            return Err(SnapshotError::Cpu(format!(
                "CPUID leaf {leaf:#x}.{sub} {} bits {missing:#010x} are used by the guest and not offered here",
                ["eax", "ebx", "ecx", "edx"][reg]
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(function: u32, index: u32, regs: [u32; 4]) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 {
            function,
            index,
            eax: regs[0],
            ebx: regs[1],
            ecx: regs[2],
            edx: regs[3],
            ..Default::default()
        }
    }

    #[test]
    fn a_feature_or_vendor_the_host_lacks_is_refused_and_vmm_bits_are_not() {
        let intel = leaf(0, 0, [0xd, 0x756e_6547, 0x6c65_746e, 0x4965_6e69]);
        let amd = leaf(0, 0, [0xd, 0x6874_7541, 0x444d_4163, 0x6974_6e65]);
        let host = [
            intel,
            leaf(1, 0, [0, 0, 0b1, 0]),
            leaf(7, 0, [0, 0b10, 0, 0]),
        ];
        // The hypervisor bit and OSXSAVE are the VMM's and the guest's.
        let saved = [intel, leaf(1, 0, [0, 0, 0b1 | 1 << 31 | 1 << 27, 0])];
        check_cpu(&saved, &host).expect("same features");
        let avx2 = [intel, leaf(7, 0, [0, 0b110, 0, 0])];
        let err = check_cpu(&avx2, &host).expect_err("a missing feature");
        assert!(
            err.to_string().contains("leaf 0x7.0 ebx bits 0x00000004"),
            "{err}"
        );
        let err = check_cpu(&[amd], &host).expect_err("another vendor");
        assert!(err.to_string().contains("AuthenticAMD"), "{err}");
    }

    #[test]
    fn a_state_file_must_be_whole_unchanged_and_of_this_format() {
        let path = Path::new("state");
        let damaged = |bytes: &[u8]| Snapshot::decode(bytes, path).err().map(|e| e.to_string());
        let body = b"cubicle-vmm snapshot 1\n{}\n";
        let mut whole = body.to_vec();
        whole.extend_from_slice(format!("sha256 {}\n", hex(&Sha256::digest(body))).as_bytes());
        // Right digest, but "{}" is no state: refused as unparsable.
        assert!(damaged(&whole).expect("refused").contains("does not parse"));
        let mut changed = whole.clone();
        changed[23] = b'[';
        assert!(
            damaged(&changed)
                .expect("refused")
                .contains("SHA-256 does not match")
        );
        assert!(
            damaged(&whole[..30])
                .expect("refused")
                .contains("truncated")
        );
        let other = b"cubicle-vmm snapshot 9\n{}\nsha256 00\n";
        assert!(damaged(other).expect("refused").contains("format is 9"));
        assert!(
            damaged(b"ELF...")
                .expect("refused")
                .contains("does not start")
        );
    }
}
