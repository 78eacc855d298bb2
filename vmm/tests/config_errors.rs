//! A bad configuration gets a clear error naming the input, a non-zero exit,
//! and leaves nothing behind (no socket, no log file).

mod common;

use common::*;

fn refused(args: &[&str], expect: &str) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(expect), "expected {expect:?} in: {err}");
}

#[test]
fn missing_kernel() {
    refused(
        &["--kernel", "/nonexistent/vmlinux"],
        "kernel /nonexistent/vmlinux: cannot open it",
    );
}

#[test]
fn zero_memory() {
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--memory-mib",
            "0",
        ],
        "memory_mib = 0",
    );
}

#[test]
fn zero_vcpus() {
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--vcpus",
            "0",
        ],
        "vcpus = 0",
    );
}

#[test]
fn unreadable_disk_and_nothing_left_behind() {
    let dir = Scratch::new("bad-disk");
    let uds = dir.path("v.sock");
    let log = dir.path("serial.log");
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--disk",
            "id=root,path=/nonexistent/root.img,ro",
            "--vsock",
            &format!("cid=3,uds={}", uds.display()),
            "--serial-log",
            log.to_str().expect("utf-8"),
        ],
        "disk \"root\": cannot open /nonexistent/root.img",
    );
    assert!(!uds.exists(), "no vsock socket left behind");
    assert!(!log.exists(), "no serial log left behind");
}

#[test]
fn overlapping_devices() {
    let dir = Scratch::new("overlap");
    let img = dir.path("a.img");
    std::fs::write(&img, vec![0u8; 4096]).expect("image");
    let spec = format!("id=a,path={}", img.display());
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--disk",
            &spec,
            "--disk",
            &format!("{spec},ro"),
        ],
        "devices overlap",
    );
    let other = format!("id=b,path={}", img.display());
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--disk",
            &spec,
            "--disk",
            &other,
        ],
        "devices overlap",
    );
}

#[test]
fn reserved_vsock_cid() {
    let dir = Scratch::new("cid");
    let uds = format!("cid=2,uds={}", dir.path("v.sock").display());
    refused(
        &[
            "--kernel",
            guest("hello").to_str().expect("utf-8"),
            "--vsock",
            &uds,
        ],
        "guest_cid = 2",
    );
}

#[test]
fn malformed_json_config() {
    let dir = Scratch::new("json");
    let file = dir.path("vm.json");
    std::fs::write(&file, r#"{"kernel": "/k", "memory_mib": 64, "vcpu": 2}"#)
        .expect("write config");
    refused(
        &["--config", file.to_str().expect("utf-8")],
        "unknown field `vcpu`",
    );
}

#[test]
fn a_kernel_that_is_not_a_kernel() {
    require_kvm!();
    let dir = Scratch::new("not-kernel");
    let file = dir.path("junk");
    std::fs::write(&file, vec![0x5au8; 8192]).expect("write junk");
    refused(
        &["--kernel", file.to_str().expect("utf-8")],
        "not a loadable x86-64 ELF vmlinux or bzImage",
    );
}
