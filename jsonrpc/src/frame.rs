//! Framing: the newline-delimited lines of a stdio peer (MCP's stdio transport, ACP's stdin) and the events of a
//! `text/event-stream` body (MCP's Streamable HTTP), each cut at a byte cap *before* it is held — a longer message
//! is reported as soon as it crosses the cap and the rest of it is skipped unread — and the JSON a frame holds.

use serde_json::Value;

/// One frame the framers cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One whole message's bytes: a line without its newline, or an SSE event's `data:` lines joined by newlines.
    Message(Vec<u8>),
    /// A message crossed the cap after this many bytes; the rest of it is skipped unread.
    TooLarge(usize),
}

/// Cuts newline-delimited messages out of a byte stream, never holding more than `cap` bytes of one. Blank lines are
/// skipped.
#[derive(Debug)]
pub struct LineFramer {
    cap: usize,
    line: Vec<u8>,
    /// Inside a line that crossed the cap (already reported): skip up to its newline.
    skipping: bool,
}

impl LineFramer {
    /// A framer for messages of at most `cap` bytes.
    pub fn new(cap: usize) -> LineFramer {
        LineFramer {
            cap,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// Feeds `bytes`, handing each finished frame to `out`; stops early (returning false) when `out` returns false.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut dyn FnMut(Frame) -> bool) -> bool {
        while !bytes.is_empty() {
            let nl = bytes.iter().position(|&b| b == b'\n');
            let (chunk, rest) = match nl {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            bytes = rest;
            if self.skipping {
                self.skipping = nl.is_none();
                continue;
            }
            if self.line.len() + chunk.len() > self.cap {
                let seen = self.line.len() + chunk.len();
                self.line = Vec::new();
                self.skipping = nl.is_none();
                if !out(Frame::TooLarge(seen)) {
                    return false;
                }
                continue;
            }
            self.line.extend_from_slice(chunk);
            if nl.is_some() {
                let line = std::mem::take(&mut self.line);
                if !line.iter().all(u8::is_ascii_whitespace) && !out(Frame::Message(line)) {
                    return false;
                }
            }
        }
        true
    }

    /// The input ended: the last line, when it had no newline (and was not already reported as too large).
    pub fn finish(&mut self) -> Option<Frame> {
        let line = std::mem::take(&mut self.line);
        let skipping = std::mem::replace(&mut self.skipping, false);
        (!skipping && !line.iter().all(u8::is_ascii_whitespace)).then_some(Frame::Message(line))
    }
}

/// Cuts the events of a `text/event-stream` body, never holding more than `cap` bytes of one event (or one line).
/// Only `data:` lines make an event's message; an event without data is skipped.
#[derive(Debug)]
pub struct SseFramer {
    cap: usize,
    /// The current line, before its newline.
    line: Vec<u8>,
    /// The current event's data.
    data: Vec<u8>,
    /// The current event crossed the cap (already reported): its remaining lines are skipped.
    dropped: bool,
    /// Inside a line that crossed the cap: skip up to its newline.
    skipping: bool,
}

impl SseFramer {
    /// A framer for events of at most `cap` bytes.
    pub fn new(cap: usize) -> SseFramer {
        SseFramer {
            cap,
            line: Vec::new(),
            data: Vec::new(),
            dropped: false,
            skipping: false,
        }
    }

    /// Feeds `bytes`, handing each finished frame to `out`; stops early (returning false) when `out` returns false.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut dyn FnMut(Frame) -> bool) -> bool {
        while !bytes.is_empty() {
            let nl = bytes.iter().position(|&b| b == b'\n');
            let (chunk, rest) = match nl {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            bytes = rest;
            if self.skipping {
                self.skipping = nl.is_none();
                continue;
            }
            if self.line.len() + chunk.len() > self.cap {
                let seen = self.data.len() + self.line.len() + chunk.len();
                self.line = Vec::new();
                self.skipping = nl.is_none();
                if !self.drop_event(seen, out) {
                    return false;
                }
                continue;
            }
            self.line.extend_from_slice(chunk);
            if nl.is_none() {
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.is_empty() {
                let data = std::mem::take(&mut self.data);
                let dropped = std::mem::replace(&mut self.dropped, false);
                if !dropped && !data.is_empty() && !out(Frame::Message(data)) {
                    return false;
                }
                continue;
            }
            let Some(d) = line.strip_prefix(b"data:") else {
                continue;
            };
            if self.dropped {
                continue;
            }
            let d = d.strip_prefix(b" ").unwrap_or(d);
            let sep = usize::from(!self.data.is_empty());
            if self.data.len() + sep + d.len() > self.cap {
                let seen = self.data.len() + sep + d.len();
                if !self.drop_event(seen, out) {
                    return false;
                }
                continue;
            }
            if sep == 1 {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(d);
        }
        true
    }

    /// Reports the current event as too large (once) and forgets its data.
    fn drop_event(&mut self, seen: usize, out: &mut dyn FnMut(Frame) -> bool) -> bool {
        self.data = Vec::new();
        if std::mem::replace(&mut self.dropped, true) {
            return true;
        }
        out(Frame::TooLarge(seen))
    }
}

/// The JSON-RPC message (or batch) a frame holds; `None` for anything that is not JSON (a server logging on stdout).
pub fn parse_message(frame: &[u8]) -> Option<Value> {
    serde_json::from_slice(frame).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(cap: usize, parts: &[&[u8]]) -> Vec<Frame> {
        let mut f = LineFramer::new(cap);
        let mut got = Vec::new();
        for p in parts {
            f.push(p, &mut |fr| {
                got.push(fr);
                true
            });
        }
        got
    }

    #[test]
    fn lines_are_cut_at_newlines_across_chunks_and_blank_lines_skipped() {
        let got = lines(100, &[b"{\"a\":", b"1}\n\n  \n{\"b\":2}\n{\"c\""]);
        assert_eq!(
            got,
            [
                Frame::Message(b"{\"a\":1}".to_vec()),
                Frame::Message(b"{\"b\":2}".to_vec())
            ]
        );
    }

    #[test]
    fn a_line_over_the_cap_is_reported_when_it_crosses_it_then_skipped() {
        // the long line never ends in this input: reported all the same, and nothing of it is held
        let got = lines(8, &[b"ok\n0123", b"456789", b"abcdef"]);
        assert_eq!(got, [Frame::Message(b"ok".to_vec()), Frame::TooLarge(10)]);
        // once it ends, the next line is read normally
        let got = lines(8, &[b"0123456789abc", b"def\nnext\n"]);
        assert_eq!(got, [Frame::TooLarge(13), Frame::Message(b"next".to_vec())]);
        // exactly the cap is fine
        assert_eq!(lines(4, &[b"abcd\n"]), [Frame::Message(b"abcd".to_vec())]);
    }

    #[test]
    fn finish_hands_over_an_unterminated_last_line_once() {
        let mut f = LineFramer::new(8);
        f.push(b"a\nlast", &mut |_| true);
        assert_eq!(f.finish(), Some(Frame::Message(b"last".to_vec())));
        assert_eq!(f.finish(), None);
        // blank, or already reported as too large: nothing
        f.push(b"  ", &mut |_| true);
        assert_eq!(f.finish(), None);
        f.push(b"0123456789", &mut |_| true);
        assert_eq!(f.finish(), None);
    }

    #[test]
    fn the_consumer_can_stop_the_framer() {
        let mut f = LineFramer::new(100);
        let mut n = 0;
        assert!(!f.push(b"a\nb\nc\n", &mut |_| {
            n += 1;
            false
        }));
        assert_eq!(n, 1);
    }

    fn events(cap: usize, parts: &[&[u8]]) -> Vec<Frame> {
        let mut f = SseFramer::new(cap);
        let mut got = Vec::new();
        for p in parts {
            f.push(p, &mut |fr| {
                got.push(fr);
                true
            });
        }
        got
    }

    #[test]
    fn sse_events_join_their_data_lines_and_skip_other_fields() {
        let got = events(
            100,
            &[
                b"event: message\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\n\n",
                b"data:x\n\n",
            ],
        );
        assert_eq!(
            got,
            [
                Frame::Message(b"{\"a\":\n1}".to_vec()),
                Frame::Message(b"x".to_vec())
            ]
        );
    }

    #[test]
    fn an_sse_event_over_the_cap_is_reported_once_and_the_next_one_read() {
        // many data lines adding up past the cap
        let got = events(
            12,
            &[b"data: 123456\ndata: 789012\ndata: 3\n\ndata: ok\n\n"],
        );
        assert_eq!(got, [Frame::TooLarge(13), Frame::Message(b"ok".to_vec())]);
        // one endless line, never ended in this input
        let got = events(12, &[b"data: 0123456789", b"0123456789", b"0123"]);
        assert_eq!(got, [Frame::TooLarge(16)]);
    }

    #[test]
    fn parse_message_tells_json_from_noise() {
        assert_eq!(
            parse_message(b"{\"id\":1}"),
            Some(serde_json::json!({ "id": 1 }))
        );
        assert_eq!(parse_message(b"Server listening on stdio"), None);
        assert_eq!(parse_message(&[0xff, 0xfe]), None);
    }
}
