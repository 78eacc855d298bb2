//! One workspace through every door, on the backend of the run: the jail in
//! the host tier, the microVM in the nested tier (`CUBICLE_TEST_BACKEND`,
//! set by scripts/test-nested). The doors' own tests go deep on the jail;
//! this one proves each door reaches a workspace of the other backend too,
//! with one desktop boot (minutes under emulation) instead of one per door.
//!
//! In order: the live view (RFB through the gateway's WebSocket), the
//! screenshot, exec (REST and WebSocket), files, input actions typed into a
//! terminal, CDP with Playwright unchanged, egress through the proxy, the
//! operator's take-over, pause and resume, a daemon killed and restarted
//! while the workspace runs on, stop and start keeping the home, the
//! recording, a snapshot and a workspace started from it, delete.

use std::time::Duration;

use cubicle_tests::{Daemon, desk, guard, origin, rfb};
use futures_util::SinkExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

async fn ok(daemon: &Daemon, method: Method, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let (status, reply) = daemon.call(method, path, body.as_deref()).await.unwrap();
    assert!((200..300).contains(&status), "{path}: {status} {reply}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_workspace_through_every_door() {
    // Each door's time since the start, printed: under emulation this test
    // takes many minutes, and a slow run should say where they went.
    let started_at = std::time::Instant::now();
    // Written past the test harness's capture, so a passing run shows it.
    let door = |name: &str| {
        let line = format!("every door: {name} at {:.0?}\n", started_at.elapsed());
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    };
    let origin_port = origin::serve(None).await;
    let data = tempfile::tempdir().unwrap();
    // The origin is on this host's loopback, which the proxy walls off
    // unless told otherwise (test-only flags), under a test name.
    let hosts = data.path().join("hosts");
    std::fs::write(&hosts, "origin.test=127.0.0.1\n").unwrap();
    let state = data.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let flags = [
        "--egress-allow-host-services",
        "--egress-test-hosts",
        hosts.to_str().unwrap(),
    ];
    let mut daemon = Daemon::start(&state, None, &flags).unwrap();
    // A name's rule, and one naming the loopback range it resolves to.
    // The open policy: this test is about the doors, not the gates (the
    // default policy holds typing it cannot tell from a password field's,
    // which a slow browser under emulation can make it).
    let body = json!({
        "policy": "open",
        "egress": {"allow": [
            format!("origin.test:{origin_port}"),
            format!("127.0.0.1/32:{origin_port}"),
        ]},
    });
    let ws = daemon.create_workspace(&body.to_string()).await;
    assert_eq!(ws["state"], "running", "{ws}");
    let backend = ws["backend"].as_str().unwrap().to_owned();
    let id = ws["id"].as_str().unwrap().to_owned();
    let path = |tail: &str| format!("/v1/workspaces/{id}{tail}");
    println!("every door: a {backend} workspace");

    door("created");
    // The live view: a real RFB client through the gateway sees the
    // desktop (the XFCE panel paints many colours).
    let url = daemon.ws_url(&path("/vnc"));
    let mut frame = rfb::first_full_frame(&url, Duration::from_secs(30))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + guard(Duration::from_secs(30));
    while frame.colours_in_rows(0, 28) < 20 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        frame = rfb::first_full_frame(&url, Duration::from_secs(30))
            .await
            .unwrap();
    }
    assert_eq!((frame.width, frame.height), (1280, 800));
    assert!(
        frame.colours_in_rows(0, 28) >= 20,
        "no panel in the live view"
    );

    door("live view");
    // The screenshot door: a PNG of the screen.
    let shot = reqwest::Client::new()
        .get(daemon.url(&path("/screenshot")))
        .bearer_auth(&daemon.token)
        .timeout(guard(Duration::from_secs(60)))
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), 200);
    let png = shot.bytes().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    door("screenshot");
    // Exec over REST runs as the desktop user.
    let who = desk::exec(&daemon, &id, "id -un; id -u").await;
    assert_eq!(who, "user\n1000\n");
    // A microVM's user has nothing of the host's: no network device and no
    // vsock (the guest channel is the services'). Python starts in tens of
    // seconds under emulation: the exec's time limit is scaled like every
    // hang guard.
    if backend == "microvm" {
        let (status, out) = desk::exec_status(
            &daemon,
            &id,
            "ls /sys/class/net; python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)' 2>&1 | tail -1",
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let stdout = out["stdout"].as_str().unwrap();
        assert!(stdout.starts_with("lo\n"), "{out}");
        assert!(
            stdout.contains("PermissionError"),
            "the user opened a vsock socket (or Python never said): {out}"
        );
    }

    // Exec over the WebSocket: stdin in, stdout back, the exit code last.
    let url = format!("{}&arg=cat", daemon.ws_url(&path("/exec/ws")));
    let (mut exec, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    exec.send(Message::Text(r#"{"stdin": "through the door\n"}"#.into()))
        .await
        .unwrap();
    let mut echoed = String::new();
    while echoed != "through the door\n" {
        let frame = desk::next_json(&mut exec).await;
        echoed.push_str(
            frame["stdout"]
                .as_str()
                .unwrap_or_else(|| panic!("{frame}")),
        );
    }
    exec.send(Message::Text(r#"{"stdin_eof": true}"#.into()))
        .await
        .unwrap();
    assert_eq!(desk::next_json(&mut exec).await["exit_code"], 0);

    door("exec");
    // Files: bytes in, the same bytes out.
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let client = reqwest::Client::builder()
        .timeout(guard(Duration::from_secs(60)))
        .build()
        .unwrap();
    let put = client
        .put(daemon.url(&path("/files?path=/home/user/door.bin")))
        .bearer_auth(&daemon.token)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let got = client
        .get(daemon.url(&path("/files?path=/home/user/door.bin")))
        .bearer_auth(&daemon.token)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    assert!(
        got.bytes().await.unwrap() == bytes,
        "the file came back changed"
    );

    door("files");
    // Input actions: click into a terminal and type a command; the file it
    // makes is the proof the keys arrived.
    let term = desk::terminal(&daemon, &id).await;
    let click = json!({"action": "left_click", "coordinate": [term.x + 40, term.y + 40]});
    let (status, reply) = desk::act(&daemon, &daemon.token, &id, click).await;
    assert_eq!(status, 200, "{reply}");
    let typed = json!({"action": "type", "text": "touch typed_through_the_door\n"});
    let (status, reply) = desk::act(&daemon, &daemon.token, &id, typed).await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        desk::appears(
            &daemon,
            &id,
            "typed_through_the_door",
            Duration::from_secs(30)
        )
        .await,
        "the typed command did not run"
    );

    door("typed input");
    // CDP: Playwright connects through the gateway, unchanged.
    let script = cubicle_tests::repo().join("tests/browser/cdp_connect.mjs");
    let endpoint = daemon.url(&path("/cdp"));
    let token = daemon.token.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(script)
            .arg(&endpoint)
            .arg(&token)
            .output()
    })
    .await
    .unwrap()
    .expect("node runs (apt install nodejs)");
    assert!(
        output.status.success(),
        "Playwright failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["answer"], 42, "{seen}");

    door("cdp");
    // Egress: the allowed origin answers through the proxy; anything else
    // is the proxy's 403.
    let allowed = desk::exec(
        &daemon,
        &id,
        &format!("curl -sS -m 120 http://origin.test:{origin_port}/ 2>&1"),
    )
    .await;
    assert!(allowed.contains("hello from origin"), "{allowed}");
    let denied = desk::exec(
        &daemon,
        &id,
        "curl -sS -m 120 -o /dev/null -w '%{http_code}' http://elsewhere.test/ 2>&1",
    )
    .await;
    assert_eq!(denied.trim(), "403", "{denied}");

    door("egress");
    // An operator takes over: anyone else's input is refused while they
    // hold it.
    let operator = desk::token(&daemon, "alice", "operator").await;
    let (status, reply) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &path("/control/take"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{reply}");
    let key = json!({"action": "key", "text": "Escape"});
    let (status, reply) = desk::act(&daemon, &daemon.token, &id, key).await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("control_held")),
        "{reply}"
    );
    let (status, reply) = daemon
        .call_as(
            Some(&operator.secret),
            Method::POST,
            &path("/control/release"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{reply}");

    door("take-over");
    // Pause and resume through the backend.
    let paused = ok(&daemon, Method::POST, &path("/pause"), None).await;
    assert_eq!(paused["state"], "paused");
    let (status, reply) = desk::exec_status(&daemon, &id, "true").await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("paused"))
    );
    let resumed = ok(&daemon, Method::POST, &path("/resume"), None).await;
    assert_eq!(resumed["state"], "running");
    assert_eq!(desk::exec(&daemon, &id, "echo back").await, "back\n");

    door("pause");
    // The daemon dies; the workspace runs on (its shim holds it) and the
    // next daemon picks it up.
    let token = daemon.token.clone();
    daemon.kill9();
    drop(daemon);
    let daemon = Daemon::start(&state, Some(&token), &flags).unwrap();
    let again = ok(&daemon, Method::GET, &path(""), None).await;
    assert_eq!(again["state"], "running", "{again}");
    assert!(desk::exists(&daemon, &id, "typed_through_the_door").await);

    door("daemon restart");
    // Stop and start: the home is kept.
    let stopped = ok(&daemon, Method::POST, &path("/stop"), None).await;
    assert_eq!(stopped["state"], "stopped");
    let started = ok(&daemon, Method::POST, &path("/start"), None).await;
    assert_eq!(started["state"], "running");
    assert!(
        desk::exists(&daemon, &id, "door.bin").await,
        "the home was lost"
    );

    door("stop and start");
    // The recording kept what was on the screen.
    let deadline = std::time::Instant::now() + guard(Duration::from_secs(30));
    loop {
        let view = ok(&daemon, Method::GET, &path("/recordings"), None).await;
        let segments = view["segments"].as_array().map_or(0, Vec::len);
        if segments > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no recorded segment: {view}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    door("recording");
    // A snapshot, and a workspace started from it: the whole machine on a
    // microVM (its memory: the fork goes on as its own machine), the home
    // and browser profile on a jail. The source is stopped before the fork
    // starts: one desktop at a time, as at every other door here (under
    // emulation two recorded desktops at once starved each other's guest
    // channel).
    let machine_id = "cat /etc/machine-id";
    let source_machine = desk::exec(&daemon, &id, machine_id).await;
    let snap = ok(
        &daemon,
        Method::POST,
        &path("/snapshot"),
        Some(json!({"name": "door"})),
    )
    .await;
    let kind = if backend == "microvm" {
        "memory"
    } else {
        "disk"
    };
    assert_eq!(snap["kind"], kind, "{snap}");
    let stopped = ok(&daemon, Method::POST, &path("/stop"), None).await;
    assert_eq!(stopped["state"], "stopped");
    let fork = ok(
        &daemon,
        Method::POST,
        "/v1/workspaces",
        Some(json!({"from_snapshot": snap["id"], "policy": "open"})),
    )
    .await;
    let fork_id = fork["id"].as_str().unwrap().to_owned();
    assert_eq!(fork["state"], "running", "{fork}");
    assert!(
        desk::exists(&daemon, &fork_id, "door.bin").await,
        "the snapshot's home is not in the workspace started from it"
    );
    assert_eq!(
        desk::exec(&daemon, &fork_id, "hostname").await.trim(),
        fork_id
    );
    assert_ne!(
        desk::exec(&daemon, &fork_id, machine_id).await,
        source_machine,
        "the workspace started from the snapshot has its source's machine id"
    );
    let (status, _) = daemon
        .call(Method::DELETE, &format!("/v1/workspaces/{fork_id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 204);

    door("snapshot");
    let (status, _) = daemon.call(Method::DELETE, &path(""), None).await.unwrap();
    assert_eq!(status, 204);
    door("deleted");
}
