//! Snapshot state files as a restore meets them: a VMM that ran a guest
//! wrote them, so a forged one is outside bytes, read by a VMM started as
//! root (before its jail). Half the inputs get a valid digest line, so the
//! JSON behind it is reached too. Every refusal must be an error, never a
//! panic; what decodes must encode again.
#![no_main]

use std::path::Path;

use cubicle_vmm::snapshot::Snapshot;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.state");
    let _ = Snapshot::decode(data, path);
    let mut framed = b"cubicle-vmm snapshot 1\n".to_vec();
    framed.extend_from_slice(data);
    framed.push(b'\n');
    let digest: String = Sha256::digest(&framed)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    framed.extend_from_slice(format!("sha256 {digest}\n").as_bytes());
    if let Ok((snapshot, _)) = Snapshot::decode(&framed, path) {
        snapshot.encode().expect("a decoded state encodes again");
    }
});
