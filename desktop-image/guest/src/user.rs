//! The workspace's user (id 1000, the image's `user`): who runs the desktop
//! session, every exec, and whose file ids every files op uses.
//!
//! The supervisor itself runs as another id (the services', 1001, in the
//! jail; root in a microVM), so the user's processes cannot read its memory
//! or descriptors, nor reach Xvnc's RFB socket or the browser. A process
//! started for the user switches ids between fork and exec
//! ([`run_as_user`]); a files op switches only the file ids of the thread
//! doing it ([`FilesAsUser`]), so permissions are the user's.
//!
//! Nothing switches when the supervisor already is the user (a unit test,
//! or a jail of an older runtime that mapped one id): see [`init`].

use std::sync::OnceLock;

use crate::caps;

/// The user's uid and gid inside the workspace.
pub const UID: u32 = 1000;
pub const GID: u32 = 1000;

static SWITCH: OnceLock<bool> = OnceLock::new();
/// A seccomp filter the user's processes get on top of the supervisor's
/// (a microVM's: no vsock), set once at start.
static EXTRA_FILTER: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();

/// Every process started for the user from now on installs `filter`.
pub fn add_filter(filter: Vec<libc::sock_filter>) {
    let _ = EXTRA_FILTER.set(filter);
}

/// Decides, once at start, whether work for the user switches ids: yes
/// unless the supervisor runs as the user already. Until this is called
/// (unit tests) nothing switches.
pub fn init() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    *SWITCH.get_or_init(|| me != UID)
}

fn switching() -> bool {
    SWITCH.get().copied().unwrap_or(false)
}

/// Makes the user's group the supervisor's only supplementary group, so
/// the services (Chromium's file chooser and uploads) can read what the
/// user leaves group-readable (its home is 0750). Call while the process
/// has one thread.
pub fn join_users_group() -> std::io::Result<()> {
    let groups = [GID];
    // SAFETY: setgroups reads `groups.len()` ids from a live local array.
    if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `command` run as the user, with no capability at all: the child
/// takes the user's gid and uid (no supplementary groups) before it
/// changes to its working directory (the user's home is closed to the
/// services' id), then drops every capability (a change between two
/// non-zero uids keeps them) just before exec.
pub fn run_as_user(command: &mut tokio::process::Command) {
    if !switching() {
        return;
    }
    command.uid(UID).gid(GID);
    let filter = EXTRA_FILTER.get();
    // SAFETY: `caps::drop_all` makes only raw system calls on stack memory
    // (prctl, capset), and `seccomp_load::install` one prctl on a program
    // made before the fork: async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            caps::drop_all()?;
            match filter {
                Some(filter) => crate::seccomp_load::install(filter),
                None => Ok(()),
            }
        });
    }
}

/// While it lives, the calling thread opens, creates and checks files as
/// the user (`setfsuid`/`setfsgid` are per thread); dropping it switches
/// back. Needs `CAP_SETUID`/`CAP_SETGID`, which the supervisor keeps.
pub struct FilesAsUser {
    previous: Option<(u32, u32)>,
}

impl FilesAsUser {
    pub fn begin() -> std::io::Result<Self> {
        if !switching() {
            return Ok(Self { previous: None });
        }
        // SAFETY: setfsgid/setfsuid take an id and only change this
        // thread's file ids; each returns the previous one. An id of -1
        // changes nothing and reports the current one.
        let (gid, uid, now_gid, now_uid) = unsafe {
            let gid = libc::setfsgid(GID);
            let uid = libc::setfsuid(UID);
            (gid, uid, libc::setfsgid(u32::MAX), libc::setfsuid(u32::MAX))
        };
        let guard = Self {
            previous: Some((uid as u32, gid as u32)),
        };
        if now_uid as u32 != UID || now_gid as u32 != GID {
            drop(guard);
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "cannot take the user's file ids (the supervisor lacks CAP_SETUID/CAP_SETGID)",
            ));
        }
        Ok(guard)
    }
}

impl Drop for FilesAsUser {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.previous {
            // SAFETY: as in `begin`: back to this thread's own ids.
            unsafe {
                libc::setfsuid(uid);
                libc::setfsgid(gid);
            }
        }
    }
}

/// The user's runtime directory (`XDG_RUNTIME_DIR`), made as the user,
/// mode 0700.
pub const RUNTIME_DIR: &str = "/tmp/runtime-user";

pub fn make_runtime_dir() -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let _as_user = FilesAsUser::begin()?;
    match std::fs::DirBuilder::new().mode(0o700).create(RUNTIME_DIR) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => Err(err),
        _ => Ok(()),
    }
}
