//! `loom run` driven through a pseudo-terminal, as a person would use it: the scripted harness answers, slash
//! commands answer between turns, Ctrl-C cancels a running tool and the session goes on, `/quit` leaves.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loom_tests::{loom_bin, Scratch};

use super::sandbox_available;

/// A child on the slave side of a pty; everything it prints accumulates in `seen`.
pub(super) struct Pty {
    master: std::fs::File,
    pub(super) seen: Arc<Mutex<String>>,
    pub(super) child: std::process::Child,
    /// Where the next `expect` starts looking.
    mark: usize,
}

/// Waits are for the child to get there, not measurements: the bound only stops a broken build from hanging CI.
pub(super) const PATIENCE: Duration = Duration::from_secs(90);

impl Pty {
    pub(super) fn spawn(dir: &std::path::Path, args: &[&str]) -> Pty {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors into the provided integers; null name/termios/winsize are allowed.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just returned by openpty and are owned here.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut cmd = Command::new(loom_bin());
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        for key in ["PATH", "HOME", "TMPDIR"] {
            if let Ok(v) = std::env::var(key) {
                cmd.env(key, v);
            }
        }
        cmd.env("LOOM_DATA_HOME", dir.join(".loom-data"))
            .env("TERM", "xterm");
        // SAFETY: setsid and ioctl are async-signal-safe; the child becomes a session leader whose controlling
        // terminal is the pty, so Ctrl-C written to the master reaches it as SIGINT.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let master = std::fs::File::from(master);
        let seen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Pty {
            master,
            seen,
            child,
            mark: 0,
        }
    }

    pub(super) fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Sends `/quit` and waits for loom to exit; its exit status.
    pub(super) fn quit(&mut self) -> std::process::ExitStatus {
        self.send("/quit\r");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "loom run did not exit after /quit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `want` appears (ANSI styling removed) after the last match; returns the text up to it.
    pub(super) fn expect(&mut self, want: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let plain = strip(&self.seen.lock().unwrap());
            if let Some(at) = plain[self.mark.min(plain.len())..].find(want) {
                let end = self.mark + at + want.len();
                let before = plain[self.mark..end].to_string();
                self.mark = end;
                return before;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {want:?}; the terminal shows:\n{plain}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The terminal text without ANSI escapes and carriage returns.
fn strip(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                for n in chars.by_ref() {
                    if n.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

#[test]
fn a_person_talks_runs_commands_cancels_a_turn_and_leaves() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        r##"[agent]
name = "repl"

[harness]
provider = "test"
script = [
  [ { say = "# Hi\nsome **bold** words" } ],
  [ { call = { tool = "bash", input = { command = "sleep 60" } } }, { say = "slept" } ],
  [ { say = "still here" } ],
]

[session]
provider = "in-memory"

[capabilities]
bash = { commands = ["sleep"], paths = ["./"] }

[tools]
bash = "builtin"
"##,
    );
    let mut t = Pty::spawn(s.path(), &["run", "agent.toml"]);
    t.expect("> ");
    t.send("hello\r");
    // markdown is rendered: the heading and bold markers are gone
    let answer = t.expect("some bold words");
    assert!(answer.contains("Hi\n"), "{answer:?}");
    assert!(
        !answer.contains("**") && !answer.contains("# Hi"),
        "{answer:?}"
    );
    t.expect("[end_turn");
    t.expect("> ");

    t.send("/tools\r");
    t.expect("bash:");
    t.send("/help\r");
    t.expect("/compact");
    t.send("/nope\r");
    t.expect("unknown command \"/nope\"");
    t.send("/events\r");
    t.expect("\"sessionUpdate\":\"user_message_chunk\"");
    // an in-memory session has nothing that compacts, and says so instead of claiming success
    t.send("/compact\r");
    t.expect("nothing to compact: the session has no compacting layer");

    t.send("sleep please\r");
    t.expect("⏺ bash sleep 60");
    // the tool is running inside its sandbox; Ctrl-C cancels the turn, not the session
    std::thread::sleep(Duration::from_millis(300));
    t.send("\x03");
    t.expect("cancelled");
    t.expect("> ");

    t.send("are you there?\r");
    t.expect("still here");
    t.expect("> ");
    let status = t.quit();
    assert!(status.success(), "{status:?}");
}

/// A call naming several paths is asked about once; "always" remembers each path an ask rule stopped — here the
/// second one — so the same path is not asked about again.
#[test]
fn always_remembers_the_path_that_asked_in_a_call_of_several() {
    let s = Scratch::new();
    s.write("a.txt", "alpha");
    s.write("secret/b.txt", "beta");
    s.write(
        "agent.toml",
        r##"[agent]
name = "asker"

[harness]
provider = "test"
script = [
  [ { call = { tool = "read_many", input = { paths = ["a.txt", "secret/b.txt"] } } }, { say = "both were read" } ],
  [ { call = { tool = "read_many", input = { paths = ["secret/b.txt"] } } }, { say = "b was read again" } ],
]

[session]
provider = "in-memory"

[capabilities]
read_many = { read_paths = ["./"] }

[tools]
read_many = "builtin"

[[permissions.ask_rules]]
tool = "read_many"
path_prefix = "./secret"
"##,
    );
    let mut t = Pty::spawn(s.path(), &["run", "agent.toml"]);
    t.expect("> ");
    t.send("read both\r");
    t.expect("approve? read_many: a [permissions] ask rule (permissions.ask_rules[1])");
    t.send("a\r");
    t.expect("both were read");
    t.expect("> ");
    t.send("again\r");
    let turn = t.expect("b was read again");
    assert!(!turn.contains("approve?"), "{turn:?}");
    t.expect("> ");
    t.quit();
    let kept =
        std::fs::read_to_string(s.path().join(".loom-data/agents/asker/approvals.json")).unwrap();
    assert!(kept.contains("b.txt") && !kept.contains("a.txt"), "{kept}");
}

#[test]
fn a_person_answers_asks_once_always_and_reject() {
    let s = Scratch::new();
    s.write("a.txt", "alpha");
    s.write("b.txt", "beta");
    s.write(
        "agent.toml",
        r##"[agent]
name = "asker"

[harness]
provider = "test"
script = [
  [ { call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "read a" } ],
  [ { call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "read a again" } ],
  [ { call = { tool = "read_file", input = { path = "b.txt" } } }, { say = "tried b" } ],
]

[session]
provider = "in-memory"

[capabilities]
read_file = { paths = ["./"] }

[tools]
read_file = "builtin"

[[permissions.ask_rules]]
tool = "read_file"
"##,
    );
    let mut t = Pty::spawn(s.path(), &["run", "agent.toml"]);
    t.expect("> ");
    t.send("read a\r");
    t.expect("approve? read_file: a [permissions] ask rule (permissions.ask_rules[1])");
    t.expect("[o]nce, [a]lways");
    // while the question waits, the spinner draws nothing over it (the time lets several frames go by)
    std::thread::sleep(Duration::from_millis(600));
    let waiting = strip(&t.seen.lock().unwrap())[t.mark..].to_string();
    assert!(
        !waiting.chars().any(|c| ('⠀'..='⣿').contains(&c)),
        "the spinner drew while the question waited: {waiting:?}"
    );
    // not an answer: asked again, and nothing runs meanwhile
    t.send("perhaps\r");
    t.expect("answer o (once), a (always) or r (reject)");
    t.send("a\r");
    t.expect("⎿ ok alpha");
    t.expect("read a");
    t.expect("> ");
    // remembered: the same call runs without a question
    t.send("again\r");
    let turn = t.expect("read a again");
    assert!(!turn.contains("approve?"), "{turn:?}");
    t.expect("> ");
    // another path is another call: asked, and rejected
    t.send("now b\r");
    t.expect("approve?");
    t.send("r\r");
    t.expect("the user rejected it");
    t.expect("tried b");
    t.expect("> ");
    t.quit();
    let kept =
        std::fs::read_to_string(s.path().join(".loom-data/agents/asker/approvals.json")).unwrap();
    assert!(kept.contains("a.txt") && !kept.contains("b.txt"), "{kept}");
    s.loom(&["permissions", "list", "agent.toml"])
        .expect_code(0)
        .stdout_has("  1  read_file  path ")
        .stdout_has("a.txt");
}
