//! `cubicle-vmm`: Cubicle's microVM monitor on KVM, one process per VM.
//!
//! It owns everything inside that process: guest memory (vm-memory), the KVM
//! VM with its in-kernel irqchip and PIT, vCPUs (CPUID and MSRs from what
//! KVM supports), kernel loading (ELF vmlinux with PVH or 64-bit entry,
//! bzImage) with boot parameters, e820, initrd and MP table, COM1, the
//! i8042 reset, virtio-mmio block and vsock devices, seccomp hardening, and
//! a small HTTP API on a Unix socket. It knows nothing of workspaces,
//! images or policies: the runtime drives it through its API or command line.
//!
//! Read [`vmm::Vmm`] first (a built VM and its threads), then
//! [`builder::build`] (how a [`config::VmConfig`] becomes one).

pub mod api;
pub mod arch;
pub mod bench;
pub mod bench_snapshot;
pub mod builder;
pub mod config;
pub mod devices;
pub mod event_loop;
pub mod hardening;
pub mod jail;
pub mod metrics;
pub mod snapshot;
pub mod vmm;
pub mod vstate;
