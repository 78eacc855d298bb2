//! Restoring a snapshot into this process: the state file checked first
//! (format, digest, this host's CPU), memory mapped copy-on-write from the
//! memory file, the devices built as the snapshot's VM had them (same
//! slots, the disks and vsock socket the caller names), then KVM's state
//! written back — the in-kernel devices, each vCPU, each virtio transport —
//! before any vCPU runs.

use std::path::{Path, PathBuf};

use kvm_ioctls::Kvm;
use vm_memory::GuestMemoryMmap;

use super::memory::{MemoryImage, OpenFile};
use super::{Snapshot, SnapshotError, check_cpu, memory};
use crate::arch::x86_64::{cpuid, msr};
use crate::builder::{BuildError, BuildOptions, CreatedFiles, Devices, KvmParts};
use crate::config::{DiskConfig, VmConfig, VsockConfig};
use crate::vmm::Vmm;
use crate::vstate::vcpu::Vcpu;
use crate::vstate::{memory as guest_memory, vcpu_state, vm};

/// What a restored VM takes from its caller rather than from the snapshot:
/// a fork needs its own disks' writable layers, its own vsock socket and
/// its own console.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Disks replacing the snapshot's disks of the same id (paths, overlay).
    pub disks: Vec<DiskConfig>,
    /// The vsock device's socket and CID (the guest reads the CID again).
    pub vsock: Option<VsockConfig>,
    /// Where COM1 goes (stdout when absent).
    pub serial_log: Option<PathBuf>,
}

/// The memory files of a restore, open: the snapshot's, and for a diff
/// snapshot the full one it applies to.
#[derive(Debug)]
pub struct MemoryFiles {
    /// The snapshot's memory file.
    pub memory: OpenFile,
    /// The base memory file of a diff snapshot.
    pub base: Option<OpenFile>,
    /// Check the (base) memory file's CRC before mapping it.
    pub verify: bool,
}

impl MemoryFiles {
    /// Opens `memory` (and `base`), refusing symlinks.
    pub fn open(memory: &Path, base: Option<&Path>, verify: bool) -> Result<Self, SnapshotError> {
        Ok(MemoryFiles {
            memory: OpenFile::open(memory)?,
            base: base.map(OpenFile::open).transpose()?,
            verify,
        })
    }
}

/// The snapshot's configuration with `o` applied. Every path the restored
/// VM opens comes from `o`, never from the state file: a state file is
/// written by a VMM that ran a guest, and a forged one must not name a host
/// file for this VMM (started as root) to bind or open. So each of the
/// snapshot's disks and its vsock device must be given again.
fn configure(saved: &VmConfig, o: &Overrides) -> Result<VmConfig, SnapshotError> {
    if let Some(missing) = saved
        .disks
        .iter()
        .find(|d| !o.disks.iter().any(|g| g.id == d.id))
    {
        return Err(SnapshotError::Mismatch(format!(
            "give --disk id={},path=...[,overlay=...] for the snapshot's disk {:?}: a restore \
             opens no path its state file names",
            missing.id, missing.id
        )));
    }
    if saved.vsock.is_some() && o.vsock.is_none() {
        return Err(SnapshotError::Mismatch(
            "give --vsock cid=N,uds=PATH: the snapshot's VM has a vsock device, and a restore \
             opens no path its state file names"
                .into(),
        ));
    }
    let mut config = saved.clone();
    for disk in &o.disks {
        let Some(slot) = config.disks.iter_mut().find(|d| d.id == disk.id) else {
            let ids: Vec<&str> = saved.disks.iter().map(|d| d.id.as_str()).collect();
            return Err(SnapshotError::Mismatch(format!(
                "the snapshot's VM has no disk {:?} (it has {ids:?}); name one of those",
                disk.id
            )));
        };
        *slot = disk.clone();
    }
    match (&mut config.vsock, &o.vsock) {
        (Some(saved), Some(new)) => *saved = new.clone(),
        (None, Some(_)) => {
            return Err(SnapshotError::Mismatch(
                "the snapshot's VM has no vsock device; leave --vsock out".into(),
            ));
        }
        _ => {}
    }
    config.serial_log = o.serial_log.clone();
    Ok(config)
}

/// A snapshot read and checked, with the configuration its restore will
/// have (a jail rewrites `config`'s paths to those seen inside).
pub struct Prepared {
    snapshot: Snapshot,
    sha256: String,
    /// The restored VM's configuration.
    pub config: VmConfig,
}

/// Reads the state file at `state` (format, digest) and applies `o` to the
/// configuration it holds, checking the result as a boot would.
pub fn prepare(state: &Path, o: &Overrides) -> Result<Prepared, BuildError> {
    let (snapshot, sha256) = Snapshot::read(state)?;
    let config = configure(&snapshot.config, o)?;
    config.validate_machine()?;
    Ok(Prepared {
        snapshot,
        sha256,
        config,
    })
}

/// Builds a VM from the snapshot at `state` and `memory`, ready to start.
/// Returns it with the state file's SHA-256.
pub fn restore(
    state: &Path,
    files: MemoryFiles,
    o: &Overrides,
    options: BuildOptions,
) -> Result<(Vmm, String), BuildError> {
    build(prepare(state, o)?, files, options)
}

/// Builds the prepared VM with its memory mapped from `files`.
pub fn build(
    prepared: Prepared,
    files: MemoryFiles,
    options: BuildOptions,
) -> Result<(Vmm, String), BuildError> {
    let Prepared {
        snapshot,
        sha256,
        config,
    } = prepared;
    let kvm = Kvm::new().map_err(BuildError::Kvm)?;
    let vm_fd = vm::create(&kvm)?;
    let vcpus = (0..config.vcpus)
        .map(|i| Vcpu::create(&vm_fd, i))
        .collect::<Result<Vec<_>, _>>()?;
    check_cpu(
        &snapshot.vcpus[0].cpuid,
        &host_cpuid(&kvm, &vcpus[0], config.vcpus)?,
    )?;
    let (guest, base) = map_memory(&snapshot, &files, config.memory_mib)?;
    guest_memory::register(&vm_fd, &guest)?;
    let mut created = CreatedFiles::default();
    let devices = Devices::wire(
        &config,
        &vm_fd,
        &guest,
        Some(&snapshot.serial),
        &mut created,
    )?;
    check_devices(&snapshot, &devices)?;
    snapshot.vm.restore(&vm_fd)?;
    for (vcpu, saved) in vcpus.iter().zip(&snapshot.vcpus) {
        saved.restore(vcpu.fd()).map_err(SnapshotError::from)?;
    }
    for (slot, (transport, saved)) in devices.transports.iter().zip(&snapshot.virtio).enumerate() {
        transport
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .restore(slot, saved)
            .map_err(|e| SnapshotError::Damaged(e.to_string()))?;
    }
    let msr_indices = vcpu_state::msr_list(&kvm).map_err(msr::MsrError::IndexList)?;
    created.0.clear();
    let kvm = KvmParts {
        guest,
        vm: vm_fd,
        vcpus,
        msr_indices,
        memory_base: Some(base),
    };
    let vmm = devices.into_vmm(&config, kvm, options);
    Ok((vmm, sha256))
}

/// Guest memory for `snapshot`: its memory file mapped, or for a diff its
/// base mapped with the diff read over it. Returns the full image the
/// mapping comes from (a later diff applies to it).
fn map_memory(
    snapshot: &Snapshot,
    files: &MemoryFiles,
    memory_mib: u64,
) -> Result<(GuestMemoryMmap, MemoryImage), SnapshotError> {
    match (&snapshot.memory.base, &files.base) {
        (None, None) => {
            let guest = memory::map(&files.memory, &snapshot.memory, memory_mib, files.verify)?;
            let mut image = snapshot.memory.clone();
            image.base = None;
            Ok((guest, image))
        }
        (Some(base), Some(base_file)) => {
            let guest = memory::map(base_file, base, memory_mib, files.verify)?;
            memory::apply_diff(&guest, &files.memory, &snapshot.memory)?;
            Ok((guest, (**base).clone()))
        }
        (Some(_), None) => Err(SnapshotError::Base(
            "this is a diff snapshot: give the memory file of the snapshot it was taken against as --restore-base",
        )),
        (None, Some(_)) => Err(SnapshotError::Base(
            "this is a full snapshot: leave --restore-base out",
        )),
    }
}

/// The CPUID this host gives a vCPU built the way the VMM builds one: what
/// KVM supports, as the VMM filters it, read back from a vCPU that has not
/// run (some KVMs, PVM among them, fill in more of the host's own features
/// than they list as supported; the snapshot's guest saw those too).
fn host_cpuid(
    kvm: &Kvm,
    vcpu: &Vcpu,
    count: u8,
) -> Result<Vec<kvm_bindings::kvm_cpuid_entry2>, BuildError> {
    let mut table = cpuid::supported(kvm)?;
    cpuid::filter_for_vcpu(&mut table, 0, count);
    let refused =
        |source| BuildError::Vcpu(crate::vstate::vcpu::VcpuError::Cpuid { index: 0, source });
    vcpu.fd().set_cpuid2(&table).map_err(refused)?;
    let effective = vcpu
        .fd()
        .get_cpuid2(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
        .map_err(refused)?;
    Ok(effective.as_slice().to_vec())
}

/// The devices built now must be the snapshot's: as many virtio devices,
/// and every disk the size its guest knows.
fn check_devices(snapshot: &Snapshot, devices: &Devices) -> Result<(), SnapshotError> {
    if devices.transports.len() != snapshot.virtio.len() {
        return Err(SnapshotError::Damaged(format!(
            "{} virtio devices saved, {} configured",
            snapshot.virtio.len(),
            devices.transports.len()
        )));
    }
    for (id, size) in devices.disk_sizes() {
        let saved = snapshot.disk_sizes.iter().find(|(i, _)| *i == id);
        if let Some((_, want)) = saved
            && *want != size
        {
            return Err(SnapshotError::Mismatch(format!(
                "disk {id:?} is {size} bytes, the snapshot's guest knows it as {want}; give the disk (or a copy) it had"
            )));
        }
    }
    Ok(())
}
