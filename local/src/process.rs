//! The engine as loom sees it: a child process (`loom-engine`, crate `loom-engine`) that owns llama.cpp, the model
//! and its KV cache, driven over pipes ([`crate::protocol`]). llama.cpp — C++ that parses the model file — never runs
//! in the loom process, and a `loom` that never runs a local model never loads it (it is not linked into `loom`).
//!
//! The child gets an empty environment (no secret of loom's reaches it), its stdin and stdout as the protocol, and its
//! stderr kept (the last 4 KiB) for the error when it dies. It exits when loom closes its stdin, and is killed when
//! the [`Engine`] is dropped.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::protocol::{line, EngineError, EngineOptions, JobEvent, JobSpec, Reply, Request};

/// The engine's file name.
pub const ENGINE_PROGRAM: &str = "loom-engine";
/// The environment variable that names the engine program instead of the one next to `loom`.
pub const ENGINE_VAR: &str = "LOOM_ENGINE";
/// How much of the engine's stderr is kept for messages.
const STDERR_TAIL: usize = 4096;

/// One generation job.
pub struct Job {
    /// The conversation as (role, content) pairs, rendered with the model's own chat template.
    pub messages: Vec<(String, String)>,
    /// The GBNF grammar the output must follow (start rule `root`); empty: free text.
    pub grammar: String,
    /// Makes the grammar lazy: free text until this opens a call ([`crate::protocol::Trigger`]).
    pub trigger: Option<crate::protocol::Trigger>,
    /// Output cap in tokens.
    pub max_tokens: u32,
    /// Sampling settings.
    pub sampling: crate::Sampling,
    /// Receives the events; returning `false` stops the job (it still ends with `Done { cancelled: true }`).
    pub events: Box<dyn FnMut(JobEvent) -> bool + Send>,
    /// Called once when the job ends: `Ok` after `Done`, or why it failed.
    pub done: Box<dyn FnOnce(Result<(), EngineError>) + Send>,
}

/// Where the engine program is: `$LOOM_ENGINE` when `env` sets it, else `loom-engine` in the directory of the running
/// executable (or the one above it, where cargo puts test and example executables).
pub fn engine_program(env: &BTreeMap<String, String>) -> Result<PathBuf, EngineError> {
    if let Some(p) = env.get(ENGINE_VAR).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| {
        EngineError::Process(format!(
            "cannot be located: loom cannot find its own executable: {e}"
        ))
    })?;
    next_to(&exe)
}

/// `loom-engine` in the directory of `exe`, or the one above it.
fn next_to(exe: &Path) -> Result<PathBuf, EngineError> {
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates: Vec<PathBuf> = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(ENGINE_PROGRAM))
        .collect();
    candidates.iter().find(|c| c.is_file()).cloned().ok_or_else(|| {
        EngineError::Process(format!(
            "`{ENGINE_PROGRAM}` was not found (looked for {}); it is built with loom: run `cargo build --workspace` \
             (or `cargo install --path engine` next to `cargo install --path cli`), or set {ENGINE_VAR} to its path",
            candidates
                .iter()
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ))
    })
}

struct Pending {
    events: Box<dyn FnMut(JobEvent) -> bool + Send>,
    done: Box<dyn FnOnce(Result<(), EngineError>) + Send>,
    cancel_sent: bool,
}

struct Shared {
    stdin: Mutex<Option<ChildStdin>>,
    jobs: Mutex<HashMap<u64, Pending>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Shared {
    fn send(&self, r: &Request) -> Result<(), EngineError> {
        let mut guard = self.stdin.lock().map_err(|_| EngineError::Stopped)?;
        let stdin = guard.as_mut().ok_or(EngineError::Stopped)?;
        let mut text = line(r);
        text.push('\n');
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|_| EngineError::Stopped)
    }

    fn tail(&self) -> String {
        let bytes = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with: {text}")
        }
    }
}

/// A running engine process with one model loaded.
pub struct Engine {
    shared: Arc<Shared>,
    child: Mutex<Child>,
    next: std::sync::atomic::AtomicU64,
    label: String,
    chat_template: String,
    confinement: String,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("model", &self.label)
            .finish()
    }
}

impl Engine {
    /// Starts `program` and loads the model; returns once it is loaded (or failed to).
    pub fn start(program: &Path, opts: EngineOptions) -> Result<Engine, EngineError> {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // it dies with loom, however loom ends (a SIGKILL included): an engine taken over by a bad model file cannot
        // outlive it, and its seccomp filter keeps it from clearing that signal or starting a process of its own
        let mut child = loom_sandbox::spawn_tied(cmd).map_err(|e| {
            EngineError::Process(format!("{} could not be started: {e}", program.display()))
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(EngineError::Process("has no pipes".into()));
        };
        let tail = Arc::new(Mutex::new(Vec::new()));
        keep_tail(stderr, tail.clone());
        let shared = Arc::new(Shared {
            stdin: Mutex::new(Some(stdin)),
            jobs: Mutex::new(HashMap::new()),
            stderr: tail,
        });
        let label = opts.label.clone();
        let mut engine = Engine {
            shared: shared.clone(),
            child: Mutex::new(child),
            next: std::sync::atomic::AtomicU64::new(1),
            label,
            chat_template: String::new(),
            confinement: String::new(),
        };
        let mut lines = BufReader::new(stdout);
        let ready = shared
            .send(&Request::Load(opts))
            .and_then(|()| match read_reply(&mut lines) {
                // an engine that did not confine itself (a build from before it could) is not used
                Some(Ok(Reply::Ready { confinement, .. })) if confinement.is_empty() => {
                    Err(EngineError::Process(format!(
                        "{} loaded the model without confining itself (a build older than this loom?); \
                         reinstall loom so that loom-engine comes from the same build",
                        program.display()
                    )))
                }
                Some(Ok(Reply::Ready {
                    chat_template,
                    confinement,
                })) => Ok((chat_template, confinement)),
                Some(Ok(Reply::LoadFailed(e))) => Err(e),
                Some(Ok(other)) => Err(EngineError::Process(format!(
                    "broke the protocol: it answered the load with {}",
                    line(&other)
                ))),
                Some(Err(e)) => Err(e),
                None => Err(EngineError::Stopped),
            });
        match ready {
            Ok((t, c)) => {
                engine.chat_template = t;
                engine.confinement = c;
            }
            Err(e) => return Err(engine.ended(e)),
        }
        let reader = shared.clone();
        std::thread::Builder::new()
            .name("loom-local-engine".into())
            .spawn(move || serve_replies(lines, &reader))
            .map_err(|e| engine.ended(EngineError::Process(format!("reader thread: {e}"))))?;
        Ok(engine)
    }

    /// What a failure while starting becomes: the child is reaped, and a bare "stopped" gets its exit and stderr.
    fn ended(&self, e: EngineError) -> EngineError {
        let status = self.reap();
        match e {
            EngineError::Stopped => EngineError::Process(format!(
                "ended before the model was loaded ({status}){}",
                self.shared.tail()
            )),
            other => other,
        }
    }

    fn reap(&self) -> String {
        self.shared.stdin.lock().map(|mut s| s.take()).ok();
        match self.child.lock() {
            Ok(mut c) => {
                let _ = c.kill();
                c.wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string())
            }
            Err(_) => "unknown status".into(),
        }
    }

    /// Queues a job; its events and end arrive through the job's own callbacks, on the engine's reader thread.
    pub fn submit(&self, job: Job) -> Result<(), EngineError> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec = JobSpec {
            messages: job.messages,
            grammar: job.grammar,
            trigger: job.trigger,
            max_tokens: job.max_tokens,
            sampling: job.sampling,
        };
        self.shared
            .jobs
            .lock()
            .map_err(|_| EngineError::Stopped)?
            .insert(
                id,
                Pending {
                    events: job.events,
                    done: job.done,
                    cancel_sent: false,
                },
            );
        let sent = self.shared.send(&Request::Job { id, job: spec });
        if sent.is_err() {
            if let Ok(mut jobs) = self.shared.jobs.lock() {
                jobs.remove(&id);
            }
        }
        sent
    }

    /// The model's label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The chat template the model's GGUF file carries.
    pub fn chat_template(&self) -> &str {
        &self.chat_template
    }

    /// How the engine confined itself before it loaded the model, as it reported it.
    pub fn confinement(&self) -> &str {
        &self.confinement
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.reap();
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of `stderr` in `tail`, on a thread of its own.
fn keep_tail(mut stderr: impl Read + Send + 'static, tail: Arc<Mutex<Vec<u8>>>) {
    let _ = std::thread::Builder::new()
        .name("loom-local-stderr".into())
        .spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = tail.lock() {
                    t.extend_from_slice(&buf[..n]);
                    let over = t.len().saturating_sub(STDERR_TAIL);
                    t.drain(..over);
                }
            }
        });
}

/// The longest reply line loom reads from the engine (4 MiB): a reply is a token of text, a progress figure or an
/// error, so a longer line is a broken (or compromised) engine, and is refused before it is held in memory.
pub const MAX_REPLY_LINE: usize = 4 * 1024 * 1024;

/// The next reply: `None` at the end of the stream; an error for a line that is not a reply, or that is longer than
/// [`MAX_REPLY_LINE`] (read no further than the cap; the offending text is never echoed whole).
fn read_reply(lines: &mut impl BufRead) -> Option<Result<Reply, EngineError>> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_REPLY_LINE).unwrap_or(u64::MAX) + 1;
    match lines.by_ref().take(limit).read_until(b'\n', &mut bytes) {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if bytes.len() > MAX_REPLY_LINE {
        return Some(Err(EngineError::Process(format!(
            "broke the protocol with a reply line longer than {MAX_REPLY_LINE} bytes"
        ))));
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim_end();
    Some(serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(200).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        EngineError::Process(format!(
            "broke the protocol ({e}) with the line {shown:?}{more}"
        ))
    }))
}

/// Dispatches replies to their jobs until the engine's stdout ends (or it breaks the protocol); then every job still
/// waiting ends with the reason.
fn serve_replies(mut lines: impl BufRead, shared: &Shared) {
    let why = loop {
        let reply = match read_reply(&mut lines) {
            None => break EngineError::Stopped,
            Some(Err(e)) => break e,
            Some(Ok(r)) => r,
        };
        match reply {
            Reply::Event { id, event } => {
                let mut cancel = false;
                if let Ok(mut jobs) = shared.jobs.lock() {
                    if let Some(p) = jobs.get_mut(&id) {
                        if !(p.events)(event) && !p.cancel_sent {
                            p.cancel_sent = true;
                            cancel = true;
                        }
                    }
                }
                if cancel {
                    let _ = shared.send(&Request::Cancel { id });
                }
            }
            Reply::End { id, error } => {
                let pending = shared.jobs.lock().ok().and_then(|mut j| j.remove(&id));
                if let Some(p) = pending {
                    (p.done)(error.map_or(Ok(()), Err));
                }
            }
            other => {
                break EngineError::Process(format!(
                    "broke the protocol: {} after the model was loaded",
                    line(&other)
                ))
            }
        }
    };
    // the engine is of no further use: close its stdin so it exits, and fail what is still waiting
    if let Ok(mut s) = shared.stdin.lock() {
        s.take();
    }
    let why = match why {
        EngineError::Stopped => EngineError::Process(format!(
            "stopped while loom was using it{}; restart loom",
            shared.tail()
        )),
        other => other,
    };
    let waiting: Vec<Pending> = shared
        .jobs
        .lock()
        .map(|mut j| j.drain().map(|(_, p)| p).collect())
        .unwrap_or_default();
    for p in waiting {
        (p.done)(Err(why.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::Sampling;

    /// An engine that never ends its line (here: an endless stream of `a`) is refused after the cap, not read into
    /// memory; a broken line is quoted only in part.
    #[test]
    fn reply_lines_are_bounded_before_they_are_held() {
        let mut endless = std::io::BufReader::new(std::io::repeat(b'a'));
        match read_reply(&mut endless) {
            Some(Err(EngineError::Process(m))) => {
                assert!(
                    m.contains(&format!("longer than {MAX_REPLY_LINE} bytes")),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        let long = format!("{}\n", "x".repeat(10_000));
        match read_reply(&mut long.as_bytes()) {
            Some(Err(EngineError::Process(m))) => assert!(m.len() < 1_000, "{m}"),
            other => panic!("{other:?}"),
        }
        let ready = Reply::Ready {
            chat_template: "<|im_start|>".into(),
            confinement: "landlock=full".into(),
        };
        let ok = format!("{}\n", crate::protocol::line(&ready).trim_end());
        assert_eq!(read_reply(&mut ok.as_bytes()).unwrap().unwrap(), ready);
    }

    /// A fake engine in Python that speaks the protocol: it loads anything but `bad.gguf`, answers each job with the
    /// job's messages echoed as text, and for the message `die` writes to stderr and exits mid-job. A job whose
    /// message is `wait` streams text until it is cancelled.
    const FAKE: &str = r#"
import json, sys, os, select
def out(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
load = json.loads(sys.stdin.readline())["load"]
if load["model"].endswith("bad.gguf"):
    out({"load_failed": {"NoTemplate": load["label"]}}); sys.exit(1)
assert "HOME" not in os.environ and "PATH" not in os.environ, "loom's environment was passed on"
out({"ready": {"chat_template": "{{ fake }}", "confinement": "" if load["model"].endswith("free.gguf") else "landlock=full (fake)"}})
for raw in sys.stdin:
    req = json.loads(raw)
    if "cancel" in req:
        continue
    job = req["job"]; i = job["id"]; text = job["job"]["messages"][-1][1]
    if text == "die":
        sys.stderr.write("engine: segmentation fault (pretend)\n"); sys.stderr.flush(); os._exit(3)
    if text == "wait":
        n = 0
        while True:
            out({"event": {"id": i, "event": {"Text": "x"}}}); n += 1
            if select.select([sys.stdin], [], [], 0.01)[0]:
                if json.loads(sys.stdin.readline()).get("cancel", {}).get("id") == i:
                    break
        out({"event": {"id": i, "event": {"Done": {"generated": n, "hit_limit": False, "cancelled": True, "millis": 1}}}})
        out({"end": {"id": i, "error": None}}); continue
    out({"event": {"id": i, "event": {"Text": text.upper()}}})
    out({"event": {"id": i, "event": {"Done": {"generated": 1, "hit_limit": False, "cancelled": False, "millis": 1}}}})
    out({"end": {"id": i, "error": None}})
"#;

    fn fake_engine(dir: &Path) -> PathBuf {
        let p = dir.join("fake-engine");
        std::fs::write(&p, format!("#!/usr/bin/env python3\n{FAKE}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn opts(model: &str) -> EngineOptions {
        EngineOptions {
            model: model.into(),
            label: "fake".into(),
            threads: 1,
            context: 64,
        }
    }

    type Seen = mpsc::Receiver<Result<JobEvent, Result<(), EngineError>>>;

    fn job(engine: &Engine, text: &str, stop_after: usize) -> Seen {
        let (tx, rx) = mpsc::channel();
        let done = tx.clone();
        let mut n = 0;
        engine
            .submit(Job {
                messages: vec![("user".into(), text.into())],
                grammar: String::new(),
                trigger: None,
                max_tokens: 8,
                sampling: Sampling {
                    temperature: 0.0,
                    top_k: 0,
                    top_p: 1.0,
                    seed: 0,
                },
                events: Box::new(move |e| {
                    n += 1;
                    let _ = tx.send(Ok(e));
                    n < stop_after
                }),
                done: Box::new(move |r| {
                    let _ = done.send(Err(r));
                }),
            })
            .unwrap();
        rx
    }

    fn until_end(rx: &Seen) -> (Vec<JobEvent>, Result<(), EngineError>) {
        let mut events = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(30)).unwrap() {
                Ok(e) => events.push(e),
                Err(end) => return (events, end),
            }
        }
    }

    #[test]
    fn jobs_run_in_the_engine_process_and_report_through_their_callbacks() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&fake_engine(dir.path()), opts("/m/ok.gguf")).unwrap();
        for text in ["hello", "again"] {
            let (events, end) = until_end(&job(&engine, text, usize::MAX));
            end.unwrap();
            assert_eq!(events[0], JobEvent::Text(text.to_uppercase()));
            assert!(
                matches!(
                    events[1],
                    JobEvent::Done {
                        cancelled: false,
                        ..
                    }
                ),
                "{events:?}"
            );
        }
    }

    #[test]
    fn a_callback_that_returns_false_cancels_the_job_in_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&fake_engine(dir.path()), opts("/m/ok.gguf")).unwrap();
        let (events, end) = until_end(&job(&engine, "wait", 3));
        end.unwrap();
        assert!(
            matches!(
                events.last(),
                Some(JobEvent::Done {
                    cancelled: true,
                    ..
                })
            ),
            "{events:?}"
        );
        // the engine goes on serving
        let (events, end) = until_end(&job(&engine, "next", usize::MAX));
        end.unwrap();
        assert_eq!(events[0], JobEvent::Text("NEXT".into()));
    }

    #[test]
    fn a_load_failure_comes_back_as_the_engines_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Engine::start(&fake_engine(dir.path()), opts("/m/bad.gguf")).unwrap_err();
        assert_eq!(err, EngineError::NoTemplate("fake".into()));
    }

    #[test]
    fn an_engine_that_did_not_confine_itself_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_engine(dir.path());
        let err = Engine::start(&program, opts("/m/free.gguf")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the local model engine {} loaded the model without confining itself (a build older than this \
                 loom?); reinstall loom so that loom-engine comes from the same build",
                program.display()
            )
        );
        let engine = Engine::start(&program, opts("/m/ok.gguf")).unwrap();
        assert_eq!(engine.confinement(), "landlock=full (fake)");
    }

    #[test]
    fn an_engine_that_dies_mid_job_fails_the_job_with_its_stderr_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&fake_engine(dir.path()), opts("/m/ok.gguf")).unwrap();
        let (_, end) = until_end(&job(&engine, "die", usize::MAX));
        let msg = end.unwrap_err().to_string();
        assert!(msg.contains("stopped while loom was using it"), "{msg}");
        // the stderr tail is read on its own thread; the message carries it when it arrived first
        let (tx, rx) = mpsc::channel();
        let refused = engine.submit(Job {
            messages: vec![],
            grammar: String::new(),
            trigger: None,
            max_tokens: 1,
            sampling: Sampling {
                temperature: 0.0,
                top_k: 0,
                top_p: 1.0,
                seed: 0,
            },
            events: Box::new(|_| true),
            done: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        assert_eq!(refused, Err(EngineError::Stopped));
        assert!(rx.try_recv().is_err(), "a refused job must not also end");
    }

    #[test]
    fn a_missing_program_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err = Engine::start(&dir.path().join("nope"), opts("/m/ok.gguf")).unwrap_err();
        assert!(err.to_string().contains("could not be started"), "{err}");
        let env = BTreeMap::from([(ENGINE_VAR.to_string(), "/x/loom-engine".to_string())]);
        assert_eq!(
            engine_program(&env).unwrap(),
            PathBuf::from("/x/loom-engine")
        );
        let exe = dir.path().join("bin/deps/loom");
        let err = next_to(&exe).unwrap_err().to_string();
        assert!(
            err.contains(ENGINE_VAR) && err.contains("cargo build"),
            "{err}"
        );
        std::fs::create_dir_all(dir.path().join("bin/deps")).unwrap();
        std::fs::write(dir.path().join("bin").join(ENGINE_PROGRAM), "").unwrap();
        assert_eq!(
            next_to(&exe).unwrap(),
            dir.path().join("bin").join(ENGINE_PROGRAM)
        );
    }
}
