//! Helpers for the VMM's integration tests: the built test guests, the
//! `cubicle-vmm` binary, scratch directories, and a hang guard.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A test guest built by build.rs.
pub fn guest(name: &str) -> PathBuf {
    Path::new(env!("CUBICLE_TEST_GUESTS")).join(name)
}

/// The VMM binary.
pub fn vmm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cubicle-vmm"))
}

/// A fresh scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("cubicle-vmm-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether /dev/kvm is usable here.
pub fn kvm_available() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

// Each test binary includes this module and uses a part of it.
#[allow(unused_imports)]
pub use cubicle_skip::{kvm_required, skip, skip_without_kvm};

/// Why this host cannot run the test guests on KVM, if it cannot.
pub fn no_kvm() -> Option<&'static str> {
    (!kvm_available()).then_some("/dev/kvm is not usable here (missing, or no permission)")
}

/// Returns from the calling test as skipped (or fails it, see
/// [`skip_without_kvm`]) when /dev/kvm is not usable.
#[macro_export]
macro_rules! require_kvm {
    () => {
        if let Some(reason) = $crate::common::no_kvm() {
            return $crate::common::skip_without_kvm(reason);
        }
    };
}

/// A hang guard of `secs` seconds, ten times longer inside the nested test
/// host (`scripts/nested`), where QEMU emulates the CPU: a guard, never a
/// timing assertion.
pub fn guard(secs: u64) -> Duration {
    let nested = std::env::var_os("CUBICLE_NESTED").is_some();
    Duration::from_secs(if nested { secs * 10 } else { secs })
}

/// Waits for `child`, killing it if it hangs (a guard, not a timing
/// assertion). Its stdout and stderr are read as they come: a guest that
/// prints more than a pipe holds (a stock kernel's boot log can) would
/// otherwise block on its serial port and look hung.
pub fn wait_output(mut child: Child) -> Output {
    fn drain(
        pipe: Option<impl std::io::Read + Send + 'static>,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + guard(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait on VMM") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break reap_killed(&mut child);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Waits for a VMM that was just sent SIGKILL. One that does not go within
/// the guard has a thread the kernel holds (in KVM_RUN, say): waiting on
/// would hang the test run, so the test fails here with what the kernel
/// says each of its threads waits in.
fn reap_killed(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + guard(10);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait on the killed VMM") {
            return status;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = child.id();
    let mut threads = String::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let read = |name: &str| std::fs::read_to_string(task.path().join(name)).unwrap_or_default();
        threads.push_str(&format!(
            "  thread {}: {} wchan={} stack:\n{}\n",
            task.file_name().to_string_lossy(),
            read("stat").trim(),
            read("wchan"),
            read("stack")
        ));
    }
    panic!("the VMM (pid {pid}) hung past its guard and did not end on SIGKILL:\n{threads}");
}

/// Runs the VMM with `args`, capturing stdout (the serial console) and stderr.
pub fn run(args: &[&str]) -> Output {
    let child = vmm()
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cubicle-vmm");
    wait_output(child)
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Kills the child if a test panics before waiting for it, so no VMM
/// outlives its test.
pub struct KillOnDrop(pub Option<Child>);

impl KillOnDrop {
    /// Waits for the child (hang-guarded) and returns its output.
    pub fn wait(mut self) -> Output {
        wait_output(self.0.take().expect("child present until waited"))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A console log as text (a kernel's log may hold bytes that are not
/// UTF-8; they must not hide the rest).
pub fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Polls until `path` holds `text` (hang-guarded).
pub fn wait_for_text(path: &Path, text: &str) {
    let deadline = Instant::now() + guard(30);
    while !read_lossy(path).contains(text) {
        assert!(
            Instant::now() < deadline,
            "{} never contained {text:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls until `path` exists (hang-guarded).
pub fn wait_for_path(path: &Path) {
    let deadline = Instant::now() + guard(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One request to the VMM's API socket: the status and the body.
pub fn request(socket: &Path, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).expect("connect to API");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: vmm\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send request");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read reply");
    let status = reply
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The body of `PUT /vm/snapshot` (JSON from serde, so any path is quoted right).
pub fn snapshot_body(state: &Path, memory: &Path, diff: bool) -> String {
    serde_json::json!({ "state_path": state, "memory_path": memory, "diff": diff }).to_string()
}
