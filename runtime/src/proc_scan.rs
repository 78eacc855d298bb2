//! Finding and ending processes by host uid through `/proc`.
//!
//! Each workspace runs under its own host uid, so "every process of this
//! workspace" is exactly "every process of that uid".

use std::time::{Duration, Instant};

/// Pids of every process whose real uid is `uid`.
pub fn pids_of_uid(uid: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| real_uid(pid) == Some(uid))
        .collect()
}

/// The real uid of `pid`, if it is still there.
pub fn real_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` exists and any of its threads is not a zombie.
///
/// The process's own state is its first thread's: a process whose first
/// thread ended (`SYS_exit` from `main`, `pthread_exit`) shows `Z` while its
/// other threads run on. Judged by the process state alone, such a
/// process looked dead and was never killed: a workspace was deleted with
/// it still running.
pub fn is_alive(pid: i32) -> bool {
    if thread_alive(&format!("/proc/{pid}/stat")) {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|task| {
        thread_alive(&format!(
            "/proc/{pid}/task/{}/stat",
            task.file_name().to_string_lossy()
        ))
    })
}

/// Whether the thread whose `stat` file is at `path` exists and is not a
/// zombie.
fn thread_alive(path: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return false;
    };
    // The state letter follows the command name, which ends at the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim().chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

/// The parent pid of `pid`, if it is still there.
pub fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (which may hold spaces and ')'): state, ppid.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is `top` or one of its descendants, walking parent pids
/// (at most `MAX_DEPTH` steps; a deeper tree is not a workspace's).
pub fn descends_from(pid: i32, top: i32) -> bool {
    const MAX_DEPTH: usize = 256;
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        if at == top {
            return true;
        }
        match parent_pid(at) {
            Some(parent) if parent > 0 && parent != at => at = parent,
            _ => return false,
        }
    }
    false
}

/// SIGKILLs every process of `uid` until none is left or `timeout` passes.
/// Returns the pids still alive at the end (empty on success).
pub async fn kill_uid(uid: u32, timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let pids: Vec<i32> = pids_of_uid(uid)
            .into_iter()
            .filter(|&p| is_alive(p))
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            return pids;
        }
        for &pid in &pids {
            // SAFETY: kill only sends a signal; a pid that is gone fails with
            // ESRCH. uid is a workspace uid (never 0, never the daemon's), so
            // nothing outside the workspace is hit.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ends every process of `uid`: SIGTERM, up to `grace` for them to go, then
/// SIGKILL for the rest. Returns the pids that survived even that.
pub async fn end_uid(uid: u32, grace: Duration) -> Vec<i32> {
    for pid in pids_of_uid(uid) {
        // SAFETY: kill only sends a signal; pids come from a workspace's
        // own uid, never 0 nor the daemon's.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !pids_of_uid(uid).is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill_uid(uid, Duration::from_secs(5)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process whose first thread ended while another runs on: alive,
    /// though its own state says zombie.
    #[test]
    fn a_process_whose_first_thread_ended_is_alive_until_killed() {
        let script = "import threading, time, ctypes, sys\n\
                      threading.Thread(target=time.sleep, args=(60,)).start()\n\
                      print('ready', flush=True)\n\
                      ctypes.CDLL(None).syscall(60, 0)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "ready\n");
        // Wait for the first thread to be gone (its state turns Z).
        while thread_alive(&format!("/proc/{pid}/stat")) {
            std::thread::yield_now();
        }
        assert!(is_alive(pid), "the second thread still runs");
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn a_process_descends_from_its_ancestors_only() {
        let me = std::process::id() as i32;
        let parent = parent_pid(me).expect("the test has a parent");
        assert!(descends_from(me, me));
        assert!(descends_from(me, parent));
        assert!(descends_from(me, 1), "everything descends from init");
        assert!(!descends_from(parent, me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let child_pid = child.id() as i32;
        assert!(descends_from(child_pid, me));
        assert!(!descends_from(me, child_pid));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!descends_from(i32::MAX, me), "a pid that does not exist");
    }
}
