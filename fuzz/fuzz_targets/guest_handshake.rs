//! The guest channel handshake from both ends: the guest reading a host's
//! `CONNECT <port>` line, and the host reading a (hostile) guest's reply.
#![no_main]

use cubicle_image::handshake::{connect, parse_connect, read_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime builds");
    runtime.block_on(async {
        let mut reader = data;
        if let Ok(line) = read_line(&mut reader).await {
            let _ = parse_connect(&line);
        }
        let mut guest = tokio::io::join(data, tokio::io::sink());
        let _ = connect(&mut guest, 5900).await;
    });
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_connect(text);
    }
});
