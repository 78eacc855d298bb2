//! The jail's seccomp filter, compiled with `seccompiler` (Firecracker's
//! crate) and handed to bubblewrap as raw BPF.
//!
//! It is a deny list on top of what the jail already removes (capabilities,
//! further user namespaces): kernel-module, kexec, BPF, perf, keyring,
//! mount, tracing of other processes and reading or writing their memory
//! or descriptors (`ptrace`, `process_vm_*`, `pidfd_getfd`), terminal
//! injection (`TIOCSTI`), io_uring and vsock sockets — the calls a desktop
//! and a browser never need and container escapes keep using. A denied call
//! fails with `EPERM`. `setns` is denied; `unshare` only passes for exactly
//! a new network namespace (the supervisor makes the browser's at start;
//! it needs `CAP_SYS_ADMIN`, which no other process of the jail has).
//!
//! `pidfd_getfd` matters beyond the usual: the guest supervisor holds the
//! guest channel's listening socket, and without the denial any process of
//! the workspace could take a copy of it. `AF_VSOCK`
//! reaches the host's vsock services (and, on a host that is itself a VM,
//! its hypervisor's), which the jail's network namespace does not cover.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What can go wrong compiling the filter.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("cannot build the jail seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("cannot build the jail seccomp rule: {0}")]
    Rule(#[from] seccompiler::Error),
    #[error("the jail seccomp filter is only defined for x86_64")]
    Arch,
}

const DENIED: &[i64] = &[
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_setns,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_vhangup,
    libc::SYS_fanotify_init,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The filter as the bytes bubblewrap reads from `--seccomp FD`.
pub fn jail_filter_bytes() -> Result<Vec<u8>, SeccompError> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => TargetArch::x86_64,
        _ => return Err(SeccompError::Arch),
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&call| (call, Vec::new())).collect();
    let tiocsti = SeccompCondition::new(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        u64::from(libc::TIOCSTI as u32),
    )?;
    rules.insert(libc::SYS_ioctl, vec![SeccompRule::new(vec![tiocsti])?]);
    let vsock = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_VSOCK as u64,
    )?;
    rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![vsock])?]);
    let not_only_net = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::Ne,
        libc::CLONE_NEWNET as u64,
    )?;
    rules.insert(
        libc::SYS_unshare,
        vec![SeccompRule::new(vec![not_only_net])?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let program: BpfProgram = filter.try_into()?;
    Ok(program
        .iter()
        .flat_map(|insn| {
            let mut raw = [0u8; 8];
            raw[..2].copy_from_slice(&insn.code.to_ne_bytes());
            raw[2] = insn.jt;
            raw[3] = insn.jf;
            raw[4..].copy_from_slice(&insn.k.to_ne_bytes());
            raw
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_compiles_to_whole_instructions() {
        let bytes = jail_filter_bytes().unwrap();
        assert!(!bytes.is_empty());
        assert_eq!(bytes.len() % 8, 0);
    }

    /// What `call` gives in a forked child, under the jail filter when
    /// `filtered`: `Ok(())` or the errno.
    fn in_child(filtered: bool, call: fn() -> libc::c_long) -> Result<(), i32> {
        let bytes = jail_filter_bytes().unwrap();
        let insns: Vec<libc::sock_filter> = bytes
            .chunks_exact(8)
            .map(|raw| libc::sock_filter {
                code: u16::from_ne_bytes([raw[0], raw[1]]),
                jt: raw[2],
                jf: raw[3],
                k: u32::from_ne_bytes([raw[4], raw[5], raw[6], raw[7]]),
            })
            .collect();
        let prog = libc::sock_fprog {
            len: u16::try_from(insns.len()).unwrap(),
            filter: insns.as_ptr().cast_mut(),
        };
        // SAFETY: the child only makes raw syscalls (prctl, the call under
        // test, _exit), all async-signal-safe, on memory prepared before fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: as above; `prog` points at live instructions.
            unsafe {
                if filtered
                    && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                        || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0)
                {
                    libc::_exit(200);
                }
                if call() >= 0 {
                    libc::_exit(0);
                }
                libc::_exit(*libc::__errno_location() & 0x7f);
            }
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "child died: {status}");
        let code = libc::WEXITSTATUS(status);
        assert_ne!(code, 200, "installing the filter failed");
        if code == 0 { Ok(()) } else { Err(code) }
    }

    fn socket_of(domain: i32) -> libc::c_long {
        // SAFETY: socket takes plain integers; the child exits right after.
        libc::c_long::from(unsafe { libc::socket(domain, libc::SOCK_STREAM, 0) })
    }

    #[test]
    fn vsock_sockets_are_denied_and_unix_sockets_are_not() {
        assert_eq!(
            in_child(true, || socket_of(libc::AF_VSOCK)),
            Err(libc::EPERM)
        );
        // Control: without the filter the host does not answer EPERM.
        assert_ne!(
            in_child(false, || socket_of(libc::AF_VSOCK)),
            Err(libc::EPERM)
        );
        assert_eq!(in_child(true, || socket_of(libc::AF_UNIX)), Ok(()));
        assert_eq!(in_child(true, || socket_of(libc::AF_INET)), Ok(()));
    }

    #[test]
    fn unshare_passes_only_for_a_network_namespace() {
        // SAFETY: unshare takes a flag word; the child exits right after.
        let user = || libc::c_long::from(unsafe { libc::unshare(libc::CLONE_NEWUSER) });
        // SAFETY: as above.
        let net = || libc::c_long::from(unsafe { libc::unshare(libc::CLONE_NEWNET) });
        // SAFETY: as above.
        let both =
            || libc::c_long::from(unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) });
        assert_eq!(in_child(true, user), Err(libc::EPERM));
        assert_eq!(in_child(true, both), Err(libc::EPERM));
        // The filter lets this one through: the kernel decides (it needs
        // CAP_SYS_ADMIN, so as root here it works).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(in_child(true, net), Ok(()));
        }
    }

    #[test]
    fn taking_descriptors_or_memory_of_another_process_is_denied() {
        // SAFETY: with a bad pidfd the kernel fails the call without
        // touching memory.
        let getfd = || unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, 0, 0) };
        // SAFETY: zero iovecs: nothing is read or written.
        let vm_read = || unsafe {
            libc::syscall(
                libc::SYS_process_vm_readv,
                libc::getpid(),
                std::ptr::null::<libc::iovec>(),
                0,
                std::ptr::null::<libc::iovec>(),
                0,
                0,
            )
        };
        // Controls: unfiltered, the calls reach the kernel (which answers
        // EBADF and EINVAL for these arguments, never EPERM).
        assert_eq!(in_child(false, getfd), Err(libc::EBADF));
        assert_ne!(in_child(false, vm_read), Err(libc::EPERM));
        assert_eq!(in_child(true, getfd), Err(libc::EPERM));
        assert_eq!(in_child(true, vm_read), Err(libc::EPERM));
    }
}
