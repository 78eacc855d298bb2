//! The supervisor's capabilities, and none for anything it starts.
//!
//! In the jail `cubicle-guest` starts as the services id (1001) with a few
//! capabilities that bubblewrap also put in its ambient set (so they would
//! pass on to every child): `SETUID`/`SETGID` (to run the user's processes
//! and files ops as the user), `KILL` (to end them), and `SYS_ADMIN` plus
//! `NET_ADMIN` for the browser's network namespace. At start it keeps the
//! first three for itself only ([`keep_only_for_self`]); every child drops
//! all ([`drop_all`], between fork and exec). In a microVM it is root and
//! the same calls hold.
//!
//! Capabilities are per thread: [`keep_only_for_self`] runs before any
//! other thread exists, so every later thread starts from its result.

/// Capability numbers (linux/capability.h) of what the supervisor keeps.
pub const KILL: u32 = 5;
pub const SETGID: u32 = 6;
pub const SETUID: u32 = 7;

/// What the supervisor keeps after start.
const KEPT: [u32; 3] = [SETUID, SETGID, KILL];

const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's (effective, permitted, inheritable) sets.
fn get() -> std::io::Result<(u64, u64, u64)> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: header and a two-element data array of the V3 layout, both
    // valid for writes and alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let join = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
        join(data[0].inheritable, data[1].inheritable),
    ))
}

/// Sets the calling thread's three sets; async-signal-safe (one system
/// call on stack memory).
fn set(effective: u64, permitted: u64, inheritable: u64) -> std::io::Result<()> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let split = |set: u64| (set as u32, (set >> 32) as u32);
    let (e0, e1) = split(effective);
    let (p0, p1) = split(permitted);
    let (i0, i1) = split(inheritable);
    let data = [
        Data {
            effective: e0,
            permitted: p0,
            inheritable: i0,
        },
        Data {
            effective: e1,
            permitted: p1,
            inheritable: i1,
        },
    ];
    // SAFETY: a valid V3 header and two data elements, alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn bit(cap: u32) -> u64 {
    1u64 << cap
}

/// Clears the ambient set (async-signal-safe).
fn clear_ambient() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    // EINVAL: a kernel without ambient capabilities has none to clear.
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// At start, on the only thread: nothing in the ambient or inheritable
/// sets (no child inherits a capability), and of the rest only `SETUID`,
/// `SETGID` and `KILL`, if they were there.
pub fn keep_only_for_self() -> std::io::Result<()> {
    clear_ambient()?;
    let (effective, permitted, _) = get()?;
    let kept = KEPT.iter().fold(0, |set, &cap| set | bit(cap));
    set(effective & kept, permitted & kept, 0)
}

/// Sets exactly `caps` as effective and permitted (none inheritable, no
/// ambient): a microVM's init gives the supervisor what bubblewrap gives it
/// in a jail, after changing to the services' id with keep-caps on.
pub fn start_with(caps: &[u32]) -> std::io::Result<()> {
    clear_ambient()?;
    let wanted = caps.iter().fold(0, |set, &cap| set | bit(cap));
    set(wanted, wanted, 0)
}

/// Drops every capability of the calling thread: for a child between fork
/// and exec (async-signal-safe), and for the browser's network thread
/// once it is set up.
pub fn drop_all() -> std::io::Result<()> {
    clear_ambient()?;
    set(0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_drops_everything_has_nothing_left() {
        let result = std::thread::spawn(|| {
            drop_all().unwrap();
            get().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(result, (0, 0, 0));
    }

    #[test]
    fn keeping_for_self_keeps_at_most_three() {
        let (effective, permitted, inheritable) = std::thread::spawn(|| {
            keep_only_for_self().unwrap();
            get().unwrap()
        })
        .join()
        .unwrap();
        let kept = bit(SETUID) | bit(SETGID) | bit(KILL);
        assert_eq!(effective & !kept, 0);
        assert_eq!(permitted & !kept, 0);
        assert_eq!(inheritable, 0);
    }
}
