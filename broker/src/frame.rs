//! The wire format between `loom-shim` and the broker (see `broker/PROTOCOL.md`). Standard library only: the shim
//! includes this file directly, so it must not depend on anything else in the crate.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The protocol version carried in every request.
pub const VERSION: u16 = 1;
/// The largest payload of any frame (bytes). A request (argv + cwd + env) must fit in one frame.
pub const MAX_PAYLOAD: usize = 4 << 20;
/// The largest data chunk either side sends in one stdin/stdout/stderr frame.
pub const CHUNK: usize = 64 << 10;

/// Shim to broker: the request (argv, cwd, env). Always the first frame.
pub const T_REQUEST: u8 = 0x01;
/// Shim to broker: a chunk of standard input.
pub const T_STDIN: u8 = 0x02;
/// Shim to broker: standard input reached end of file.
pub const T_STDIN_EOF: u8 = 0x03;
/// Broker to shim: a chunk of standard output.
pub const T_STDOUT: u8 = 0x81;
/// Broker to shim: a chunk of standard error.
pub const T_STDERR: u8 = 0x82;
/// Broker to shim: the command ended. Always the last frame.
pub const T_EXIT: u8 = 0x83;
/// Broker to shim: the call was refused or failed before the command ran. Always the last frame.
pub const T_ERROR: u8 = 0x84;

/// Exit payload kind: the command exited with a code.
pub const EXIT_CODE: u8 = 0;
/// Exit payload kind: the command was killed by a signal.
pub const EXIT_SIGNAL: u8 = 1;

/// One frame: a type byte and a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// One of the `T_*` constants.
    pub kind: u8,
    /// At most [`MAX_PAYLOAD`] bytes.
    pub payload: Vec<u8>,
}

/// What a shim asks the broker to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The argv; `argv[0]` is the name the shim was invoked by.
    pub argv: Vec<OsString>,
    /// The shim's working directory.
    pub cwd: OsString,
    /// The shim's environment, as `NAME=value` entries.
    pub env: Vec<OsString>,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Writes one frame.
pub fn write_frame(w: &mut dyn Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    if payload.len() > MAX_PAYLOAD {
        return Err(invalid(format!(
            "frame of {} bytes exceeds the limit of {MAX_PAYLOAD}",
            payload.len()
        )));
    }
    let len = u32::try_from(payload.len()).map_err(|_| invalid("frame too large"))?;
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&len.to_be_bytes());
    // One buffer, one write: frames from different threads never interleave when the writer is shared under a lock.
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.extend_from_slice(&head);
    buf.extend_from_slice(payload);
    w.write_all(&buf)
}

/// Reads one frame; `Ok(None)` at a clean end of stream (before any byte of a frame).
pub fn read_frame(r: &mut dyn Read) -> io::Result<Option<Frame>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(invalid("the stream ended inside a frame header")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(invalid(format!(
            "frame of {len} bytes exceeds the limit of {MAX_PAYLOAD}"
        )));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some(Frame {
        kind: head[0],
        payload,
    }))
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> io::Result<()> {
    let len = u32::try_from(b.len()).map_err(|_| invalid("string too large"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(invalid("truncated request"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u16(&mut self) -> io::Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> io::Result<usize> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn bytes(&mut self) -> io::Result<OsString> {
        let n = self.u32()?;
        let b = self.take(n)?;
        if b.contains(&0) {
            return Err(invalid("a string in the request contains a NUL byte"));
        }
        Ok(OsString::from_vec(b.to_vec()))
    }
    fn list(&mut self) -> io::Result<Vec<OsString>> {
        let n = self.u32()?;
        // Every element takes at least 4 bytes, so a count larger than the rest is a lie; refuse before allocating.
        if n > self.0.len() / 4 {
            return Err(invalid("truncated request"));
        }
        (0..n).map(|_| self.bytes()).collect()
    }
}

impl Request {
    /// The request frame's payload.
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(&VERSION.to_be_bytes());
        let count = |n: usize| u32::try_from(n).map_err(|_| invalid("too many strings"));
        out.extend_from_slice(&count(self.argv.len())?.to_be_bytes());
        for a in &self.argv {
            put_bytes(&mut out, a.as_bytes())?;
        }
        put_bytes(&mut out, self.cwd.as_bytes())?;
        out.extend_from_slice(&count(self.env.len())?.to_be_bytes());
        for e in &self.env {
            put_bytes(&mut out, e.as_bytes())?;
        }
        Ok(out)
    }

    /// Reads a request frame's payload. Refuses another version, trailing bytes, NUL bytes and an empty argv.
    pub fn decode(payload: &[u8]) -> io::Result<Request> {
        let mut c = Cursor(payload);
        let version = c.u16()?;
        if version != VERSION {
            return Err(invalid(format!(
                "protocol version {version} is not supported (this broker speaks {VERSION}); use the loom-shim that \
                 came with this loom"
            )));
        }
        let argv = c.list()?;
        let cwd = c.bytes()?;
        let env = c.list()?;
        if !c.0.is_empty() {
            return Err(invalid("trailing bytes after the request"));
        }
        if argv.is_empty() {
            return Err(invalid("the request has an empty argv"));
        }
        Ok(Request { argv, cwd, env })
    }
}

/// The payload of an exit frame.
pub fn exit_payload(kind: u8, value: i32) -> Vec<u8> {
    let mut p = vec![kind];
    p.extend_from_slice(&value.to_be_bytes());
    p
}

/// Reads an exit frame's payload into the status the shim exits with: the code, or 128 + signal number.
pub fn exit_status(payload: &[u8]) -> io::Result<i32> {
    let [kind, a, b, c, d] = payload else {
        return Err(invalid("malformed exit frame"));
    };
    let v = i32::from_be_bytes([*a, *b, *c, *d]);
    match *kind {
        EXIT_CODE => Ok(v & 0xff),
        EXIT_SIGNAL => Ok(128 + (v & 0x7f)),
        k => Err(invalid(format!("unknown exit kind {k}"))),
    }
}

/// The payload of an error frame: the exit code the shim should use, then a UTF-8 message.
pub fn error_payload(code: u8, message: &str) -> Vec<u8> {
    let mut p = vec![code];
    let max = MAX_PAYLOAD - 1;
    let msg = message.as_bytes();
    p.extend_from_slice(&msg[..msg.len().min(max)]);
    p
}

/// Reads an error frame's payload: the exit code and the message.
pub fn error_parts(payload: &[u8]) -> (i32, String) {
    match payload.split_first() {
        Some((code, msg)) => (i32::from(*code), String::from_utf8_lossy(msg).into_owned()),
        None => (126, "the broker refused the call".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> Request {
        Request {
            argv: vec!["gcalcli".into(), "agenda".into(), "".into()],
            cwd: "/w/src".into(),
            env: vec!["HOME=/h".into(), "X=a=b".into()],
        }
    }

    #[test]
    fn requests_round_trip() {
        let r = req();
        assert_eq!(Request::decode(&r.encode().unwrap()).unwrap(), r);
    }

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_frame(&mut buf, T_STDOUT, b"hello").unwrap();
        write_frame(&mut buf, T_EXIT, &exit_payload(EXIT_SIGNAL, 13)).unwrap();
        let mut r = &buf[..];
        let f = read_frame(&mut r).unwrap().unwrap();
        assert_eq!((f.kind, f.payload.as_slice()), (T_STDOUT, &b"hello"[..]));
        let f = read_frame(&mut r).unwrap().unwrap();
        assert_eq!(exit_status(&f.payload).unwrap(), 141);
        assert!(read_frame(&mut r).unwrap().is_none());
        assert!(read_frame(&mut &buf[..3]).is_err(), "a torn header");
        assert!(read_frame(&mut &buf[..7]).is_err(), "a torn payload");
    }

    #[test]
    fn hostile_requests_are_refused_without_allocating() {
        let good = req().encode().unwrap();
        let mut v2 = good.clone();
        v2[1] = 2;
        assert!(Request::decode(&v2)
            .unwrap_err()
            .to_string()
            .contains("version 2"));
        let mut huge = VERSION.to_be_bytes().to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Request::decode(&huge).is_err());
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(Request::decode(&trailing).is_err());
        assert!(Request::decode(&good[..good.len() - 1]).is_err());
        let nul = Request {
            argv: vec!["a\0b".into()],
            ..req()
        };
        assert!(Request::decode(&nul.encode().unwrap()).is_err());
        let empty = Request {
            argv: vec![],
            ..req()
        };
        assert!(Request::decode(&empty.encode().unwrap()).is_err());
        let mut big = vec![T_STDIN];
        big.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_be_bytes());
        assert!(read_frame(&mut &big[..]).is_err());
    }

    #[test]
    fn statuses() {
        assert_eq!(exit_status(&exit_payload(EXIT_CODE, 3)).unwrap(), 3);
        assert_eq!(exit_status(&exit_payload(EXIT_SIGNAL, 9)).unwrap(), 137);
        assert!(exit_status(&[9, 0, 0, 0, 0]).is_err());
        assert_eq!(
            error_parts(&error_payload(127, "no such command")),
            (127, "no such command".to_string())
        );
    }
}
