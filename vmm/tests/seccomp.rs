//! The seccomp filter is really in force: a vCPU thread that makes a
//! syscall outside its list (through a hidden test-only flag) ends the
//! whole VMM, which says which thread made which call.

mod common;

use common::*;

#[test]
fn forbidden_syscall_on_a_vcpu_thread_ends_the_vmm_and_is_named() {
    require_kvm!();
    let out = run(&[
        "--kernel",
        guest("hello").to_str().expect("utf-8"),
        "--seccomp-self-test",
    ]);
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSYS),
        "status {:?}, stderr {}",
        out.status,
        stderr(&out)
    );
    let said = format!(
        "cubicle-vmm: the vCPU thread made system call {} (x86_64), which its seccomp filter forbids",
        libc::SYS_getppid
    );
    assert!(stderr(&out).contains(&said), "stderr: {}", stderr(&out));
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
