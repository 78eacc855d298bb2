//! Snapshots end to end with the real VMM binary on /dev/kvm: a guest that
//! ticks (memory pattern, disk writes and read-backs through its virtqueue,
//! a vsock event queue) is paused and snapshotted through the API, resumes
//! and finishes; two VMs restored from the snapshot at once go on from the
//! tick it caught with their own disks and vsock CIDs, and are told their
//! vsock transport was reset; damaged, truncated or foreign snapshots are
//! refused with a message naming the cause.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use common::*;
use cubicle_vmm::snapshot::Snapshot;

const TICKS: u64 = 16;

fn disk(dir: &Scratch) -> PathBuf {
    let path = dir.path("base.img");
    std::fs::write(&path, vec![0u8; 32 * 512]).expect("write the base image");
    path
}

fn spawn(args: &[&str]) -> Child {
    vmm()
        .arg("run")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cubicle-vmm")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The tick numbers a console log printed whole (newline and all), in order.
fn ticks(log: &str) -> Vec<u64> {
    log.split_inclusive('\n')
        .filter_map(|l| {
            l.strip_suffix('\n')?
                .strip_prefix("snap guest: tick ")?
                .parse()
                .ok()
        })
        .collect()
}

/// Runs the snap guest with an API socket until it has ticked a few
/// times, pauses it and snapshots it; returns (state, memory, the overlay
/// as it was at the snapshot, the ticks seen before it).
fn take_snapshot(dir: &Scratch) -> (PathBuf, PathBuf, PathBuf, Vec<u64>) {
    let base = disk(dir);
    let (overlay, log, api) = (dir.path("ov"), dir.path("log"), dir.path("api"));
    let cmdline = format!("console=ttyS0 cubicle.ticks={TICKS}");
    let child = spawn(&[
        "--kernel",
        s(&guest("snap")),
        "--memory-mib",
        "64",
        "--cmdline",
        &cmdline,
        "--disk",
        &format!("id=d,path={},overlay={}", s(&base), s(&overlay)),
        "--vsock",
        &format!("cid=3,uds={}", s(&dir.path("v.sock"))),
        "--serial-log",
        s(&log),
        "--api-socket",
        s(&api),
    ]);
    let child = KillOnDrop(Some(child));
    wait_for_text(&log, "snap guest: tick 3\n");
    let (state, memory) = (dir.path("snap.state"), dir.path("snap.mem"));
    let body = snapshot_body(&state, &memory, false);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(status, 409, "a running VM is not snapshotted: {reply}");
    assert!(reply.contains("pause it first"), "{reply}");
    assert_eq!(request(&api, "PUT", "/vm/pause", "").0, 204);
    let diff = snapshot_body(&state, &memory, true);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &diff);
    assert_eq!(status, 409, "a booted VM has no base for a diff: {reply}");
    assert!(reply.contains("take a full snapshot"), "{reply}");
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(status, 200, "{reply}");
    assert!(reply.contains(r#""sha256":""#), "{reply}");
    let before = ticks(&std::fs::read_to_string(&log).expect("log"));
    let at_snapshot = dir.path("ov-at-snapshot");
    std::fs::copy(&overlay, &at_snapshot).expect("copy the overlay");
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(
        status, 409,
        "an existing file is never overwritten: {reply}"
    );
    assert!(reply.contains("already exists"), "{reply}");
    assert_eq!(request(&api, "PUT", "/vm/resume", "").0, 204);
    let out = child.wait();
    assert!(out.status.success(), "the source VM: {}", stderr(&out));
    let log = std::fs::read_to_string(&log).expect("log");
    assert_eq!(ticks(&log), (1..=TICKS).collect::<Vec<_>>(), "{log}");
    assert!(log.contains("snap guest: done"), "the source ran on: {log}");
    assert!(!log.contains("vsock event"), "{log}");
    (state, memory, at_snapshot, before)
}

fn restore_args(
    dir: &Scratch,
    name: &str,
    state: &Path,
    memory: &Path,
    overlay: &Path,
    cid: u32,
) -> Vec<String> {
    let fork_overlay = dir.path(&format!("{name}.ov"));
    std::fs::copy(overlay, &fork_overlay).expect("the fork's own overlay");
    let base = dir.path("base.img");
    vec![
        "--restore".into(),
        s(state).into(),
        "--restore-memory".into(),
        s(memory).into(),
        "--verify-memory".into(),
        "--disk".into(),
        format!("id=d,path={},overlay={}", s(&base), s(&fork_overlay)),
        "--vsock".into(),
        format!("cid={cid},uds={}", s(&dir.path(&format!("{name}.sock")))),
        "--serial-log".into(),
        s(&dir.path(&format!("{name}.log"))).into(),
    ]
}

#[test]
fn a_snapshot_restores_twice_at_once_from_where_it_was_taken() {
    require_kvm!();
    let dir = Scratch::new("snapshot-restore");
    let (state, memory, overlay, before) = take_snapshot(&dir);
    let last = *before.last().expect("ticks before the snapshot");
    let forks: Vec<_> = [("a", 7), ("b", 8)]
        .into_iter()
        .map(|(name, cid)| {
            let args = restore_args(&dir, name, &state, &memory, &overlay, cid);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            (name, cid, KillOnDrop(Some(spawn(&args))))
        })
        .collect();
    for (name, cid, child) in forks {
        let out = child.wait();
        let log = std::fs::read_to_string(dir.path(&format!("{name}.log"))).expect("fork log");
        assert!(out.status.success(), "fork {name}: {}\n{log}", stderr(&out));
        assert!(
            !log.contains("ready"),
            "a restore does not boot again: {log}"
        );
        assert!(!log.contains("FAIL"), "{log}");
        let seen = ticks(&log);
        let first = *seen.first().expect("the fork ticked");
        // The next tick, or the one after if the snapshot caught a tick's
        // line half printed.
        assert!(
            first == last + 1 || first == last + 2,
            "fork {name} went on from tick {first}, the snapshot caught tick {last}: {log}"
        );
        assert_eq!(seen, (first..=TICKS).collect::<Vec<_>>(), "{log}");
        assert!(
            log.contains(&format!("snap guest: vsock event=0 len=4 cid={cid}")),
            "the guest was told of the transport reset and reads its new CID: {log}"
        );
        assert!(log.contains("snap guest: done"), "{log}");
    }
}

#[test]
fn damaged_truncated_or_foreign_snapshots_are_refused() {
    require_kvm!();
    let dir = Scratch::new("snapshot-refused");
    let (state, memory, overlay, _) = take_snapshot(&dir);
    let refused = |name: &str, state: &Path, memory: &Path| {
        let args = restore_args(&dir, name, state, memory, &overlay, 5);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = wait_output(spawn(&args));
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(
            !dir.path(&format!("{name}.sock")).exists(),
            "{name}: nothing is left behind"
        );
        stderr(&out)
    };

    let mut bytes = std::fs::read(&state).expect("state");
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    let changed = dir.path("changed.state");
    std::fs::write(&changed, &bytes).expect("write");
    let err = refused("changed", &changed, &memory);
    assert!(err.contains("SHA-256 does not match"), "{err}");

    let corrupt = dir.path("corrupt.mem");
    std::fs::copy(&memory, &corrupt).expect("copy");
    let (snapshot, _) = Snapshot::read(&state).expect("the state reads");
    let (offset, _) = snapshot.memory.extents[0];
    let file = std::fs::File::options()
        .write(true)
        .open(&corrupt)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&file, b"\xff\xfe", offset + 100).expect("corrupt");
    let err = refused("corrupt", &state, &corrupt);
    assert!(err.contains("CRC-32"), "{err}");
    file.set_len(snapshot.memory.size / 2).expect("truncate");
    let err = refused("truncated", &state, &corrupt);
    assert!(err.contains("truncated"), "{err}");

    // A snapshot from a host with another CPU vendor: the guest's CPUID
    // says so, and the digest is right (as a copy from such a host has).
    let (mut foreign, _) = Snapshot::read(&state).expect("the state reads");
    for vcpu in &mut foreign.vcpus {
        for leaf in vcpu.cpuid.iter_mut().filter(|l| l.function == 0) {
            leaf.ebx ^= 0x0101_0101;
        }
    }
    let (bytes, _) = foreign.encode().expect("encodes");
    let foreign_path = dir.path("foreign.state");
    std::fs::write(&foreign_path, bytes).expect("write");
    let err = refused("foreign", &foreign_path, &memory);
    assert!(err.contains("this host cannot run the snapshot"), "{err}");

    // A state file names the snapshot VM's disk and socket paths; a
    // restore never opens them: it must be given its own.
    let bare_log = dir.path("bare.log");
    let bare = [
        "--restore",
        s(&state),
        "--restore-memory",
        s(&memory),
        "--serial-log",
        s(&bare_log),
    ];
    let out = wait_output(spawn(&bare));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a restore opens no path its state file names"),
        "{}",
        stderr(&out)
    );

    let other = dir.path("other.state");
    std::fs::write(&other, b"cubicle-vmm snapshot 0\n{}\nsha256 00\n").expect("write");
    let err = refused("other", &other, &memory);
    assert!(err.contains("format is 0"), "{err}");
}

fn memory_bytes(reply: &str) -> u64 {
    let info: serde_json::Value = serde_json::from_str(reply).expect("JSON");
    info["memory_bytes"].as_u64().expect("memory_bytes")
}

/// A restored VM snapshotted again as a diff writes only what it changed;
/// the diff restores over its base (and not without it), and a full
/// snapshot of the restored VM restores on its own.
#[test]
fn a_diff_snapshot_holds_only_what_changed_and_restores_over_its_base() {
    require_kvm!();
    let dir = Scratch::new("snapshot-diff");
    let (state, memory, overlay, _) = take_snapshot(&dir);
    let full = Snapshot::read(&state).expect("reads").0.memory.data_bytes();
    let mut args = restore_args(&dir, "a", &state, &memory, &overlay, 7);
    let api = dir.path("a.api");
    args.extend(["--api-socket".into(), s(&api).into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let fork = KillOnDrop(Some(spawn(&args)));
    let log = dir.path("a.log");
    wait_for_path(&api);
    let first = loop {
        if let Some(&t) = ticks(&std::fs::read_to_string(&log).unwrap_or_default()).first() {
            break t;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    wait_for_text(&log, &format!("snap guest: tick {}\n", first + 1));
    assert_eq!(request(&api, "PUT", "/vm/pause", "").0, 204);
    let (diff_state, diff_memory) = (dir.path("diff.state"), dir.path("diff.mem"));
    let body = snapshot_body(&diff_state, &diff_memory, true);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(status, 200, "{reply}");
    let changed = memory_bytes(&reply);
    println!("full snapshot {full} bytes of memory, the diff {changed}");
    assert!(changed > 0 && changed < full, "diff {changed}, full {full}");
    // A full snapshot of the restored copy too: its memory is the base
    // file's pages plus its own.
    let (again_state, again_memory) = (dir.path("again.state"), dir.path("again.mem"));
    let body = snapshot_body(&again_state, &again_memory, false);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &body);
    assert_eq!(status, 200, "{reply}");
    assert!(memory_bytes(&reply) >= changed, "{reply}");
    let caught = ticks(&std::fs::read_to_string(&log).expect("log"));
    let at_diff = dir.path("ov-at-diff");
    std::fs::copy(dir.path("a.ov"), &at_diff).expect("copy the overlay");
    assert_eq!(request(&api, "PUT", "/vm/stop", "").0, 204);
    drop(fork);

    let mut args = restore_args(&dir, "b", &diff_state, &diff_memory, &at_diff, 8);
    let without_base: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = wait_output(spawn(&without_base));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--restore-base"), "{}", stderr(&out));
    args.extend(["--restore-base".into(), s(&memory).into()]);
    let _ = std::fs::remove_file(dir.path("b.log"));
    let with_base: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = wait_output(spawn(&with_base));
    let log = std::fs::read_to_string(dir.path("b.log")).expect("log");
    assert!(out.status.success(), "{}\n{log}", stderr(&out));
    let last = *caught.last().expect("ticks before the diff");
    let seen = ticks(&log);
    assert!(
        seen.first()
            .is_some_and(|&t| t == last + 1 || t == last + 2),
        "went on from {seen:?} after {last}: {log}"
    );
    assert!(log.contains("snap guest: done"), "{log}");

    let args = restore_args(&dir, "c", &again_state, &again_memory, &at_diff, 9);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = wait_output(spawn(&args));
    let log = std::fs::read_to_string(dir.path("c.log")).expect("log");
    assert!(out.status.success(), "{}\n{log}", stderr(&out));
    assert_eq!(
        ticks(&log).first(),
        seen.first(),
        "the full copy goes on from the same tick: {log}"
    );
    assert!(log.contains("snap guest: done"), "{log}");
}

/// A tmpfs too small for the memory file, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(path: PathBuf) -> SmallDisk {
        std::fs::create_dir_all(&path).expect("mount point");
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (target, fstype, data) = (c(s(&path)), c("tmpfs"), c("size=64k"));
        // SAFETY: NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        SmallDisk(path)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(s(&self.0)).expect("no NUL");
        // SAFETY: a NUL-terminated path.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// A disk that fills up during the copy: the snapshot fails naming the
/// cause, leaves no file behind, and the VM snapshots fine elsewhere and
/// runs on.
#[test]
fn a_full_disk_fails_the_snapshot_cleanly_and_the_vm_runs_on() {
    require_kvm!();
    if !cubicle_skip::is_root() {
        return skip("needs root: the test mounts a small tmpfs");
    }
    let dir = Scratch::new("snapshot-full");
    let base = disk(&dir);
    let (log, api) = (dir.path("log"), dir.path("api"));
    let child = spawn(&[
        "--kernel",
        s(&guest("snap")),
        "--memory-mib",
        "64",
        "--cmdline",
        "console=ttyS0 cubicle.ticks=12",
        "--disk",
        &format!("id=d,path={},overlay={}", s(&base), s(&dir.path("ov"))),
        "--serial-log",
        s(&log),
        "--api-socket",
        s(&api),
    ]);
    let child = KillOnDrop(Some(child));
    wait_for_text(&log, "snap guest: tick 2\n");
    assert_eq!(request(&api, "PUT", "/vm/pause", "").0, 204);
    let full = SmallDisk::mount(dir.path("full"));
    let into = |d: &Path| snapshot_body(&d.join("s.state"), &d.join("s.mem"), false);
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &into(&full.0));
    assert_eq!(status, 500, "{reply}");
    assert!(
        reply.contains("snapshot_failed") && reply.contains("No space left on device"),
        "{reply}"
    );
    let left: Vec<_> = std::fs::read_dir(&full.0).expect("lists").collect();
    assert!(left.is_empty(), "no half snapshot: {left:?}");
    let (status, reply) = request(&api, "PUT", "/vm/snapshot", &into(&dir.0));
    assert_eq!(status, 200, "the VM snapshots fine elsewhere: {reply}");
    assert_eq!(request(&api, "PUT", "/vm/resume", "").0, 204);
    let out = child.wait();
    let log = std::fs::read_to_string(&log).expect("log");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(log.contains("snap guest: done"), "{log}");
}
