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
    // Rewrites the process's segment table: only 16-bit and Wine-like
    // code needs it, and it has been a source of kernel bugs.
    libc::SYS_modify_ldt,
];

/// The filter as the bytes bubblewrap reads from `--seccomp FD`.
pub fn jail_filter_bytes() -> Result<Vec<u8>, SeccompError> {
    filter_bytes(Vsock::Denied)
}

/// The same filter for a microVM's supervisor, which `cubicle-guest`'s
/// init installs from the host disk: there the guest channel and the way
/// out are vsock, so `socket(AF_VSOCK)` stays allowed.
pub fn vm_filter_bytes() -> Result<Vec<u8>, SeccompError> {
    filter_bytes(Vsock::Allowed)
}

/// What a microVM's user processes get on top of [`vm_filter_bytes`]:
/// `socket(AF_VSOCK)` refused, as the jail's filter refuses it to all.
pub fn vm_user_filter_bytes() -> Result<Vec<u8>, SeccompError> {
    let vsock = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_VSOCK as u64,
    )?;
    let rules = BTreeMap::from([(libc::SYS_socket, vec![SeccompRule::new(vec![vsock])?])]);
    to_bytes(SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::x86_64,
    )?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vsock {
    Denied,
    Allowed,
}

fn filter_bytes(vsock_rule: Vsock) -> Result<Vec<u8>, SeccompError> {
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
    if vsock_rule == Vsock::Denied {
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![vsock])?]);
    }
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
    rules.insert(libc::SYS_personality, vec![unusual_personality()?]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    to_bytes(filter)
}

/// A filter as the raw instructions bubblewrap (and a microVM's init) read.
fn to_bytes(filter: SeccompFilter) -> Result<Vec<u8>, SeccompError> {
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

/// The personalities a desktop may ask for: Linux itself, 32-bit
/// `uname`, the 2.6 `uname` some old tools want, both, and the query
/// (`0xffffffff`). Anything else (`READ_IMPLIES_EXEC`, which makes every
/// readable mapping executable, `ADDR_NO_RANDOMIZE`, which turns ASLR off
/// for what the process runs next) is refused: a rule matches when the
/// argument is none of them.
fn unusual_personality() -> Result<SeccompRule, SeccompError> {
    const ALLOWED: [u64; 5] = [0, 0x0008, 0x0002_0000, 0x0002_0008, 0xffff_ffff];
    let conditions = ALLOWED
        .iter()
        .map(|&p| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SeccompRule::new(conditions)?)
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

    /// A pseudo-terminal's follower side, opened before any fork.
    fn pty_follower() -> libc::c_int {
        // SAFETY: plain libc calls on a descriptor we own; `ptsname` returns
        // a static buffer read at once, before anything else can call it.
        unsafe {
            let leader = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(leader >= 0, "posix_openpt failed");
            assert_eq!(libc::grantpt(leader), 0);
            assert_eq!(libc::unlockpt(leader), 0);
            let name = libc::ptsname(leader);
            assert!(!name.is_null(), "ptsname failed");
            let follower = libc::open(name, libc::O_RDWR | libc::O_NOCTTY);
            assert!(follower >= 0, "cannot open the pty follower");
            follower
        }
    }

    /// The follower descriptor the TIOCSTI calls below use (a `fn` cannot
    /// capture it).
    static PTY: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();

    #[test]
    fn terminal_injection_is_denied_and_other_terminal_ioctls_are_not() {
        PTY.get_or_init(pty_follower);
        let inject = || {
            let byte: libc::c_char = b'x' as libc::c_char;
            // SAFETY: TIOCSTI reads one byte from a live local.
            libc::c_long::from(unsafe {
                libc::ioctl(*PTY.get().unwrap_or(&-1), libc::TIOCSTI, &byte)
            })
        };
        let size = || {
            // SAFETY: TIOCGWINSZ writes one winsize into a live local.
            let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            libc::c_long::from(unsafe {
                libc::ioctl(*PTY.get().unwrap_or(&-1), libc::TIOCGWINSZ, &mut ws)
            })
        };
        // Control: unfiltered, the kernel takes the call on this pty (root
        // may inject; whatever it answers, it is not the filter's EPERM).
        assert_ne!(in_child(false, inject), Err(libc::EPERM));
        assert_eq!(in_child(true, inject), Err(libc::EPERM));
        // The filter looks at the request, not at every ioctl.
        assert_eq!(in_child(true, size), Ok(()));
    }

    // Denied calls, each with arguments the kernel itself refuses with
    // another errno: invalid descriptors, null or zero-length arguments,
    // missing paths. Each fails before touching memory or state.
    fn mount() -> libc::c_long {
        // SAFETY: NUL-terminated literals; the target does not exist.
        libc::c_long::from(unsafe {
            libc::mount(
                c"none".as_ptr(),
                c"/nonexistent/cubicle-seccomp-test".as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        })
    }
    fn umount() -> libc::c_long {
        // SAFETY: a NUL-terminated literal path that does not exist.
        libc::c_long::from(unsafe { libc::umount2(c"/nonexistent/cubicle".as_ptr(), 0) })
    }
    fn ptrace() -> libc::c_long {
        // SAFETY: attaching to a pid that cannot exist fails with ESRCH.
        unsafe { libc::ptrace(libc::PTRACE_ATTACH, libc::pid_t::MAX, 0, 0) }
    }
    fn bpf() -> libc::c_long {
        // SAFETY: an unknown command with a null attribute: EINVAL.
        unsafe { libc::syscall(libc::SYS_bpf, 9999, std::ptr::null::<u8>(), 0) }
    }
    fn finit_module() -> libc::c_long {
        // SAFETY: a bad descriptor: EBADF.
        unsafe { libc::syscall(libc::SYS_finit_module, -1, c"".as_ptr(), 0) }
    }
    fn keyctl() -> libc::c_long {
        // SAFETY: an unknown operation: EOPNOTSUPP.
        unsafe { libc::syscall(libc::SYS_keyctl, 9999, 0, 0, 0, 0) }
    }
    fn perf_event_open() -> libc::c_long {
        // SAFETY: a null attribute: EFAULT.
        unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                std::ptr::null::<u8>(),
                0,
                -1,
                -1,
                0,
            )
        }
    }
    fn setns() -> libc::c_long {
        // SAFETY: a bad descriptor: EBADF.
        unsafe { libc::syscall(libc::SYS_setns, -1, 0) }
    }
    fn io_uring_setup() -> libc::c_long {
        // SAFETY: zero entries and null parameters: EINVAL or EFAULT.
        unsafe { libc::syscall(libc::SYS_io_uring_setup, 0, std::ptr::null::<u8>()) }
    }
    fn open_by_handle_at() -> libc::c_long {
        // SAFETY: a bad descriptor and a null handle: EBADF or EFAULT.
        unsafe { libc::syscall(libc::SYS_open_by_handle_at, -1, std::ptr::null::<u8>(), 0) }
    }

    /// A named call made in a test child.
    type Call = (&'static str, fn() -> libc::c_long);

    #[test]
    fn the_deny_list_answers_eperm_where_the_kernel_would_not() {
        let calls: [Call; 10] = [
            ("mount", mount),
            ("umount2", umount),
            ("ptrace", ptrace),
            ("bpf", bpf),
            ("finit_module", finit_module),
            ("keyctl", keyctl),
            ("perf_event_open", perf_event_open),
            ("setns", setns),
            ("io_uring_setup", io_uring_setup),
            ("open_by_handle_at", open_by_handle_at),
        ];
        for (name, call) in calls {
            let unfiltered = in_child(false, call);
            assert!(
                unfiltered.is_err() && unfiltered != Err(libc::EPERM),
                "control: unfiltered {name} gave {unfiltered:?}; pick arguments the kernel refuses otherwise"
            );
            assert_eq!(in_child(true, call), Err(libc::EPERM), "{name}");
        }
    }

    // Calls a desktop makes all the time.
    fn getpid() -> libc::c_long {
        // SAFETY: no arguments.
        libc::c_long::from(unsafe { libc::getpid() })
    }
    fn open() -> libc::c_long {
        // SAFETY: a NUL-terminated literal path, read-only.
        libc::c_long::from(unsafe { libc::open(c"/proc/self/status".as_ptr(), libc::O_RDONLY) })
    }
    fn fork() -> libc::c_long {
        // SAFETY: the grandchild only exits; we reap it.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: ends the grandchild at once.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer.
        libc::c_long::from(unsafe { libc::waitpid(pid, &mut status, 0) })
    }
    fn socketpair() -> libc::c_long {
        let mut fds = [0; 2];
        // SAFETY: writes two descriptors into a live local array.
        libc::c_long::from(unsafe {
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr())
        })
    }

    fn read_implies_exec() -> libc::c_long {
        // SAFETY: changes only this test child's personality.
        libc::c_long::from(unsafe { libc::personality(0x0040_0000) })
    }
    fn no_randomize() -> libc::c_long {
        // SAFETY: as above (ADDR_NO_RANDOMIZE).
        libc::c_long::from(unsafe { libc::personality(0x0004_0000) })
    }
    fn personality_query() -> libc::c_long {
        // SAFETY: 0xffffffff only reads the personality.
        libc::c_long::from(unsafe { libc::personality(0xffff_ffff) })
    }
    fn modify_ldt_read() -> libc::c_long {
        let mut table = [0u8; 64];
        // SAFETY: func 0 reads at most `table.len()` bytes into it.
        unsafe { libc::syscall(libc::SYS_modify_ldt, 0, table.as_mut_ptr(), table.len()) }
    }

    /// Calls the kernel allows any process (so the control succeeds) that
    /// the jail refuses.
    #[test]
    fn unusual_personalities_and_the_segment_table_are_refused() {
        let calls: [Call; 3] = [
            ("personality(READ_IMPLIES_EXEC)", read_implies_exec),
            ("personality(ADDR_NO_RANDOMIZE)", no_randomize),
            ("modify_ldt", modify_ldt_read),
        ];
        for (name, call) in calls {
            assert_eq!(in_child(false, call), Ok(()), "control: unfiltered {name}");
            assert_eq!(in_child(true, call), Err(libc::EPERM), "{name}");
        }
        assert_eq!(in_child(true, personality_query), Ok(()), "the query");
    }

    #[test]
    fn what_a_desktop_needs_still_works_under_the_filter() {
        let calls: [Call; 4] = [
            ("getpid", getpid),
            ("open", open),
            ("fork", fork),
            ("socketpair", socketpair),
        ];
        for (name, call) in calls {
            assert_eq!(in_child(true, call), Ok(()), "{name}");
        }
    }
}
