//! Builds the VMM's test guests from `guests/` with the system C compiler and
//! GNU binutils (gcc drives `as` and `ld`). They are freestanding x86-64 ELF
//! images linked at 1 MiB, loaded by the VMM exactly like a vmlinux:
//! C guests enter in 64-bit mode (Linux 64-bit boot protocol), `pvh` enters in
//! 32-bit mode through its PVH note. Writing them in C (not Rust) keeps them
//! buildable without an extra rustup target, which this machine cannot fetch.

use std::path::{Path, PathBuf};
use std::process::Command;

const C_GUESTS: &[&str] = &["hello", "probe", "blk", "vsock"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = Path::new("guests");
    println!("cargo:rerun-if-changed=guests");
    for name in C_GUESTS {
        let sources = [
            dir.join("entry64.S"),
            dir.join("rt.c"),
            dir.join(format!("{name}.c")),
        ];
        link(&out.join(name), &sources, dir);
    }
    link(&out.join("pvh"), &[dir.join("pvh.S")], dir);
    println!("cargo:rustc-env=CUBICLE_TEST_GUESTS={}", out.display());
}

fn link(output: &Path, sources: &[PathBuf], dir: &Path) {
    let status = Command::new("gcc")
        .args([
            "-m64",
            "-O2",
            "-ffreestanding",
            "-fno-pic",
            "-fno-pie",
            "-no-pie",
        ])
        .args([
            "-nostdlib",
            "-static",
            "-mno-red-zone",
            "-mgeneral-regs-only",
        ])
        .args(["-fno-stack-protector", "-fno-asynchronous-unwind-tables"])
        .args([
            "-Wall",
            "-Werror",
            "-Wl,--build-id=none",
            "-Wl,-n",
            "-Wl,--no-warn-rwx-segments",
        ])
        .arg(format!("-Wl,-T,{}", dir.join("guest.ld").display()))
        .arg("-o")
        .arg(output)
        .args(sources)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("building test guest {} failed ({s})", output.display()),
        Err(e) => panic!("cannot run gcc to build the test guests ({e}): install gcc and binutils"),
    }
}
