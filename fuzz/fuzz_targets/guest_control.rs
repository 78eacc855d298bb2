//! The guest's control protocol (one JSON line each way): requests as the
//! guest parses and checks them, and replies as the host reads them from a
//! guest it does not trust.
#![no_main]

use cubicle_image::control::{
    DirListing, ErrorReply, ExecEvent, ExecResult, FileData, FileInfo, Health, ProfileArchive,
    Request, normalise_path,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<Request>(data) {
        match &request {
            Request::Exec(exec) | Request::ExecStream(exec) => {
                let _ = exec.validate();
                let _ = exec.program();
            }
            _ => {}
        }
        // What the guest accepts, the host can send again unchanged.
        let again = serde_json::to_vec(&request).expect("a parsed request serialises");
        assert_eq!(
            serde_json::from_slice::<Request>(&again).ok(),
            Some(request)
        );
    }
    let _ = serde_json::from_slice::<Health>(data);
    let _ = serde_json::from_slice::<ExecResult>(data);
    let _ = serde_json::from_slice::<ExecEvent>(data);
    let _ = serde_json::from_slice::<FileData>(data);
    let _ = serde_json::from_slice::<FileInfo>(data);
    let _ = serde_json::from_slice::<DirListing>(data);
    let _ = serde_json::from_slice::<ErrorReply>(data);
    let _ = serde_json::from_slice::<ProfileArchive>(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = normalise_path("path", text);
    }
});
