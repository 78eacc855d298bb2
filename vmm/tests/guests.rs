//! Test guests run by the real VMM binary on /dev/kvm: serial output, both
//! boot protocols, the i8042 reset, virtio-mmio discovery, virtio-blk I/O
//! driven by the guest, a vsock echo in both directions, and several vCPUs.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use common::*;

#[test]
fn serial_output_then_i8042_reset_exits_cleanly() {
    require_kvm!();
    let hello = guest("hello");
    let out = run(&[
        "--kernel",
        hello.to_str().expect("utf-8 path"),
        "--memory-mib",
        "32",
        "--cmdline",
        "console=ttyS0 marker=42",
    ]);
    let serial = stdout(&out);
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        stderr(&out)
    );
    assert!(serial.contains("hello guest: ready"), "{serial}");
    assert!(
        serial.contains("cmdline=console=ttyS0 marker=42"),
        "{serial}"
    );
    assert!(serial.contains("hello guest: resetting"), "{serial}");
    assert!(
        serial.contains("cpuid hypervisor-bit=1 signature=KVMKVMKVM"),
        "{serial}"
    );
}

#[test]
fn pvh_entry_gets_start_info() {
    require_kvm!();
    let pvh = guest("pvh");
    let out = run(&[
        "--kernel",
        pvh.to_str().expect("utf-8 path"),
        "--memory-mib",
        "16",
    ]);
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("pvh guest: start_info ok"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn bzimage_loads_with_its_setup_header() {
    require_kvm!();
    let out = run(&[
        "--kernel",
        guest("bzimage").to_str().expect("utf-8"),
        "--cmdline",
        "console=ttyS0 from=bzimage",
    ]);
    let serial = stdout(&out);
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        stderr(&out)
    );
    assert!(
        serial.contains("cmdline=console=ttyS0 from=bzimage"),
        "{serial}"
    );
}

#[test]
fn serial_log_goes_to_a_file() {
    require_kvm!();
    let dir = Scratch::new("serial-log");
    let log = dir.path("console.log");
    let out = run(&[
        "--kernel",
        guest("hello").to_str().expect("utf-8"),
        "--serial-log",
        log.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&log).expect("serial log written");
    assert!(text.contains("hello guest: ready"), "{text}");
}

#[test]
fn four_vcpus_all_come_up_through_init_sipi() {
    require_kvm!();
    let smp = guest("smp");
    let out = run(&[
        "--kernel",
        smp.to_str().expect("utf-8"),
        "--vcpus",
        "4",
        "--cmdline",
        "cubicle.aps=3",
    ]);
    let serial = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(serial.contains("smp guest: aps up=3"), "{serial}");
}

fn image(dir: &Scratch, name: &str, fill: &[u8]) -> String {
    let path = dir.path(name);
    let data: Vec<u8> = fill.iter().copied().cycle().take(8 * 512).collect();
    std::fs::write(&path, data).expect("write disk image");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn virtio_mmio_probe_sees_every_device() {
    require_kvm!();
    let dir = Scratch::new("probe");
    let a = image(&dir, "a.img", b"x");
    let uds = dir.path("v.sock");
    let out = run(&[
        "--kernel",
        guest("probe").to_str().expect("utf-8"),
        "--disk",
        &format!("id=a,path={a},ro"),
        "--vsock",
        &format!("cid=7,uds={}", uds.display()),
    ]);
    let serial = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(serial.contains("probe guest: devices=2"), "{serial}");
    assert!(
        serial.contains("virtio-mmio 0xd0000000 irq=5 magic=ok version=2 device=2"),
        "{serial}"
    );
    assert!(
        serial.contains("virtio-mmio 0xd0001000 irq=6 magic=ok version=2 device=19"),
        "{serial}"
    );
    assert!(!uds.exists(), "the vsock socket is removed at exit");
}

#[test]
fn virtio_blk_read_write_readonly_and_copy_on_write() {
    require_kvm!();
    let dir = Scratch::new("blk");
    let rw = image(&dir, "rw.img", b"sector-zero-data");
    let ro = image(&dir, "ro.img", b"read-only-base..");
    let base = image(&dir, "base.img", b"cow-base-sectors");
    let overlay = dir.path("overlay.img");
    let out = run(&[
        "--kernel",
        guest("blk").to_str().expect("utf-8"),
        "--disk",
        &format!("id=rw,path={rw}"),
        "--disk",
        &format!("id=ro,path={ro},ro"),
        "--disk",
        &format!("id=cow,path={base},overlay={}", overlay.display()),
    ]);
    let serial = stdout(&out);
    assert!(
        out.status.success(),
        "exit {:?}: {}\n{serial}",
        out.status,
        stderr(&out)
    );
    assert!(
        serial.contains("blk0: sector0=sector-zero-data"),
        "{serial}"
    );
    assert!(serial.contains("blk0: write+readback ok"), "{serial}");
    assert!(
        serial.contains("blk1: write rejected (read-only)"),
        "{serial}"
    );
    assert!(
        serial.contains("blk2: sector0=cow-base-sectors"),
        "{serial}"
    );
    assert!(serial.contains("blk2: write+readback ok"), "{serial}");
    let rw_data = std::fs::read(&rw).expect("read rw image");
    assert_eq!(&rw_data[512..528], b"written-by-guest");
    let ro_data = std::fs::read(&ro).expect("read ro image");
    assert_eq!(&ro_data[512..528], b"read-only-base..");
    let base_data = std::fs::read(&base).expect("read base image");
    assert_eq!(
        &base_data[512..528],
        b"cow-base-sectors",
        "the base is never written"
    );
    let over = std::fs::read(&overlay).expect("read overlay");
    assert_eq!(&over[512..528], b"written-by-guest");
    assert_eq!(
        &over[0..16],
        b"cow-base-sectors",
        "the rest of the chunk was copied up"
    );
}

#[test]
fn vsock_streams_both_ways_with_echo() {
    require_kvm!();
    let dir = Scratch::new("vsock");
    let uds = dir.path("v.sock");
    let guest_port = UnixListener::bind(dir.path("v.sock_5000")).expect("listen for the guest");
    let child = vmm()
        .args(["run", "--kernel", guest("vsock").to_str().expect("utf-8")])
        .args(["--vsock", &format!("cid=3,uds={}", uds.display())])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn VMM");
    let child = KillOnDrop(Some(child));
    // Guest-initiated stream: the guest greets, the host echoes.
    let (mut from_guest, _) = guest_port.accept().expect("guest connects to <uds>_5000");
    let mut greeting = [0u8; 16];
    from_guest
        .read_exact(&mut greeting)
        .expect("guest greeting");
    assert_eq!(&greeting, b"hello from guest");
    from_guest.write_all(&greeting).expect("echo to guest");
    // Host-initiated stream: CONNECT, OK, then the guest echoes.
    wait_for_path(&uds);
    let mut host = UnixStream::connect(&uds).expect("connect to the vsock socket");
    host.write_all(b"CONNECT 1234\n").expect("handshake");
    let mut ok = Vec::new();
    let mut byte = [0u8; 1];
    while byte[0] != b'\n' {
        host.read_exact(&mut byte).expect("handshake reply");
        ok.push(byte[0]);
    }
    assert!(ok.starts_with(b"OK "), "{}", String::from_utf8_lossy(&ok));
    host.write_all(b"ping from host").expect("send");
    let mut echo = [0u8; 14];
    host.read_exact(&mut echo).expect("echo");
    assert_eq!(&echo, b"ping from host");
    // Bulk data through the guest's 1 KiB buffers exercises credit flow
    // control both ways.
    let bulk: Vec<u8> = (0..256 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let mut writer = host.try_clone().expect("clone stream");
    let expected = bulk.clone();
    let sender = std::thread::spawn(move || writer.write_all(&bulk));
    let mut back = vec![0u8; expected.len()];
    host.read_exact(&mut back).expect("bulk echo");
    sender.join().expect("sender thread").expect("bulk send");
    assert!(back == expected, "bulk echo differs");
    drop(host);
    let out = child.wait();
    let serial = stdout(&out);
    assert!(out.status.success(), "{}\n{serial}", stderr(&out));
    assert!(
        serial.contains("vsock guest-initiated echo: hello from guest"),
        "{serial}"
    );
    assert!(
        serial.contains("vsock host stream: ping from host"),
        "{serial}"
    );
    assert!(serial.contains("vsock guest: done"), "{serial}");
    assert!(!uds.exists(), "socket removed at exit");
}

#[test]
fn connect_to_a_port_nobody_listens_on_is_refused() {
    require_kvm!();
    let dir = Scratch::new("vsock-refused");
    let uds = dir.path("v.sock");
    let child = vmm()
        .args(["run", "--kernel", guest("vsock").to_str().expect("utf-8")])
        .args(["--vsock", &format!("cid=3,uds={}", uds.display())])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn VMM");
    // Nobody listens on <uds>_5000: the guest's stream is reset and it fails loudly.
    let out = wait_output(child);
    assert!(
        stdout(&out).contains("FAIL: host refused the guest-initiated stream"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn host_connect_to_a_guest_without_a_driver_is_closed() {
    require_kvm!();
    let dir = Scratch::new("vsock-timeout");
    let uds = dir.path("v.sock");
    let api = dir.path("api.sock");
    let child = vmm()
        .args(["run", "--kernel", guest("hello").to_str().expect("utf-8")])
        .args(["--cmdline", "console=ttyS0 cubicle.idle"])
        .args(["--vsock", &format!("cid=3,uds={}", uds.display())])
        .arg("--api-socket")
        .arg(&api)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn VMM");
    let child = KillOnDrop(Some(child));
    wait_for_path(&uds);
    wait_for_path(&api);
    let mut host = UnixStream::connect(&uds).expect("connect");
    host.write_all(b"CONNECT 1234\n").expect("handshake");
    // The guest never answers: the VMM gives up and closes the stream.
    let mut reply = Vec::new();
    host.read_to_end(&mut reply)
        .expect("stream closed, not reset");
    assert!(
        reply.is_empty(),
        "no OK without a guest: {}",
        String::from_utf8_lossy(&reply)
    );
    let mut api_conn = UnixStream::connect(&api).expect("API");
    api_conn
        .write_all(b"PUT /vm/stop HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        .expect("stop");
    let mut response = String::new();
    api_conn.read_to_string(&mut response).expect("stop reply");
    assert!(response.starts_with("HTTP/1.1 204"), "{response}");
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
}
