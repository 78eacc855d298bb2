//! A bad policy file stops `cubicle serve` (README "Policies"): it exits
//! before listening, nonzero, with `file:line: field: what is wrong`; the
//! same directory with the file fixed serves.

use std::process::{Command, Stdio};
use std::time::Duration;

use cubicle_tests::Daemon;
use cubicle_tests::daemon::bin_dir;

const BAD: &str = "default = \"allow\"\n[[rule]]\nsubject = \"exec\"\ndecision = \"confirm\"\nkeys = [\"ctrl+w\"]\n";
const GOOD: &str = "default = \"allow\"\n[[rule]]\nsubject = \"exec\"\ndecision = \"confirm\"\ncommand = [\"rm *\"]\n";

#[test]
fn a_bad_policy_file_stops_serve_naming_file_line_and_field() {
    let data = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    let file = policies.path().join("broken.toml");
    std::fs::write(&file, BAD).unwrap();
    let mut child = Command::new(bin_dir().join("cubicle"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data.path())
        .args(["--listen", "127.0.0.1:0"])
        .arg("--policy-dir")
        .arg(policies.path())
        .args(["--default-policy", "broken"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + cubicle_tests::guard(Duration::from_secs(60));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cubicle serve kept running with a bad policy file");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!status.success(), "{said}");
    assert!(!said.contains("listening on"), "it listened: {said}");
    assert!(
        said.contains("broken.toml:5: rule[0].keys: does not apply to subject \"exec\""),
        "file:line: field: what is wrong, got: {said}"
    );

    // The control: the same directory, the file fixed, serves.
    std::fs::write(&file, GOOD).unwrap();
    // The failed start made no admin token: the first start that serves
    // makes it and shows it (Daemon::start reads it off stdout).
    assert!(
        !said.contains("admin token"),
        "a start that failed showed a token nobody may see again: {said}"
    );
    let daemon = Daemon::start(
        data.path(),
        None,
        &[
            "--policy-dir",
            policies.path().to_str().unwrap(),
            "--default-policy",
            "broken",
        ],
    );
    assert!(daemon.is_ok(), "the fixed file: {:?}", daemon.err());
    eprintln!(
        "policy file: {}",
        said.lines()
            .find(|l| l.contains("broken.toml"))
            .unwrap_or_default()
    );
}
