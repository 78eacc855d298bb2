//! The jail's seccomp filter, compiled with `seccompiler` (Firecracker's
//! crate) and handed to bubblewrap as raw BPF.
//!
//! It is a deny list on top of what the jail already removes (capabilities,
//! further user namespaces): kernel-module, kexec, BPF, perf, keyring,
//! mount, tracing of other processes, terminal injection (`TIOCSTI`) and
//! io_uring — the calls a desktop and a browser never need and container
//! escapes keep using. A denied call fails with `EPERM`.

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
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_unshare,
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
    #[test]
    fn filter_compiles_to_whole_instructions() {
        let bytes = super::jail_filter_bytes().unwrap();
        assert!(!bytes.is_empty());
        assert_eq!(bytes.len() % 8, 0);
    }
}
