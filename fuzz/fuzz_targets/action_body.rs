//! Bodies of `POST /v1/workspaces/{id}/actions` (one action or a batch) and
//! single actions as JSON values: refused with a field error or parsed,
//! never a panic.
#![no_main]

use cubicle_gateway::actions::parse_action;
use cubicle_gateway::api::actions::parse_body;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((actions, sent, _batch)) = parse_body(data) {
        assert_eq!(actions.len(), sent.len());
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = parse_action(&value);
    }
});
