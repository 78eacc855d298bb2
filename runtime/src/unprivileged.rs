//! How both backends start a workspace's top process: `prlimit` (per-uid
//! process and file limits, no core dumps) then `setpriv` to the
//! workspace's own unprivileged uid with no new privileges. Each execs the
//! next, so the chain is one process, the daemon's child.

/// Limits of one workspace's processes (per uid, so per workspace).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub processes: u32,
    pub open_files: u32,
}

/// Supplementary groups of the workspace's processes.
#[derive(Debug, Clone, Copy)]
pub enum Groups {
    /// None at all.
    Clear,
    /// Only this one (the microVM needs /dev/kvm's group).
    Only(u32),
}

/// The argv prefix; the workspace's own command follows it.
pub fn prefix(uid: u32, limits: Limits, groups: Groups) -> Vec<String> {
    let groups = match groups {
        Groups::Clear => "--clear-groups".to_owned(),
        Groups::Only(gid) => format!("--groups={gid}"),
    };
    let mut argv = prlimit(limits);
    argv.extend([
        "setpriv".into(),
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        groups,
        "--no-new-privs".into(),
    ]);
    argv
}

/// `prlimit` alone, for a command that drops to its uid itself (the
/// microVM's VMM, see `cubicle_vmm::jail`): the limits hold for whichever
/// uid the process becomes.
pub fn prlimit(limits: Limits) -> Vec<String> {
    vec![
        "prlimit".into(),
        format!("--nproc={0}:{0}", limits.processes),
        format!("--nofile={0}:{0}", limits.open_files),
        "--core=0:0".into(),
        "--".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_drops_to_the_uid_with_limits() {
        let limits = Limits {
            processes: 10,
            open_files: 20,
        };
        let argv = prefix(1_600_003, limits, Groups::Only(108)).join(" ");
        assert_eq!(
            argv,
            "prlimit --nproc=10:10 --nofile=20:20 --core=0:0 -- setpriv --reuid=1600003 --regid=1600003 --groups=108 --no-new-privs"
        );
        assert!(prefix(7, limits, Groups::Clear).contains(&"--clear-groups".to_owned()));
    }
}
