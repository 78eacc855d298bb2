//! The Python client, installed with one `pip install` from the repo path
//! into a scratch folder, driving a real gateway (tests/e2e/python_client.py
//! holds the assertions and prints its measurements); the worked Anthropic
//! loop on it (tests/e2e/anthropic_loop.py) and the OpenAI one
//! (tests/e2e/openai_loop.py); and its wire layer is what
//! `gateway/openapi.json` generates (`scripts/clients --check`).

use std::process::Command;

use cubicle_tests::desk;

fn python() -> Option<String> {
    let python = std::env::var("CUBICLE_PYTHON")
        .unwrap_or_else(|_| "/var/cache/cubicle/py/bin/python".into());
    std::path::Path::new(&python).exists().then_some(python)
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_wire_layer_is_what_the_openapi_document_generates() {
    if python().is_none() {
        cubicle_tests::skip("no Python with openapi-python-client (scripts/setup installs it)");
        return;
    }
    let out = Command::new(repo().join("scripts/clients"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The client pip-installed from a copy of the repo's source into a
/// scratch folder. A copy: setuptools builds in the source tree (`build/`,
/// `*.egg-info`), and two tests installing from one tree at once broke
/// each other's wheel.
fn install_client(python: &str) -> tempfile::TempDir {
    let target = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    let tree = repo().join("gateway/clients/python");
    for part in ["pyproject.toml", "cubicle"] {
        let copied = Command::new("cp")
            .arg("-r")
            .arg(tree.join(part))
            .arg(source.path())
            .status()
            .unwrap();
        assert!(copied.success(), "cp -r {part}");
    }
    let install = Command::new(python)
        .args(["-m", "pip", "install", "-q", "--no-deps", "--target"])
        .arg(target.path())
        .arg(source.path())
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "pip install gateway/clients/python: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    target
}

/// Runs `script` (under tests/e2e) with the installed client against a
/// fresh gateway whose policy holds `touch /home/user/held-*`; its output.
async fn run_script(python: &str, script: &str) -> String {
    let target = install_client(python);
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("held", desk::HELD_FILES).await;
    let run = tokio::process::Command::new(python)
        .arg(repo().join("tests/e2e").join(script))
        .env("PYTHONPATH", target.path())
        .env("CUBICLE_URL", &daemon.base)
        .env("CUBICLE_TOKEN", &agent.secret)
        .env("OPERATOR_TOKEN", &operator.secret)
        .env("WORKSPACE", &id)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    eprintln!("{stdout}");
    assert!(run.status.success(), "{script}: {stdout}{stderr}");
    stdout
}

#[tokio::test]
async fn the_python_client_drives_a_workspace_sync_and_async() {
    let Some(python) = python() else {
        cubicle_tests::skip("no Python for the client (scripts/setup installs one)");
        return;
    };
    let out = run_script(&python, "python_client.py").await;
    assert!(out.contains("python client: ok"), "{out}");
}

/// The worked loop with Anthropic's SDK and `computer_20251124`, against a
/// stand-in for the Messages API (tests/e2e/anthropic_loop.py).
#[tokio::test]
async fn the_anthropic_computer_use_loop_drives_a_workspace() {
    let Some(python) = python() else {
        cubicle_tests::skip("no Python with the anthropic SDK (scripts/setup installs it)");
        return;
    };
    let out = run_script(&python, "anthropic_loop.py").await;
    assert!(out.contains("anthropic loop: ok"), "{out}");
}

/// The worked loop with OpenAI's SDK and the GA `computer` tool, against a
/// stand-in for the Responses API (tests/e2e/openai_loop.py): batched
/// actions in one request, and each safety check a Cubicle approval that
/// an operator decides before the loop acknowledges it.
#[tokio::test]
async fn the_openai_computer_use_loop_asks_a_person_for_each_safety_check() {
    let Some(python) = python() else {
        cubicle_tests::skip("no Python with the openai SDK (scripts/setup installs it)");
        return;
    };
    let out = run_script(&python, "openai_loop.py").await;
    assert!(out.contains("openai loop: ok"), "{out}");
}
