//! Loading seccomp filters the host built (`cubicle-runtime`'s
//! `jail::seccomp`) from the microVM's host disk: classic BPF as raw
//! `sock_filter`s, 8 bytes each, as bubblewrap's `--seccomp` reads them.

/// The program in `bytes`, or why it is not one.
pub fn parse(bytes: &[u8]) -> std::io::Result<Vec<libc::sock_filter>> {
    const INSN: usize = std::mem::size_of::<libc::sock_filter>();
    if bytes.is_empty()
        || !bytes.len().is_multiple_of(INSN)
        || bytes.len() / INSN > usize::from(u16::MAX)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} bytes are not a seccomp program", bytes.len()),
        ));
    }
    Ok(bytes
        .chunks_exact(INSN)
        .map(|insn| libc::sock_filter {
            code: u16::from_ne_bytes([insn[0], insn[1]]),
            jt: insn[2],
            jf: insn[3],
            k: u32::from_ne_bytes([insn[4], insn[5], insn[6], insn[7]]),
        })
        .collect())
}

/// Installs `program` on the calling thread (and what it starts). Needs
/// no-new-privileges (or `CAP_SYS_ADMIN`). Only a prctl on memory that
/// outlives the call: async-signal-safe, so a child may call it between
/// fork and exec.
pub fn install(program: &[libc::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `program`, which outlives the call; the
    // kernel copies the program.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &raw const fprog,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_instructions_make_a_program() {
        let one = [0x06, 0, 0, 0, 0, 0, 0xff, 0x7f]; // ret ALLOW
        let program = parse(&one).unwrap();
        assert_eq!((program[0].code, program[0].k), (6, 0x7fff_0000));
        assert!(parse(&one[..7]).is_err());
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn an_installed_filter_refuses_what_it_names() {
        // In a thread of its own: filters stay with the thread.
        std::thread::spawn(|| {
            // SAFETY: prctl with integer arguments only.
            let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            assert_eq!(rc, 0);
            // A program refusing getppid (110) with EPERM, allowing the rest.
            let program = [
                libc::sock_filter {
                    code: 0x20,
                    jt: 0,
                    jf: 0,
                    k: 0,
                }, // ld nr
                libc::sock_filter {
                    code: 0x15,
                    jt: 0,
                    jf: 1,
                    k: 110,
                }, // jeq getppid
                libc::sock_filter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x0005_0001,
                }, // errno EPERM
                libc::sock_filter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x7fff_0000,
                }, // allow
            ];
            install(&program).unwrap();
            // SAFETY: getppid has no preconditions; syscall() sets errno.
            assert_eq!(unsafe { libc::syscall(libc::SYS_getppid) }, -1);
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EPERM)
            );
        })
        .join()
        .unwrap();
    }
}
