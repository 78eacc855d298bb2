//! The KVM VM: created with an in-kernel irqchip (PIC + IOAPIC + LAPICs)
//! and PIT, so interrupts and timers need no VMM thread.

use kvm_bindings::{
    KVM_PIT_SPEAKER_DUMMY, kvm_clock_data, kvm_irqchip, kvm_pit_config, kvm_pit_state2,
};
use kvm_ioctls::{Kvm, VmFd};

use crate::arch::x86_64::layout::KVM_TSS_ADDRESS;

/// Errors while creating the VM.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// KVM_CREATE_VM failed.
    #[error("cannot create a KVM VM (is /dev/kvm usable by this user?)")]
    Create(#[source] kvm_ioctls::Error),
    /// A VM setup ioctl failed.
    #[error("KVM refused {what}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
}

/// Creates the VM with its irqchip and PIT.
pub fn create(kvm: &Kvm) -> Result<VmFd, VmError> {
    let vm = kvm.create_vm().map_err(VmError::Create)?;
    let setup = |what| move |source| VmError::Setup { what, source };
    vm.set_tss_address(KVM_TSS_ADDRESS)
        .map_err(setup("the TSS address"))?;
    vm.create_irq_chip()
        .map_err(setup("the in-kernel irqchip"))?;
    let pit = kvm_pit_config {
        flags: KVM_PIT_SPEAKER_DUMMY,
        ..Default::default()
    };
    vm.create_pit2(pit).map_err(setup("the in-kernel PIT"))?;
    Ok(vm)
}

/// The in-kernel devices' state for snapshots: the PIT, kvmclock, and the
/// irqchip (both PICs and the IOAPIC; the LAPICs belong to the vCPUs).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct VmKvmState {
    /// The PIT's channels.
    pub pit: kvm_pit_state2,
    /// kvmclock.
    pub clock: kvm_clock_data,
    /// PIC master, PIC slave, IOAPIC (KVM's chip ids 0, 1, 2).
    pub irqchips: Vec<kvm_irqchip>,
}

/// KVM's chip ids: PIC master, PIC slave, IOAPIC.
const CHIPS: [u32; 3] = [0, 1, 2];

impl VmKvmState {
    /// Reads the in-kernel devices of a VM whose vCPUs are parked.
    pub fn save(vm: &VmFd) -> Result<Self, VmError> {
        let read = |what| move |source| VmError::Setup { what, source };
        let pit = vm.get_pit2().map_err(read("reading the PIT"))?;
        let mut clock = vm.get_clock().map_err(read("reading kvmclock"))?;
        // Only the time goes back in: KVM_SET_CLOCK refuses the flags
        // KVM_GET_CLOCK reports.
        clock.flags = 0;
        let irqchips = CHIPS
            .iter()
            .map(|&chip_id| {
                let mut chip = kvm_irqchip {
                    chip_id,
                    ..Default::default()
                };
                vm.get_irqchip(&mut chip).map(|()| chip)
            })
            .collect::<Result<_, _>>()
            .map_err(read("reading the irqchip"))?;
        Ok(VmKvmState {
            pit,
            clock,
            irqchips,
        })
    }

    /// Writes the state into a fresh VM (before its vCPUs run).
    pub fn restore(&self, vm: &VmFd) -> Result<(), VmError> {
        let write = |what| move |source| VmError::Setup { what, source };
        vm.set_pit2(&self.pit).map_err(write("the PIT's state"))?;
        vm.set_clock(&self.clock).map_err(write("kvmclock"))?;
        for chip in &self.irqchips {
            vm.set_irqchip(chip).map_err(write("the irqchip's state"))?;
        }
        Ok(())
    }
}
