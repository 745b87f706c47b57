//! Managed processes: `bash` with `background = true` starts a command and returns its id at once; `process_output`
//! polls what it wrote since the last poll (bounded) and whether it still runs; `process_kill` ends its whole
//! process group. The command runs exactly as a foreground `bash` call would — decided by the kernel, confined under
//! the row it picked — only without waiting for it.
//!
//! The agent's [`ProcessTable`] holds them (at most [`MAX_RUNNING`] running at once, and the last [`MAX_ENDED`]
//! that ended); each keeps the last [`KEPT_BYTES`] of its output. Ending the session kills every one still running ([`ProcessTable::kill_all`]), and
//! so does dropping the table. Killing a group that already ended does nothing (the slot knows it was reaped); no
//! external `kill` command ever runs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use loom_sandbox::GroupSlot;
use serde_json::{json, Value};

use super::{check_fields, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The most background processes running at once, per agent.
pub const MAX_RUNNING: usize = 16;
/// The most output bytes kept per process (older bytes are dropped, and counted).
pub const KEPT_BYTES: usize = 1024 * 1024;
/// The most bytes one `process_output` returns.
pub const POLL_BYTES: usize = 64 * 1024;
/// The most ended processes kept for polling (the oldest is forgotten first).
pub const MAX_ENDED: usize = 16;
/// The longest `wait_ms` a poll may ask for.
pub const MAX_WAIT_MS: u64 = 30_000;

/// How a background process stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcState {
    /// Still running.
    Running,
    /// Ended by itself (or by its timeout: `timed_out`) with this exit code.
    Exited {
        /// The exit code.
        code: i32,
        /// The timeout ended it.
        timed_out: bool,
    },
    /// `process_kill` (or the session's end) ended it.
    Killed,
    /// It could not run; why.
    Failed(String),
}

impl ProcState {
    fn describe(&self) -> String {
        match self {
            ProcState::Running => "running".into(),
            ProcState::Exited {
                code,
                timed_out: true,
            } => format!("timed out (exit code {code}); its process group was killed"),
            ProcState::Exited { code, .. } => format!("exited with code {code}"),
            ProcState::Killed => "killed".into(),
            ProcState::Failed(why) => format!("did not run: {why}"),
        }
    }
}

#[derive(Default)]
struct Output {
    kept: VecDeque<u8>,
    /// Bytes written in all.
    total: u64,
    /// Bytes already returned by a poll (or dropped before one).
    read: u64,
}

/// One background process.
pub(crate) struct Proc {
    command: String,
    slot: Arc<GroupSlot>,
    out: Mutex<Output>,
    state: Mutex<ProcState>,
    started: Instant,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Proc {
    /// Appends output, keeping the last [`KEPT_BYTES`].
    pub(crate) fn append(&self, bytes: &[u8]) {
        let mut o = lock(&self.out);
        o.total += bytes.len() as u64;
        o.kept.extend(bytes);
        while o.kept.len() > KEPT_BYTES {
            let drop = o.kept.len() - KEPT_BYTES;
            o.kept.drain(..drop);
        }
    }

    /// The command ended (or could not run).
    pub(crate) fn ended(&self, state: ProcState) {
        let mut s = lock(&self.state);
        // a kill already recorded stays the reason
        if *s == ProcState::Running {
            *s = state;
        }
    }

    /// The output since the last poll (at most [`POLL_BYTES`]; what was dropped before it is counted).
    fn take_new(&self) -> (String, u64, u64) {
        let mut o = lock(&self.out);
        let first_kept = o.total - o.kept.len() as u64;
        let dropped = first_kept.saturating_sub(o.read);
        let from = o.read.max(first_kept);
        let start = usize::try_from(from - first_kept).unwrap_or(usize::MAX);
        let end = o.kept.len().min(start.saturating_add(POLL_BYTES));
        let bytes: Vec<u8> = o.kept.range(start..end).copied().collect();
        o.read = first_kept + end as u64;
        let more = o.total - o.read;
        (String::from_utf8_lossy(&bytes).into_owned(), dropped, more)
    }

    fn state(&self) -> ProcState {
        lock(&self.state).clone()
    }

    fn kill(&self) {
        {
            let mut s = lock(&self.state);
            if *s == ProcState::Running {
                *s = ProcState::Killed;
            }
        }
        self.slot.kill();
    }
}

#[derive(Default)]
struct Table {
    next: u64,
    procs: BTreeMap<u64, Arc<Proc>>,
}

impl Drop for Table {
    fn drop(&mut self) {
        for p in self.procs.values() {
            if p.state() == ProcState::Running {
                p.kill();
            }
        }
    }
}

/// An agent's background processes, shared by `bash` and the process tools (a cheap handle).
#[derive(Clone, Default)]
pub struct ProcessTable(Arc<Mutex<Table>>);

impl std::fmt::Debug for ProcessTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTable")
            .field("processes", &lock(&self.0).procs.len())
            .finish()
    }
}

impl ProcessTable {
    /// Registers a process about to start; its id, or why no more may start.
    pub(crate) fn add(
        &self,
        command: &str,
        slot: Arc<GroupSlot>,
    ) -> Result<(u64, Arc<Proc>), String> {
        let mut t = lock(&self.0);
        let running = t
            .procs
            .values()
            .filter(|p| p.state() == ProcState::Running)
            .count();
        if running >= MAX_RUNNING {
            return Err(format!(
                "{MAX_RUNNING} background processes are running already; end one with process_kill first"
            ));
        }
        // ended ones are kept for polling, but not forever: their output is memory
        let ended: Vec<u64> = t
            .procs
            .iter()
            .filter(|(_, p)| p.state() != ProcState::Running)
            .map(|(id, _)| *id)
            .collect();
        for id in ended.iter().take(ended.len().saturating_sub(MAX_ENDED - 1)) {
            t.procs.remove(id);
        }
        t.next += 1;
        let id = t.next;
        let p = Arc::new(Proc {
            command: command.to_string(),
            slot,
            out: Mutex::new(Output::default()),
            state: Mutex::new(ProcState::Running),
            started: Instant::now(),
        });
        t.procs.insert(id, p.clone());
        Ok((id, p))
    }

    fn get(&self, id: u64) -> Result<Arc<Proc>, String> {
        let t = lock(&self.0);
        t.procs.get(&id).cloned().ok_or_else(|| {
            if t.procs.is_empty() {
                format!("there is no process {id} (no background process was started)")
            } else {
                format!(
                    "there is no process {id} (the processes are {})",
                    t.procs
                        .keys()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        })
    }

    /// How many are running.
    pub fn running(&self) -> usize {
        lock(&self.0)
            .procs
            .values()
            .filter(|p| p.state() == ProcState::Running)
            .count()
    }

    /// Kills every process still running (the session ends); how many were.
    pub fn kill_all(&self) -> usize {
        let procs: Vec<Arc<Proc>> = lock(&self.0).procs.values().cloned().collect();
        let mut n = 0;
        for p in procs {
            if p.state() == ProcState::Running {
                p.kill();
                n += 1;
            }
        }
        n
    }
}

/// Which process tool an instance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessOp {
    /// `process_output`.
    Output,
    /// `process_kill`.
    Kill,
}

impl ProcessOp {
    /// The op of built-in `underlying`.
    pub fn of(underlying: &str) -> Option<ProcessOp> {
        match underlying {
            "process_output" => Some(ProcessOp::Output),
            "process_kill" => Some(ProcessOp::Kill),
            _ => None,
        }
    }
}

/// `process_output` / `process_kill`.
pub struct ProcessTool {
    op: ProcessOp,
    env: ToolEnv,
}

impl ProcessTool {
    /// The tool for `op`.
    pub fn new(op: ProcessOp, env: ToolEnv) -> ProcessTool {
        ProcessTool { op, env }
    }
}

fn report(id: u64, p: &Proc) -> ToolOutput {
    let (text, dropped, more) = p.take_new();
    let state = p.state();
    let mut head = format!(
        "process {id} (`{}`): {}, {} s since it started",
        p.command,
        state.describe(),
        p.started.elapsed().as_secs()
    );
    if dropped > 0 {
        head.push_str(&format!(
            "\n[{dropped} earlier bytes were dropped: only the last {KEPT_BYTES} are kept]"
        ));
    }
    let body = if text.is_empty() {
        "(no new output)".to_string()
    } else {
        text
    };
    let mut out = ToolOutput::ok(format!(
        "{head}\n{body}{}",
        if more > 0 {
            format!("\n[{more} more bytes: poll again]")
        } else {
            String::new()
        }
    ));
    let (status, code) = match &state {
        ProcState::Running => ("running", None),
        ProcState::Exited { code, .. } => ("exited", Some(*code)),
        ProcState::Killed => ("killed", None),
        ProcState::Failed(_) => ("failed", None),
    };
    out.raw_output = Some(json!({ "id": id, "status": status, "exitCode": code }));
    out
}

impl Tool for ProcessTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(match self.op {
            ProcessOp::Output => "process_output",
            ProcessOp::Kill => "process_kill",
        })
    }

    fn kind(&self) -> ToolKind {
        match self.op {
            ProcessOp::Output => ToolKind::Read,
            ProcessOp::Kill => ToolKind::Execute,
        }
    }

    fn spec(&self) -> ToolSpec {
        let (description, schema) = match self.op {
            ProcessOp::Output => (
                format!(
                    "Poll a background process (started by bash with background = true): whether it still runs, \
                     and what it wrote since the last poll (at most {POLL_BYTES} bytes). wait_ms (up to \
                     {MAX_WAIT_MS}) waits for new output or its end first."
                ),
                json!({
                    "type": "object",
                    "properties": {
                        "id": { "type": "integer", "minimum": 1 },
                        "wait_ms": { "type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS },
                    },
                    "required": ["id"],
                }),
            ),
            ProcessOp::Kill => (
                "End a background process and every process it started (its whole process group); returns its \
                 last output."
                    .to_string(),
                json!({
                    "type": "object",
                    "properties": { "id": { "type": "integer", "minimum": 1 } },
                    "required": ["id"],
                }),
            ),
        };
        ToolSpec {
            name: self.env.instance.clone(),
            description,
            input_schema: schema,
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        let fields: &[&str] = match self.op {
            ProcessOp::Output => &["id", "wait_ms"],
            ProcessOp::Kill => &["id"],
        };
        check_fields(input, &name, fields)?;
        let id = input
            .get("id")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name}: id must be a process id (a positive integer)"))?;
        let wait = match input.get("wait_ms") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().filter(|n| *n <= MAX_WAIT_MS).ok_or_else(|| {
                format!("{name}: wait_ms must be an integer from 0 to {MAX_WAIT_MS}")
            })?,
        };
        let table = self.env.processes.clone();
        let op = self.op;
        Ok(
            crate::CallHead::whole_tool(&name).then(Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    let p = match table.get(id) {
                        Ok(p) => p,
                        Err(e) => return ToolOutput::error(format!("{name}: {e}")),
                    };
                    match op {
                        ProcessOp::Output => {
                            let until = Instant::now() + Duration::from_millis(wait);
                            let seen = lock(&p.out).total;
                            while Instant::now() < until
                                && p.state() == ProcState::Running
                                && lock(&p.out).total == seen
                                && !ctx.cancel.is_cancelled()
                            {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            report(id, &p)
                        }
                        ProcessOp::Kill => {
                            if p.state() != ProcState::Running {
                                let mut out = report(id, &p);
                                out.is_error = true;
                                out.text =
                                    format!("{name}: process {id} is not running\n{}", out.text);
                                return out;
                            }
                            p.kill();
                            // the group is gone; its last bytes may still be in the pipe
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            report(id, &p)
                        }
                    }
                })
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use crate::{BashTool, SandboxEnv};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn a_background_command_is_polled_and_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let e = env("bash", dir.path(), "\"*\"");
        let bash = BashTool::new(e.clone(), SandboxEnv::default());
        let (output, kill) = (
            ProcessTool::new(ProcessOp::Output, e.clone()),
            ProcessTool::new(ProcessOp::Kill, e.clone()),
        );
        let started = call(
            &bash,
            AlgebraKind::Bash,
            &e,
            json!({"command": "echo started; sleep 30 & sleep 30; echo never", "background": true}),
        )
        .await;
        assert!(!started.is_error, "{}", started.text);
        assert_eq!(started.raw_output.as_ref().unwrap()["processId"], 1);
        let poll = call(
            &output,
            AlgebraKind::Default,
            &e,
            json!({"id": 1, "wait_ms": 10_000}),
        )
        .await;
        assert!(
            poll.text.contains(": running,") && poll.text.contains("started"),
            "{}",
            poll.text
        );
        // nothing new since the last poll
        let again = call(&output, AlgebraKind::Default, &e, json!({"id": 1})).await;
        assert!(again.text.contains("(no new output)"), "{}", again.text);
        let killed = call(&kill, AlgebraKind::Default, &e, json!({"id": 1})).await;
        assert!(killed.text.contains(": killed,"), "{}", killed.text);
        let twice = call(&kill, AlgebraKind::Default, &e, json!({"id": 1})).await;
        assert!(
            twice.is_error && twice.text.contains("is not running"),
            "{}",
            twice.text
        );
        // one that ends by itself reports its exit code
        call(
            &bash,
            AlgebraKind::Bash,
            &e,
            json!({"command": "echo bye; exit 3", "background": true}),
        )
        .await;
        let mut done = call(
            &output,
            AlgebraKind::Default,
            &e,
            json!({"id": 2, "wait_ms": 10_000}),
        )
        .await;
        for _ in 0..100 {
            if !done.text.contains(": running,") {
                break;
            }
            done = call(
                &output,
                AlgebraKind::Default,
                &e,
                json!({"id": 2, "wait_ms": 100}),
            )
            .await;
        }
        assert!(done.text.contains("exited with code 3"), "{}", done.text);
        let unknown = call(&output, AlgebraKind::Default, &e, json!({"id": 9})).await;
        assert!(
            unknown.is_error
                && unknown
                    .text
                    .contains("there is no process 9 (the processes are 1, 2)"),
            "{}",
            unknown.text
        );
        // the session's end kills what still runs
        call(
            &bash,
            AlgebraKind::Bash,
            &e,
            json!({"command": "sleep 30", "background": true}),
        )
        .await;
        assert_eq!(e.processes.kill_all(), 1);
        let last = call(&output, AlgebraKind::Default, &e, json!({"id": 3})).await;
        assert!(last.text.contains(": killed,"), "{}", last.text);
    }

    #[tokio::test]
    async fn dropping_the_table_kills_what_still_runs_and_ended_ones_are_forgotten_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let e = env("bash", dir.path(), "\"*\"");
        let bash = BashTool::new(e.clone(), SandboxEnv::default());
        let out = call(
            &bash,
            AlgebraKind::Bash,
            &e,
            json!({"command": "echo $$ > pid; sleep 30", "background": true}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        let pid_file = dir.path().join("pid");
        let mut pid = String::new();
        for _ in 0..200 {
            pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if !pid.trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let proc_dir = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
        assert!(proc_dir.exists(), "the command did not start");
        // the agent goes away without closing: its tools and their table with it
        drop(bash);
        drop(e);
        let mut gone = false;
        for _ in 0..200 {
            if !proc_dir.exists() {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(gone, "the background process outlived its table");
        // ended processes beyond MAX_ENDED are forgotten, oldest first
        let table = ProcessTable::default();
        for _ in 0..MAX_ENDED + 5 {
            let (_, p) = table.add("x", Arc::new(GroupSlot::new())).unwrap();
            p.ended(ProcState::Exited {
                code: 0,
                timed_out: false,
            });
        }
        let t = lock(&table.0);
        assert_eq!(t.procs.len(), MAX_ENDED);
        assert_eq!(t.procs.keys().next(), Some(&6));
    }

    #[test]
    fn output_is_bounded_and_read_once() {
        let table = ProcessTable::default();
        let (_, p) = table.add("x", Arc::new(GroupSlot::new())).unwrap();
        p.append(&vec![b'a'; KEPT_BYTES + 10]);
        let (text, dropped, more) = p.take_new();
        assert_eq!((text.len(), dropped), (POLL_BYTES, 10));
        assert_eq!(more as usize, KEPT_BYTES - POLL_BYTES);
        p.append(b"tail");
        let last = loop {
            let (t, _, more) = p.take_new();
            if more == 0 {
                break t;
            }
        };
        assert!(last.ends_with("tail"));
        assert_eq!(p.take_new(), (String::new(), 0, 0));
    }
}
