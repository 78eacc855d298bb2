//! A workspace's cgroup as a test reads it from the host: the daemon is the
//! test's child, so the workspace's cgroup sits below the test's own, in
//! `cubicle/<id>`.

use std::path::{Path, PathBuf};

/// The file holding the CPU time (ns on v1, `usage_usec` on v2) of
/// workspace `id`'s cgroup, if there is one.
pub fn cpu_file(id: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let file = Path::new("/sys/fs/cgroup")
            .join(path.trim_start_matches('/'))
            .join("cubicle")
            .join(id)
            .join("cpu.stat");
        return file.exists().then_some(file);
    }
    let line = own.lines().find(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|c| c == "cpuacct"))
    })?;
    let (controllers, path) = line.split_once(':')?.1.split_once(':')?;
    let file = Path::new("/sys/fs/cgroup")
        .join(controllers)
        .join(path.trim_start_matches('/'))
        .join("cubicle")
        .join(id)
        .join("cpuacct.usage");
    file.exists().then_some(file)
}

/// CPU time used so far by the cgroup of `file` ([`cpu_file`]), in
/// microseconds.
pub fn cpu_usec(file: &Path) -> u64 {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    if file.ends_with("cpu.stat") {
        return text
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no usage_usec in {}", file.display()));
    }
    text.trim()
        .parse::<u64>()
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        / 1000
}

/// The folder of workspace `id`'s cgroup that holds `controller`'s files
/// (`memory`, `pids`, `cpu`): the one folder on cgroup v2, that
/// controller's hierarchy on v1. `None` if it is not there.
pub fn controller_dir(id: &str, controller: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let dir = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'))
    } else {
        let (mount, path) = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| (controllers.to_owned(), path.to_owned()))
        })?;
        Path::new("/sys/fs/cgroup")
            .join(mount)
            .join(path.trim_start_matches('/'))
    };
    let dir = dir.join("cubicle").join(id);
    dir.is_dir().then_some(dir)
}

/// A cgroup file's first line, trimmed.
pub fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}
