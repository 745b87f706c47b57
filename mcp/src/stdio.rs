//! The stdio transport: one child process per server, newline-delimited JSON-RPC on its stdin/stdout, stderr kept as
//! a bounded tail for error messages. The child leads its own process group, killed whole when the transport drops
//! (`npx` runs the server as a grandchild).

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use loom_sandbox::ProcessGroup;
use serde_json::Value as Json;

use super::{McpError, Received, Transport, Wait, MAX_MESSAGE_BYTES};
use loom_jsonrpc::{parse_message, Frame, LineFramer};

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

/// Messages read ahead of the client; when they are not taken, the reader stops reading and the server blocks on
/// its stdout (each holds at most [`MAX_MESSAGE_BYTES`]).
const READ_QUEUE: usize = 8;

/// Writes queued for the server's stdin; a reply to the server's own request is dropped when the queue is full.
const WRITE_QUEUE: usize = 16;

/// How often a send re-tries a full write queue.
const WRITE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// What the reader thread hands over.
enum FromServer {
    Frame(Frame),
    Closed,
}

/// One write for the writer thread; with a sender when the writer reports its outcome.
type ToServer = (Vec<u8>, Option<SyncSender<Result<(), String>>>);

/// A running stdio server. Its stdout is read, its stdin written and its stderr drained by threads of their own, so
/// no exchange blocks on a server that stops reading or keeps writing: every wait has a deadline.
pub struct StdioTransport {
    child: Child,
    writes: Option<SyncSender<ToServer>>,
    /// A write did not finish in time: the stream may hold half a message, so nothing more is sent.
    stuck: bool,
    rx: Receiver<FromServer>,
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
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    kill_group(&mut child);
                    return Err("the server's stdio pipes are missing".into());
                }
            };
        let (tx, rx) = mpsc::sync_channel(READ_QUEUE);
        std::thread::spawn(move || read_messages(stdout, &tx));
        let (writes, queued) = mpsc::sync_channel::<ToServer>(WRITE_QUEUE);
        std::thread::spawn(move || write_messages(stdin, &queued));
        let tail = Arc::new(Mutex::new(Tail::default()));
        let sink = tail.clone();
        // stderr is always drained (only its tail is kept), so a server logging a lot never blocks on it
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
            child,
            writes: Some(writes),
            stuck: false,
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

/// Reads newline-delimited messages, never holding more than [`MAX_MESSAGE_BYTES`] of one line: a longer line is
/// reported as soon as it crosses the limit and the rest of it is skipped.
fn read_messages(mut r: impl Read, tx: &SyncSender<FromServer>) {
    let mut framer = LineFramer::new(MAX_MESSAGE_BYTES);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(FromServer::Closed);
                return;
            }
            Ok(n) => n,
        };
        if !framer.push(&buf[..n], &mut |f| tx.send(FromServer::Frame(f)).is_ok()) {
            return;
        }
    }
}

/// Writes queued messages to the server's stdin until the queue closes or a write fails (the server is gone).
fn write_messages(mut stdin: ChildStdin, queued: &Receiver<ToServer>) {
    while let Ok((bytes, done)) = queued.recv() {
        let r = stdin
            .write_all(&bytes)
            .and_then(|()| stdin.flush())
            .map_err(|e| e.to_string());
        let failed = r.is_err();
        if let Some(done) = done {
            let _ = done.try_send(r);
        }
        if failed {
            return;
        }
    }
}

impl Transport for StdioTransport {
    fn send(&mut self, message: &Json, deadline: Instant) -> Result<(), McpError> {
        let mut text = message.to_string().into_bytes();
        text.push(b'\n');
        let size = text.len();
        let writes = match &self.writes {
            Some(w) if !self.stuck => w,
            _ => return Err(McpError::Dead("the server's stdin is closed".into())),
        };
        let (done, outcome) = mpsc::sync_channel(1);
        let mut job = (text, Some(done));
        let stuck = |what: &str| {
            McpError::Timeout(format!(
                "the server stopped reading its stdin ({what} a message of {size} bytes)"
            ))
        };
        loop {
            match writes.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => {
                    return Err(McpError::Dead(
                        "cannot write to the server: its stdin is closed".into(),
                    ))
                }
                Err(TrySendError::Full(j)) => job = j,
            }
            if Instant::now() >= deadline {
                self.stuck = true;
                return Err(stuck("it never took"));
            }
            std::thread::sleep(WRITE_POLL);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match outcome.recv_timeout(left) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(McpError::Dead(format!("cannot write to the server: {e}"))),
            Err(RecvTimeoutError::Disconnected) => Err(McpError::Dead(
                "cannot write to the server: its stdin is closed".into(),
            )),
            Err(RecvTimeoutError::Timeout) => {
                self.stuck = true;
                Err(stuck("it did not take"))
            }
        }
    }

    fn post(&mut self, message: &Json) {
        if self.stuck {
            return;
        }
        let mut text = message.to_string().into_bytes();
        text.push(b'\n');
        if let Some(w) = &self.writes {
            // a full queue means the server is not reading: this message is dropped, nothing waits
            let _ = w.try_send((text, None));
        }
    }

    fn next(&mut self, deadline: Instant) -> Wait {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(FromServer::Closed) | Err(RecvTimeoutError::Disconnected) => {
                Wait::Closed(self.exit_status())
            }
            Ok(FromServer::Frame(Frame::TooLarge(n))) => Wait::Got(Received::TooLarge(n)),
            Ok(FromServer::Frame(Frame::Message(bytes))) => {
                Wait::Got(match parse_message(&bytes) {
                    Some(m) => Received::Message(m),
                    None => Received::Noise,
                })
            }
            Err(RecvTimeoutError::Timeout) => Wait::TimedOut,
        }
    }

    fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.text()).unwrap_or_default()
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // the writer thread ends with the queue, or with EPIPE once the group is killed
        self.writes.take();
        kill_group(&mut self.child);
    }
}

fn kill_group(child: &mut Child) {
    if let Some(group) = ProcessGroup::led_by(child.id()) {
        group.kill();
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_line_is_reported_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nnot json\n");
        let (tx, rx) = mpsc::sync_channel(100);
        read_messages(std::io::Cursor::new(input), &tx);
        let got: Vec<FromServer> = rx.try_iter().collect();
        assert!(
            matches!(got[0], FromServer::Frame(Frame::TooLarge(n)) if n > MAX_MESSAGE_BYTES),
            "reported when it crossed the limit"
        );
        assert!(
            matches!(&got[1], FromServer::Frame(Frame::Message(m)) if parse_message(m).is_some_and(|m| m["id"] == 1))
        );
        assert!(
            matches!(&got[2], FromServer::Frame(Frame::Message(m)) if parse_message(m).is_none())
        );
        assert!(matches!(got[3], FromServer::Closed));
    }
}
