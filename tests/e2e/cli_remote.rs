//! The commands for people (`cubicle ws|approvals|downloads|events`) run
//! as a person would, as processes against a real `cubicle serve`: each
//! does what it says, prints text (or the API's JSON with `--json`), and
//! ends with the exit code README documents (3 not found, 4 token, 5 held
//! for approval, the command's own code for `ws exec`).

use cubicle_tests::daemon::bin_dir;
use cubicle_tests::desk;
use serde_json::Value;

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn cubicle(url: &str, token: &str, args: &[&str]) -> Ran {
    let out = tokio::process::Command::new(bin_dir().join("cubicle"))
        .args(args)
        .env("CUBICLE_URL", url)
        .env("CUBICLE_TOKEN", token)
        .output()
        .await
        .unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn a_person_drives_a_workspace_and_decides_from_the_terminal() {
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("held", desk::HELD_FILES).await;
    let url = daemon.base.clone();
    let agent = agent.secret.as_str();
    let operator = operator.secret.as_str();
    let show = |ran: &Ran| {
        format!(
            "rc={} stdout={} stderr={}",
            ran.code, ran.stdout, ran.stderr
        )
    };

    let ran = cubicle(&url, agent, &["ws", "ls"]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert!(ran.stdout.starts_with("ID"), "{}", show(&ran));
    assert!(ran.stdout.contains(&id), "{}", show(&ran));

    // exec: the output, and the command's own exit code.
    let ran = cubicle(
        &url,
        agent,
        &["ws", "exec", &id, "--", "sh", "-c", "echo hi; exit 3"],
    )
    .await;
    assert_eq!(ran.code, 3, "{}", show(&ran));
    assert_eq!(ran.stdout, "hi\n", "{}", show(&ran));

    // cp in and out, byte for byte.
    let scratch = tempfile::tempdir().unwrap();
    let local = scratch.path().join("in.bin");
    let bytes: Vec<u8> = (0..70_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&local, &bytes).unwrap();
    let inside = format!("{id}:/home/user/copied.bin");
    let ran = cubicle(&url, agent, &["ws", "cp", local.to_str().unwrap(), &inside]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    let back = scratch.path().join("out.bin");
    let ran = cubicle(&url, agent, &["ws", "cp", &inside, back.to_str().unwrap()]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert_eq!(std::fs::read(&back).unwrap(), bytes);
    let ran = cubicle(&url, agent, &["ws", "cp", "a", "b"]).await;
    assert_eq!(ran.code, 2, "neither side in a workspace: {}", show(&ran));

    let shot = scratch.path().join("shot.png");
    let ran = cubicle(
        &url,
        agent,
        &["ws", "screenshot", &id, "-o", shot.to_str().unwrap()],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert!(std::fs::read(&shot).unwrap().starts_with(b"\x89PNG"));

    // Held: exit 5, naming the approval and the command that decides it.
    let ran = cubicle(
        &url,
        agent,
        &["ws", "exec", &id, "--", "touch", "/home/user/held-1"],
    )
    .await;
    assert_eq!(ran.code, 5, "{}", show(&ran));
    assert!(
        ran.stderr.contains("cubicle approvals approve apr-"),
        "{}",
        show(&ran)
    );
    let ran = cubicle(&url, operator, &["approvals", "ls", "--json"]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    let listed: Value = serde_json::from_str(&ran.stdout).unwrap();
    let approval = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["workspace"] == id.as_str())
        .unwrap_or_else(|| panic!("the held exec is listed: {listed}"));
    let approval = approval["id"].as_str().unwrap().to_owned();
    let ran = cubicle(&url, operator, &["approvals", "ls"]).await;
    assert!(
        ran.stdout.contains(&approval),
        "the text listing: {}",
        show(&ran)
    );
    let ran = cubicle(
        &url,
        operator,
        &[
            "approvals",
            "approve",
            &approval,
            "--reason",
            "from the terminal",
        ],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert!(ran.stdout.contains("approved"), "{}", show(&ran));
    let ran = cubicle(&url, agent, &["approvals", "approve", &approval]).await;
    assert_eq!(ran.code, 4, "an agent decides nothing: {}", show(&ran));

    let ran = cubicle(&url, operator, &["downloads", "ls"]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert!(ran.stdout.starts_with("ID"), "{}", show(&ran));

    // Not found, a wrong token, a gateway that is not there.
    let ran = cubicle(&url, agent, &["ws", "get", "ws-000000000000"]).await;
    assert_eq!(ran.code, 3, "{}", show(&ran));
    let ran = cubicle(&url, "cubicle_wrong", &["ws", "ls"]).await;
    assert_eq!(ran.code, 4, "{}", show(&ran));
    assert!(ran.stderr.contains("CUBICLE_TOKEN"), "{}", show(&ran));
    let ran = cubicle("http://127.0.0.1:9", agent, &["ws", "ls"]).await;
    assert_eq!(ran.code, 7, "{}", show(&ran));

    // Pause and resume; the live view's address; the event log's tail.
    for (verb, state) in [("pause", "paused"), ("resume", "running")] {
        let ran = cubicle(&url, agent, &["ws", verb, &id]).await;
        assert_eq!(ran.code, 0, "{}", show(&ran));
        assert_eq!(ran.stdout.trim(), format!("{id} {state}"), "{}", show(&ran));
    }
    let ran = cubicle(&url, operator, &["ws", "view", &id, "--no-open"]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert!(
        ran.stdout.trim().starts_with(&format!("{url}/?token="))
            && ran.stdout.trim().ends_with(&format!("#{id}")),
        "{}",
        show(&ran)
    );
    let ran = cubicle(&url, operator, &["events", "tail", "-n", "5", "--json"]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    let tail: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tail.len(), 5, "{}", show(&ran));
    assert!(
        tail.windows(2)
            .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64())
    );

    // A workspace made and removed from the terminal.
    let ran = cubicle(
        &url,
        agent,
        &["ws", "create", "--json", "--name", "from-cli"],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    let made: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(made["state"], "running", "{made}");
    assert_eq!(made["name"], "from-cli", "{made}");
    let new = made["id"].as_str().unwrap();
    let ran = cubicle(&url, agent, &["ws", "rm", new]).await;
    assert_eq!(ran.code, 0, "{}", show(&ran));
    assert_eq!(ran.stdout.trim(), format!("{new} deleted"));
}
