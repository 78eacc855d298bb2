//! Builds the VMM's test guests from `guests/` with the system C compiler and
//! GNU binutils (gcc drives `as` and `ld`). They are freestanding x86-64 ELF
//! images linked at 1 MiB, loaded by the VMM exactly like a vmlinux:
//! C guests enter in 64-bit mode (Linux 64-bit boot protocol), `pvh` enters in
//! 32-bit mode through its PVH note. Writing them in C (not Rust) keeps them
//! buildable without an extra rustup target, which this machine cannot fetch.

use std::path::{Path, PathBuf};
use std::process::Command;

const C_GUESTS: &[&str] = &["hello", "probe", "blk", "blkfill", "vsock", "snap"];

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
    let smp = [
        dir.join("entry64.S"),
        dir.join("rt.c"),
        dir.join("ap.S"),
        dir.join("smp.c"),
    ];
    link(&out.join("smp"), &smp, dir);
    link(&out.join("pvh"), &[dir.join("pvh.S")], dir);
    bzimage(&out, dir);
    initramfs(&out, dir);
    println!("cargo:rustc-env=CUBICLE_TEST_GUESTS={}", out.display());
}

/// The hello guest wrapped as a bzImage: a one-sector setup header (boot
/// protocol 2.15, LOADED_HIGH, code32_start = 1 MiB) and the flat payload.
fn bzimage(out: &Path, dir: &Path) {
    let elf = out.join("hello-bz.elf");
    let sources = [dir.join("entry64.S"), dir.join("rt.c"), dir.join("hello.c")];
    link_with(&elf, &sources, &dir.join("bzimage.ld"));
    let flat = out.join("hello-bz.bin");
    let status = Command::new("objcopy")
        .args(["-O", "binary"])
        .arg(&elf)
        .arg(&flat)
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "objcopy failed: install binutils"
    );
    let payload = std::fs::read(&flat).expect("read flattened guest");
    let mut image = vec![0u8; 1024];
    image[0x1f1] = 1; // setup_sects: one sector after the boot sector
    image[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
    image[0x202..0x206].copy_from_slice(b"HdrS");
    image[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    image[0x211] = 1; // loadflags: LOADED_HIGH
    image[0x214..0x218].copy_from_slice(&0x10_0000u32.to_le_bytes()); // code32_start
    image.extend(payload);
    std::fs::write(out.join("bzimage"), image).expect("write bzImage test guest");
}

/// `linux-init.c` as a static Linux program, packed as `/init` into a
/// newc cpio archive (the initramfs format) with `/dev/console`, for the
/// Linux boot tests.
fn initramfs(out: &Path, dir: &Path) {
    let init = out.join("linux-init");
    let status = Command::new("gcc")
        .args(["-m64", "-O2", "-static", "-nostdlib", "-fno-pie", "-no-pie"])
        .args([
            "-fno-stack-protector",
            // No C library: loops must not become calls to strlen/memset.
            "-fno-tree-loop-distribute-patterns",
            "-mgeneral-regs-only",
            "-Wall",
            "-Werror",
        ])
        .arg("-o")
        .arg(&init)
        .arg(dir.join("linux-init.c"))
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "building the test init failed: install gcc"
    );
    let program = std::fs::read(&init).expect("read the built test init");
    let mut archive = Vec::new();
    cpio_entry(&mut archive, "dev", 0o040_755, (0, 0), &[]);
    cpio_entry(&mut archive, "dev/console", 0o020_600, (5, 1), &[]);
    cpio_entry(&mut archive, "init", 0o100_755, (0, 0), &program);
    cpio_entry(&mut archive, "TRAILER!!!", 0, (0, 0), &[]);
    std::fs::write(out.join("initramfs.cpio"), archive).expect("write the test initramfs");
}

/// One newc entry (header, name and data each padded to 4 bytes). Written
/// here: the format is a few lines, and the `cpio` tool is not on every
/// build machine.
fn cpio_entry(archive: &mut Vec<u8>, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
    let ino = archive.len() as u32 + 1;
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        1, // nlink
        0, // mtime
        data.len() as u32,
        0, // dev major
        0, // dev minor
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0, // check
    ];
    archive.extend(b"070701");
    for field in fields {
        archive.extend(format!("{field:08x}").as_bytes());
    }
    archive.extend(name.as_bytes());
    archive.push(0);
    pad4(archive);
    archive.extend(data);
    pad4(archive);
}

fn pad4(archive: &mut Vec<u8>) {
    archive.resize(archive.len().next_multiple_of(4), 0);
}

fn link(output: &Path, sources: &[PathBuf], dir: &Path) {
    link_with(output, sources, &dir.join("guest.ld"));
}

fn link_with(output: &Path, sources: &[PathBuf], script: &Path) {
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
        .arg(format!("-Wl,-T,{}", script.display()))
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
