//! The provider protocol (a model endpoint, or anything between loom and it, is untrusted): arbitrary bytes, split
//! into chunks where the input says, -> `SseParser` (small bounds so the limits are reached) -> every event through
//! the Anthropic Messages, OpenAI Responses and Chat Completions decoders, and each event's data as a whole JSON
//! message through their non-streaming decoders. Must hold: never panics; the parser yields the same events (or the
//! same error) however the bytes are split; every error renders a non-empty message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loom_harness::{AnthropicDecoder, ChatDecoder, ResponsesDecoder, SseLimits, SseParser};

fn limits() -> SseLimits {
    SseLimits {
        line: 4096,
        event: 8192,
        stream: 65536,
    }
}

fn parse(chunks: &[&[u8]]) -> Result<Vec<loom_harness::SseEvent>, String> {
    let mut p = SseParser::with_limits(limits());
    let mut out = Vec::new();
    for c in chunks {
        out.extend(p.feed(c).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let whole = parse(&[body]);
    // the same bytes in chunks of `split` (1..=256) bytes
    let n = usize::from(split) + 1;
    let chunks: Vec<&[u8]> = body.chunks(n).collect();
    let pieces = parse(&chunks);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "events depend on how the stream was split"),
        (Err(a), Err(b)) => assert!(!a.is_empty() && !b.is_empty()),
        _ => panic!("one split fails, the other does not: {whole:?} / {pieces:?}"),
    }
    let Ok(events) = whole else { return };
    let (mut a, mut r, mut c) = (
        AnthropicDecoder::default(),
        ResponsesDecoder::default(),
        ChatDecoder::default(),
    );
    for ev in &events {
        for out in a
            .decode(ev)
            .into_iter()
            .chain(r.decode(ev))
            .chain(c.decode(ev))
        {
            if let Err(e) = out {
                assert!(!e.to_string().is_empty());
            }
        }
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev.data) {
            let (mut a, mut r, mut c) = (
                AnthropicDecoder::default(),
                ResponsesDecoder::default(),
                ChatDecoder::default(),
            );
            for out in a
                .decode_message(&v)
                .into_iter()
                .chain(r.decode_response(&v))
                .chain(c.decode_response(&v))
            {
                if let Err(e) = out {
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
});
