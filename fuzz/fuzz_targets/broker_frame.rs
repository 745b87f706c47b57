//! The broker's wire format, as the broker reads it from a shim (untrusted: anything inside the sandbox can connect):
//! arbitrary bytes -> `read_frame` until the end of stream or an error; each request frame -> `WireRequest::decode`,
//! exit and error frames -> `exit_status` / `error_parts`. Must hold: never panics; no frame payload exceeds
//! `MAX_PAYLOAD`; a decoded request has a non-empty argv and no NUL byte in any string, and re-encodes to exactly the
//! payload it came from (the format has one encoding); an exit status is 0..=255.
#![no_main]

use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;
use loom_broker::{error_parts, exit_status, read_frame, WireRequest, MAX_PAYLOAD};

fuzz_target!(|data: &[u8]| {
    // a request payload on its own, as well as inside a frame stream
    check_request(data);
    let mut r: &[u8] = data;
    for _ in 0..64 {
        match read_frame(&mut r) {
            Ok(Some(f)) => {
                assert!(f.payload.len() <= MAX_PAYLOAD);
                match f.kind {
                    0x01 => check_request(&f.payload),
                    0x83 => {
                        if let Ok(s) = exit_status(&f.payload) {
                            assert!((0..=255).contains(&s), "{s}");
                        }
                    }
                    0x84 => {
                        let (code, _msg) = error_parts(&f.payload);
                        assert!((0..=255).contains(&code));
                    }
                    _ => {}
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
});

fn check_request(payload: &[u8]) {
    let Ok(req) = WireRequest::decode(payload) else {
        return;
    };
    assert!(!req.argv.is_empty());
    for s in req.argv.iter().chain([&req.cwd]).chain(&req.env) {
        assert!(!s.as_bytes().contains(&0));
    }
    let again = req.encode().expect("a decoded request re-encodes");
    assert_eq!(again, payload, "one encoding per request");
}
