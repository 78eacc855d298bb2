//! Process hardening after setup: no-new-privileges, closing inherited file
//! descriptors, and per-thread seccomp filters (vCPU, device event loop, VMM
//! thread) built with seccompiler. A syscall outside a thread's list kills
//! the whole process with SIGSYS.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Errors while hardening.
#[derive(Debug, thiserror::Error)]
pub enum HardeningError {
    /// prctl(PR_SET_NO_NEW_PRIVS) failed.
    #[error("cannot set no-new-privileges")]
    NoNewPrivs(#[source] std::io::Error),
    /// A filter could not be built (a bug in the rule lists).
    #[error("cannot build the {0} seccomp filter")]
    Build(&'static str, #[source] seccompiler::Error),
    /// The kernel refused the filter.
    #[error("cannot install the {0} seccomp filter (does the kernel support seccomp?)")]
    Install(&'static str, #[source] seccompiler::Error),
}

/// Which thread a filter is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// A vCPU thread: KVM_RUN and device emulation on exits.
    Vcpu,
    /// The device event loop: virtqueues, disk files, vsock sockets.
    Devices,
    /// The VMM thread after start: the API socket and pause/resume/stop.
    Vmm,
}

impl ThreadKind {
    fn name(self) -> &'static str {
        match self {
            ThreadKind::Vcpu => "vCPU",
            ThreadKind::Devices => "device",
            ThreadKind::Vmm => "VMM",
        }
    }
}

const KVM_RUN: u64 = 0xae80;
const FIONBIO: u64 = 0x5421;

/// Syscalls every thread needs: memory allocation, locks, signals, exit.
const COMMON: &[i64] = &[
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_futex,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    libc::SYS_sched_yield,
    libc::SYS_clock_gettime,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_getrandom,
    // Rust's std checks descriptors with F_GETFD when dropping them (debug builds).
    libc::SYS_fcntl,
    libc::SYS_close,
];

const DEVICES: &[i64] = &[
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_ctl,
    libc::SYS_read,
    libc::SYS_readv,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_lseek,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_accept4,
    libc::SYS_socket,
    libc::SYS_connect,
    libc::SYS_shutdown,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
];

const VMM: &[i64] = &[
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_ctl,
    libc::SYS_read,
    libc::SYS_accept4,
    libc::SYS_shutdown,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_openat,
    libc::SYS_statx,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_lseek,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_tgkill,
    libc::SYS_setsockopt,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
];

fn ioctl_rule(request: u64) -> SeccompRule {
    let cond = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
        .expect("argument index 1 is valid");
    SeccompRule::new(vec![cond]).expect("one condition is a valid rule")
}

/// The BPF program for `kind`.
pub fn filter(kind: ThreadKind) -> Result<BpfProgram, HardeningError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = COMMON.iter().map(|&s| (s, vec![])).collect();
    let (extra, ioctl): (&[i64], u64) = match kind {
        ThreadKind::Vcpu => (&[], KVM_RUN),
        ThreadKind::Devices => (DEVICES, FIONBIO),
        ThreadKind::Vmm => (VMM, FIONBIO),
    };
    rules.extend(extra.iter().map(|&s| (s, vec![])));
    rules.insert(libc::SYS_ioctl, vec![ioctl_rule(ioctl)]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(|e| HardeningError::Build(kind.name(), e.into()))?;
    BpfProgram::try_from(filter).map_err(|e| HardeningError::Build(kind.name(), e.into()))
}

/// Installs `kind`'s filter on the calling thread (sets no-new-privileges first).
pub fn apply(kind: ThreadKind) -> Result<(), HardeningError> {
    set_no_new_privs()?;
    let program = filter(kind)?;
    seccompiler::apply_filter(&program).map_err(|e| HardeningError::Install(kind.name(), e))
}

/// prctl(PR_SET_NO_NEW_PRIVS): no exec can ever gain privileges.
pub fn set_no_new_privs() -> Result<(), HardeningError> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if r != 0 {
        return Err(HardeningError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Closes every inherited descriptor above stderr (call first thing in main).
pub fn close_inherited_fds() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor number; the read_dir handle's own fd
        // is already closed (the iterator was consumed), and nothing else in
        // this process has opened files yet.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_build() {
        for kind in [ThreadKind::Vcpu, ThreadKind::Devices, ThreadKind::Vmm] {
            assert!(!filter(kind).expect("filter builds").is_empty());
        }
    }
}
