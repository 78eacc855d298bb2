//! The `cubicle serve` the benchmark measures: this same binary, started as
//! a child on a data dir of its own, reached over HTTP with its admin token.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

/// A running daemon and how to reach it.
pub struct Daemon {
    child: Child,
    pub base: String,
    pub token: String,
    pub data_dir: PathBuf,
    pub http: reqwest::Client,
    uid_base: u32,
    extra: Vec<String>,
}

impl Daemon {
    /// Whether it was started with `--share-memory`.
    pub fn shares_memory(&self) -> bool {
        self.extra.iter().any(|a| a == "--share-memory")
    }

    /// Starts `cubicle serve` on `data_dir` with `extra` arguments and waits
    /// until it listens.
    pub fn start(data_dir: &Path, uid_base: u32, extra: &[String]) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        Self::spawn(data_dir, uid_base, extra, None)
    }

    /// Stops the daemon as an upgrade does (SIGTERM: its workspaces keep
    /// running) and starts it again on the same data dir; returns how long
    /// the new one took from its start until it listened, every running
    /// workspace re-attached.
    pub fn restart(&mut self) -> anyhow::Result<Duration> {
        self.signal("-TERM");
        let started = std::time::Instant::now();
        let next = Self::spawn(
            &self.data_dir,
            self.uid_base,
            &self.extra,
            Some(self.token.clone()),
        )?;
        let took = started.elapsed();
        *self = next;
        Ok(took)
    }

    fn spawn(
        data_dir: &Path,
        uid_base: u32,
        extra: &[String],
        token: Option<String>,
    ) -> anyhow::Result<Self> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("daemon.log"))?;
        let exe = std::env::current_exe().context("the cubicle binary's path")?;
        if exe.to_string_lossy().ends_with(" (deleted)") {
            bail!(
                "this cubicle binary was replaced while the bench ran (a rebuild?): \
                 run the bench again, or from a copy of the binaries"
            );
        }
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--uid-base",
                &uid_base.to_string(),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting cubicle serve")?;
        let stdout = child.stdout.take().context("the daemon's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let (mut token, mut base) = (token, None);
        for line in lines.by_ref() {
            let line = line?;
            if let Some(secret) = line.strip_prefix("admin token (shown once, store it now): ") {
                token = Some(secret.to_owned());
            }
            if let Some(url) = line.strip_prefix("listening on ") {
                base = Some(url.to_owned());
                break;
            }
        }
        // Keep draining, so the daemon never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let Some(base) = base else {
            let status = child.wait()?;
            bail!(
                "cubicle serve exited ({status}) before listening; see {}",
                data_dir.join("daemon.log").display()
            );
        };
        Ok(Self {
            child,
            base,
            token: token.context("the daemon printed no admin token (a used data dir?)")?,
            data_dir: data_dir.to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()?,
            uid_base,
            extra: extra.to_vec(),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `host:port` of the gateway.
    pub fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// Sends a request with the admin token; status and JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method, self.url(path))
            .bearer_auth(&self.token);
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
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, json))
    }

    /// The daemon's own process.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
    }

    /// The folder of workspace `id`.
    pub fn workspace_dir(&self, id: &str) -> PathBuf {
        self.data_dir.join("workspaces").join(id)
    }

    /// The guest channel socket of workspace `id` (microVM or jail).
    pub fn channel_socket(&self, id: &str) -> PathBuf {
        let dir = self.workspace_dir(id);
        let vm = dir.join("chan/guest.sock");
        if vm.exists() {
            vm
        } else {
            dir.join("host/guest.sock")
        }
    }

    /// Stops the daemon as Ctrl-C does (SIGINT: it stops its workspaces)
    /// and waits.
    pub fn stop(&mut self) {
        self.signal("-INT");
    }

    fn signal(&mut self, signal: &str) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..600 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}
