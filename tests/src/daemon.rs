//! A `cubicle serve` process under test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

/// The directory holding the workspace's binaries (`target/debug`): the
/// test binary's own folder, or its parent for tests in `deps/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let dir = exe.parent().expect("a binary lives in a folder");
    if dir.ends_with("deps") {
        dir.parent().expect("deps/ has a parent").to_owned()
    } else {
        dir.to_owned()
    }
}

/// Test daemons hand out uids from here up, above the range a real daemon
/// on this host starts from (1 600 000 and the next 65 536).
const TEST_UID_FIRST: u32 = 2_000_000;
/// Uids set aside for one daemon (it takes the lowest free ones).
const UIDS_PER_DAEMON: u32 = 64;
/// Daemons one test process starts before it reuses a range.
const DAEMONS_PER_PROCESS: u32 = 256;
/// Test processes (by pid) before two of them share ranges.
const PROCESSES: u32 = 1024;

/// A `--uid-base` of its own for each daemon a test starts. The daemon's
/// host-wide uid leases already keep two live workspaces off one uid, but
/// every daemon takes the lowest free uid from its base: with one shared
/// base, a uid a test just freed (and now checks has no processes left)
/// would at once go to another test's workspace.
fn fresh_uid_base() -> String {
    static STARTED: AtomicU32 = AtomicU32::new(0);
    let daemon = STARTED.fetch_add(1, Ordering::Relaxed) % DAEMONS_PER_PROCESS;
    let process = std::process::id() % PROCESSES;
    let range = process * DAEMONS_PER_PROCESS + daemon;
    (TEST_UID_FIRST + range * UIDS_PER_DAEMON).to_string()
}

/// Inside the nested test host a create asks for one CPU unless it says
/// otherwise (a microVM gets a vCPU per CPU): there, a guest with two
/// vCPUs triple-faulted within a minute of starting the desktop, every
/// time (QEMU 7.2's emulated nested SVM; one vCPU runs it fine). Outside
/// it, and for a body that is not a JSON object, the body is unchanged.
fn one_vcpu_inside_nested(body: &str) -> String {
    let Ok(Value::Object(mut create)) = serde_json::from_str::<Value>(body) else {
        return body.to_owned();
    };
    if !crate::nested() {
        return body.to_owned();
    }
    let limits = create
        .entry("limits")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Value::Object(limits) = limits {
        limits.entry("cpus").or_insert(Value::from(1));
    }
    Value::Object(create).to_string()
}

/// A running daemon and how to reach it.
pub struct Daemon {
    child: Child,
    pub base: String,
    pub token: String,
    pub data_dir: PathBuf,
    http: reqwest::Client,
}

impl Daemon {
    /// Starts `cubicle serve` on `data_dir` with `extra` arguments. `token`
    /// is the admin token when the data dir was used before (it is printed
    /// only at first start). Each daemon gets a uid range of its own unless
    /// `extra` names a `--uid-base`.
    pub fn start(data_dir: &Path, token: Option<&str>, extra: &[&str]) -> anyhow::Result<Self> {
        Self::start_as(&["serve"], data_dir, token, extra)
    }

    /// [`Daemon::start`] of another `cubicle` command that is `serve` with
    /// more (`node` and its cluster arguments).
    pub fn start_as(
        command_line: &[&str],
        data_dir: &Path,
        token: Option<&str>,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_in(None, command_line, data_dir, token, extra)
    }

    /// [`Daemon::start_as`] inside the network namespace `netns` (entered
    /// with `nsenter --net`, which execs the daemon: its pid is the
    /// daemon's; not `ip netns exec`, which also mounts a sysfs of its own
    /// without the cgroup hierarchy). `extra` may name its own `--listen`.
    pub fn start_in(
        netns: Option<&str>,
        command_line: &[&str],
        data_dir: &Path,
        token: Option<&str>,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        remove_at_exit(data_dir);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.with_extension("daemon.log"))?;
        let mut command = match netns {
            Some(netns) => {
                let mut command = Command::new("nsenter");
                command
                    .arg(format!("--net=/run/netns/{netns}"))
                    .arg("--")
                    .arg(bin_dir().join("cubicle"));
                command
            }
            None => Command::new(bin_dir().join("cubicle")),
        };
        command.args(command_line).arg("--data-dir").arg(data_dir);
        if !extra.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(extra);
        if !extra.contains(&"--uid-base") {
            command.args(["--uid-base", &fresh_uid_base()]);
        }
        // The backend matrix: `CUBICLE_TEST_BACKEND` (scripts/test-nested
        // sets `microvm`) runs a test's daemon on that backend.
        if let Ok(backend) = std::env::var("CUBICLE_TEST_BACKEND")
            && !extra.contains(&"--backend")
        {
            command.args(["--backend", &backend]);
        }
        // Inside the nested test host QEMU emulates the CPU: a desktop
        // takes minutes to come up there (a guard, not a timing claim).
        if crate::nested() && !extra.contains(&"--ready-timeout") {
            command.args(["--ready-timeout", "1200"]);
        }
        // And its display takes as much longer to finish a live view's
        // RFB handshake (twenty times the default, as `guard` scales).
        if crate::nested() && !extra.contains(&"--display-handshake-seconds") {
            command.args(["--display-handshake-seconds", "200"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting cubicle serve (run `cargo build --workspace` first)")?;
        let stdout = child.stdout.take().context("daemon stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut admin = token.map(str::to_owned);
        let mut base = None;
        for line in lines.by_ref() {
            let line = line?;
            if let Some(secret) = line.strip_prefix("admin token (shown once, store it now): ") {
                admin = Some(secret.to_owned());
            }
            if let Some(url) = line.strip_prefix("listening on ") {
                base = Some(url.to_owned());
                break;
            }
        }
        // Keep draining stdout so the daemon never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let Some(base) = base else {
            let status = child.wait()?;
            // Its own words, not a path: inside the nested host the file
            // is gone with the L1.
            let log = data_dir.with_extension("daemon.log");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "cubicle serve exited ({status}) before listening; {} ends:\n{}",
                log.display(),
                tail.join("\n")
            );
        };
        Ok(Self {
            child,
            base,
            token: admin.context("no admin token printed and none given")?,
            data_dir: data_dir.to_owned(),
            http: reqwest::Client::builder()
                .timeout(crate::guard(Duration::from_secs(180)))
                .build()?,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The WebSocket URL of `path` with the token as a query parameter.
    pub fn ws_url(&self, path: &str) -> String {
        format!(
            "{}{path}?access_token={}",
            self.base.replacen("http://", "ws://", 1),
            self.token
        )
    }

    /// Sends a request with the admin token; returns status and JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, Value)> {
        self.call_as(Some(&self.token), method, path, body).await
    }

    /// Sends a request with `token` (or none).
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, Value)> {
        let one_vcpu = (method == reqwest::Method::POST && path == "/v1/workspaces")
            .then(|| body.map(one_vcpu_inside_nested))
            .flatten();
        let body = one_vcpu.as_deref().or(body);
        let mut request = self.http.request(method, self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?
        };
        Ok((status, json))
    }

    /// Creates a workspace with `body` and returns it; panics (failing the
    /// test) unless it was created and ready.
    pub async fn create_workspace(&self, body: &str) -> Value {
        let (status, ws) = self
            .call(reqwest::Method::POST, "/v1/workspaces", Some(body))
            .await
            .expect("POST /v1/workspaces answers");
        assert_eq!(
            status,
            201,
            "create failed: {ws}{}",
            self.microvm_consoles()
        );
        assert_eq!(ws["state"], "running", "{ws}");
        ws
    }

    /// The tail of every microVM's guest console in this data dir (what a
    /// failed boot printed), for failure messages; empty for jails.
    pub fn microvm_consoles(&self) -> String {
        let Ok(dirs) = std::fs::read_dir(self.data_dir.join("workspaces")) else {
            return String::new();
        };
        let mut out = String::new();
        for dir in dirs.flatten() {
            let log = dir.path().join("vm/serial.log");
            if let Ok(bytes) = std::fs::read(&log) {
                let tail = &bytes[bytes.len().saturating_sub(6000)..];
                out.push_str(&format!(
                    "\n--- {} (tail) ---\n{}",
                    log.display(),
                    String::from_utf8_lossy(tail)
                ));
            }
        }
        out
    }

    /// The guest channel socket of workspace `id`: the microVM's vsock
    /// socket (`chan/`) if there is one, else the jail's, which the daemon
    /// binds in its root-only `host/` directory.
    pub fn channel_socket(&self, id: &str) -> PathBuf {
        let dir = self.workspace_dir(id);
        let vm = dir.join("chan/guest.sock");
        if vm.exists() {
            vm
        } else {
            dir.join("host/guest.sock")
        }
    }

    /// The workspace directory of `id`.
    pub fn workspace_dir(&self, id: &str) -> PathBuf {
        self.data_dir.join("workspaces").join(id)
    }

    /// Its process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid fits an i32")
    }

    /// Waits up to `limit` for the daemon to end by itself; its exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// What the daemon has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("daemon.log")).unwrap_or_default()
    }

    /// `kill -9` the daemon, as a crash would.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the daemon as a service manager or an upgrade does (SIGTERM)
    /// and waits for it: its workspaces keep running under their shims.
    pub fn terminate(&mut self) {
        self.signal("-TERM");
    }

    /// Stops the daemon as Ctrl-C does (SIGINT) and waits for it: it stops
    /// every workspace first. What each test's daemon gets at its end.
    pub fn interrupt(&mut self) {
        self.signal("-INT");
    }

    fn signal(&mut self, signal: &str) {
        let Ok(pid) = i32::try_from(self.child.id()) else {
            return;
        };
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status();
        // Stopping every workspace takes a grace period each.
        for _ in 0..600 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill9();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A test failing with a daemon up: what the daemon and its
        // microVMs' consoles said last goes with the failure (libtest shows
        // it only for failed tests), before the data dir is gone.
        if std::thread::panicking() {
            let log = std::fs::read(self.data_dir.with_extension("daemon.log")).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(8000)..];
            eprintln!(
                "--- the daemon's log (tail) ---\n{}{}",
                String::from_utf8_lossy(tail),
                self.microvm_consoles()
            );
        }
        self.interrupt();
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(self.data_dir.with_extension("daemon.log"));
        }
    }
}

/// The temporary data dirs of this test process's daemons.
static DATA_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes `data_dir` (and its daemon log) when the test process exits, if
/// it is a temporary dir and still there. A test's own `TempDir` is dropped
/// before its daemon when the two are bound in that order (a destructured
/// `let Owned { daemon, _data, .. }` drops `_data` first): its removal then
/// meets the running workspace's disk mount, fails quietly, and the whole
/// dir stayed (about 90 MB a test, 11 GB a run of the host tier, until the
/// disk was full). At exit every daemon has stopped and unmounted.
fn remove_at_exit(data_dir: &Path) {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    extern "C" fn remove_leftovers() {
        let dirs = std::mem::take(&mut *DATA_DIRS.lock().unwrap_or_else(|p| p.into_inner()));
        for dir in dirs {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(dir.with_extension("daemon.log"));
        }
    }
    if !data_dir.starts_with(std::env::temp_dir()) {
        return;
    }
    // SAFETY: atexit takes a plain function that needs no state but a
    // static; it is registered once.
    REGISTER.call_once(|| unsafe {
        libc::atexit(remove_leftovers);
    });
    DATA_DIRS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(data_dir.to_owned());
}
