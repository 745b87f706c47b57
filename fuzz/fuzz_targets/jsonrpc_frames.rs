//! The JSON-RPC framers (what an MCP server writes on stdout or in an SSE body, what an ACP client writes on loom's
//! stdin): first byte = chunk size, second = cap, rest = the stream, fed to `LineFramer` and `SseFramer` in chunks
//! and whole. Must hold: never panics; no message is longer than the cap; a line stream gives the same frames however
//! it is split; every message is classified without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loom_jsonrpc::{classify, parse_message, Frame, LineFramer, SseFramer};

fuzz_target!(|data: &[u8]| {
    let [chunk, cap, stream @ ..] = data else {
        return;
    };
    let chunk = usize::from(*chunk).max(1);
    let cap = usize::from(*cap).max(1);
    let lines = |size: usize| {
        let mut f = LineFramer::new(cap);
        let mut got = Vec::new();
        for part in stream.chunks(size) {
            f.push(part, &mut |frame| {
                got.push(frame);
                true
            });
        }
        got.extend(f.finish());
        got
    };
    let split = lines(chunk);
    assert_eq!(split, lines(stream.len().max(1)));
    let mut sse = SseFramer::new(cap);
    let mut events = Vec::new();
    for part in stream.chunks(chunk) {
        sse.push(part, &mut |frame| {
            events.push(frame);
            true
        });
    }
    for frame in split.iter().chain(&events) {
        if let Frame::Message(m) = frame {
            assert!(m.len() <= cap, "{} > {cap}", m.len());
            if let Some(v) = parse_message(m) {
                let _ = classify(v);
            }
        }
    }
});
