//! A minimal CDP client over the guest channel, to check from the test side
//! what the browser in the workspace really did.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::UnixStream>;

/// A CDP connection to one page target.
pub struct Page {
    ws: Ws,
    next_id: u64,
}

impl Page {
    /// Connects to the first page target of the browser behind `socket`.
    /// The listing is asked again while it fails, for up to 30 s (scaled
    /// in the nested host, where an emulated browser can take longer than
    /// the guest's 10 s per DevTools call right after a start).
    pub async fn first(socket: &Path) -> anyhow::Result<Self> {
        let deadline = std::time::Instant::now() + crate::guard(Duration::from_secs(30));
        let list = loop {
            match crate::guest::http_get(socket, 9222, "/json/list").await {
                Ok(list) => break list,
                Err(err) if std::time::Instant::now() >= deadline => return Err(err),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        };
        let list: Value = serde_json::from_str(&list)?;
        let target = list
            .as_array()
            .and_then(|targets| targets.iter().find(|t| t["type"] == "page"))
            .context("no page target")?;
        let id = target["id"].as_str().context("target id")?;
        Self::open(socket, id).await
    }

    /// Connects to the page target `id` of the browser behind `socket`.
    pub async fn open(socket: &Path, id: &str) -> anyhow::Result<Self> {
        let stream = crate::guest::connect(socket, 9222).await?;
        let url = format!("ws://127.0.0.1:9222/devtools/page/{id}");
        let (ws, _) = tokio_tungstenite::client_async(url, stream).await?;
        Ok(Self { ws, next_id: 1 })
    }

    /// Sends a command and returns its result.
    pub async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({ "id": id, "method": method, "params": params });
        self.ws
            .send(Message::Text(message.to_string().into()))
            .await?;
        let wait = async {
            while let Some(message) = self.ws.next().await {
                let Message::Text(text) = message? else {
                    continue;
                };
                let reply: Value = serde_json::from_str(&text)?;
                if reply["id"] == id {
                    if let Some(err) = reply.get("error") {
                        bail!("{method} failed: {err}");
                    }
                    return Ok(reply["result"].clone());
                }
            }
            bail!("CDP connection closed")
        };
        tokio::time::timeout(crate::guard(Duration::from_secs(30)), wait).await?
    }

    /// Evaluates `expression` in the page and returns its value.
    pub async fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await?;
        Ok(result["result"]["value"].clone())
    }

    /// Waits until `expression` is true in the page (a page loading, a
    /// script reacting), up to 30 s scaled by `guard`.
    pub async fn wait_for(&mut self, expression: &str) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + crate::guard(Duration::from_secs(30));
        while self.eval(expression).await.ok() != Some(Value::Bool(true)) {
            if std::time::Instant::now() >= deadline {
                bail!("the page never got to {expression}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Navigates to `url` and waits for the load to finish.
    pub async fn goto(&mut self, url: &str) -> anyhow::Result<()> {
        self.call("Page.navigate", json!({ "url": url })).await?;
        for _ in 0..100 {
            if self.eval("document.readyState").await? == "complete" {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("page {url} did not finish loading")
    }
}
