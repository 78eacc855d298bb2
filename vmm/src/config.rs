//! The VM configuration (JSON over the API, a JSON file, or command-line
//! flags) and its validation. Validation has no side effects: nothing is
//! created on disk until the whole configuration is known to be good.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::arch::x86_64::layout::{FIRST_DEVICE_IRQ, LAST_DEVICE_IRQ, MAX_VCPUS, MMIO_GAP_START};

/// Default kernel command line (serial console, reboot through the i8042,
/// no PCI probing).
pub const DEFAULT_CMDLINE: &str =
    "console=ttyS0 reboot=k panic=1 pci=off nomodule i8042.noaux i8042.nomux i8042.dumbkbd";
/// Largest guest memory accepted.
pub const MAX_MEMORY_MIB: u64 = 1 << 20;

/// A whole VM.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    /// Kernel image: ELF vmlinux (PVH or 64-bit entry) or bzImage.
    pub kernel: PathBuf,
    /// Optional initrd.
    #[serde(default)]
    pub initrd: Option<PathBuf>,
    /// Kernel command line; virtio devices are appended to it.
    #[serde(default = "default_cmdline")]
    pub cmdline: String,
    /// Guest memory in MiB.
    pub memory_mib: u64,
    /// Number of vCPUs.
    #[serde(default = "one")]
    pub vcpus: u8,
    /// Block devices, in guest probe order.
    #[serde(default)]
    pub disks: Vec<DiskConfig>,
    /// Optional vsock device.
    #[serde(default)]
    pub vsock: Option<VsockConfig>,
    /// Where COM1 output goes: a file path, or absent for stdout.
    #[serde(default)]
    pub serial_log: Option<PathBuf>,
}

/// A virtio-blk device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// Name, unique in the VM (the guest reads it as the serial number).
    pub id: String,
    /// Raw image.
    pub path: PathBuf,
    /// The guest may not write (VIRTIO_BLK_F_RO).
    #[serde(default)]
    pub read_only: bool,
    /// Copy-on-write overlay: writes go here, `path` is never written.
    #[serde(default)]
    pub overlay: Option<PathBuf>,
}

/// A virtio-vsock device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VsockConfig {
    /// The guest's CID (3 or more).
    pub guest_cid: u32,
    /// Host Unix socket for host-initiated streams; guest-initiated streams
    /// to port P go to `<uds_path>_P`.
    pub uds_path: PathBuf,
}

fn default_cmdline() -> String {
    DEFAULT_CMDLINE.to_string()
}

fn one() -> u8 {
    1
}

/// A configuration the VMM refuses. Each message says which input is wrong
/// and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The kernel cannot be read.
    #[error("kernel {path}: cannot open it; give the path of a readable vmlinux or bzImage")]
    Kernel {
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The initrd cannot be read.
    #[error("initrd {path}: cannot open it; give a readable file or leave initrd out")]
    Initrd {
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Memory is zero or too large.
    #[error("memory_mib = {0}: must be between 2 and {MAX_MEMORY_MIB}")]
    Memory(u64),
    /// vCPU count out of range.
    #[error("vcpus = {0}: must be between 1 and {MAX_VCPUS}")]
    Vcpus(u8),
    /// A disk cannot be opened.
    #[error("disk {id:?}: cannot open {path}; check the path and its permissions")]
    Disk {
        /// Disk id.
        id: String,
        /// The image or overlay path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Two devices would use the same thing.
    #[error("devices overlap: {0}")]
    Overlap(String),
    /// More devices than interrupt lines.
    #[error("{0} virtio devices configured; at most {max} fit", max = LAST_DEVICE_IRQ - FIRST_DEVICE_IRQ + 1)]
    TooManyDevices(usize),
    /// Bad vsock settings.
    #[error("vsock: {0}")]
    Vsock(String),
    /// The command line is unusable.
    #[error("cmdline: {0}")]
    Cmdline(String),
    /// The JSON is malformed.
    #[error("configuration {source_name} is not a valid VM configuration")]
    Json {
        /// Where the JSON came from.
        source_name: String,
        /// The parse error (says which field, line and column).
        #[source]
        source: serde_json::Error,
    },
}

impl VmConfig {
    /// Parses JSON, naming `source_name` in errors.
    pub fn from_json(text: &str, source_name: &str) -> Result<VmConfig, ConfigError> {
        serde_json::from_str(text).map_err(|source| ConfigError::Json {
            source_name: source_name.into(),
            source,
        })
    }

    /// Checks everything that can be checked without creating anything.
    pub fn validate(&self) -> Result<(), ConfigError> {
        File::open(&self.kernel).map_err(|source| ConfigError::Kernel {
            path: self.kernel.clone(),
            source,
        })?;
        if let Some(initrd) = &self.initrd {
            File::open(initrd).map_err(|source| ConfigError::Initrd {
                path: initrd.clone(),
                source,
            })?;
        }
        self.validate_machine()
    }

    /// Everything but the kernel and initrd: what a VM restored from a
    /// snapshot (which boots nothing) must still have right.
    pub fn validate_machine(&self) -> Result<(), ConfigError> {
        if !(2..=MAX_MEMORY_MIB).contains(&self.memory_mib) {
            return Err(ConfigError::Memory(self.memory_mib));
        }
        if self.vcpus == 0 || self.vcpus > MAX_VCPUS {
            return Err(ConfigError::Vcpus(self.vcpus));
        }
        if self.cmdline.contains('\0') || self.cmdline.contains('\n') {
            return Err(ConfigError::Cmdline("contains a NUL or newline".into()));
        }
        self.validate_disks()?;
        self.validate_vsock()?;
        let devices = self.disks.len() + usize::from(self.vsock.is_some());
        if devices > (LAST_DEVICE_IRQ - FIRST_DEVICE_IRQ + 1) as usize {
            return Err(ConfigError::TooManyDevices(devices));
        }
        Ok(())
    }

    /// Guest memory that fits under the MMIO gap.
    pub fn low_memory_bytes(&self) -> u64 {
        (self.memory_mib << 20).min(MMIO_GAP_START)
    }

    fn validate_disks(&self) -> Result<(), ConfigError> {
        let mut ids = std::collections::HashSet::new();
        let mut writable: Vec<PathBuf> = Vec::new();
        for disk in &self.disks {
            if !ids.insert(disk.id.as_str()) {
                return Err(ConfigError::Overlap(format!(
                    "two disks are named {:?}; give each a unique id",
                    disk.id
                )));
            }
            check_disk_file(disk, &disk.path, disk.read_only || disk.overlay.is_some())?;
            let target = disk.overlay.clone().unwrap_or_else(|| disk.path.clone());
            if !disk.read_only || disk.overlay.is_some() {
                writable.push(canonical(&target));
            }
            if let Some(overlay) = &disk.overlay
                && canonical(overlay) == canonical(&disk.path)
            {
                return Err(ConfigError::Overlap(format!(
                    "disk {:?}: the overlay is the base image itself",
                    disk.id
                )));
            }
        }
        for disk in &self.disks {
            let uses = writable
                .iter()
                .filter(|w| **w == canonical(&disk.path))
                .count();
            let own = usize::from(!disk.read_only && disk.overlay.is_none());
            if uses > own {
                return Err(ConfigError::Overlap(format!(
                    "{} is written by one disk and used by another; give each writable disk its own file",
                    disk.path.display()
                )));
            }
        }
        Ok(())
    }

    fn validate_vsock(&self) -> Result<(), ConfigError> {
        let Some(vsock) = &self.vsock else {
            return Ok(());
        };
        if vsock.guest_cid < 3 {
            return Err(ConfigError::Vsock(format!(
                "guest_cid = {}: CIDs 0-2 are reserved; use 3 or more",
                vsock.guest_cid
            )));
        }
        if vsock.uds_path.exists() {
            return Err(ConfigError::Vsock(format!(
                "{} already exists; remove it or choose another uds_path",
                vsock.uds_path.display()
            )));
        }
        let parent = vsock
            .uds_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(ConfigError::Vsock(format!(
                "directory {} does not exist",
                parent.display()
            )));
        }
        Ok(())
    }
}

fn check_disk_file(disk: &DiskConfig, path: &Path, read_only: bool) -> Result<(), ConfigError> {
    let result = std::fs::OpenOptions::new()
        .read(true)
        .write(!read_only)
        .open(path);
    result.map(drop).map_err(|source| ConfigError::Disk {
        id: disk.id.clone(),
        path: path.into(),
        source,
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(kernel: &Path) -> VmConfig {
        VmConfig {
            kernel: kernel.into(),
            initrd: None,
            cmdline: default_cmdline(),
            memory_mib: 64,
            vcpus: 1,
            disks: vec![],
            vsock: None,
            serial_log: None,
        }
    }

    #[test]
    fn refuses_bad_inputs() {
        let exe = std::env::current_exe().expect("test binary path");
        assert!(base(&exe).validate().is_ok());
        assert!(matches!(
            base(Path::new("/nonexistent/vmlinux")).validate(),
            Err(ConfigError::Kernel { .. })
        ));
        let mut c = base(&exe);
        c.memory_mib = 0;
        assert!(matches!(c.validate(), Err(ConfigError::Memory(0))));
        let mut c = base(&exe);
        c.vcpus = 0;
        assert!(matches!(c.validate(), Err(ConfigError::Vcpus(0))));
        let mut c = base(&exe);
        let disk = DiskConfig {
            id: "a".into(),
            path: exe.clone(),
            read_only: true,
            overlay: None,
        };
        c.disks = vec![disk.clone(), disk];
        assert!(matches!(c.validate(), Err(ConfigError::Overlap(_))));
        let mut c = base(&exe);
        c.disks = vec![DiskConfig {
            id: "x".into(),
            path: "/nonexistent".into(),
            read_only: true,
            overlay: None,
        }];
        assert!(matches!(c.validate(), Err(ConfigError::Disk { .. })));
    }

    #[test]
    fn json_errors_name_the_field() {
        let err = VmConfig::from_json(r#"{"kernel":"k","memory_mib":1,"bogus":1}"#, "vm.json")
            .expect_err("unknown field");
        let source = std::error::Error::source(&err).expect("parse error attached");
        assert!(source.to_string().contains("bogus"), "{source}");
    }
}
