//! The `limits` a create asks for (README API table: `"limits"?:
//! {"memory_mb","cpus","cpu_weight","pids","disk_mb"}`) are taken as asked,
//! shown by `GET`, and are the numbers the kernel enforces: the workspace's
//! cgroup files and the size of its disk. `limits.rs` proves the limits
//! hold under attack; this proves each field reaches the kernel, and that a
//! create with them is not refused.

use cubicle_tests::Daemon;
use cubicle_tests::cgroup::{controller_dir, read};
use reqwest::Method;
use serde_json::json;

const MIB: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_asked_at_create_is_what_the_kernel_enforces() {
    let data = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(data.path(), None, &[]).unwrap();
    // Each value differs from its default (2 GiB, 4096 tasks, 4 GiB, ...).
    let asked =
        json!({"memory_mb": 768, "cpus": 0.5, "cpu_weight": 50, "pids": 700, "disk_mb": 1536});
    let ws = daemon
        .create_workspace(&json!({ "limits": asked }).to_string())
        .await;
    let id = ws["id"].as_str().unwrap().to_owned();
    let (status, view) = daemon
        .call(Method::GET, &format!("/v1/workspaces/{id}"), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{view}");
    for field in ["memory_mb", "cpu_weight", "pids", "disk_mb"] {
        assert_eq!(view["limits"][field], asked[field], "{field}: {view}");
    }
    assert_eq!(view["limits"]["cpus"].as_f64(), Some(0.5), "{view}");

    let (Some(memory), Some(pids), Some(cpu)) = (
        controller_dir(&id, "memory"),
        controller_dir(&id, "pids"),
        controller_dir(&id, "cpu"),
    ) else {
        return cubicle_tests::skip("the workspace's cgroup folders are not where this test looks");
    };
    let v2 = memory.join("memory.max").exists();
    let memory_bytes: u64 = if v2 {
        read(&memory, "memory.max").parse().unwrap()
    } else {
        read(&memory, "memory.limit_in_bytes").parse().unwrap()
    };
    assert_eq!(
        memory_bytes,
        768 * MIB,
        "memory limit in {}",
        memory.display()
    );
    assert_eq!(read(&pids, "pids.max"), "700", "{}", pids.display());
    let (quota, period): (f64, f64) = if v2 {
        let max = read(&cpu, "cpu.max");
        let (q, p) = max.split_once(' ').unwrap();
        (q.parse().unwrap(), p.parse().unwrap())
    } else {
        (
            read(&cpu, "cpu.cfs_quota_us").parse().unwrap(),
            read(&cpu, "cpu.cfs_period_us").parse().unwrap(),
        )
    };
    assert!(
        (quota / period - 0.5).abs() < 0.01,
        "cpus 0.5 is a quota of {quota} per {period} in {}",
        cpu.display()
    );
    if v2 {
        assert_eq!(read(&cpu, "cpu.weight"), "50");
    } else {
        // v1 shares: weight 100 is 1024.
        assert_eq!(read(&cpu, "cpu.shares"), "512");
    }

    // The disk: the home's filesystem is that size (less what ext4 keeps
    // for itself), not the 4 GiB default.
    let body = json!({"command": "stat -f -c '%b %S' /home/user"}).to_string();
    let (status, out) = daemon
        .call(
            Method::POST,
            &format!("/v1/workspaces/{id}/exec"),
            Some(&body),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{out}");
    let size: u64 = out["stdout"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap())
        .product();
    assert!(
        (1536 * MIB * 9 / 10..=1536 * MIB).contains(&size),
        "the home's filesystem is {} MiB for disk_mb 1536",
        size / MIB
    );
}
