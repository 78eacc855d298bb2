//! The workspace's machine id: made at every start, never baked into the
//! image, so no two workspaces (and no two forks of one snapshot) share
//! one. The image links `/etc/machine-id` (and D-Bus's
//! `/var/lib/dbus/machine-id`) to [`PATH`], on the workspace's own `/run`
//! tmpfs; this writes it before any program of the desktop starts.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;

/// Where the id is written (the image's `/etc/machine-id` points here).
pub const PATH: &str = "/run/machine-id";

/// Writes a fresh machine id: 128 random bits as 32 lowercase hex digits
/// and a newline, the format machine-id(5) describes.
pub fn write() -> std::io::Result<String> {
    let mut bits = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bits)?;
    let id = format_id(bits);
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(PATH)
    {
        Ok(file) => file,
        // Written already in this boot of the workspace: it stays.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            return Ok(std::fs::read_to_string(PATH)?.trim().to_owned());
        }
        Err(err) => return Err(err),
    };
    file.write_all(format!("{id}\n").as_bytes())?;
    Ok(id)
}

fn format_id(bits: [u8; 16]) -> String {
    bits.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_32_lowercase_hex_digits() {
        let id = format_id([0xab; 16]);
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
