//! The commands for people at a terminal, against a running gateway's REST
//! API (`--url`/`--token`, or `CUBICLE_URL`/`CUBICLE_TOKEN`): workspaces,
//! approvals, downloads and the event log. Human output by default, the
//! API's JSON with `--json`.
//!
//! Exit codes scripts can use: 0 done; 1 any other failure; 2 bad usage
//! (clap's); 3 not found; 4 the token is missing, wrong or not allowed;
//! 5 held for an operator's approval (the approval is printed); 6 a
//! conflict (paused, an operator holds control, not running); 7 the
//! gateway cannot be reached. `ws exec` exits with the command's own code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

/// Where the gateway is and who is asking.
#[derive(Debug, Args)]
pub struct Remote {
    /// The gateway's base URL.
    #[arg(
        long,
        env = "CUBICLE_URL",
        default_value = "http://127.0.0.1:7878",
        global = true
    )]
    url: String,
    /// Your token (`cubicle token create`, or an admin's `POST /v1/tokens`).
    #[arg(long, env = "CUBICLE_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Print the API's JSON instead of text for people.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum WsCommand {
    /// Create a workspace; waits until its desktop answers.
    Create {
        #[arg(long)]
        name: Option<String>,
        /// Screen size, WxH.
        #[arg(long)]
        geometry: Option<String>,
        /// A guard-rail template the server offers.
        #[arg(long)]
        template: Option<String>,
        /// The whole create body as JSON (the flags above are added to it).
        #[arg(long, value_name = "JSON")]
        body: Option<String>,
    },
    /// List the workspaces you may see.
    Ls,
    /// One workspace's record.
    Get {
        id: String,
    },
    /// Stop and remove a workspace and everything of it.
    Rm {
        id: String,
    },
    /// Run a command in a workspace and print its output when it ends;
    /// exits with the command's code.
    Exec {
        id: String,
        /// Longest it may run, in seconds.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The program and its arguments (after `--`).
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Copy a file in or out: `ws-ID:/abs/path` on one side, a local path
    /// on the other.
    Cp {
        from: String,
        to: String,
    },
    /// Save the screen as PNG.
    Screenshot {
        id: String,
        #[arg(short, long, default_value = "screenshot.png")]
        output: PathBuf,
    },
    /// Print the live view's URL and open it in a browser.
    View {
        id: String,
        /// Only print it.
        #[arg(long)]
        no_open: bool,
    },
    /// Freeze it: memory kept, no CPU, every door answers 409 until resumed.
    Pause {
        id: String,
    },
    Resume {
        id: String,
    },
    /// Stop it, keeping its home.
    Stop {
        id: String,
    },
    Start {
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Pending approvals (`--all`: decided ones too).
    Ls {
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        all: bool,
    },
    Approve {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    Deny {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DownloadsCommand {
    /// Held downloads (`--all`: released and rejected ones too).
    Ls {
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        all: bool,
    },
    Release {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    Reject {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// The newest events, then (with `--follow`) each new one as it comes.
    Tail {
        #[arg(long)]
        workspace: Option<String>,
        /// How many of the newest to print first.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: u32,
        #[arg(short, long)]
        follow: bool,
    },
}

/// A failure with the exit code it ends the command with.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// An answer of the API that is not a success.
fn refused(what: &str, status: u16, body: &Value) -> Failure {
    let code = body["error"]["code"].as_str().unwrap_or("");
    let message = body["error"]["message"].as_str().unwrap_or("");
    let text = format!("{what}: {status} {code}: {message}");
    match status {
        202 => {
            let approval = &body["approval"];
            let id = approval["id"].as_str().unwrap_or("?");
            Failure::new(
                5,
                format!(
                    "{what}: {message}\nan operator decides with `cubicle approvals approve {id}` (or deny)"
                ),
            )
        }
        401 => Failure::new(
            4,
            format!("{text}\n(give a valid token with --token or CUBICLE_TOKEN)"),
        ),
        403 => Failure::new(4, text),
        404 => Failure::new(3, text),
        409 => Failure::new(6, text),
        _ => Failure::new(1, text),
    }
}

struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
    json: bool,
}

impl Client {
    fn new(remote: &Remote) -> Result<Self, Failure> {
        let base = remote.url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::new(
                2,
                format!("--url {base:?} is not an http:// or https:// URL of a cubicle gateway"),
            ));
        }
        let token = remote.token.clone().ok_or_else(|| {
            Failure::new(
                4,
                "no token: give one with --token or CUBICLE_TOKEN (`cubicle serve` prints the first admin token)",
            )
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Failure::new(1, format!("cannot make an HTTP client: {e}")))?;
        Ok(Self {
            base,
            token,
            http,
            json: remote.json,
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: &str,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.header("content-type", content_type).body(body);
        }
        request.send().await.map_err(|e| {
            Failure::new(
                7,
                format!(
                    "cannot reach the gateway at {} ({e}); is `cubicle serve` running there? (--url or CUBICLE_URL)",
                    self.base
                ),
            )
        })
    }

    /// One request; the body of a 2xx answer (other than 202, which is a
    /// hold), else the refusal the answer's error names.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: &str,
    ) -> Result<Vec<u8>, Failure> {
        let what = format!("{method} {path}");
        let answer = self.send(method, path, body, content_type).await?;
        let status = answer.status().as_u16();
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| Failure::new(7, format!("{what}: the answer broke off: {e}")))?;
        if status == 202 || !(200..300).contains(&status) {
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(refused(&what, status, &value));
        }
        Ok(bytes.to_vec())
    }

    /// A JSON call; the body of a 2xx answer (`null` for none).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let body = body.map(|b| b.to_string().into_bytes());
        let bytes = self
            .exchange(method, path, body, "application/json")
            .await?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        Ok(serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())))
    }

    /// Bytes out of a 2xx answer.
    async fn bytes(&self, path: &str) -> Result<Vec<u8>, Failure> {
        self.exchange(Method::GET, path, None, "").await
    }

    fn print(&self, value: &Value, human: impl FnOnce(&Value) -> String) {
        let text = if self.json {
            serde_json::to_string_pretty(value).unwrap_or_default()
        } else {
            human(value)
        };
        if !text.is_empty() {
            println!("{text}");
        }
    }
}

/// A spinner on stderr while `work` runs, for a person at a terminal.
async fn with_progress<T>(label: &str, work: impl Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() {
        return work.await;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(label.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    let out = work.await;
    bar.finish_and_clear();
    out
}

fn field<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or("-")
}

fn workspace_line(ws: &Value) -> String {
    format!(
        "{:<18} {:<10} {:<20} {}",
        field(ws, "id"),
        field(ws, "state"),
        field(ws, "name"),
        field(ws, "owner_token")
    )
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

pub async fn ws(remote: &Remote, command: WsCommand) -> Result<(), Failure> {
    let client = Client::new(remote)?;
    match command {
        WsCommand::Create {
            name,
            geometry,
            template,
            body,
        } => {
            let mut create: Value = match body {
                Some(text) => serde_json::from_str(&text)
                    .map_err(|e| Failure::new(2, format!("--body is not JSON: {e}")))?,
                None => json!({}),
            };
            for (key, value) in [
                ("name", name),
                ("geometry", geometry),
                ("template", template),
            ] {
                if let Some(value) = value {
                    create[key] = json!(value);
                }
            }
            let made = with_progress(
                "creating the workspace (its desktop and browser)…",
                client.call(Method::POST, "/v1/workspaces", Some(create)),
            )
            .await?;
            client.print(&made, |ws| {
                format!(
                    "{} {} (policy {}, recording {})",
                    field(ws, "id"),
                    field(ws, "state"),
                    field(ws, "policy"),
                    if ws["record"] == false { "off" } else { "on" }
                )
            });
        }
        WsCommand::Ls => {
            let list = client.call(Method::GET, "/v1/workspaces", None).await?;
            client.print(&list, |list| {
                let mut lines = vec![format!(
                    "{:<18} {:<10} {:<20} {}",
                    "ID", "STATE", "NAME", "OWNER"
                )];
                for ws in list["workspaces"].as_array().into_iter().flatten() {
                    lines.push(workspace_line(ws));
                }
                lines.join("\n")
            });
        }
        WsCommand::Get { id } => {
            let ws = client
                .call(
                    Method::GET,
                    &format!("/v1/workspaces/{}", encode(&id)),
                    None,
                )
                .await?;
            client.print(&ws, |ws| {
                serde_json::to_string_pretty(ws).unwrap_or_default()
            });
        }
        WsCommand::Rm { id } => {
            with_progress(
                "deleting…",
                client.call(
                    Method::DELETE,
                    &format!("/v1/workspaces/{}", encode(&id)),
                    None,
                ),
            )
            .await?;
            client.print(&json!({ "id": id, "deleted": true }), |_| {
                format!("{id} deleted")
            });
        }
        WsCommand::Pause { id } => lifecycle(&client, &id, "pause").await?,
        WsCommand::Resume { id } => lifecycle(&client, &id, "resume").await?,
        WsCommand::Stop { id } => lifecycle(&client, &id, "stop").await?,
        WsCommand::Start { id } => lifecycle(&client, &id, "start").await?,
        WsCommand::Exec { id, timeout, argv } => {
            let body = json!({ "argv": argv, "timeout_ms": timeout.saturating_mul(1000) });
            let done = client
                .call(
                    Method::POST,
                    &format!("/v1/workspaces/{}/exec", encode(&id)),
                    Some(body),
                )
                .await?;
            if client.json {
                client.print(&done, |_| String::new());
            } else {
                let _ = std::io::stdout().write_all(field(&done, "stdout").as_bytes());
                let _ = std::io::stderr().write_all(field(&done, "stderr").as_bytes());
            }
            if done["timed_out"] == true {
                return Err(Failure::new(
                    124,
                    format!("the command ran out of its {timeout} s"),
                ));
            }
            let code = done["exit_code"].as_i64().unwrap_or(1);
            if code != 0 {
                return Err(Failure::new(
                    u8::try_from(code).unwrap_or(1),
                    format!("the command exited with {code}"),
                ));
            }
        }
        WsCommand::Cp { from, to } => copy(&client, &from, &to).await?,
        WsCommand::Screenshot { id, output } => {
            let png = client
                .bytes(&format!("/v1/workspaces/{}/screenshot", encode(&id)))
                .await?;
            std::fs::write(&output, &png)
                .map_err(|e| Failure::new(1, format!("cannot write {}: {e}", output.display())))?;
            let done = json!({ "path": output, "bytes": png.len() });
            client.print(&done, |_| {
                format!("{} ({} bytes)", output.display(), png.len())
            });
        }
        WsCommand::View { id, no_open } => {
            // The page takes the token once from the query and keeps it in
            // its cookie; the workspace is chosen in its address's fragment.
            client
                .call(
                    Method::GET,
                    &format!("/v1/workspaces/{}", encode(&id)),
                    None,
                )
                .await?;
            let url = format!(
                "{}/?token={}#{}",
                client.base,
                encode(&client.token),
                encode(&id)
            );
            client.print(&json!({ "url": url }), |_| url.clone());
            if !no_open {
                let opened = std::process::Command::new("xdg-open")
                    .arg(&url)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
                if !matches!(opened, Ok(status) if status.success()) {
                    eprintln!("(no browser could be opened here: open the URL above)");
                }
            }
        }
    }
    Ok(())
}

async fn lifecycle(client: &Client, id: &str, verb: &str) -> Result<(), Failure> {
    let ws = with_progress(
        &format!("{verb}…"),
        client.call(
            Method::POST,
            &format!("/v1/workspaces/{}/{verb}", encode(id)),
            None,
        ),
    )
    .await?;
    client.print(&ws, |ws| format!("{id} {}", field(ws, "state")));
    Ok(())
}

/// `ws-ID:/path` → (id, path).
fn remote_path(text: &str) -> Option<(&str, &str)> {
    let (id, path) = text.split_once(':')?;
    (id.starts_with("ws-") && path.starts_with('/')).then_some((id, path))
}

async fn copy(client: &Client, from: &str, to: &str) -> Result<(), Failure> {
    match (remote_path(from), remote_path(to)) {
        (Some((id, path)), None) => {
            let bytes = client
                .bytes(&format!(
                    "/v1/workspaces/{}/files?path={}",
                    encode(id),
                    encode(path)
                ))
                .await?;
            std::fs::write(to, &bytes)
                .map_err(|e| Failure::new(1, format!("cannot write {to}: {e}")))?;
            client.print(&json!({ "path": to, "bytes": bytes.len() }), |_| {
                format!("{from} → {to} ({} bytes)", bytes.len())
            });
        }
        (None, Some((id, path))) => {
            let bytes = std::fs::read(from)
                .map_err(|e| Failure::new(1, format!("cannot read {from}: {e}")))?;
            let size = bytes.len();
            let target = format!("/v1/workspaces/{}/files?path={}", encode(id), encode(path));
            client
                .exchange(
                    Method::PUT,
                    &target,
                    Some(bytes),
                    "application/octet-stream",
                )
                .await?;
            client.print(&json!({ "path": to, "bytes": size }), |_| {
                format!("{from} → {to} ({size} bytes)")
            });
        }
        _ => {
            return Err(Failure::new(
                2,
                "cp: exactly one side must be in a workspace, as ws-ID:/absolute/path",
            ));
        }
    }
    Ok(())
}

pub async fn approvals(remote: &Remote, command: ApprovalsCommand) -> Result<(), Failure> {
    let client = Client::new(remote)?;
    match command {
        ApprovalsCommand::Ls { workspace, all } => {
            let mut path = format!(
                "/v1/approvals?state={}",
                if all { "all" } else { "pending" }
            );
            if let Some(id) = workspace {
                path.push_str(&format!("&workspace={}", encode(&id)));
            }
            let list = client.call(Method::GET, &path, None).await?;
            client.print(&list, |list| {
                let mut lines = vec![format!(
                    "{:<18} {:<18} {:<9} {:<16} {}",
                    "ID", "WORKSPACE", "STATE", "OPERATION", "REASON"
                )];
                for a in list["approvals"].as_array().into_iter().flatten() {
                    lines.push(format!(
                        "{:<18} {:<18} {:<9} {:<16} {}",
                        field(a, "id"),
                        field(a, "workspace"),
                        field(a, "state"),
                        field(a, "operation"),
                        field(a, "reason")
                    ));
                }
                lines.join("\n")
            });
        }
        ApprovalsCommand::Approve { id, reason } => {
            decide(&client, "approvals", &id, "approve", reason).await?
        }
        ApprovalsCommand::Deny { id, reason } => {
            decide(&client, "approvals", &id, "deny", reason).await?
        }
    }
    Ok(())
}

pub async fn downloads(remote: &Remote, command: DownloadsCommand) -> Result<(), Failure> {
    let client = Client::new(remote)?;
    match command {
        DownloadsCommand::Ls { workspace, all } => {
            let mut query = Vec::new();
            if !all {
                query.push("state=held".to_owned());
            }
            if let Some(id) = workspace {
                query.push(format!("workspace={}", encode(&id)));
            }
            let path = format!("/v1/downloads?{}", query.join("&"));
            let list = client.call(Method::GET, &path, None).await?;
            client.print(&list, |list| {
                let mut lines = vec![format!(
                    "{:<18} {:<18} {:<9} {:>10} {:<24} {}",
                    "ID", "WORKSPACE", "STATE", "BYTES", "TYPE", "NAME"
                )];
                for d in list["downloads"].as_array().into_iter().flatten() {
                    lines.push(format!(
                        "{:<18} {:<18} {:<9} {:>10} {:<24} {}",
                        field(d, "id"),
                        field(d, "workspace"),
                        field(d, "state"),
                        d["size"].as_u64().unwrap_or(0),
                        field(d, "sniffed_type"),
                        field(d, "name")
                    ));
                }
                lines.join("\n")
            });
        }
        DownloadsCommand::Release { id, reason } => {
            decide(&client, "downloads", &id, "release", reason).await?
        }
        DownloadsCommand::Reject { id, reason } => {
            decide(&client, "downloads", &id, "reject", reason).await?
        }
    }
    Ok(())
}

async fn decide(
    client: &Client,
    what: &str,
    id: &str,
    verb: &str,
    reason: Option<String>,
) -> Result<(), Failure> {
    let body = reason.map(|reason| json!({ "reason": reason }));
    let done = client
        .call(
            Method::POST,
            &format!("/v1/{what}/{}/{verb}", encode(id)),
            body,
        )
        .await?;
    client.print(&done, |done| {
        format!("{id} {}", done["state"].as_str().unwrap_or(verb))
    });
    Ok(())
}

pub async fn events(remote: &Remote, command: EventsCommand) -> Result<(), Failure> {
    let client = Client::new(remote)?;
    let EventsCommand::Tail {
        workspace,
        lines,
        follow,
    } = command;
    let scope = workspace
        .map(|id| format!("&workspace={}", encode(&id)))
        .unwrap_or_default();
    // The newest `lines`: page through to the end, keeping the last ones.
    let mut after = 0i64;
    let mut newest: std::collections::VecDeque<Value> = std::collections::VecDeque::new();
    loop {
        let page = client
            .call(
                Method::GET,
                &format!("/v1/events?after={after}&limit=1000{scope}"),
                None,
            )
            .await?;
        let events = page["events"].as_array().cloned().unwrap_or_default();
        let Some(last) = events.last() else { break };
        after = last["id"].as_i64().unwrap_or(after);
        for event in events {
            newest.push_back(event);
            if newest.len() > lines as usize {
                newest.pop_front();
            }
        }
    }
    for event in &newest {
        print_event(&client, event);
    }
    if !follow {
        return Ok(());
    }
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let page = client
            .call(
                Method::GET,
                &format!("/v1/events?after={after}&limit=1000{scope}"),
                None,
            )
            .await?;
        for event in page["events"].as_array().into_iter().flatten() {
            after = event["id"].as_i64().unwrap_or(after);
            print_event(&client, event);
        }
    }
}

fn print_event(client: &Client, event: &Value) {
    let text = if client.json {
        event.to_string()
    } else {
        format!(
            "{:>7} {} {:<22} {:<18} {:<10} {:<16} {}",
            event["id"],
            cubicle_gateway::control::rfc3339(event["at"].as_i64().unwrap_or(0)),
            field(event, "kind"),
            event["workspace_id"].as_str().unwrap_or("-"),
            event["outcome"].as_str().unwrap_or("-"),
            event["actor"]["name"].as_str().unwrap_or("daemon"),
            event["detail"]
        )
    };
    println!("{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_exit_codes_scripts_can_use() {
        let body = json!({"error": {"code": "x", "message": "m"}, "approval": {"id": "ap-1"}});
        assert_eq!(refused("GET /", 404, &body).code, 3);
        assert_eq!(refused("GET /", 401, &body).code, 4);
        assert_eq!(refused("GET /", 403, &body).code, 4);
        assert_eq!(refused("GET /", 409, &body).code, 6);
        assert_eq!(refused("GET /", 500, &body).code, 1);
        let held = refused("POST /", 202, &body);
        assert_eq!(held.code, 5);
        assert!(
            held.message.contains("cubicle approvals approve ap-1"),
            "{}",
            held.message
        );
    }

    #[test]
    fn a_workspace_side_is_an_id_and_an_absolute_path() {
        assert_eq!(remote_path("ws-1:/a/b"), Some(("ws-1", "/a/b")));
        assert_eq!(remote_path("ws-1:a"), None);
        assert_eq!(remote_path("./file"), None);
        assert_eq!(remote_path("C:/x"), None);
    }
}
