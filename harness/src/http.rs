//! Pure helpers every HTTP harness shares: classifying a failed response into a [`HarnessError`], and parsing a
//! server-sent-events stream incrementally. No I/O here: a harness feeds bytes in and gets values out.

use std::time::Duration;

use super::{parse_retry_after, HarnessError};

/// The longest error body kept in a message.
const MAX_MESSAGE: usize = 500;

/// Phrases providers use when the prompt does not fit the context window.
const OVERFLOW_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
    "too many tokens",
    "input is too long",
];

/// Classifies a failed HTTP response (or an error event that arrived after HTTP 200, with `status` 200) from its
/// status, the `retry-after-ms` / `retry-after` headers and the body. The body is cut to 500 characters; callers
/// must not pass request headers (they hold the API key).
pub fn classify_http(
    status: u16,
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    body: &str,
) -> HarnessError {
    let hint: Option<Duration> = parse_retry_after(retry_after_ms, retry_after);
    let mut message: String = body.trim().chars().take(MAX_MESSAGE).collect();
    if message.is_empty() {
        message = format!("HTTP {status}");
    }
    let lower = body.to_ascii_lowercase();
    if OVERFLOW_PHRASES.iter().any(|p| lower.contains(p)) {
        return HarnessError::ContextOverflow { message };
    }
    match status {
        401 | 403 => HarnessError::Auth { message },
        429 => HarnessError::RateLimited {
            message,
            retry_after: hint,
        },
        529 => HarnessError::Overloaded {
            message,
            retry_after: hint,
        },
        _ if lower.contains("overloaded") => HarnessError::Overloaded {
            message,
            retry_after: hint,
        },
        _ if lower.contains("rate_limit") => HarnessError::RateLimited {
            message,
            retry_after: hint,
        },
        _ => HarnessError::Http {
            status,
            message,
            retry_after: hint,
        },
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// An incremental SSE parser: feed it bytes as they arrive, get complete events out. Lines may be split anywhere,
/// including inside a UTF-8 sequence; `\r\n`, `\n` and `\r` all end lines; comments (`:`) are skipped.
///
/// Everything it holds is bounded, so a compromised endpoint (or a man in the middle of a plain-http `apiBase`)
/// cannot make loom allocate without limit: one line ([`MAX_SSE_LINE`]), the data of one event ([`MAX_SSE_EVENT`])
/// and the whole stream ([`MAX_SSE_STREAM`], which also bounds what a decoder accumulates from it, such as a tool
/// call's input) — past any of them the request fails with a protocol error naming the bound.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: Vec<String>,
    /// Bytes of `data` (with the `\n`s that will join them).
    data_len: usize,
    /// Bytes fed so far.
    total: usize,
    /// True after a `\r`, so a following `\n` is not a second line end.
    after_cr: bool,
    limits: SseLimits,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::with_limits(SseLimits::default())
    }
}

/// The longest line the parser accepts (16 MiB): past it the stream is garbage.
pub const MAX_SSE_LINE: usize = 16 * 1024 * 1024;
/// The most data one event may carry, all its `data:` lines together (16 MiB).
pub const MAX_SSE_EVENT: usize = 16 * 1024 * 1024;
/// The most bytes one event stream (one model response) may carry (256 MiB; a long answer with extended thinking
/// is a few MiB).
pub const MAX_SSE_STREAM: usize = 256 * 1024 * 1024;

/// The bounds of an [`SseParser`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Bytes of one line.
    pub line: usize,
    /// Bytes of the data of one event.
    pub event: usize,
    /// Bytes of the whole stream.
    pub stream: usize,
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            line: MAX_SSE_LINE,
            event: MAX_SSE_EVENT,
            stream: MAX_SSE_STREAM,
        }
    }
}

/// "16 MiB" for a byte count that is a whole number of MiB, else the bytes.
fn size(n: usize) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else {
        format!("{n} bytes")
    }
}

impl SseParser {
    /// A parser with other bounds than the defaults.
    pub fn with_limits(limits: SseLimits) -> SseParser {
        SseParser {
            buf: Vec::new(),
            event: String::new(),
            data: Vec::new(),
            data_len: 0,
            total: 0,
            after_cr: false,
            limits,
        }
    }

    /// Feeds `bytes`; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, HarnessError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > self.limits.stream {
            return Err(HarnessError::Protocol {
                message: format!(
                    "the event stream is longer than {}, more than any model response: the endpoint is broken \
                     or hostile",
                    size(self.limits.stream)
                ),
            });
        }
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr && b == b'\n' {
                self.after_cr = false;
                continue;
            }
            self.after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.buf);
                let line = String::from_utf8(line).map_err(|_| HarnessError::Protocol {
                    message: "the event stream is not UTF-8".into(),
                })?;
                if let Some(e) = self.line(&line)? {
                    out.push(e);
                }
            } else {
                if self.buf.len() >= self.limits.line {
                    return Err(HarnessError::Protocol {
                        message: format!(
                            "an event stream line is longer than {}",
                            size(self.limits.line)
                        ),
                    });
                }
                self.buf.push(b);
            }
        }
        Ok(out)
    }

    fn line(&mut self, line: &str) -> Result<Option<SseEvent>, HarnessError> {
        if line.is_empty() {
            if self.data.is_empty() && self.event.is_empty() {
                return Ok(None);
            }
            self.data_len = 0;
            return Ok(Some(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data).join("\n"),
            }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                self.data_len = self
                    .data_len
                    .saturating_add(value.len() + usize::from(!self.data.is_empty()));
                if self.data_len > self.limits.event {
                    return Err(HarnessError::Protocol {
                        message: format!(
                            "an event of the event stream carries more than {} of data",
                            size(self.limits.event)
                        ),
                    });
                }
                self.data.push(value.to_string());
            }
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let c = |s, body: &str| classify_http(s, None, Some("3"), body);
        assert!(matches!(
            c(401, "invalid x-api-key"),
            HarnessError::Auth { .. }
        ));
        assert!(
            matches!(c(429, ""), HarnessError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3))
        );
        assert!(matches!(
            c(529, "{\"type\":\"overloaded_error\"}"),
            HarnessError::Overloaded { .. }
        ));
        assert!(matches!(
            c(
                200,
                "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}"
            ),
            HarnessError::Overloaded { .. }
        ));
        assert!(matches!(
            c(400, "prompt is too long: 210000 tokens > 200000 maximum"),
            HarnessError::ContextOverflow { .. }
        ));
        assert!(matches!(
            c(400, "{\"code\":\"context_length_exceeded\"}"),
            HarnessError::ContextOverflow { .. }
        ));
        assert!(matches!(
            c(503, "down"),
            HarnessError::Http { status: 503, .. }
        ));
        assert!(c(503, "").is_retryable() && !c(400, "bad").is_retryable());
        let long = "x".repeat(10_000);
        assert!(c(500, &long).to_string().len() < 600);
    }

    #[test]
    fn sse_events_across_arbitrary_splits() {
        let text = "event: message_start\ndata: {\"a\":1}\n\n: ping\r\nevent: delta\r\ndata: one\r\ndata: two\r\n\r\ndata: é\n\n";
        let bytes = text.as_bytes();
        for split in 0..bytes.len() {
            let mut p = SseParser::default();
            let mut all = p.feed(&bytes[..split]).unwrap();
            all.extend(p.feed(&bytes[split..]).unwrap());
            assert_eq!(
                all,
                vec![
                    SseEvent {
                        event: "message_start".into(),
                        data: "{\"a\":1}".into()
                    },
                    SseEvent {
                        event: "delta".into(),
                        data: "one\ntwo".into()
                    },
                    SseEvent {
                        event: String::new(),
                        data: "é".into()
                    },
                ],
                "split at {split}"
            );
        }
        assert!(SseParser::default().feed(&[0xff, b'\n']).is_err());
    }

    #[test]
    fn sse_lines_events_and_streams_are_bounded() {
        let limits = SseLimits {
            line: 16,
            event: 24,
            stream: 200,
        };
        let protocol = |r: Result<Vec<SseEvent>, HarnessError>| match r {
            Err(HarnessError::Protocol { message }) => message,
            other => panic!("expected a protocol error, got {other:?}"),
        };
        // at the bounds: accepted (a 16-byte line; 10 + 1 + 8 + 1 + 4 = 24 bytes of data)
        let mut p = SseParser::with_limits(limits);
        let ok = p
            .feed(b"data: 0123456789\ndata: abcdefgh\ndata: ABCD\n\n")
            .unwrap();
        assert_eq!(ok[0].data.len(), 24);
        // one line too long
        let mut p = SseParser::with_limits(limits);
        let m = protocol(p.feed(b"data: 01234567890\n"));
        assert!(m.contains("line is longer than 16 bytes"), "{m}");
        // many short data lines that add up past the event bound, even fed one line at a time
        let mut p = SseParser::with_limits(limits);
        let mut last = Ok(vec![]);
        for _ in 0..4 {
            last = p.feed(b"data: 12345678\n");
            if last.is_err() {
                break;
            }
        }
        let m = protocol(last);
        assert!(m.contains("more than 24 bytes of data"), "{m}");
        // the data bound is per event: many small events are fine until the stream bound
        let mut p = SseParser::with_limits(limits);
        for _ in 0..10 {
            assert_eq!(p.feed(b"data: 12345678\n\n").unwrap().len(), 1);
        }
        let m = protocol(p.feed(&[b'\n'; 100]));
        assert!(m.contains("longer than 200 bytes"), "{m}");
        assert_eq!(
            SseParser::default().limits,
            SseLimits {
                line: 16 << 20,
                event: 16 << 20,
                stream: 256 << 20
            }
        );
    }
}
