//! Schemathesis (property-based API testing, from PyPI; `scripts/setup`
//! installs it into `/var/cache/cubicle/py`) against the live gateway's own
//! `GET /v1/openapi.json`: every operation gets generated requests, valid
//! and invalid, and must answer with no 5xx, with a status its operation
//! documents, and with a response that matches its documented schema and
//! content type.
//!
//! Destructive operations are scoped to a workspace this test made: every
//! `{id}` path parameter is that workspace's id. Lifecycle changes (stop,
//! pause, delete) run in a second pass, so the first reaches a running
//! workspace. Creating workspaces (slow, and fuzzed in-process by
//! `fuzz/fuzz_targets/wire_requests.rs`) and the endless streams (SSE) are
//! left out. `?wait=` is 0: a question to a person (`POST .../approvals`)
//! really waits, up to 300 s, for somebody to answer.

use std::path::Path;
use std::process::Command;

use cubicle_tests::Daemon;

const SCHEMATHESIS: &str = "/var/cache/cubicle/py/bin/schemathesis";
/// Checks every response must pass.
const CHECKS: &str = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance";
/// Operations generated against (regexes on the path, `METHOD /path`).
const LIFECYCLE: &str =
    "^POST /v1/workspaces/\\{id\\}/(stop|pause)$|^DELETE /v1/workspaces/\\{id\\}$";
const NEVER: &str = "^POST /v1/workspaces$|/events$";

/// One schemathesis pass; its output, and whether it passed.
fn pass(daemon: &Daemon, config: &Path, filter: &[&str], examples: &str) -> (bool, String) {
    let output = Command::new(SCHEMATHESIS)
        // Its caches go next to the config, not into the source tree.
        .current_dir(config.parent().unwrap_or(Path::new(".")))
        .arg("--config-file")
        .arg(config)
        .args(["run", &daemon.url("/v1/openapi.json")])
        .args([
            "--header",
            &format!("Authorization: Bearer {}", daemon.token),
        ])
        .args(["--checks", CHECKS])
        .args(["--max-examples", examples])
        // One worker: CPython 3.11's ast module is not safe across threads
        // (hypothesis describing a filter in two at once raised "AST
        // constructor recursion depth mismatch", a runtime error, not ours).
        .args(["--request-timeout", "60", "--workers", "1", "--seed", "1"])
        .args(["--generation-database", "none", "--no-color"])
        .args(filter)
        .output()
        .expect("schemathesis runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    if !Path::new(SCHEMATHESIS).exists() {
        return cubicle_tests::skip("schemathesis is not installed (scripts/setup installs it)");
    }
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon.create_workspace(r#"{"name":"schemathesis"}"#).await;
    let id = ws["id"].as_str().unwrap();
    // In the test's own folder: schemathesis keeps its caches beside it.
    let config = data.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        format!(
            "[parameters]\n\"path.id\" = \"{id}\"\n\"path.target\" = \"ABCDEF0123\"\n\
             \"path.file\" = \"r1-000001.mp4\"\n\"query.wait\" = 0\n"
        ),
    )
    .unwrap();
    let exclude = format!("{LIFECYCLE}|{NEVER}");
    let (ok, out) = pass(&daemon, &config, &["--exclude-name-regex", &exclude], "25");
    eprintln!("{out}");
    assert!(ok, "schemathesis found problems (first pass):\n{out}");
    // Then stop, pause and delete, on the same workspace.
    let (ok, out) = pass(&daemon, &config, &["--include-name-regex", LIFECYCLE], "10");
    eprintln!("{out}");
    assert!(ok, "schemathesis found problems (lifecycle pass):\n{out}");
}
