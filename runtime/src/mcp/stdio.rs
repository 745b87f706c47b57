//! The stdio transport: one child process per server, newline-delimited JSON-RPC on its stdin/stdout, stderr kept as
//! a bounded tail for error messages. The child leads its own process group, killed whole when the transport drops
//! (`npx` runs the server as a grandchild).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value as Json;

use super::{Incoming, McpError, Transport, Wait, MAX_MESSAGE_BYTES};

/// How much of the server's stderr is kept for error messages.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// What to spawn.
#[derive(Clone)]
pub struct StdioSpawn {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: std::path::PathBuf,
}

impl std::fmt::Debug for StdioSpawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // env values may be secrets: names only
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("StdioSpawn")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &names)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// A running stdio server.
pub struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Incoming>,
    stderr: Arc<Mutex<Tail>>,
}

/// The last bytes of a stream.
#[derive(Default)]
pub struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > STDERR_TAIL_BYTES {
            let cut = self.0.len() - STDERR_TAIL_BYTES;
            self.0.drain(..cut);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0).trim().to_string()
    }
}

impl StdioTransport {
    /// Spawns the server.
    pub fn spawn(spec: &StdioSpawn) -> Result<StdioTransport, String> {
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", spec.program))?;
        let (stdout, stderr) = match (child.stdout.take(), child.stderr.take()) {
            (Some(o), Some(e)) => (o, e),
            _ => {
                kill_group(&mut child);
                return Err("the server's stdio pipes are missing".into());
            }
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || read_messages(BufReader::new(stdout), &tx));
        let tail = Arc::new(Mutex::new(Tail::default()));
        let sink = tail.clone();
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = sink.lock() {
                    t.push(&buf[..n]);
                }
            }
        });
        Ok(StdioTransport {
            stdin: child.stdin.take(),
            child,
            rx,
            stderr: tail,
        })
    }

    fn exit_status(&mut self) -> String {
        // the reader saw EOF: give the process a moment to be reaped so the status is known
        for _ in 0..50 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return format!("the server exited ({status})");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        "the server closed its stdout".to_string()
    }
}

/// Reads newline-delimited messages, never holding more than [`MAX_MESSAGE_BYTES`] of one line.
fn read_messages(mut r: impl BufRead, tx: &mpsc::Sender<Incoming>) {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => {
                let _ = tx.send(Incoming::Closed);
                return;
            }
            Ok(b) => b,
        };
        let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if dropped > 0 || line.len() + chunk.len() > MAX_MESSAGE_BYTES {
            dropped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let used = end.unwrap_or(buf.len());
        r.consume(used);
        if end.is_some() {
            let msg = if dropped > 0 {
                Incoming::TooLarge(dropped)
            } else if line.iter().all(u8::is_ascii_whitespace) {
                line.clear();
                continue;
            } else {
                match serde_json::from_slice::<Json>(&line) {
                    Ok(v) => Incoming::Message(v),
                    Err(_) => Incoming::Noise,
                }
            };
            dropped = 0;
            line.clear();
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
}

impl Transport for StdioTransport {
    fn send(&mut self, message: &Json) -> Result<(), McpError> {
        let mut text = message.to_string();
        text.push('\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| McpError::Dead("the server's stdin is closed".into()))?;
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| McpError::Dead(format!("cannot write to the server: {e}")))
    }

    fn next(&mut self, deadline: Instant) -> Wait {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => {
                Wait::Closed(self.exit_status())
            }
            Ok(m) => Wait::Got(m),
            Err(RecvTimeoutError::Timeout) => Wait::TimedOut,
        }
    }

    fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.text()).unwrap_or_default()
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.stdin.take();
        kill_group(&mut self.child);
    }
}

fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: killpg has no memory effects; the group is the child's own (process_group(0)).
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_line_is_dropped_whole_and_reported() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nnot json\n");
        let (tx, rx) = mpsc::channel();
        read_messages(std::io::Cursor::new(input), &tx);
        let got: Vec<Incoming> = rx.try_iter().collect();
        assert!(
            matches!(got[0], Incoming::TooLarge(n) if n == MAX_MESSAGE_BYTES + 10),
            "{got:?}"
        );
        assert!(
            matches!(&got[1], Incoming::Message(m) if m["id"] == 1),
            "{got:?}"
        );
        assert!(matches!(&got[2], Incoming::Noise), "{got:?}");
        assert!(matches!(got[3], Incoming::Closed), "{got:?}");
    }
}
