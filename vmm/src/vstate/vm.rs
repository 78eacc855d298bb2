//! The KVM VM: created with an in-kernel irqchip (PIC + IOAPIC + LAPICs)
//! and PIT, so interrupts and timers need no VMM thread.

use kvm_bindings::{KVM_PIT_SPEAKER_DUMMY, kvm_pit_config};
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
