//! The live view's viewer→workspace RFB stream: split into messages by
//! `RfbParser` however the bytes arrive (the first byte picks the chunk
//! size, the second whether the viewer holds control), and each message
//! through the input filter. Nothing may panic or loop; what is forwarded
//! is never longer than what came in plus the releases the filter adds.
#![no_main]

use cubicle_gateway::vnc::filter::{HeldInput, decide};
use cubicle_gateway::vnc::rfb_parse::RfbParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [chunk, control, stream @ ..] = data else {
        return;
    };
    let chunk = usize::from(*chunk).max(1);
    let may_input = control & 1 == 1;
    let mut parser = RfbParser::default();
    let mut held = HeldInput::default();
    for piece in stream.chunks(chunk) {
        parser.push(piece);
        loop {
            match parser.next_message() {
                Ok(Some(message)) => {
                    let _ = decide(&message, may_input, &mut held);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    let _ = parser.truncated("the fuzzer stopped");
    let _ = held.release();
});
