//! The jail's pid, ipc and cgroup namespaces (README "Isolation"), shown by
//! what a process inside sees through `exec`, each beside the host's view
//! of the same thing as the positive control: the host sees the workspace's
//! process, its shared memory and its cgroup; the workspace sees none of
//! the host's.

use std::process::Command;

use cubicle_tests::Daemon;
use cubicle_tests::desk::exec;

/// The host pids whose command line is exactly `argv`.
fn host_pids(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// The keys (hex, as `ipcs` shows them) and ids of the System V shared
/// memory segments `/proc/sysvipc/shm` lists.
fn shm_ids(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let key: i64 = cols.next()?.parse().ok()?;
            Some((format!("{:#010x}", key as u32), cols.next()?.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pid_ipc_and_cgroup_namespaces_hide_the_host_from_a_workspace() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    let ws = daemon.create_workspace("{}").await;
    let id = ws["id"].as_str().unwrap().to_owned();

    // pid: a process started inside is seen by the host under another pid;
    // from inside, the daemon and this test are not there at all.
    let inside_pid = exec(
        &daemon,
        &id,
        "setsid -f sleep 31337.25; sleep 0.3; pgrep -f 31337.25",
    )
    .await
    .trim()
    .to_owned();
    let host = host_pids(&["sleep", "31337.25"]);
    assert_eq!(
        host.len(),
        1,
        "the host sees the workspace's process: {host:?}"
    );
    let host_pid = host[0];
    assert_ne!(
        inside_pid,
        host_pid.to_string(),
        "the same pid inside and out"
    );
    let seen_inside = exec(&daemon, &id, "cat /proc/[0-9]*/comm | sort | uniq -c").await;
    let own = std::fs::read_to_string("/proc/self/comm").unwrap();
    for host_only in ["cubicle", own.trim()] {
        assert!(
            seen_inside
                .lines()
                .all(|l| !l.ends_with(&format!(" {host_only}"))),
            "{host_only} is visible inside:\n{seen_inside}"
        );
    }
    let host_comms: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .collect();
    assert!(
        host_comms.iter().any(|c| c.trim() == "cubicle"),
        "the control: the host sees the daemon"
    );
    let inside_count: usize = seen_inside
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    assert!(
        inside_count < host_comms.len(),
        "inside sees {inside_count} processes, the host {}",
        host_comms.len()
    );

    // ipc: a segment made on the host is not inside, and one made inside is
    // not on the host, while each side sees its own.
    let made = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    let made = String::from_utf8_lossy(&made.stdout);
    let host_shm: String = made.trim().rsplit(' ').next().unwrap().to_owned();
    let host_table = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    let inside_table = exec(
        &daemon,
        &id,
        "ipcmk -M 4096 >/dev/null && cat /proc/sysvipc/shm",
    )
    .await;
    let _ = Command::new("ipcrm").args(["-m", &host_shm]).status();
    // Segment ids are numbered per namespace (Xvnc's first segment inside
    // and one on the host can both be 3), and IPC_PRIVATE segments all have
    // key 0: a segment is told apart by its key, which ipcmk makes at
    // random.
    let (host_ids, inside_ids) = (shm_ids(&host_table), shm_ids(&inside_table));
    let host_key = host_ids
        .iter()
        .find(|(_, id)| *id == host_shm)
        .map(|(key, _)| key.clone())
        .unwrap_or_else(|| {
            panic!("the control: the host lists its segment {host_shm}: {host_table}")
        });
    let keyed = |ids: &[(String, String)]| -> Vec<String> {
        ids.iter()
            .map(|(key, _)| key.clone())
            .filter(|key| key != "0x00000000")
            .collect()
    };
    let inside_keys = keyed(&inside_ids);
    assert!(
        !inside_keys.is_empty(),
        "the control: inside lists the segment it made: {inside_table}"
    );
    assert!(
        !inside_keys.contains(&host_key),
        "the host's segment {host_key} is visible inside: {inside_table}"
    );
    let host_after = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    let host_keys = keyed(&shm_ids(&host_after));
    for key in &inside_keys {
        assert!(
            !host_keys.contains(key),
            "the workspace's segment {key} reached the host: {host_after}"
        );
    }

    // cgroup: inside, the workspace's own cgroup is the root; the host sees
    // the same process deep in its tree, under the workspace's id.
    let inside_cgroup = exec(&daemon, &id, "cat /proc/self/cgroup").await;
    let host_cgroup = std::fs::read_to_string(format!("/proc/{host_pid}/cgroup")).unwrap();
    assert!(
        host_cgroup.contains(&format!("/cubicle/{id}")),
        "the control: the host places the workspace in cubicle/{id}: {host_cgroup}"
    );
    assert!(
        inside_cgroup.lines().all(|l| l.ends_with(":/")),
        "inside sees a cgroup path below the root: {inside_cgroup}"
    );
    eprintln!(
        "namespaces: sleep is pid {inside_pid} inside, {host_pid} on the host; \
         {inside_count} processes inside; cgroup inside {:?}, on the host {:?}",
        inside_cgroup.lines().next(),
        host_cgroup.lines().find(|l| l.contains("cubicle")),
    );
}
