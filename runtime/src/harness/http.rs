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
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: Vec<String>,
    /// True after a `\r`, so a following `\n` is not a second line end.
    after_cr: bool,
}

/// The longest line the parser accepts (16 MiB): past it the stream is garbage.
pub const MAX_SSE_LINE: usize = 16 * 1024 * 1024;

impl SseParser {
    /// Feeds `bytes`; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, HarnessError> {
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
                if let Some(e) = self.line(&line) {
                    out.push(e);
                }
            } else {
                if self.buf.len() >= MAX_SSE_LINE {
                    return Err(HarnessError::Protocol {
                        message: "an event stream line is longer than 16 MiB".into(),
                    });
                }
                self.buf.push(b);
            }
        }
        Ok(out)
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            if self.data.is_empty() && self.event.is_empty() {
                return None;
            }
            return Some(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data).join("\n"),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
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
}
