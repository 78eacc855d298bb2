//! The jail's user namespace, made by the daemon before bubblewrap runs:
//! two ids inside, each its own unprivileged host uid, and no further user
//! namespace possible below it. Why two ids: see [`crate::jail`].
//!
//! | inside | host | who |
//! | --- | --- | --- |
//! | 1000 | the workspace's `host_uid` | the user: shell, desktop session, exec, files |
//! | 1001 | its services uid (`host_uid + 1`) | `cubicle-guest`, Xvnc, Chromium |
//!
//! bubblewrap started as one unprivileged uid maps just that uid, so the
//! namespace is made here: a short-lived holder process, already running as
//! the services uid, `unshare`s a user namespace (which it then owns, as
//! bubblewrap would) and sets the namespace's own `max_user_namespaces` to
//! 0 (the creator holds every capability in the new namespace until it
//! execs; nothing inside ever gets `CAP_SYS_RESOURCE` to raise it). Root
//! then writes the two-line uid and gid maps (only a writer privileged in
//! the parent namespace may map more than its own id), keeps a descriptor
//! of the namespace and ends the holder. bubblewrap joins it with
//! `--userns FD` and checks with `--assert-userns-disabled` that nothing
//! inside can make another.

use std::ffi::CStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::backend::{BackendError, WorkspaceSpec};

/// The user's id inside every workspace (the image's `user`).
pub const USER_ID: u32 = 1000;
/// The services' id inside the jail.
pub const SERVICES_ID: u32 = 1001;

const MAX_USER_NAMESPACES: &CStr = c"/proc/sys/user/max_user_namespaces";

fn spawn_err(what: &str) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |err| {
        BackendError::Spawn(format!(
            "cannot make the jail's user namespace: {what}: {err}"
        ))
    }
}

/// The two-line map written to `uid_map` and `gid_map` (ids and gids are
/// the same numbers here).
pub fn id_map(spec: &WorkspaceSpec) -> String {
    format!(
        "{USER_ID} {} 1\n{SERVICES_ID} {} 1\n",
        spec.host_uid,
        spec.services_uid()
    )
}

/// Makes the workspace's user namespace and returns a descriptor of it
/// (close-on-exec; the caller clears that for bubblewrap only).
pub fn create(spec: &WorkspaceSpec) -> Result<OwnedFd, BackendError> {
    let owner = spec.services_uid();
    let mut holder = Command::new("sleep");
    holder
        .arg("60")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and makes
    // only raw system calls (setgroups, setresgid, setresuid, unshare,
    // open, write, close) on memory it owns: async-signal-safe, nothing
    // allocated.
    unsafe {
        holder.pre_exec(move || become_owner(owner));
    }
    let mut child = holder.spawn().map_err(spawn_err("start the holder"))?;
    let made = map_and_open(child.id(), &id_map(spec));
    let _ = child.kill();
    let _ = child.wait();
    made
}

/// In the holder: the services uid, then a new user namespace with no
/// room for another below it.
fn become_owner(uid: u32) -> std::io::Result<()> {
    let check = |rc: libc::c_int| {
        if rc == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    };
    // SAFETY: plain system calls with valid arguments (a null list of
    // zero groups, ids, a flag, a NUL-terminated static path, a 1-byte
    // static buffer); every result is checked.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setresgid(uid, uid, uid))?;
        check(libc::setresuid(uid, uid, uid))?;
        check(libc::unshare(libc::CLONE_NEWUSER))?;
        let fd = check(libc::open(
            MAX_USER_NAMESPACES.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        ))?;
        let wrote = libc::write(fd, b"0".as_ptr().cast(), 1);
        libc::close(fd);
        if wrote != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Writes the maps of the holder `pid`'s namespace and opens it.
fn map_and_open(pid: u32, map: &str) -> Result<OwnedFd, BackendError> {
    for file in ["uid_map", "gid_map"] {
        let path = format!("/proc/{pid}/{file}");
        // One write: the kernel takes a map only whole.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(map.as_bytes()))
            .map_err(spawn_err(&path))?;
    }
    let path = format!("/proc/{pid}/ns/user");
    let ns = std::fs::File::open(&path).map_err(spawn_err(&path))?;
    Ok(ns.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn spec(uid: u32) -> WorkspaceSpec {
        WorkspaceSpec {
            id: "ws-1".into(),
            geometry: crate::geometry::Geometry::default(),
            host_uid: uid,
            dir: "/nonexistent".into(),
            top_pid: None,
            limits: Default::default(),
        }
    }

    #[test]
    fn the_map_names_both_ids() {
        assert_eq!(id_map(&spec(1_600_010)), "1000 1600010 1\n1001 1600011 1\n");
    }

    /// The real thing: a namespace with both ids mapped, owned by the
    /// services uid, in which no further user namespace can be made.
    /// Needs root.
    #[test]
    fn the_namespace_maps_two_ids_and_allows_no_other() {
        // SAFETY: getuid has no preconditions and cannot fail.
        if unsafe { libc::getuid() } != 0 {
            return cubicle_skip::skip("needs root to map two uids");
        }
        let spec = spec(1_799_100);
        let ns = create(&spec).unwrap();
        let fd = ns.as_raw_fd();
        // A child joins it as the owner would, and reports what it sees.
        let mut probe = Command::new("sh");
        probe
            .arg("-c")
            .arg("cat /proc/self/uid_map; id -u; unshare -U true && echo nested")
            .stderr(Stdio::null());
        let owner = spec.services_uid();
        // SAFETY: only raw system calls on ids and an inherited descriptor.
        unsafe {
            probe.pre_exec(move || {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(owner, owner, owner) != 0
                    || libc::setresuid(owner, owner, owner) != 0
                    || libc::setns(fd, libc::CLONE_NEWUSER) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = probe.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["1000", "1799100", "1"], "{text}");
        assert_eq!(lines[1], ["1001", "1799101", "1"], "{text}");
        assert_eq!(
            lines[2],
            ["1001"],
            "the owner joins as the services id: {text}"
        );
        assert!(
            !text.contains("nested"),
            "a nested user namespace was made: {text}"
        );
    }
}
