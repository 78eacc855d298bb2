//! What `cubicle serve` tells its operator at start, and what it keeps of
//! it (README "Two commands" and "Audit"): the host line and the backend,
//! the admin token printed once at first start with only its hash stored,
//! the audit public key printed at every start (the same key, made once,
//! 0600 on disk, the one `GET /v1/audit/key` gives any token), and a state
//! database no one but root reads.
//!
//! The daemon is started by hand here, not with [`cubicle_tests::Daemon`],
//! because these lines come before "listening on" and the fixture keeps
//! only the token and the address.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cubicle_tests::daemon::bin_dir;
use reqwest::Method;
use serde_json::Value;

/// A `cubicle serve` started here: what it printed before it listened.
struct Started {
    child: Child,
    lines: Vec<String>,
    base: String,
}

impl Started {
    /// Starts `cubicle serve` on `data` and collects its stdout up to and
    /// including "listening on ...".
    fn on(data: &Path) -> Self {
        // A uid range no fixture daemon uses (they start at 2 000 000); no
        // workspace is made, so none is leased.
        let uid_base = (3_000_000 + (std::process::id() % 1000) * 64).to_string();
        let mut child = Command::new(bin_dir().join("cubicle"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data)
            .args(["--listen", "127.0.0.1:0", "--uid-base", &uid_base])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cubicle serve starts (cargo build --workspace first)");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Sends every line, then keeps draining so the daemon never
            // blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut started = Self {
            child,
            lines: Vec::new(),
            base: String::new(),
        };
        loop {
            let line = rx
                .recv_timeout(cubicle_tests::guard(Duration::from_secs(120)))
                .unwrap_or_else(|_| {
                    panic!(
                        "cubicle serve did not say it listens within 120 s; it said {:#?}",
                        started.lines
                    )
                });
            if let Some(url) = line.strip_prefix("listening on ") {
                started.base = url.to_owned();
                started.lines.push(line);
                return started;
            }
            started.lines.push(line);
        }
    }

    /// The rest of the line that starts with `prefix`, if one does; panics
    /// if more than one does.
    fn said(&self, prefix: &str) -> Option<&str> {
        let found: Vec<&str> = self
            .lines
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .collect();
        assert!(found.len() <= 1, "{prefix:?} said twice: {:#?}", self.lines);
        found.first().copied()
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let response = reqwest::Client::new()
            .request(Method::GET, format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

impl Drop for Started {
    /// Ctrl-C, as at the terminal; then wait for it.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        for _ in 0..300 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Files under `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && std::fs::read(&path)
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_token_is_shown_once_and_the_audit_key_at_every_start() {
    let data = tempfile::tempdir().unwrap();
    let first = Started::on(data.path());

    // What the host offers, and which backend that gives, one line each.
    let host = first.said("host: ").expect("a host line");
    assert!(
        host.contains("workspaces use the jail backend") || host.contains("microvm backend"),
        "the host line says what workspaces run on: {host}"
    );
    assert!(first.said("backend: ").is_some(), "{:#?}", first.lines);

    // The admin token, printed once; it works and is an admin's.
    let secret = first
        .said("admin token (shown once, store it now): ")
        .expect("the admin token at first start")
        .to_owned();
    let (status, me) = first.get(&secret, "/v1/me").await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["role"], "admin", "{me}");

    // The audit key: printed, 32 bytes of hex, the one the API gives any
    // token (an agent's here), its private half 0600.
    let key = first
        .said("audit public key: ")
        .expect("the audit public key")
        .to_owned();
    assert_eq!(key.len(), 64, "{key}");
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    let made = reqwest::Client::new()
        .post(format!("{}/v1/tokens", first.base))
        .bearer_auth(&secret)
        .json(&serde_json::json!({"name": "bot", "role": "agent"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
    let agent: Value = made.json().await.unwrap();
    let agent = agent["secret"].as_str().unwrap().to_owned();
    let (status, served) = first.get(&agent, "/v1/audit/key").await;
    assert_eq!(status, 200, "{served}");
    assert_eq!(served["public_key"], key.as_str(), "{served}");
    assert_eq!(mode(&data.path().join("audit/signing.key")), 0o600);
    assert_eq!(mode(&data.path().join("cubicle.db")), 0o600);

    // Only the hash is stored: neither secret is anywhere in the data dir
    // (the database, its WAL, logs, everything), nor its random part.
    for token in [&secret, &agent] {
        let random = token.strip_prefix("cubicle_").unwrap_or(token);
        let holding = files_holding(data.path(), random.as_bytes());
        assert!(
            holding.is_empty(),
            "a token's secret is stored in {holding:?}"
        );
    }
    drop(first);

    // The next start on the same data dir prints no token, the same key,
    // and the first token still works.
    let second = Started::on(data.path());
    assert_eq!(
        second.said("admin token"),
        None,
        "a second admin token was printed: {:#?}",
        second.lines
    );
    assert_eq!(
        second.said("audit public key: "),
        Some(key.as_str()),
        "the audit key changed between starts: {:#?}",
        second.lines
    );
    let (status, me) = second.get(&secret, "/v1/me").await;
    assert_eq!((status, &me["role"]), (200, &Value::from("admin")), "{me}");
}
