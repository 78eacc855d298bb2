//! PID 1's one service in a microVM: taking a fresh identity after a
//! restore from a memory snapshot (`cubicle_image::identity`).
//!
//! A thread of init (root, outside the services' seccomp filter) listens on
//! vsock port [`identity::PORT`] and serves one request per connection, and
//! only from the host (CID 2): a process inside the guest never reaches it.
//! The order is the one a fork needs: the entropy first (so nothing that
//! follows draws from the parent's RNG state), then the machine id, the
//! hostname and the clock.
//!
//! Programs that read the machine id or the hostname once at their start
//! and kept it (D-Bus, the browser) keep the parent's until they restart;
//! new programs, and every read of `/etc/machine-id`, see the new one.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;

use cubicle_image::identity::{self, Identity, IdentityReply};

/// The host's vsock context id.
const HOST_CID: u32 = 2;
/// `RNDADDENTROPY` = `_IOW('R', 0x03, int[2])` (linux/random.h; not in libc).
const RNDADDENTROPY: libc::c_ulong = 0x4008_5203;
/// `RNDRESEEDCRNG` = `_IO('R', 0x07)`.
const RNDRESEEDCRNG: libc::c_ulong = 0x5207;

/// Starts the listener thread; a VM whose kernel has no vsock goes on
/// without it (a restore of it then fails at the host, saying so).
pub fn spawn() {
    let listener = match vsock::VsockListener::bind_with_cid_port(
        libc::VMADDR_CID_ANY,
        u32::from(identity::PORT),
    ) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!(
                "cubicle-guest: cannot listen on vsock port {} for a fresh identity: {err}",
                identity::PORT
            );
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("identity".into())
        .spawn(move || {
            for accepted in listener.incoming() {
                let Ok(stream) = accepted else { continue };
                let from_host = stream.peer_addr().is_ok_and(|a| a.cid() == HOST_CID);
                if from_host {
                    serve(stream);
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("cubicle-guest: cannot start the identity thread: {err}");
    }
}

fn serve(stream: vsock::VsockStream) {
    let mut line = String::new();
    let read = BufReader::new((&stream).take(identity::MAX_LINE as u64)).read_line(&mut line);
    let reply = match read {
        Ok(_) => match serde_json::from_str::<Identity>(&line) {
            Ok(request) => apply(&request),
            Err(err) => Err(format!("not an identity request: {err}")),
        },
        Err(err) => Err(format!("cannot read the request: {err}")),
    };
    let reply = match reply {
        Ok(()) => IdentityReply {
            ok: true,
            error: None,
        },
        Err(error) => {
            eprintln!("cubicle-guest: fresh identity refused: {error}");
            IdentityReply {
                ok: false,
                error: Some(error),
            }
        }
    };
    let mut text = serde_json::to_string(&reply).unwrap_or_default();
    text.push('\n');
    let _ = (&stream).write_all(text.as_bytes());
}

/// Takes `request` as this VM's identity, entropy first.
fn apply(request: &Identity) -> Result<(), String> {
    let entropy = request.check().map_err(|e| e.to_string())?;
    reseed(&entropy).map_err(|e| format!("cannot reseed the kernel's RNG: {e}"))?;
    write_machine_id(&request.machine_id)
        .map_err(|e| format!("cannot write {}: {e}", crate::machine_id::PATH))?;
    set_hostname(&request.hostname).map_err(|e| format!("cannot set the hostname: {e}"))?;
    set_clock(request.time_unix_ns).map_err(|e| format!("cannot step the clock: {e}"))?;
    Ok(())
}

/// Mixes `entropy` into the input pool, credited in full, and forces the
/// CRNG to reseed from it now (not at its next periodic reseed).
fn reseed(entropy: &[u8]) -> std::io::Result<()> {
    // struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
    let mut info = Vec::with_capacity(8 + entropy.len());
    let bits = i32::try_from(entropy.len() * 8).unwrap_or(i32::MAX);
    let size = i32::try_from(entropy.len()).unwrap_or(i32::MAX);
    info.extend_from_slice(&bits.to_ne_bytes());
    info.extend_from_slice(&size.to_ne_bytes());
    info.extend_from_slice(entropy);
    let random = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/urandom")?;
    use std::os::fd::AsRawFd;
    // SAFETY: `info` is a rand_pool_info of `size` bytes of buffer that
    // outlives the call; the kernel only reads it.
    if unsafe { libc::ioctl(random.as_raw_fd(), RNDADDENTROPY, info.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: RNDRESEEDCRNG takes no argument.
    if unsafe { libc::ioctl(random.as_raw_fd(), RNDRESEEDCRNG) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Replaces the machine id (written beside, then renamed over it).
fn write_machine_id(id: &str) -> std::io::Result<()> {
    let path = std::path::Path::new(crate::machine_id::PATH);
    let partial = path.with_extension("new");
    let _ = std::fs::remove_file(&partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&partial)?;
    file.write_all(format!("{id}\n").as_bytes())?;
    std::fs::rename(&partial, path)
}

fn set_hostname(name: &str) -> std::io::Result<()> {
    // SAFETY: the pointer and length describe `name`'s bytes, which the
    // kernel copies.
    match unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn set_clock(unix_ns: u128) -> std::io::Result<()> {
    let time = libc::timespec {
        tv_sec: libc::time_t::try_from(unix_ns / 1_000_000_000)
            .map_err(|_| std::io::Error::other("time out of range"))?,
        tv_nsec: (unix_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `time` is a valid timespec the kernel only reads.
    match unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &time) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
