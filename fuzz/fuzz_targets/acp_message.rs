//! ACP messages from the client (an editor, or anything speaking on loom's stdin): each line of arbitrary text ->
//! the server's `classify`, and a request's or notification's params -> `prompt_text` (the `session/prompt` content
//! blocks). Must hold: never panics; an invalid line is answered with a JSON-RPC error code and a non-empty message,
//! and with an id only when the id is a string or an integer; a prompt is either non-empty text or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loom_acp::fuzzing::{acp_classify, acp_prompt_text, Incoming};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.split('\n') {
        match acp_classify(line) {
            Incoming::Invalid { id, error } => {
                assert!(
                    id.is_null() || id.is_string() || id.is_i64() || id.is_u64(),
                    "{id}"
                );
                assert!(error.code < 0 && !error.message.is_empty());
            }
            Incoming::Request { id, params, .. } => {
                assert!(id.is_string() || id.is_i64() || id.is_u64(), "{id}");
                prompt(&params);
            }
            Incoming::Notification { params, .. } => prompt(&params),
            Incoming::Response { id, .. } => {
                assert!(id.is_string() || id.is_i64() || id.is_u64(), "{id}");
            }
        }
    }
});

fn prompt(params: &serde_json::Value) {
    match acp_prompt_text(params) {
        Ok(t) => assert!(!t.trim().is_empty()),
        Err(e) => assert!(!e.message.is_empty()),
    }
}
