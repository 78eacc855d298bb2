//! Process hardening after setup: no-new-privileges, closing inherited file
//! descriptors, and per-thread seccomp filters (vCPU, device event loop, VMM
//! thread) built with seccompiler. A syscall outside a thread's list ends
//! the whole process: the filter traps it (SIGSYS), and the handler writes
//! which thread made which system call to stderr (the VMM's log) before
//! exiting with status 159 (128 + SIGSYS), as Firecracker reports its own.
//! A bare kill said only "signal 31", and nobody could tell which call.

use std::cell::Cell;
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

/// The exit status of a VMM that made a forbidden system call.
pub const FORBIDDEN_SYSCALL_EXIT: i32 = 128 + libc::SIGSYS;

thread_local! {
    /// This thread's filter, for the SIGSYS handler (a const-initialised
    /// cell: reading it in a signal handler takes no lock and allocates
    /// nothing).
    static THREAD: Cell<Option<ThreadKind>> = const { Cell::new(None) };
}

/// Room for the handler's one line.
struct Line {
    bytes: [u8; 256],
    len: usize,
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// SIGSYS from a seccomp trap: names the thread and the call on stderr
/// and ends the process. Only async-signal-safe work: formatting into a
/// stack buffer, `write` and `_exit` (both in every thread's filter).
extern "C" fn on_forbidden_syscall(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    use std::fmt::Write as _;
    // For SIGSYS the kernel fills `_sigsys { void *call_addr; int syscall;
    // unsigned arch; }` at byte 16 of siginfo_t on x86_64: the syscall
    // number is the int at byte 24. The libc crate has no accessor for it.
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let syscall = unsafe { info.cast::<u8>().add(24).cast::<i32>().read_unaligned() };
    let thread = THREAD
        .with(Cell::get)
        .map_or("unfiltered", ThreadKind::name);
    let mut line = Line {
        bytes: [0; 256],
        len: 0,
    };
    let _ = writeln!(
        line,
        "cubicle-vmm: the {thread} thread made system call {syscall} (x86_64), \
         which its seccomp filter forbids; stopping the VM"
    );
    // SAFETY: write(2) from a live stack buffer, then _exit: both
    // async-signal-safe, and both in every thread's filter.
    unsafe {
        libc::write(2, line.bytes.as_ptr().cast(), line.len);
        libc::_exit(FORBIDDEN_SYSCALL_EXIT);
    }
}

/// Installs the SIGSYS handler that reports a forbidden call (process-wide;
/// installing it again changes nothing).
fn install_reporter() {
    // SAFETY: a zeroed sigaction is valid; it is filled in before use and
    // the handler has the SA_SIGINFO signature.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_forbidden_syscall as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut());
    }
}

const KVM_RUN: u64 = 0xae80;
/// `_IOR(KVMIO, 0x81, struct kvm_regs)` and `_IOR(KVMIO, 0x83, struct
/// kvm_sregs)`: a vCPU thread reads its own registers when the guest
/// crashes, to say where.
const KVM_GET_REGS: u64 = 0x8090_ae81;
const KVM_GET_SREGS: u64 = 0x8138_ae83;
const FIONBIO: u64 = 0x5421;

/// `_IOR(KVMIO, nr, T)` and `_IOWR(...)`: the request numbers of KVM's
/// read ioctls, from the kernel's encoding (direction, size, type, number).
const fn kvm_ior<T>(nr: u64) -> u64 {
    (2 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | (0xae << 8) | nr
}
const fn kvm_iowr<T>(nr: u64) -> u64 {
    (3 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | (0xae << 8) | nr
}

/// What a parked vCPU reads of itself when a snapshot asks
/// (`VcpuState::save`): read-only ioctls on its own descriptor.
const VCPU_SNAPSHOT_IOCTLS: &[u64] = &[
    kvm_ior::<kvm_bindings::kvm_mp_state>(0x98),
    kvm_ior::<kvm_bindings::kvm_xsave>(0xa4),
    kvm_ior::<kvm_bindings::kvm_xcrs>(0xa6),
    kvm_ior::<kvm_bindings::kvm_debugregs>(0xa1),
    kvm_ior::<kvm_bindings::kvm_lapic_state>(0x8e),
    kvm_iowr::<kvm_bindings::kvm_msrs>(0x88),
    kvm_ior::<kvm_bindings::kvm_vcpu_events>(0x9f),
    kvm_iowr::<kvm_bindings::kvm_cpuid2>(0x91),
    // KVM_GET_TSC_KHZ is `_IO(KVMIO, 0xa3)`.
    (0xae << 8) | 0xa3,
];

/// What the VMM thread reads of the VM for a snapshot (`VmKvmState::save`).
const VM_SNAPSHOT_IOCTLS: &[u64] = &[
    kvm_ior::<kvm_bindings::kvm_clock_data>(0x7c),
    kvm_iowr::<kvm_bindings::kvm_irqchip>(0x62),
    kvm_ior::<kvm_bindings::kvm_pit_state2>(0x9f),
];

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
    // Snapshots: the memory and state files, written beside, synced, linked.
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_ftruncate,
    libc::SYS_fsync,
    libc::SYS_linkat,
    libc::SYS_link,
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
        // The console log starts over at its cap (builder's CappedLog).
        ThreadKind::Vcpu => (&[libc::SYS_ftruncate], KVM_RUN),
        ThreadKind::Devices => (DEVICES, FIONBIO),
        ThreadKind::Vmm => (VMM, FIONBIO),
    };
    rules.extend(extra.iter().map(|&s| (s, vec![])));
    let mut ioctls = vec![ioctl_rule(ioctl)];
    match kind {
        ThreadKind::Vcpu => {
            ioctls.extend([ioctl_rule(KVM_GET_REGS), ioctl_rule(KVM_GET_SREGS)]);
            ioctls.extend(VCPU_SNAPSHOT_IOCTLS.iter().map(|&r| ioctl_rule(r)));
        }
        ThreadKind::Vmm => ioctls.extend(VM_SNAPSHOT_IOCTLS.iter().map(|&r| ioctl_rule(r))),
        ThreadKind::Devices => {}
    }
    rules.insert(libc::SYS_ioctl, ioctls);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Trap,
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
    THREAD.with(|t| t.set(Some(kind)));
    install_reporter();
    seccompiler::apply_filter(&program).map_err(|e| HardeningError::Install(kind.name(), e))
}

/// One malloc arena for the whole process (call first thing in main,
/// before any thread exists).
///
/// glibc gives threads arenas of their own, in heaps it maps. When such a
/// heap shrinks after a burst of frees, glibc first reads
/// `/proc/sys/vm/overcommit_memory` (`check_may_shrink_heap`), once per
/// process: an `openat` on whichever thread freed, which no filter of ours
/// allows. A microVM's device thread did exactly that after its first
/// egress download (vsock buffers freed) and the VMM died. The main arena
/// grows and shrinks with `brk`, which every filter allows; the VMM's few
/// threads sharing its lock cost nothing measurable.
pub fn one_malloc_arena() {
    // SAFETY: mallopt takes two integers; before any thread exists nothing
    // races with it.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
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

    /// How a forked child ended after installing `kind`'s filter and making
    /// `call`: `Ok(())` when the call returned (whatever the kernel said)
    /// and the child exited, `Err(signal)` when it was killed.
    fn in_child(kind: Option<ThreadKind>, call: fn()) -> Result<(), i32> {
        // Built before the fork: the child only makes raw syscalls.
        let program = kind.map(|kind| filter(kind).expect("filter builds"));
        // SAFETY: the child makes only prctl/seccomp, the call under test
        // and _exit (async-signal-safe), on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            if let Some(program) = &program
                && (set_no_new_privs().is_err() || seccompiler::apply_filter(program).is_err())
            {
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(200) };
            }
            call();
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        if libc::WIFSIGNALED(status) {
            return Err(libc::WTERMSIG(status));
        }
        assert!(libc::WIFEXITED(status), "child neither exited nor died");
        assert_ne!(
            libc::WEXITSTATUS(status),
            200,
            "installing the filter failed"
        );
        Ok(())
    }

    // The calls below take invalid descriptors or point at nothing the
    // kernel writes: each returns an error or harmless data at once.
    fn getpid() {
        // SAFETY: no arguments.
        unsafe { libc::getpid() };
    }
    fn open_file() {
        // SAFETY: a NUL-terminated literal path, read-only.
        unsafe { libc::open(c"/proc/self/status".as_ptr(), libc::O_RDONLY) };
    }
    fn read_nothing() {
        // SAFETY: zero bytes into a null buffer of a bad descriptor.
        unsafe { libc::read(-1, std::ptr::null_mut(), 0) };
    }
    fn kvm_run() {
        // SAFETY: KVM_RUN on a bad descriptor fails with EBADF.
        unsafe { libc::ioctl(-1, KVM_RUN as libc::c_ulong) };
    }
    fn fionbio() {
        let on: libc::c_int = 1;
        // SAFETY: FIONBIO reads one int from a live local; bad descriptor.
        unsafe { libc::ioctl(-1, FIONBIO as libc::c_ulong, &on) };
    }
    fn socket() {
        // SAFETY: integer arguments; the descriptor is dropped with the child.
        unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
    }
    fn execve() {
        let none: [*const libc::c_char; 1] = [std::ptr::null()];
        // SAFETY: a missing program with empty argv/envp fails with ENOENT.
        unsafe { libc::execve(c"/nonexistent".as_ptr(), none.as_ptr(), none.as_ptr()) };
    }
    fn fork() {
        // SAFETY: a child that only exits.
        if unsafe { libc::fork() } == 0 {
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
    }

    /// The unit tests' process, like the VMM's, has one malloc arena from
    /// before its first thread: run before main, as an `.init_array` entry
    /// (libtest starts its threads, each with an arena, before any test).
    // SAFETY: the section holds only this function pointer, of the
    // `extern "C" fn()` type the loader calls there, with no arguments.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static ONE_ARENA_BEFORE_MAIN: extern "C" fn() = {
        extern "C" fn init() {
            one_malloc_arena();
        }
        init
    };

    /// A device thread that frees a burst of buffers lives on under its
    /// filter: with one arena, the heap shrinks by `brk`, not by the
    /// `openat` of `/proc/sys/vm/overcommit_memory` that glibc makes when a
    /// thread arena's heap shrinks (without ONE_ARENA_BEFORE_MAIN this test
    /// fails: "the device thread made system call 257").
    #[test]
    fn a_thread_that_frees_a_burst_of_buffers_survives_its_filter() {
        let program = filter(ThreadKind::Devices).expect("filter builds");
        // SAFETY: as in in_child.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let worker = std::thread::spawn(move || {
                THREAD.with(|t| t.set(Some(ThreadKind::Devices)));
                install_reporter();
                if set_no_new_privs().is_err() || seccompiler::apply_filter(&program).is_err() {
                    return 200;
                }
                for _ in 0..4 {
                    let burst: Vec<Vec<u8>> = (0..1024).map(|_| vec![7u8; 64 * 1024]).collect();
                    drop(std::hint::black_box(burst));
                }
                0
            });
            let code = worker.join().unwrap_or(201);
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "killed: {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }

    #[test]
    fn a_forbidden_call_is_named_in_the_log_before_the_vmm_exits() {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        let program = filter(ThreadKind::Devices).expect("filter builds");
        let mut pipe = [0; 2];
        // SAFETY: a valid out array of two descriptors.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: as in in_child; the child also makes dup2 and sigaction.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: the pipe's write end becomes this child's stderr.
            unsafe { libc::dup2(pipe[1], 2) };
            THREAD.with(|t| t.set(Some(ThreadKind::Devices)));
            install_reporter();
            if set_no_new_privs().is_err() || seccompiler::apply_filter(&program).is_err() {
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(200) };
            }
            open_file();
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: the parent's copy of the write end; the read end is ours.
        unsafe { libc::close(pipe[1]) };
        let mut said = String::new();
        // SAFETY: pipe[0] is an open descriptor this test owns from here.
        let mut reader = unsafe { std::fs::File::from_raw_fd(pipe[0]) };
        reader
            .read_to_string(&mut said)
            .expect("read the child's stderr");
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child was killed: {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), FORBIDDEN_SYSCALL_EXIT);
        assert_eq!(
            said.trim(),
            format!(
                "cubicle-vmm: the device thread made system call {} (x86_64), which its seccomp filter forbids; stopping the VM",
                libc::SYS_openat
            )
        );
    }

    #[test]
    fn each_thread_filter_kills_a_forbidden_call_and_lets_an_allowed_one_through() {
        // (thread, allowed calls, forbidden calls)
        type Calls = &'static [(&'static str, fn())];
        let cases: [(ThreadKind, Calls, Calls); 3] = [
            (
                ThreadKind::Vcpu,
                &[("ioctl(KVM_RUN)", kvm_run)],
                &[
                    ("ioctl(FIONBIO)", fionbio),
                    ("read", read_nothing),
                    ("openat", open_file),
                ],
            ),
            (
                ThreadKind::Devices,
                &[
                    ("read", read_nothing),
                    ("socket", socket),
                    ("ioctl(FIONBIO)", fionbio),
                ],
                &[
                    ("ioctl(KVM_RUN)", kvm_run),
                    ("openat", open_file),
                    ("execve", execve),
                ],
            ),
            (
                ThreadKind::Vmm,
                &[
                    ("openat", open_file),
                    ("getpid", getpid),
                    ("read", read_nothing),
                ],
                &[("socket", socket), ("execve", execve), ("fork", fork)],
            ),
        ];
        for (kind, allowed, forbidden) in cases {
            for (name, call) in forbidden {
                // Control: without a filter the call returns.
                assert_eq!(in_child(None, *call), Ok(()), "control: {name}");
                assert_eq!(
                    in_child(Some(kind), *call),
                    Err(libc::SIGSYS),
                    "{name} on the {} thread",
                    kind.name()
                );
            }
            for (name, call) in allowed {
                assert_eq!(
                    in_child(Some(kind), *call),
                    Ok(()),
                    "{name} on the {} thread",
                    kind.name()
                );
            }
        }
    }
}
