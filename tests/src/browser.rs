//! The page scripts under `tests/browser/` (headless Chromium driven by
//! playwright-core): each takes one JSON config argument and prints one
//! JSON line of what it saw, with `"error": null` unless a step failed.

use std::time::Duration;

use serde_json::Value;

/// Runs `tests/browser/<script>` with `config`, at most `limit` (scaled by
/// [`crate::guard`]); what it saw. Panics with its output when it printed
/// nothing readable or says a step failed.
pub async fn run(script: &str, config: &Value, limit: Duration) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("browser")
        .join(script);
    let run = tokio::process::Command::new("node")
        .arg(&path)
        .arg(config.to_string())
        .output();
    let output = tokio::time::timeout(crate::guard(limit), run)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {limit:?}"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let seen: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no result from {script}: {stdout}\n{stderr}"));
    assert!(
        seen["error"].is_null(),
        "{script}: {}\n{stderr}",
        seen["error"]
    );
    seen
}
