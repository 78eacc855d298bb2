//! KVM state: guest memory, the VM (irqchip, PIT, memory slots) and vCPUs.

pub mod exit;
pub mod memory;
pub mod run_control;
pub mod vcpu;
pub mod vcpu_state;
pub mod vm;
