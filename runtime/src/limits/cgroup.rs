//! A cgroup per workspace, always below the daemon's own cgroup (as
//! `/proc/self/cgroup` names it, per controller): `<own>/cubicle/<id>`.
//!
//! cgroup v2 where the host has a v2 hierarchy with `memory`, `cpu` and
//! `pids` available to the daemon's cgroup (`memory.max`, `cpu.max`,
//! `cpu.weight`, `pids.max`; freezing uses `cgroup.freeze`); cgroup v1 where
//! only v1 controllers are mounted (`memory.limit_in_bytes` and
//! `memory.memsw.limit_in_bytes`, `cpu.cfs_quota_us`, `cpu.shares`,
//! `pids.max`, plus a `freezer` cgroup for pausing and `cpuacct` for usage).
//!
//! The jail's first process joins by writing `0` to each `cgroup.procs` file
//! between fork and exec ([`WorkspaceCgroup::open_join_files`] opens them
//! beforehand), so every process of the workspace is inside from its first
//! instruction.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Limits;

/// The period of the CFS quota, in microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;
/// Controllers a v2 hierarchy must offer the daemon.
const V2_CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];
/// Name of the folder below the daemon's cgroup holding the workspaces'.
const PARENT: &str = "cubicle";
/// How long removing a cgroup waits for its killed tasks to go.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// What can go wrong with a workspace's cgroup.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cgroup file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no usable cgroup hierarchy for workspace limits: {0}; mount cgroup v2 with memory, cpu and pids delegated to the daemon, or the v1 memory, cpu and pids controllers"
    )]
    NoHierarchy(String),
    #[error(
        "cannot enable {controllers} below the daemon's cgroup {path}: {source}; delegate them to the daemon (systemd: Delegate=yes)"
    )]
    Delegation {
        controllers: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroup {path} still has tasks {tasks:?} after SIGKILL")]
    Busy { path: String, tasks: Vec<i32> },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One line of `/proc/self/cgroup`: `id:controllers:path`.
#[derive(Debug, Clone, PartialEq)]
struct Membership {
    /// Empty for the v2 line (`0::/path`).
    controllers: Vec<String>,
    path: String,
}

fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some(Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .collect()
}

/// A cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq)]
struct Mount {
    /// The folder of the hierarchy this mount shows.
    root: String,
    point: PathBuf,
    v2: bool,
    /// Super options (for v1: the controllers).
    options: Vec<String>,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let root = fields.get(3)?;
            let point = fields.get(4)?;
            let mut rest = after.split(' ');
            let fstype = rest.next()?;
            let _source = rest.next()?;
            let options = rest.next().unwrap_or_default();
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(root),
                point: PathBuf::from(unescape(point)),
                v2,
                options: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folder of cgroup `path` on `mount`.
fn dir_on(mount: &Mount, path: &str) -> PathBuf {
    let relative = if mount.root == "/" {
        path
    } else {
        path.strip_prefix(mount.root.as_str()).unwrap_or(path)
    };
    mount.point.join(relative.trim_start_matches('/'))
}

/// Where workspace cgroups go on this host.
#[derive(Debug, Clone, PartialEq)]
pub enum Hierarchy {
    /// The daemon's own v2 cgroup folder.
    V2 { own: PathBuf },
    /// The daemon's own cgroup folder in each v1 hierarchy; `cpuacct` and
    /// `freezer` are optional.
    V1 {
        memory: PathBuf,
        cpu: PathBuf,
        pids: PathBuf,
        cpuacct: Option<PathBuf>,
        freezer: Option<PathBuf>,
    },
}

impl Hierarchy {
    /// The hierarchy of this process, from `/proc/self/cgroup` and
    /// `/proc/self/mountinfo`.
    pub fn detect() -> Result<Self, CgroupError> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|source| CgroupError::Io {
                path: path.to_owned(),
                source,
            })
        };
        let cgroup = read("/proc/self/cgroup")?;
        let mountinfo = read("/proc/self/mountinfo")?;
        Self::choose(&cgroup, &mountinfo, |path| {
            std::fs::read_to_string(path).ok()
        })
    }

    /// v2 when the daemon's v2 cgroup offers memory, cpu and pids
    /// (`read` gives its `cgroup.controllers`), else v1 when memory, cpu
    /// and pids are mounted as v1.
    fn choose(
        proc_cgroup: &str,
        mountinfo: &str,
        read: impl Fn(&Path) -> Option<String>,
    ) -> Result<Self, CgroupError> {
        let members = parse_proc_cgroup(proc_cgroup);
        let mounts = parse_mountinfo(mountinfo);
        let v2_line = members.iter().find(|m| m.controllers.is_empty());
        let v2_mount = mounts.iter().find(|m| m.v2);
        let mut why_not_v2 = "no cgroup v2 hierarchy".to_owned();
        if let (Some(line), Some(mount)) = (v2_line, v2_mount) {
            let own = dir_on(mount, &line.path);
            let offered = read(&own.join("cgroup.controllers")).unwrap_or_default();
            let offered: Vec<&str> = offered.split_whitespace().collect();
            let missing: Vec<&str> = V2_CONTROLLERS
                .into_iter()
                .filter(|c| !offered.contains(c))
                .collect();
            if missing.is_empty() {
                return Ok(Self::V2 { own });
            }
            why_not_v2 = format!(
                "the v2 cgroup {} lacks {}",
                own.display(),
                missing.join(", ")
            );
        }
        let v1 = |controller: &str| -> Option<PathBuf> {
            let line = members
                .iter()
                .find(|m| m.controllers.iter().any(|c| c == controller))?;
            let mount = mounts
                .iter()
                .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))?;
            Some(dir_on(mount, &line.path))
        };
        match (v1("memory"), v1("cpu"), v1("pids")) {
            (Some(memory), Some(cpu), Some(pids)) => Ok(Self::V1 {
                memory,
                cpu,
                pids,
                cpuacct: v1("cpuacct"),
                freezer: v1("freezer"),
            }),
            _ => Err(CgroupError::NoHierarchy(format!(
                "{why_not_v2}, and v1 memory, cpu or pids is not mounted"
            ))),
        }
    }

    /// Makes the shared parent folders (`<own>/cubicle`), and on v2 enables
    /// the controllers for the workspaces below it. On v2 a cgroup with
    /// processes cannot pass controllers down, so the daemon first moves
    /// itself into a leaf `<own>/daemon` (the usual pattern for a delegated
    /// cgroup). Idempotent.
    pub fn prepare(&self) -> Result<(), CgroupError> {
        match self {
            Self::V2 { own } => {
                let wanted = V2_CONTROLLERS.map(|c| format!("+{c}")).join(" ");
                let control = own.join("cgroup.subtree_control");
                if !enabled(&control) && write(&control, &wanted).is_err() {
                    let leaf = own.join("daemon");
                    mkdir(&leaf)?;
                    write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
                    write(&control, &wanted).map_err(|e| delegation(own, e))?;
                }
                let parent = own.join(PARENT);
                mkdir(&parent)?;
                let control = parent.join("cgroup.subtree_control");
                if !enabled(&control) {
                    write(&control, &wanted).map_err(|e| delegation(&parent, e))?;
                }
                Ok(())
            }
            Self::V1 { .. } => {
                for dir in self.own_dirs() {
                    mkdir(&dir.join(PARENT))?;
                }
                Ok(())
            }
        }
    }

    fn own_dirs(&self) -> Vec<&Path> {
        match self {
            Self::V2 { own } => vec![own],
            Self::V1 {
                memory,
                cpu,
                pids,
                cpuacct,
                freezer,
            } => {
                let mut dirs: Vec<&Path> = vec![memory, cpu, pids];
                dirs.extend(cpuacct.as_deref());
                dirs.extend(freezer.as_deref());
                // Co-mounted controllers (`cpu,cpuacct`) share one folder.
                dirs.sort();
                dirs.dedup();
                dirs
            }
        }
    }

    /// Workspace `id`'s cgroup in `detected` (what [`Hierarchy::detect`]
    /// found at a backend's start), or why there is none: both backends
    /// keep the detection and ask here.
    pub fn workspace_in(
        detected: &Result<Hierarchy, String>,
        id: &str,
    ) -> Result<WorkspaceCgroup, CgroupError> {
        match detected {
            Ok(hierarchy) => Ok(hierarchy.workspace(id)),
            Err(reason) => Err(CgroupError::NoHierarchy(reason.clone())),
        }
    }

    /// The cgroup of workspace `id` (nothing is made yet).
    pub fn workspace(&self, id: &str) -> WorkspaceCgroup {
        let below = |own: &Path| own.join(PARENT).join(id);
        let dirs = match self {
            Self::V2 { own } => Dirs::V2(below(own)),
            Self::V1 {
                memory,
                cpu,
                pids,
                cpuacct,
                freezer,
            } => Dirs::V1 {
                memory: below(memory),
                cpu: below(cpu),
                pids: below(pids),
                cpuacct: cpuacct.as_deref().map(below),
                freezer: freezer.as_deref().map(below),
            },
        };
        WorkspaceCgroup { dirs }
    }
}

fn delegation(path: &Path, source: CgroupError) -> CgroupError {
    let source = match source {
        CgroupError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    };
    CgroupError::Delegation {
        controllers: V2_CONTROLLERS.join(", "),
        path: path.display().to_string(),
        source,
    }
}

/// Whether a `cgroup.subtree_control` already lists every v2 controller.
fn enabled(control: &Path) -> bool {
    let text = std::fs::read_to_string(control).unwrap_or_default();
    let on: Vec<&str> = text.split_whitespace().collect();
    V2_CONTROLLERS.iter().all(|c| on.contains(c))
}

fn mkdir(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err(dir)(e)),
    }
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(io_err(path))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file (`memory.events`, `cpu.stat`,
/// `memory.oom_control`).
fn keyed(path: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// v1 `cpu.shares` for a v2 `cpu.weight` (100 ↔ 1024).
fn shares_of(weight: u32) -> u64 {
    (u64::from(weight) * 1024 / 100).clamp(2, 262_144)
}

#[derive(Debug, Clone, PartialEq)]
enum Dirs {
    V2(PathBuf),
    V1 {
        memory: PathBuf,
        cpu: PathBuf,
        pids: PathBuf,
        cpuacct: Option<PathBuf>,
        freezer: Option<PathBuf>,
    },
}

/// What the kernel counts for one workspace's cgroup.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupUsage {
    pub memory_bytes: Option<u64>,
    pub cpu_usage_usec: Option<u64>,
    pub pids: Option<u64>,
    pub oom_kills: Option<u64>,
}

/// One workspace's cgroup (one folder per hierarchy on v1).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceCgroup {
    dirs: Dirs,
}

impl WorkspaceCgroup {
    /// Every folder of this cgroup, one per hierarchy.
    pub fn dirs(&self) -> Vec<&Path> {
        let mut dirs: Vec<&Path> = match &self.dirs {
            Dirs::V2(dir) => vec![dir],
            Dirs::V1 {
                memory,
                cpu,
                pids,
                cpuacct,
                freezer,
            } => {
                let mut dirs: Vec<&Path> = vec![memory, cpu, pids];
                dirs.extend(cpuacct.as_deref());
                dirs.extend(freezer.as_deref());
                dirs
            }
        };
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Makes the cgroup fresh (a leftover of a crash is emptied and
    /// removed first) and writes `limits` into it.
    pub fn create(&self, limits: &Limits) -> Result<(), CgroupError> {
        self.remove()?;
        for dir in self.dirs() {
            mkdir(dir)?;
        }
        let quota = (limits.cpus() * CPU_PERIOD_US as f64).round() as u64;
        match &self.dirs {
            Dirs::V2(dir) => {
                write(&dir.join("memory.max"), &limits.memory_bytes().to_string())?;
                let swap = dir.join("memory.swap.max");
                if swap.exists() {
                    write(&swap, "0")?;
                }
                write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
                write(&dir.join("cpu.weight"), &limits.cpu_weight().to_string())?;
                write(&dir.join("pids.max"), &limits.pids().to_string())?;
            }
            Dirs::V1 {
                memory, cpu, pids, ..
            } => {
                let bytes = limits.memory_bytes().to_string();
                // Lower the RAM limit first: memsw may never be below it.
                write(&memory.join("memory.limit_in_bytes"), &bytes)?;
                let memsw = memory.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    write(&memsw, &bytes)?;
                }
                write(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                write(&cpu.join("cpu.cfs_quota_us"), &quota.to_string())?;
                write(
                    &cpu.join("cpu.shares"),
                    &shares_of(limits.cpu_weight()).to_string(),
                )?;
                write(&pids.join("pids.max"), &limits.pids().to_string())?;
            }
        }
        Ok(())
    }

    /// Opens each `cgroup.procs` for writing (close-on-exec), for the
    /// child to join between fork and exec with [`join_from_child`].
    pub fn open_join_files(&self) -> Result<Vec<File>, CgroupError> {
        self.dirs()
            .into_iter()
            .map(|dir| {
                let path = dir.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io_err(&path))
            })
            .collect()
    }

    /// Whether any folder of the cgroup exists.
    pub fn exists(&self) -> bool {
        self.dirs().iter().any(|dir| dir.exists())
    }

    /// Pids of the tasks' processes in the cgroup.
    fn procs(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs()
            .iter()
            .filter_map(|dir| std::fs::read_to_string(dir.join("cgroup.procs")).ok())
            .flat_map(|text| {
                text.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills whatever still runs in the cgroup (thawing it first) and
    /// removes its folders. Nothing to do when it does not exist.
    pub fn remove(&self) -> Result<(), CgroupError> {
        if !self.exists() {
            return Ok(());
        }
        match &self.dirs {
            Dirs::V2(dir) => {
                let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            }
            Dirs::V1 { freezer, .. } => {
                if let Some(freezer) = freezer {
                    let _ = std::fs::write(freezer.join("freezer.state"), "THAWED");
                }
            }
        }
        let deadline = Instant::now() + REMOVE_TIMEOUT;
        loop {
            let tasks = self.procs();
            if tasks.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(CgroupError::Busy {
                    path: self
                        .dirs()
                        .first()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default(),
                    tasks,
                });
            }
            for pid in tasks {
                // SAFETY: kill(2) with a pid read from the cgroup and a valid
                // signal number; it touches no memory of ours.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for dir in self.dirs() {
            let mut tries = 0;
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    // A task that just died may still be leaving.
                    Err(_) if tries < 50 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => return Err(io_err(dir)(e)),
                }
            }
        }
        Ok(())
    }

    /// The kernel's counters for the cgroup; `None` where a file is absent.
    pub fn usage(&self) -> CgroupUsage {
        match &self.dirs {
            Dirs::V2(dir) => CgroupUsage {
                memory_bytes: read_u64(&dir.join("memory.current")),
                cpu_usage_usec: keyed(&dir.join("cpu.stat"), "usage_usec"),
                pids: read_u64(&dir.join("pids.current")),
                oom_kills: keyed(&dir.join("memory.events"), "oom_kill"),
            },
            Dirs::V1 {
                memory,
                pids,
                cpuacct,
                ..
            } => CgroupUsage {
                memory_bytes: read_u64(&memory.join("memory.usage_in_bytes")),
                cpu_usage_usec: cpuacct
                    .as_ref()
                    .and_then(|dir| read_u64(&dir.join("cpuacct.usage")))
                    .map(|ns| ns / 1000),
                pids: read_u64(&pids.join("pids.current")),
                oom_kills: keyed(&memory.join("memory.oom_control"), "oom_kill"),
            },
        }
    }

    /// The file that freezes the cgroup and the value that does it: v2
    /// `cgroup.freeze` (`1`/`0`), v1 `freezer.state` (`FROZEN`/`THAWED`).
    /// `None` on a v1 host without the freezer controller.
    pub fn freeze_file(&self) -> Option<(PathBuf, &'static str, &'static str)> {
        match &self.dirs {
            Dirs::V2(dir) => Some((dir.join("cgroup.freeze"), "1", "0")),
            Dirs::V1 { freezer, .. } => freezer
                .as_ref()
                .map(|dir| (dir.join("freezer.state"), "FROZEN", "THAWED")),
        }
    }
}

/// Moves the calling process into every cgroup whose `cgroup.procs` is
/// open in `fds` by writing `0` to each. Meant for the child between fork
/// and exec: it only calls write(2), which is async-signal-safe, and
/// allocates nothing.
pub fn join_from_child(fds: &[RawFd]) -> std::io::Result<()> {
    for &fd in fds {
        // SAFETY: `fd` is an open descriptor of a `cgroup.procs` file kept
        // alive by the parent until after spawn; the buffer is a static
        // one-byte string.
        let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        if written != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The raw descriptors of opened join files, for [`join_from_child`].
pub fn raw_fds(files: &[File]) -> Vec<RawFd> {
    files.iter().map(AsRawFd::as_raw_fd).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS_HOST_CGROUP: &str = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n4:memory:/process_api/97223ce2\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    const THIS_HOST_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn parses_proc_self_cgroup_lines() {
        let members =
            parse_proc_cgroup("4:memory:/process_api/ab\n2:cpu,cpuacct:/x\n0::/user.slice/a b\n");
        assert_eq!(members[0].controllers, ["memory"]);
        assert_eq!(members[0].path, "/process_api/ab");
        assert_eq!(members[1].controllers, ["cpu", "cpuacct"]);
        assert!(members[2].controllers.is_empty());
        assert_eq!(members[2].path, "/user.slice/a b");
        assert!(parse_proc_cgroup("garbage\n").is_empty());
    }

    #[test]
    fn hybrid_host_without_v2_controllers_uses_v1_below_own_cgroups() {
        let chosen =
            Hierarchy::choose(THIS_HOST_CGROUP, THIS_HOST_MOUNTS, |_| Some(String::new())).unwrap();
        let Hierarchy::V1 {
            memory,
            cpu,
            pids,
            cpuacct,
            freezer,
        } = &chosen
        else {
            panic!("expected v1, got {chosen:?}");
        };
        assert_eq!(
            memory,
            Path::new("/sys/fs/cgroup/memory/process_api/97223ce2")
        );
        assert_eq!(cpu, Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(pids, Path::new("/sys/fs/cgroup/pids"));
        assert_eq!(
            cpuacct.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpuacct"))
        );
        assert_eq!(
            freezer.as_deref(),
            Some(Path::new("/sys/fs/cgroup/freezer"))
        );
        let ws = chosen.workspace("ws-1");
        assert!(ws.dirs().contains(&Path::new(
            "/sys/fs/cgroup/memory/process_api/97223ce2/cubicle/ws-1"
        )));
        assert_eq!(ws.dirs().len(), 5);
    }

    #[test]
    fn v2_with_controllers_is_preferred() {
        let cgroup = "0::/system.slice/cubicle.service\n";
        let mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let chosen = Hierarchy::choose(cgroup, mounts, |path| {
            assert_eq!(
                path,
                Path::new("/sys/fs/cgroup/system.slice/cubicle.service/cgroup.controllers")
            );
            Some("cpuset cpu io memory pids\n".into())
        })
        .unwrap();
        let own = PathBuf::from("/sys/fs/cgroup/system.slice/cubicle.service");
        assert_eq!(chosen, Hierarchy::V2 { own: own.clone() });
        assert_eq!(
            chosen.workspace("ws-9").dirs(),
            [own.join("cubicle/ws-9").as_path()]
        );
    }

    #[test]
    fn v2_without_controllers_and_no_v1_is_refused_with_the_reason() {
        let cgroup = "0::/a\n";
        let mounts = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let err = Hierarchy::choose(cgroup, mounts, |_| Some("cpu io\n".into())).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("lacks memory, pids"), "{message}");
    }

    #[test]
    fn co_mounted_and_namespaced_v1_mounts() {
        let cgroup = "3:cpu,cpuacct:/outer/inner\n2:memory:/outer/inner\n1:pids:/outer/inner\n";
        let mounts = "\
1 0 0:1 /outer /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
2 0 0:2 /outer /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
3 0 0:3 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
";
        let chosen = Hierarchy::choose(cgroup, mounts, |_| None).unwrap();
        let Hierarchy::V1 {
            cpu, cpuacct, pids, ..
        } = &chosen
        else {
            panic!("expected v1");
        };
        assert_eq!(cpu, Path::new("/sys/fs/cgroup/cpu,cpuacct/inner"));
        assert_eq!(cpuacct.as_deref(), Some(cpu.as_path()));
        assert_eq!(pids, Path::new("/sys/fs/cgroup/pids/outer/inner"));
        assert_eq!(chosen.workspace("w").dirs().len(), 3);
    }

    #[test]
    fn mountinfo_escapes_and_weights() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain\\"), "/plain\\");
        assert_eq!(shares_of(100), 1024);
        assert_eq!(shares_of(1), 10);
        assert_eq!(shares_of(10_000), 102_400);
    }

    /// On the real host (root only): a child joins between fork and exec,
    /// gets the limits, and removing the cgroup kills it and leaves nothing.
    #[test]
    fn a_child_joins_before_exec_and_removal_leaves_nothing() {
        use std::os::unix::process::CommandExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to make cgroups");
            return;
        }
        let hierarchy = Hierarchy::detect().unwrap();
        hierarchy.prepare().unwrap();
        let id = format!("unit-{}", std::process::id());
        let cgroup = hierarchy.workspace(&id);
        let request = super::super::LimitsRequest {
            memory_mb: Some(256),
            pids: Some(64),
            cpus: Some(0.5),
            ..Default::default()
        };
        let policy = super::super::LimitsPolicy::with_maxima(1 << 40, 2.0, 4096, 1 << 40);
        cgroup.create(&policy.resolve(&request).unwrap()).unwrap();
        let files = cgroup.open_join_files().unwrap();
        let fds = raw_fds(&files);
        let mut command = std::process::Command::new("sleep");
        command.arg("30");
        // SAFETY: the hook only calls write(2) on open descriptors.
        unsafe {
            command.pre_exec(move || join_from_child(&fds));
        }
        let mut child = command.spawn().unwrap();
        drop(files);
        let member = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
        let suffix = format!("/{PARENT}/{id}");
        for line in parse_proc_cgroup(&member) {
            let ours = ["memory", "pids", "cpu"]
                .iter()
                .any(|c| line.controllers.iter().any(|l| l == c));
            if ours || (line.controllers.is_empty() && matches!(hierarchy, Hierarchy::V2 { .. })) {
                assert!(line.path.ends_with(&suffix), "{member}");
            }
        }
        let limit = match &cgroup.dirs {
            Dirs::V2(dir) => read_u64(&dir.join("memory.max")),
            Dirs::V1 { memory, .. } => read_u64(&memory.join("memory.limit_in_bytes")),
        };
        assert_eq!(limit, Some(256 << 20));
        assert_eq!(cgroup.usage().pids, Some(1));
        cgroup.remove().unwrap();
        assert!(!cgroup.exists());
        let status = child.wait().unwrap();
        assert!(!status.success(), "the sleep was killed: {status}");
    }

    #[test]
    fn reads_keyed_counters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.oom_control");
        std::fs::write(&path, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(keyed(&path, "oom_kill"), Some(3));
        assert_eq!(keyed(&path, "absent"), None);
    }
}
