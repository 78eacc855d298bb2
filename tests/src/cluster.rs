//! A cluster on this machine, for the multi-node rig: one PostgreSQL of the
//! test's own (`cubicle_runtime::cluster::temp_postgres`), `cubicle edge`
//! replicas and `cubicle node` daemons (each a [`Daemon`] run as `node`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::daemon::{Daemon, bin_dir};
use crate::netns::Host;

/// The edges' key pair, as `cubicle edge-key` prints it.
pub struct Keys {
    pub private: String,
    pub public: String,
}

/// A new key pair from `cubicle edge-key`.
pub fn edge_keys() -> Keys {
    let out = Command::new(bin_dir().join("cubicle"))
        .arg("edge-key")
        .output()
        .expect("cubicle edge-key runs");
    assert!(out.status.success(), "cubicle edge-key: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_else(|| panic!("cubicle edge-key printed no {name}: {text}"))
            .to_owned()
    };
    Keys {
        private: value("CUBICLE_EDGE_KEY="),
        public: value("CUBICLE_EDGE_PUBLIC_KEY="),
    }
}

/// Starts `cubicle node` `name` on `data_dir`, in the cluster at `url`,
/// heartbeating every 200 ms, with `extra` `serve` arguments; inside
/// `host`'s namespace listening on its address, if given. `token`: its
/// local admin token, when the data dir was used before.
pub fn node(
    host: Option<&Host>,
    data_dir: &Path,
    url: &str,
    keys: &Keys,
    name: &str,
    token: Option<&str>,
    extra: &[&str],
) -> anyhow::Result<Daemon> {
    let mut command = vec![
        "node",
        "--cluster-url",
        url,
        "--node-name",
        name,
        "--edge-public-key",
        &keys.public,
    ];
    if !extra.contains(&"--heartbeat-ms") {
        command.extend(["--heartbeat-ms", "200"]);
    }
    match host {
        Some(host) => {
            let listen = format!("{}:7878", host.address);
            let mut extra = extra.to_vec();
            extra.extend(["--listen", &listen]);
            Daemon::start_in(Some(&host.netns), &command, data_dir, token, &extra)
        }
        None => Daemon::start_as(&command, data_dir, token, extra),
    }
}

/// A running `cubicle edge`.
pub struct Edge {
    child: Child,
    pub base: String,
    pub name: String,
    log: tempfile::NamedTempFile,
    http: reqwest::Client,
}

impl Edge {
    /// Starts edge `name`; the admin token if it made the cluster's first.
    pub fn start(
        url: &str,
        keys: &Keys,
        name: &str,
        deadline_ms: u64,
    ) -> anyhow::Result<(Self, Option<String>)> {
        let log = tempfile::NamedTempFile::new()?;
        let mut child = Command::new(bin_dir().join("cubicle"))
            .args(["edge", "--cluster-url", url, "--listen", "127.0.0.1:0"])
            .args(["--edge-key", &keys.private, "--name", name])
            .args(["--deadline-ms", &deadline_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen()?)
            .spawn()
            .context("starting cubicle edge (run `cargo build --workspace` first)")?;
        let stdout = child.stdout.take().context("edge stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut admin = None;
        let mut base = None;
        for line in lines.by_ref() {
            let line = line?;
            if let Some(secret) = line.strip_prefix("admin token (shown once, store it now): ") {
                admin = Some(secret.to_owned());
            }
            if let Some((_, url)) = line.split_once(" listening on ") {
                base = Some(url.to_owned());
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let Some(base) = base else {
            let status = child.wait()?;
            bail!(
                "cubicle edge exited ({status}) before listening: {}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        };
        let edge = Self {
            child,
            base,
            name: name.to_owned(),
            log,
            http: reqwest::Client::builder()
                .timeout(crate::guard(Duration::from_secs(180)))
                .build()?,
        };
        Ok((edge, admin))
    }

    /// Sends a request with `token`; its status and JSON body.
    pub async fn call(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        call(&self.http, &self.base, token, method, path, body).await
    }

    /// A handle on the same edge for another task (it does not own the
    /// process: dropping it stops nothing).
    pub fn attach(edge: &Edge) -> EdgeClient {
        EdgeClient {
            base: edge.base.clone(),
            http: edge.http.clone(),
        }
    }

    /// A GET's body as bytes (an export); panics unless 200.
    pub async fn bytes(&self, token: &str, path: &str) -> Vec<u8> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("the edge answers");
        assert_eq!(response.status(), 200, "GET {path}");
        response.bytes().await.expect("a body").to_vec()
    }

    /// What the edge logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

/// Requests to an edge from another task.
pub struct EdgeClient {
    base: String,
    http: reqwest::Client,
}

impl EdgeClient {
    /// As [`Edge::call`].
    pub async fn call(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        call(&self.http, &self.base, token, method, path, body).await
    }
}

async fn call(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&str>,
) -> (u16, Value) {
    let mut request = http
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = request.send().await.expect("the edge answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("the edge's answer is text");
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, json)
}

impl Drop for Edge {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- edge {} log ---\n{}", self.name, self.log());
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill on our own child's pid, which we have not reaped.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let _ = self.child.wait();
    }
}
