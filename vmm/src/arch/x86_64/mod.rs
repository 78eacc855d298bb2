//! x86-64: guest memory layout, boot protocols (Linux 64-bit and PVH), CPUID
//! and MSR setup, the MP table, and the vCPU register state at entry.

pub mod boot;
pub mod cpuid;
pub mod layout;
pub mod mptable;
pub mod msr;
pub mod regs;
