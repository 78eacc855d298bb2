//! A fresh identity for a microVM restored from a memory snapshot.
//!
//! A restore resumes the snapshot's guest exactly as it was: the same
//! kernel RNG state, the same machine id, the same hostname, and a clock
//! that stopped when the snapshot was taken. Two forks of one snapshot
//! would hand out the same "random" bytes. So before the host reports a
//! restored workspace ready, it connects to the VM's init (PID 1, root) on
//! vsock port [`PORT`] and sends one [`Identity`] line; init mixes the
//! entropy into the kernel's pool and forces the CRNG to reseed (every
//! later read of `/dev/urandom` and `getrandom` differs between forks),
//! writes the machine id, sets the hostname and steps the wall clock, and
//! answers one [`IdentityReply`] line.
//!
//! Only the host may send it: init takes a connection only from CID 2
//! (the host), so nothing inside the guest can set the clock or the
//! hostname through it. The port is not on the guest channel's table
//! ([`crate::ports`]): the jail never serves it, and the host reaches it
//! only on a microVM.

use serde::{Deserialize, Serialize};

/// The vsock port init listens on inside a microVM.
pub const PORT: u16 = 1025;
/// Bytes of entropy the host sends (mixed in and credited in full).
pub const ENTROPY_BYTES: usize = 64;
/// The longest request line init reads.
pub const MAX_LINE: usize = 4096;

/// What the host tells a restored VM it now is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// The new workspace's id.
    pub hostname: String,
    /// 32 lowercase hex digits (machine-id(5)).
    pub machine_id: String,
    /// [`ENTROPY_BYTES`] random bytes from the host, as lowercase hex.
    pub entropy: String,
    /// The host's wall clock, nanoseconds since the Unix epoch.
    pub time_unix_ns: u128,
}

/// Init's answer: done, or what it could not do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IdentityReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why an [`Identity`] is refused before anything is changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("hostname {0:?} is not 1-64 letters, digits, '-' or '.'")]
    Hostname(String),
    #[error("machine id {0:?} is not 32 lowercase hex digits")]
    MachineId(String),
    #[error("entropy is not {ENTROPY_BYTES} bytes of hex")]
    Entropy,
}

impl Identity {
    /// Checks every field; what init acts on is only what passes.
    pub fn check(&self) -> Result<Vec<u8>, IdentityError> {
        let name = &self.hostname;
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return Err(IdentityError::Hostname(name.clone()));
        }
        let id = &self.machine_id;
        if id.len() != 32 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(IdentityError::MachineId(id.clone()));
        }
        let entropy = decode_hex(&self.entropy).ok_or(IdentityError::Entropy)?;
        if entropy.len() != ENTROPY_BYTES {
            return Err(IdentityError::Entropy);
        }
        Ok(entropy)
    }
}

/// Lowercase hex of `bytes`.
pub fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Identity {
        Identity {
            hostname: "ws-1a2b".into(),
            machine_id: "0123456789abcdef0123456789abcdef".into(),
            entropy: encode_hex(&[7u8; ENTROPY_BYTES]),
            time_unix_ns: 1_800_000_000_000_000_000,
        }
    }

    #[test]
    fn a_good_identity_passes_and_yields_its_entropy() {
        assert_eq!(good().check().unwrap(), vec![7u8; ENTROPY_BYTES]);
        let line = serde_json::to_string(&good()).unwrap();
        assert_eq!(serde_json::from_str::<Identity>(&line).unwrap(), good());
    }

    #[test]
    fn bad_fields_are_refused_by_name() {
        let mut bad = good();
        bad.hostname = "ws 1".into();
        assert!(matches!(bad.check(), Err(IdentityError::Hostname(_))));
        bad.hostname = "x".repeat(65);
        assert!(matches!(bad.check(), Err(IdentityError::Hostname(_))));
        let mut bad = good();
        bad.machine_id = "0123456789ABCDEF0123456789abcdef".into();
        assert!(matches!(bad.check(), Err(IdentityError::MachineId(_))));
        let mut bad = good();
        bad.entropy = "abc".into();
        assert_eq!(bad.check(), Err(IdentityError::Entropy));
        bad.entropy = encode_hex(&[1u8; 8]);
        assert_eq!(bad.check(), Err(IdentityError::Entropy));
        bad.entropy = "zz".repeat(ENTROPY_BYTES);
        assert_eq!(bad.check(), Err(IdentityError::Entropy));
    }
}
