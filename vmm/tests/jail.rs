//! The VMM confined the way Firecracker's jailer confines Firecracker
//! (`run --jail-root`), seen from outside as a user would check it: the
//! process's root holds only what its configuration names, it runs as the
//! given uid with no capability in any set, no new privileges and seccomp,
//! its API and vsock sockets are reachable at their host paths, nothing is
//! mounted in the host's namespace, and a bind that cannot be made is an
//! error naming the stage, never a followed symlink. Needs root and KVM
//! (the test guests run on any KVM, PVM included).

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use common::*;

/// The uid and gid the jailed VMM runs as: nobody's on Debian.
const UID: u32 = 65534;
/// A group of the test's own for its KVM node (nobody holds it).
const KVM_GID: u32 = 65533;

/// A VMM's files laid out as the runtime lays them out, with a KVM node of
/// the test's own group (the host's /dev/kvm may be root's alone).
struct Workspace {
    dir: Scratch,
}

impl Workspace {
    fn new(name: &str) -> Workspace {
        let dir = Scratch::new(name);
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o711)).unwrap();
        for (sub, owner, mode) in [("root", 0, 0o755), ("chan", UID, 0o700), ("vm", UID, 0o700)] {
            let path = dir.path(sub);
            std::fs::create_dir(&path).unwrap();
            chown(&path, Some(owner), Some(owner)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let base = dir.path("base.img");
        std::fs::File::create(&base)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o644)).unwrap();
        let overlay = dir.path("overlay.img");
        std::fs::File::create(&overlay)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        chown(&overlay, Some(UID), Some(UID)).unwrap();
        mknod_kvm(&dir.path("kvm"));
        Workspace { dir }
    }

    fn args(&self, kernel: &Path) -> Vec<String> {
        let p = |name: &str| self.dir.path(name).display().to_string();
        vec![
            "run".into(),
            "--jail-root".into(),
            p("root"),
            "--jail-uid".into(),
            UID.to_string(),
            "--jail-gid".into(),
            UID.to_string(),
            "--jail-groups".into(),
            KVM_GID.to_string(),
            "--jail-kvm".into(),
            p("kvm"),
            "--kernel".into(),
            kernel.display().to_string(),
            "--memory-mib".into(),
            "32".into(),
            "--disk".into(),
            format!(
                "id=root,path={},overlay={}",
                p("base.img"),
                p("overlay.img")
            ),
            "--vsock".into(),
            format!("cid=3,uds={}", p("chan/guest.sock")),
            "--serial-log".into(),
            p("vm/serial.log"),
            "--api-socket".into(),
            p("vm/vmm.sock"),
        ]
    }
}

/// A node of the KVM device (10:232), group [`KVM_GID`], mode 0660.
fn mknod_kvm(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and integer arguments.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o660, libc::makedev(10, 232)) };
    assert_eq!(made, 0, "mknod {}", std::io::Error::last_os_error());
    chown(path, Some(0), Some(KVM_GID)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).unwrap();
}

fn request(socket: &Path, method: &str, path: &str) -> (u16, String) {
    let mut s = UnixStream::connect(socket).expect("connect to the API at its host path");
    let req = format!("{method} {path} HTTP/1.1\r\nHost: vmm\r\nContent-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status, body.unwrap_or_default())
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The `Key:` line of `/proc/<pid>/status`, polled until `want` holds
/// (the VMM hardens its main thread after start).
fn status_line(pid: u32, key: &str, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + guard(30);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        if want(&line) || Instant::now() > deadline {
            return line;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Mount points in this (the host's) namespace under `dir`.
fn host_mounts_under(dir: &Path) -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.display().to_string();
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|point| point.starts_with(&dir))
        .map(str::to_owned)
        .collect()
}

fn needs_root() -> bool {
    if cubicle_skip::is_root() {
        return true;
    }
    skip("needs root: the jail mounts, pivots and changes uid");
    false
}

#[test]
fn jailed_vmm_sees_only_its_files_and_holds_no_privilege() {
    require_kvm!();
    if !needs_root() {
        return;
    }
    let ws = Workspace::new("jail");
    let child = vmm()
        .args(ws.args(&guest("blkfill")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cubicle-vmm");
    let pid = child.id();
    let child = KillOnDrop(Some(child));
    wait_for_text(&ws.dir.path("vm/serial.log"), "blkfill: idle");
    let serial = std::fs::read_to_string(ws.dir.path("vm/serial.log")).unwrap();
    assert!(serial.contains("blkfill: still serving"), "{serial}");

    // Its root: the binds and nothing else.
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let top = names(&root);
    println!("jailed VMM root: {top:?}");
    let want = ["api", "dev", "disks", "kernel", "serial", "vsock"];
    assert_eq!(top, want.iter().map(|s| s.to_string()).collect());
    assert_eq!(names(&root.join("dev")), BTreeSet::from(["kvm".to_owned()]));
    assert_eq!(
        names(&root.join("disks")),
        BTreeSet::from(["0".to_owned(), "0.overlay".to_owned()])
    );
    assert_eq!(
        names(&root.join("vsock")),
        BTreeSet::from(["guest.sock".to_owned()])
    );
    // The base is read-only even to root through the VMM's root.
    let base_write = std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("disks/0"));
    assert_eq!(
        base_write.map(drop).unwrap_err().raw_os_error(),
        Some(libc::EROFS)
    );

    // Its credentials.
    for (key, want) in [
        ("Uid", format!("{UID} {UID} {UID} {UID}")),
        ("Gid", format!("{UID} {UID} {UID} {UID}")),
        ("Groups", KVM_GID.to_string()),
        ("CapInh", "0000000000000000".into()),
        ("CapPrm", "0000000000000000".into()),
        ("CapEff", "0000000000000000".into()),
        ("CapBnd", "0000000000000000".into()),
        ("CapAmb", "0000000000000000".into()),
        ("NoNewPrivs", "1".into()),
        ("Seccomp", "2".into()),
    ] {
        let got = status_line(pid, key, |v| v == want);
        println!("jailed VMM {key}: {got}");
        assert_eq!(got, want, "{key}");
    }

    // Reachable at the host paths; nothing mounted in the host's namespace.
    let (status, body) = request(&ws.dir.path("vm/vmm.sock"), "GET", "/vm");
    assert_eq!((status, body.as_str()), (200, r#"{"state":"running"}"#));
    assert!(ws.dir.path("chan/guest.sock").exists());
    assert_eq!(host_mounts_under(&ws.dir.0), Vec::<String>::new());
    assert_eq!(names(&ws.dir.path("root")), BTreeSet::new());

    let (status, body) = request(&ws.dir.path("vm/vmm.sock"), "PUT", "/vm/stop");
    assert_eq!(status, 204, "{body}");
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_symlinked_overlay_is_refused_naming_the_stage_and_nothing_stays_mounted() {
    require_kvm!();
    if !needs_root() {
        return;
    }
    let ws = Workspace::new("jail-symlink");
    let secret = ws.dir.path("secret");
    std::fs::write(&secret, "host data").unwrap();
    std::fs::remove_file(ws.dir.path("overlay.img")).unwrap();
    std::os::unix::fs::symlink(&secret, ws.dir.path("overlay.img")).unwrap();
    let out = run(&ws.args(&guest("blkfill"))[1..]
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    let err = stderr(&out);
    println!("symlinked overlay: {}", err.trim());
    assert!(!out.status.success());
    assert!(
        err.contains("jail: bind source") && err.contains("(disk 0 overlay) is not a regular file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host data");
    assert_eq!(host_mounts_under(&ws.dir.0), Vec::<String>::new());
}

#[test]
fn a_missing_kernel_is_an_error_naming_the_kernel_bind() {
    require_kvm!();
    if !needs_root() {
        return;
    }
    let ws = Workspace::new("jail-nokernel");
    let out = run(&ws.args(Path::new("/nonexistent/vmlinux"))[1..]
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    let err = stderr(&out);
    println!("missing kernel: {}", err.trim());
    assert!(!out.status.success());
    assert!(
        err.contains("jail: kernel /nonexistent/vmlinux cannot be opened: No such file"),
        "{err}"
    );
    assert_eq!(host_mounts_under(&ws.dir.0), Vec::<String>::new());
}

/// A jailed VMM snapshots into the one directory it was given
/// (`--snapshot-dir`, `/snapshots` inside), and a jailed restore sees no
/// kernel and no snapshot file (its memory file is opened before the jail,
/// here one only root may read): the copy finishes the guest's work.
#[test]
fn a_jailed_vm_snapshots_into_its_directory_and_restores_jailed() {
    require_kvm!();
    if !needs_root() {
        return;
    }
    let ws = Workspace::new("jail-snapshot");
    let snaps = ws.dir.path("snaps");
    std::fs::create_dir(&snaps).unwrap();
    chown(&snaps, Some(UID), Some(UID)).unwrap();
    let mut args = ws.args(&guest("snap"));
    args.extend([
        "--snapshot-dir".into(),
        snaps.display().to_string(),
        "--cmdline".into(),
        "console=ttyS0 cubicle.ticks=12".into(),
    ]);
    let child = vmm()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cubicle-vmm");
    let child = KillOnDrop(Some(child));
    wait_for_text(&ws.dir.path("vm/serial.log"), "snap guest: tick 2\n");
    let api = ws.dir.path("vm/vmm.sock");
    assert_eq!(request(&api, "PUT", "/vm/pause").0, 204);
    let body = r#"{"state_path":"/snapshots/s.state","memory_path":"/snapshots/s.mem"}"#;
    let (status, reply) = common::request(&api, "PUT", "/vm/snapshot", body);
    assert_eq!(status, 200, "{reply}");
    let outside = r#"{"state_path":"/tmp/s.state","memory_path":"/tmp/s.mem"}"#;
    let (status, reply) = common::request(&api, "PUT", "/vm/snapshot", outside);
    assert_eq!(status, 500, "nowhere else is writable: {reply}");
    assert!(reply.contains("/tmp/s.mem"), "{reply}");
    assert_eq!(
        names(&snaps),
        BTreeSet::from(["s.mem".into(), "s.state".into()])
    );
    std::fs::set_permissions(snaps.join("s.mem"), std::fs::Permissions::from_mode(0o600)).unwrap();
    chown(snaps.join("s.mem"), Some(0), Some(0)).unwrap();
    let overlay = ws.dir.path("restored.img");
    std::fs::copy(ws.dir.path("overlay.img"), &overlay).unwrap();
    chown(&overlay, Some(UID), Some(UID)).unwrap();
    assert_eq!(request(&api, "PUT", "/vm/stop").0, 204);
    assert!(child.wait().status.success());

    std::fs::remove_file(ws.dir.path("vm/serial.log")).unwrap();
    let p = |name: &str| ws.dir.path(name).display().to_string();
    let mut restore: Vec<String> = args[..11].to_vec();
    assert_eq!(restore[9], "--jail-kvm", "the jail flags come first");
    restore.extend([
        "--restore".into(),
        p("snaps/s.state"),
        "--restore-memory".into(),
        p("snaps/s.mem"),
        "--disk".into(),
        format!(
            "id=root,path={},overlay={}",
            p("base.img"),
            p("restored.img")
        ),
        "--vsock".into(),
        format!("cid=4,uds={}", p("chan/guest.sock")),
        "--serial-log".into(),
        p("vm/serial.log"),
        "--api-socket".into(),
        p("vm/vmm.sock"),
    ]);
    let child = vmm()
        .args(&restore)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the restore");
    let pid = child.id();
    let child = KillOnDrop(Some(child));
    wait_for_path(&ws.dir.path("vm/vmm.sock"));
    let top = names(&PathBuf::from(format!("/proc/{pid}/root")));
    assert_eq!(
        top,
        ["api", "dev", "disks", "serial", "vsock"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        "no kernel in a restore's root"
    );
    let out = child.wait();
    let serial = std::fs::read_to_string(ws.dir.path("vm/serial.log")).unwrap();
    assert!(out.status.success(), "{}\n{serial}", stderr(&out));
    assert!(serial.contains("snap guest: done"), "{serial}");
    assert!(!serial.contains("ready"), "{serial}");
    assert_eq!(host_mounts_under(&ws.dir.0), Vec::<String>::new());
}
