//! Policy documents (TOML): refused with an error naming file, line and
//! field, or parsed, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = cubicle_policy::Policy::parse("fuzz.toml", "fuzz", text);
    }
});
