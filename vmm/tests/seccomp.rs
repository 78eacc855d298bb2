//! The seccomp filter is really in force: a vCPU thread that makes a
//! syscall outside its list (through a hidden test-only flag) kills the
//! whole VMM with SIGSYS.

mod common;

use std::os::unix::process::ExitStatusExt;

use common::*;

#[test]
fn forbidden_syscall_on_a_vcpu_thread_is_killed_with_sigsys() {
    require_kvm!();
    let out = run(&[
        "--kernel",
        guest("hello").to_str().expect("utf-8"),
        "--seccomp-self-test",
    ]);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSYS),
        "status {:?}, stderr {}",
        out.status,
        stderr(&out)
    );
    assert!(
        !stdout(&out).contains("hello guest: ready"),
        "the guest never ran"
    );
}

#[test]
fn without_the_forbidden_call_the_same_vm_runs_under_seccomp() {
    require_kvm!();
    let out = run(&["--kernel", guest("hello").to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "status {:?}, stderr {}",
        out.status,
        stderr(&out)
    );
}
