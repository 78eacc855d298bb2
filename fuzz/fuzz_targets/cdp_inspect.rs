//! The CDP proxy's message inspector, both directions: parse, judge,
//! read what the policy is asked, and build the error reply a refused
//! call gets.
#![no_main]

use cubicle_gateway::cdp::inspect::{Direction, answer, changes_page, inspect, parse};
use cubicle_gateway::ops::cdp::subjects;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for direction in [Direction::ToBrowser, Direction::ToClient] {
        if let Ok(message) = parse(direction, text) {
            let verdict = inspect(direction, &message);
            if let Some(reply) = answer(&message, &verdict) {
                // The reply the client gets is itself valid JSON.
                assert!(serde_json::from_str::<serde_json::Value>(&reply).is_ok());
            }
            if let Some(method) = message.method.as_deref() {
                let _ = changes_page(method);
            }
            // What the policy is asked: typed reading of the subjects.
            let _ = subjects(&message);
        }
    }
});
