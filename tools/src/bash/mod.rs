//! `bash`: run a command line (or, in argv mode, a command with arguments) under the row the kernel picked, confined
//! by loom-sandbox exactly as `loom sandbox run` confines it, with the command broker beside the shell when the
//! grant has per-command rows. Output is bounded (the tail is kept, the total counted, the whole spilled to a file
//! when truncated), streamed as progress at most every 100 ms, and the process tree is killed on timeout or cancel.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loom_broker::{run_bash, BashPlan, BashRun, BrokerLimits};
use loom_kernel::{
    terminal_plan, Authorization, CallFacts, Exec, Request, TerminalFacts, TerminalPlan,
};
use loom_sandbox::{AuthorityPaths, GroupSlot, KillOnDrop, Limits, SecretFacts, Stream, Streams};
use serde_json::{json, Value};

use super::output::{OutputBuffer, DEFAULT_TAIL_BYTES, MAX_SPILL_BYTES};
use super::{
    check_fields, resolve_path, str_field, ClientTerminals, PathMode, Prepared, Progress, Tool,
    ToolCtx, ToolEnv, ToolOutput,
};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolCallContent;
use loom_protocol::update::ToolKind;

/// The default timeout (30 s).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest timeout a call may ask for (1 h).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// Progress is published at most this often.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Lets an event through at most once per `every` (the first one at once).
#[derive(Debug, Clone, Copy)]
pub struct Throttle {
    every: Duration,
    last: Option<Instant>,
}

impl Throttle {
    /// A throttle with period `every`.
    pub fn new(every: Duration) -> Throttle {
        Throttle { every, last: None }
    }

    /// True (and the period restarts) when an event at `now` may pass.
    pub fn ready(&mut self, now: Instant) -> bool {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < self.every)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// Where the sandbox machinery lives.
#[derive(Debug, Clone, Default)]
pub struct SandboxEnv {
    /// The executable that runs the sandbox's inner stage; `None`: `loom-sandbox-exec` next to the current
    /// executable.
    pub inner_exe: Option<PathBuf>,
    /// The `loom-shim` binary for the broker; `None`: next to the current executable.
    pub shim: Option<PathBuf>,
    /// Where spill files go; `None`: the temp directory.
    pub spill_dir: Option<PathBuf>,
    /// The in-memory output bound; 0: the default.
    pub tail_bytes: usize,
    /// The secrets loom resolved and the ones the agent shares (`[agent] secrets`); boot fills it in. A command
    /// sees only the secrets its row is granted.
    pub secrets: SecretFacts,
    /// The agent's authority files (boot fills it in): read-only in every command's view, secret stores masked.
    pub authority: AuthorityPaths,
    /// What the manifest accepts the sandbox may lack (`[sandbox] accept`; boot fills it in).
    pub accept: Vec<loom_kernel::AcceptedGap>,
    /// Where each confined command's owed sweep is written down (`sweeps` in loom's data directory; boot fills it
    /// in), so what a command created at a protected name is moved aside even when loom dies first. `None`: no
    /// records.
    pub sweep_records: Option<PathBuf>,
}

/// The `bash` tool.
#[derive(Debug)]
pub struct BashTool {
    env: ToolEnv,
    sandbox: SandboxEnv,
}

impl BashTool {
    /// The tool for `env`.
    pub fn new(env: ToolEnv, sandbox: SandboxEnv) -> BashTool {
        BashTool { env, sandbox }
    }
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("bash")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn spec(&self) -> ToolSpec {
        let mut rowed = Vec::new();
        if let loom_kernel::Grant::Set(rows) = &self.env.grant {
            for r in rows {
                if let Some(cmds) = loom_kernel::rowed_commands(r) {
                    rowed.push(format!("{} ({})", cmds.join(", "), r.to_toml()));
                }
            }
        }
        let mut description = format!(
            "Run a shell command via /bin/bash -c in {} (or `cwd`, which must be inside the grant). Output is the \
             combined stdout and stderr, tail-truncated when long. This tool's grant: {}.",
            self.env.cwd.display(),
            self.env.grant
        );
        if !rowed.is_empty() {
            description.push_str(&format!(
                " These commands carry their own grants wherever they run: {}. For a command listed only there, \
                 pass it as `command` with its arguments in `args` to run it directly.",
                rowed.join("; ")
            ));
        }
        ToolSpec {
            name: self.env.instance.clone(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": { "type": "string", "description": "The command line (or, with args, the command)." },
                    "args": { "type": "array", "items": { "type": "string" }, "description": "Arguments: runs `command` directly, without a shell." },
                    "cwd": { "type": "string", "description": "Working directory; must be inside an allowed path." },
                    "timeout_ms": { "type": "integer", "minimum": 1, "description": "Default 30000 (3600000 in the background)." },
                    "background": { "type": "boolean", "description": "Start it and return its process id at once (poll with process_output, end with process_kill)." },
                },
                "required": ["command"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(
            input,
            &name,
            &["command", "args", "cwd", "timeout_ms", "background"],
        )?;
        let background = match input.get("background") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(format!("{name}: background must be true or false")),
        };
        let command = str_field(input, &name, "command")?.to_string();
        if command.trim().is_empty() {
            return Err(format!("{name}: command is empty"));
        }
        let args = match input.get("args") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("{name}: args must be an array of strings"))?,
            ),
            Some(_) => return Err(format!("{name}: args must be an array of strings")),
        };
        let cwd = match input.get("cwd") {
            None | Some(Value::Null) => self.env.cwd.clone(),
            Some(_) => {
                let c = resolve_path(
                    &self.env.cwd,
                    str_field(input, &name, "cwd")?,
                    PathMode::Existing,
                )
                .map_err(|e| format!("{name}: cwd {e}"))?;
                // whether it is a directory is looked at once the kernel has allowed it (in `run`), so a call
                // naming a `cwd` outside the grant learns nothing about what is there
                c
            }
        };
        let timeout_ms = match input.get("timeout_ms") {
            None | Some(Value::Null) if background => MAX_TIMEOUT_MS,
            None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_TIMEOUT_MS).contains(n))
                .ok_or_else(|| {
                    format!("{name}: timeout_ms must be an integer from 1 to {MAX_TIMEOUT_MS}")
                })?,
        };
        let cwd_s = cwd.display().to_string();
        let (request, line, argv) = match args {
            None => (
                Request::Bash {
                    command: command.clone(),
                    cwd: cwd_s.clone(),
                },
                command.clone(),
                None,
            ),
            Some(a) => {
                let mut argv = vec![command.clone()];
                argv.extend(a);
                (
                    Request::BashArgv {
                        argv: argv.clone(),
                        cwd: cwd_s.clone(),
                    },
                    argv.join(" "),
                    Some(argv),
                )
            }
        };
        let env = self.env.clone();
        let sandbox = self.sandbox.clone();
        let not_dir = format!("{name}: cwd {cwd_s} is not a directory");
        Ok(Prepared {
            request,
            more: Vec::new(),
            facts: CallFacts {
                tool: name,
                path: Some(cwd_s),
                command: Some(line),
                // ask and deny rules read an argv call word by word, not its space-joined line
                argv: argv.clone(),
                ..CallFacts::default()
            },
            locations: vec![],
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    if !cwd.is_dir() {
                        return ToolOutput::error(not_dir);
                    }
                    let call = Call {
                        env,
                        sandbox,
                        command,
                        argv,
                        cwd,
                        timeout: Duration::from_millis(timeout_ms),
                    };
                    if background {
                        return call.run_in_background(auth);
                    }
                    call.run(auth, ctx).await
                })
            }),
        })
    }
}

mod local;
mod report;
mod terminal;

use local::start;
use report::{add_swept, sandbox_json};

struct Call {
    env: ToolEnv,
    sandbox: SandboxEnv,
    command: String,
    argv: Option<Vec<String>>,
    cwd: PathBuf,
    timeout: Duration,
}

static SPILL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Reads `reader` to its end on a thread of its own, handing each chunk to `sink` (which returns false to stop).
fn drain(reader: std::io::PipeReader, mut sink: impl FnMut(&[u8]) -> bool + Send + 'static) {
    std::thread::spawn(move || {
        let mut reader = reader;
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !sink(&chunk[..n]) {
                        break;
                    }
                }
            }
        }
    });
}

impl Call {
    /// What the call asked to run: its argv, or `/bin/bash -c LINE`; the kernel's answer says how it runs.
    fn plan(&self, auth: Authorization) -> Result<BashPlan, String> {
        let given: Vec<OsString> = match &self.argv {
            Some(a) => a.iter().map(OsString::from).collect(),
            None => vec!["/bin/bash".into(), "-c".into(), self.command.clone().into()],
        };
        BashPlan::from_authorization(&self.env.instance, auth, &self.env.grant, given)
            .map_err(|e| e.to_string())
    }

    /// Starts the command as a managed process (see [`crate::process`]) and returns its id at once: decided and
    /// confined exactly as in the foreground, run by loom itself (never in a client's terminal).
    fn run_in_background(self, auth: Authorization) -> ToolOutput {
        let plan = match self.plan(auth) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let line = self
            .argv
            .as_ref()
            .map_or_else(|| self.command.clone(), |a| a.join(" "));
        let slot = Arc::new(GroupSlot::new());
        let (id, proc_) = match self.env.processes.add(&line, slot.clone()) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(format!("{}: {e}", self.env.instance)),
        };
        let (reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => {
                proc_.ended(crate::process::ProcState::Failed(format!("no pipe: {e}")));
                return ToolOutput::error(format!("bash: cannot create a pipe: {e}"));
            }
        };
        {
            let p = proc_.clone();
            drain(reader, move |chunk| {
                p.append(chunk);
                true
            });
        }
        let Call {
            mut env,
            sandbox,
            cwd,
            timeout,
            ..
        } = self;
        // the waiting thread must not keep the table alive: dropping the agent's table kills what still runs
        env.processes = crate::process::ProcessTable::default();
        std::thread::spawn(move || {
            let ended = match start(plan, &cwd, &env, &sandbox, timeout, writer, &slot) {
                Ok(ended) => {
                    if let Some(note) = loom_sandbox::swept_note(&ended.swept) {
                        proc_.append(format!("\n{note}\n").as_bytes());
                    }
                    crate::process::ProcState::Exited {
                        code: ended.code,
                        timed_out: ended.timed_out,
                    }
                }
                Err(e) => crate::process::ProcState::Failed(e),
            };
            proc_.ended(ended);
        });
        let mut out = ToolOutput::ok(format!(
            "started process {id} in the background (`{line}`); poll it with process_output {{\"id\": {id}}} and \
             end it with process_kill {{\"id\": {id}}} (it is killed when the session ends)"
        ));
        out.raw_output = Some(json!({ "processId": id }));
        out
    }

    async fn run(self, auth: Authorization, ctx: ToolCtx) -> ToolOutput {
        let mut not_in_terminal = None;
        if let Some(terminals) = ctx.terminals.clone() {
            match self.terminal_form(&auth, terminals.as_ref()) {
                Ok((command, args)) => {
                    return self
                        .run_in_terminal(terminals.as_ref(), command, args, &ctx)
                        .await
                }
                Err(why) => not_in_terminal = Some(why),
            }
        }
        let plan = match self.plan(auth) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let spill = self
            .sandbox
            .spill_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!(
                "loom-bash-{}-{}.log",
                std::process::id(),
                SPILL_SEQ.fetch_add(1, Ordering::Relaxed)
            ));
        let cap = if self.sandbox.tail_bytes == 0 {
            DEFAULT_TAIL_BYTES
        } else {
            self.sandbox.tail_bytes
        };
        let mut buf = OutputBuffer::new(cap, Some(spill));
        let (reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(format!("bash: cannot create a pipe: {e}")),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        drain(reader, move |chunk| tx.send(chunk.to_vec()).is_ok());
        // The kill may be requested before the process exists: the slot makes whichever side comes second (the
        // start, or the kill) do it. Dropping this future mid-run (its turn abandoned) kills the tree too.
        let slot = Arc::new(GroupSlot::new());
        let _kill_on_drop = KillOnDrop(slot.clone());
        let kill = || slot.kill();
        let started = Instant::now();
        let job = {
            let slot = slot.clone();
            let timeout = self.timeout;
            let cwd = self.cwd.clone();
            let env = self.env.clone();
            let sandbox = self.sandbox.clone();
            tokio::task::spawn_blocking(move || {
                start(plan, &cwd, &env, &sandbox, timeout, writer, &slot)
            })
        };
        tokio::pin!(job);
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut throttle = Throttle::new(PROGRESS_EVERY);
        let (mut killed, mut timed_out, mut cancelled) = (false, false, false);
        let result = loop {
            tokio::select! {
                r = &mut job => break r,
                Some(chunk) = rx.recv() => {
                    buf.append(&chunk);
                    let now = tokio::time::Instant::now();
                    if throttle.ready(now.into_std()) {
                        let s = buf.snapshot();
                        (ctx.progress)(Progress {
                            content: s.text,
                            raw_output: Some(json!({ "totalBytes": s.total_bytes })),
                            terminal: None,
                        });
                    }
                }
                _ = ctx.cancel.cancelled(), if !killed => {
                    cancelled = true;
                    killed = true;
                    kill();
                }
                _ = &mut deadline, if !killed => {
                    timed_out = true;
                    killed = true;
                    kill();
                }
            }
        };
        // the last bytes may still be in the pipe; anything that outlives the command (a background child holding
        // the pipe) gets a short grace, then is left behind
        let _ = tokio::time::timeout(Duration::from_millis(250), async {
            while let Some(chunk) = rx.recv().await {
                buf.append(&chunk);
            }
        })
        .await;
        let snap = buf.finalize();
        let mut text = snap.text.clone();
        if snap.truncated {
            text = format!(
                "[output truncated: showing the last {} of {} bytes{}]\n{text}",
                text.len(),
                snap.total_bytes,
                snap.full_output_path
                    .as_ref()
                    .map(|p| if snap.spill_cut {
                        format!("; the first {MAX_SPILL_BYTES} bytes are in {}", p.display())
                    } else {
                        format!("; the full output is in {}", p.display())
                    })
                    .unwrap_or_default()
            );
        }
        let mut raw = json!({
            "totalBytes": snap.total_bytes,
            "durationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        if let Some(p) = &snap.full_output_path {
            raw["fullOutputPath"] = json!(p.display().to_string());
        }
        if let Some(why) = not_in_terminal {
            // the client offered a terminal, but this call stays with loom: say why (hosts show raw output)
            raw["notInTerminal"] = json!(why);
        }
        if cancelled {
            if let Ok(Ok(ended)) = &result {
                add_swept(&mut text, &mut raw, &ended.swept);
            }
            let mut out = ToolOutput::interrupted(&text);
            raw["interrupted"] = json!(true);
            out.raw_output = Some(raw);
            return out;
        }
        let (code, swept) = match result {
            Ok(Ok(ended)) => {
                timed_out |= ended.timed_out;
                if let Some(status) = ended.status {
                    raw["sandbox"] = sandbox_json(&status);
                }
                (ended.code, ended.swept)
            }
            Ok(Err(e)) => {
                return ToolOutput::error(format!(
                    "{text}{}bash: {e}",
                    if text.is_empty() { "" } else { "\n" }
                ))
            }
            Err(e) => return ToolOutput::error(format!("bash: the command runner failed: {e}")),
        };
        raw["exitCode"] = json!(code);
        if text.is_empty() && code == 0 && !timed_out {
            text = "(no output)".to_string();
        }
        if timed_out {
            raw["timedOut"] = json!(true);
            text.push_str(&format!(
                "\n[timed out after {} ms; the process tree was killed]",
                self.timeout.as_millis()
            ));
        } else if code != 0 {
            text.push_str(&format!("\n[exit code {code}]"));
        }
        add_swept(&mut text, &mut raw, &swept);
        ToolOutput {
            text,
            is_error: timed_out || code != 0 || !swept.is_empty(),
            raw_output: Some(raw),
            ..ToolOutput::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{authorized, call, env};
    use loom_kernel::AlgebraKind;
    use std::sync::Mutex;

    #[test]
    fn progress_is_throttled_to_one_per_period() {
        let mut t = Throttle::new(PROGRESS_EVERY);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let passed: Vec<u64> = [0, 10, 99, 100, 150, 199, 250, 420]
            .into_iter()
            .filter(|ms| t.ready(at(*ms)))
            .collect();
        assert_eq!(passed, [0, 100, 250, 420]);
    }

    #[tokio::test]
    async fn unconfined_runs_bounds_output_and_reports_exit_codes() {
        let work = tempfile::tempdir().unwrap();
        let e = env("bash", work.path(), "\"*\"");
        let spill = tempfile::tempdir().unwrap();
        let t = BashTool::new(
            e.clone(),
            SandboxEnv {
                tail_bytes: 64,
                spill_dir: Some(spill.path().into()),
                ..SandboxEnv::default()
            },
        );
        let ok = call(
            &t,
            AlgebraKind::Bash,
            &e,
            json!({"command": "echo hi; echo err >&2"}),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text);
        assert!(ok.text.contains("hi") && ok.text.contains("err"));
        let fail = call(&t, AlgebraKind::Bash, &e, json!({"command": "exit 3"})).await;
        assert!(fail.is_error && fail.text.contains("[exit code 3]"));
        let long = call(&t, AlgebraKind::Bash, &e, json!({"command": "seq 1 1000"})).await;
        assert!(
            long.text.contains("output truncated") && long.text.ends_with("1000\n"),
            "{}",
            long.text
        );
        let path = long.raw_output.as_ref().unwrap()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(std::fs::read_to_string(path).unwrap().starts_with("1\n2\n"));
        let slow = call(
            &t,
            AlgebraKind::Bash,
            &e,
            json!({"command": "sleep 30", "timeout_ms": 50}),
        )
        .await;
        assert!(
            slow.is_error && slow.text.contains("timed out"),
            "{}",
            slow.text
        );
    }

    #[tokio::test]
    async fn cancel_kills_the_tree_and_marks_the_call_interrupted() {
        let work = tempfile::tempdir().unwrap();
        let e = env("bash", work.path(), "\"*\"");
        let t = BashTool::new(e.clone(), SandboxEnv::default());
        let p = t
            .prepare(&json!({"command": "echo started; sleep 60"}))
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let cancel = tokio_util::sync::CancellationToken::new();
        let s2 = seen.clone();
        let c2 = cancel.clone();
        let ctx = ToolCtx {
            more: Vec::new(),
            cancel: cancel.clone(),
            progress: Arc::new(move |p: Progress| {
                s2.lock().unwrap().push(p.content);
                c2.cancel();
            }),
            history: None,
            client_fs: None,
            terminals: None,
        };
        let auth = authorized(&e, &p);
        let out = (p.run)(auth, ctx).await;
        assert!(out.interrupted && out.is_error, "{out:?}");
        assert!(seen.lock().unwrap()[0].contains("started"));
    }

    #[tokio::test]
    async fn dropping_the_call_mid_run_kills_the_whole_tree() {
        // a turn abandoned without its cancel token (its future dropped) must not leave the command running
        let work = tempfile::tempdir().unwrap();
        let e = env("bash", work.path(), "\"*\"");
        let t = BashTool::new(e.clone(), SandboxEnv::default());
        let p = t
            .prepare(&json!({"command": "sleep 60 & echo bg=$!; wait"}))
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let tx = Mutex::new(Some(tx));
        let ctx = ToolCtx {
            more: Vec::new(),
            cancel: tokio_util::sync::CancellationToken::new(),
            progress: Arc::new(move |p: Progress| {
                if p.content.contains("bg=") {
                    if let Some(tx) = tx.lock().unwrap().take() {
                        let _ = tx.send(p.content);
                    }
                }
            }),
            history: None,
            client_fs: None,
            terminals: None,
        };
        let auth = authorized(&e, &p);
        let text = tokio::select! {
            out = (p.run)(auth, ctx) => panic!("the call ended on its own: {out:?}"),
            text = rx => text.unwrap(),
        };
        // the call's future is gone now; so must the background sleep be
        let pid: u32 = text.trim().trim_start_matches("bg=").parse().unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
        };
        for _ in 0..500 {
            if !alive() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the background child {pid} outlived its dropped call");
    }

    /// A client's terminals that records each request and answers from `answer`.
    struct FakeTerminals {
        seen: Mutex<Vec<(String, Value)>>,
        answer: fn(&str) -> Result<Value, String>,
    }

    impl ClientTerminals for FakeTerminals {
        fn terminal(
            &self,
            method: &'static str,
            params: Value,
        ) -> futures::future::BoxFuture<'static, Result<Value, String>> {
            self.seen.lock().unwrap().push((method.to_string(), params));
            let r = (self.answer)(method);
            Box::pin(async move { r })
        }

        fn loom_exe(&self) -> Result<PathBuf, String> {
            Ok(PathBuf::from("/opt/loom"))
        }
    }

    async fn in_terminal(
        sandbox: SandboxEnv,
        answer: fn(&str) -> Result<Value, String>,
    ) -> (ToolOutput, Vec<(String, Value)>) {
        let work = tempfile::tempdir().unwrap();
        let e = env("bash", work.path(), "\"*\"");
        let t = BashTool::new(e.clone(), sandbox);
        let p = t.prepare(&json!({"command": "echo hi"})).unwrap();
        let terminals = Arc::new(FakeTerminals {
            seen: Mutex::new(Vec::new()),
            answer,
        });
        let ctx = ToolCtx {
            more: Vec::new(),
            cancel: tokio_util::sync::CancellationToken::new(),
            progress: Arc::new(|_| {}),
            history: None,
            client_fs: None,
            terminals: Some(terminals.clone()),
        };
        let auth = authorized(&e, &p);
        let out = (p.run)(auth, ctx).await;
        let seen = terminals.seen.lock().unwrap().clone();
        (out, seen)
    }

    #[tokio::test]
    async fn the_grant_star_runs_its_command_in_the_terminal_unless_a_secret_must_be_screened() {
        let (out, seen) = in_terminal(SandboxEnv::default(), |m| match m {
            "terminal/create" => Ok(json!({"terminalId": "t"})),
            "terminal/wait_for_exit" => Ok(json!({"exitCode": 0})),
            "terminal/output" => Ok(json!({"output": "hi\n", "truncated": true})),
            _ => Ok(json!({})),
        })
        .await;
        assert!(!out.is_error, "{out:?}");
        assert!(
            out.text
                .starts_with("[output truncated by the client's terminal"),
            "{}",
            out.text
        );
        assert_eq!(
            out.content,
            [ToolCallContent::Terminal {
                terminal_id: "t".into()
            }]
        );
        assert_eq!(seen[0].1["command"], "/bin/bash");
        assert_eq!(seen[0].1["args"], json!(["-c", "echo hi"]));
        assert_eq!(seen[0].1["env"], json!([]));
        // a client that cannot create a terminal, or answers without an id: a tool error, nothing else sent
        for answer in [
            (|_: &str| Err("no terminals here".to_string())) as fn(&str) -> Result<Value, String>,
            |_: &str| Ok(json!({})),
        ] {
            let (out, seen) = in_terminal(SandboxEnv::default(), answer).await;
            assert!(
                out.is_error && out.text.contains("the client could not create a terminal"),
                "{}",
                out.text
            );
            assert_eq!(seen.len(), 1);
        }
        // loom knows a secret: it keeps the command, to screen the secret out of its environment
        let mut secrets = loom_sandbox::SecretFacts::new(Vec::new());
        secrets.add("gh_token", Some("s3cret"));
        let sandbox = SandboxEnv {
            secrets,
            ..SandboxEnv::default()
        };
        let (out, seen) = in_terminal(sandbox, |_| Ok(json!({}))).await;
        assert!(seen.is_empty(), "{seen:?}");
        assert!(!out.is_error && out.text.contains("hi"), "{out:?}");
        let why = out.raw_output.unwrap()["notInTerminal"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(why.contains("screens the secrets"), "{why}");
    }

    #[tokio::test]
    async fn a_command_outside_the_grant_is_refused_by_the_kernel() {
        let work = tempfile::tempdir().unwrap();
        let e = env("bash", work.path(), r#"{ commands = ["ls"] }"#);
        let t = BashTool::new(e.clone(), SandboxEnv::default());
        let out = call(&t, AlgebraKind::Bash, &e, json!({"command": "rm -rf /"})).await;
        assert!(out.is_error && out.text.contains("rm"), "{}", out.text);
    }
}
