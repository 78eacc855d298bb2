//! Looking at host processes from a test.

/// The host uids of a jail workspace whose record says `host_uid`: its
/// user's (the record's) and its services' (the next one; see
/// `cubicle_runtime::backend::services_uid_of`).
pub fn workspace_uids(host_uid: u32) -> [u32; 2] {
    [host_uid, host_uid + 1]
}

/// Pids of every process of the workspace whose record says `host_uid`
/// (user and services).
pub fn of_workspace(host_uid: u32) -> Vec<i32> {
    workspace_uids(host_uid)
        .into_iter()
        .flat_map(of_uid)
        .collect()
}

/// Waits until no process of the workspace is left; what is still there.
pub async fn wait_workspace_gone(host_uid: u32, limit: std::time::Duration) -> Vec<i32> {
    let [user, services] = workspace_uids(host_uid);
    let mut left = wait_gone(user, limit).await;
    left.extend(wait_gone(services, limit).await);
    left
}

/// Pids of processes whose real uid is `uid`.
pub fn of_uid(uid: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| {
                    let line = status.lines().find(|l| l.starts_with("Uid:"))?.to_owned();
                    line.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(uid)
        })
        .collect()
}

/// Proportional set size (kB) summed over `pids`, from smaps_rollup.
pub fn pss_kib(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .filter_map(|text| {
            let line = text.lines().find(|l| l.starts_with("Pss:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// Waits until no process of `uid` is left (zombies included: a stopped
/// workspace's top process is reaped a moment after it dies), up to `limit`.
/// Returns what is still there.
pub async fn wait_gone(uid: u32, limit: std::time::Duration) -> Vec<i32> {
    let deadline = std::time::Instant::now() + crate::guard(limit);
    loop {
        let left = of_uid(uid);
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Threads of the workspace whose record says `host_uid` that still run
/// (not zombies), as `pid/tid`. A process whose first thread ended shows
/// as a zombie while its other threads run, so every thread is looked at.
pub fn running_threads_of_workspace(host_uid: u32) -> Vec<String> {
    of_workspace(host_uid)
        .into_iter()
        .flat_map(|pid| {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|dir| dir.filter_map(Result::ok).collect::<Vec<_>>())
                .unwrap_or_default();
            tasks.into_iter().filter_map(move |task| {
                let tid = task.file_name().to_string_lossy().into_owned();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
                let state = stat.rsplit_once(')')?.1.trim().chars().next()?;
                (state != 'Z' && state != 'X').then(|| format!("{pid}/{tid}"))
            })
        })
        .collect()
}
