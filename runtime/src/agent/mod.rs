//! The agent and its turn loop (seed 004): the runtime, not the harness, owns the loop.
//!
//! One turn: frame `turn_start`; the user message (framed); then requests while the model ends with tool calls.
//! Each request's start is wrapped in the retry policy; its events become updates as they stream (text and
//! reasoning chunks, usage); its `message_end` frame is emitted BEFORE any of its tools runs. Calls run one at a
//! time in stream order: the input is parsed (invalid JSON is an error result), the tool looked up (an unknown or
//! ungranted tool is an error result), its facts gathered, and the kernel decides first — a denial is fed back with
//! the kernel's reason; `[permissions]` rules and the doom-loop guard can only narrow an allowed call, and their
//! `Ask` goes to the agent's [`Asker`] when it has one (a client that can show the question to a user) — a headless
//! run treats it as a refusal. A kernel denial is never asked about. `maxTurnRequests` bounds the requests of one
//! turn. Cancellation
//! flows from the turn's root token to a child token per tool; in-flight and not-yet-run calls are marked
//! interrupted, so history always pairs every call with a result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use futures::StreamExt;
use loom_kernel::{
    authority_denial, combine, combine_hooks, decide, plan_mode_verdict, AlgebraKind, Approval,
    Authority, CallFacts, Decision, Effect, Grant, HookEvent, PathCtx, Permissions, Rule, RuleKind,
    RulesVerdict, Verdict,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::approvals::{now_secs, ApprovalStore, Remembered};
use crate::bus::{Bus, Capacity, Subscription};
use crate::harness::{EventStream, Harness, HarnessError};
use crate::hooks::{HookOutcome, HookRunner};
use crate::model::{ModelEvent, ModelRequest, Role, StopReason, ToolSpec};
use crate::retry::{jitter, wait, RetryPolicy, Sleeper, TokioSleeper};
use crate::session::{to_messages, Chain, CompactCtx, CompactMode, Compaction, SessionError};
use crate::tools::{ClientFs, ClientTerminals, Prepared, Progress, Tool, ToolCtx, ToolOutput};
use crate::update::{
    Chunk, Content, Frame, FrameKind, SessionUpdate, ThoughtChunk, ThoughtMeta, ToolCall,
    ToolCallContent, ToolCallUpdate, ToolKind, ToolStatus, TurnStop, UsageUpdate,
};
use loom_kernel::DoomGuard;

mod ask;
mod call;
mod explain;
mod stream;
mod supervise;
mod turn;

pub use ask::{AskAnswer, Asker, PermissionAsk};
pub use explain::{ExplainRefusal, Explanation};
pub use supervise::Supervisor;

use call::{effect_of, rule_facts};

/// A tool with the grant and algebra the kernel decides it under.
#[derive(Clone)]
pub struct ToolSlot {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its algebra.
    pub algebra: AlgebraKind,
    /// Its grant.
    pub grant: Grant,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    /// Why it ended.
    pub stop: TurnStop,
    /// The text of the last assistant message.
    pub final_text: String,
    /// What failed, when `stop` is `Error` or `MaxTurnRequests`.
    pub error: Option<String>,
    /// The turn failed on a provider error that is transient (rate limit, overload, network, 5xx) and outlasted the
    /// retries: trying again later may succeed (`loom prompt` exits 75, EX_TEMPFAIL).
    pub transient: bool,
}

/// What the model is about to see (`loom prompt --emit-preamble`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preamble {
    /// System prompt sections, in order.
    pub system_prompt: Vec<String>,
    /// The history, ending with the prompt.
    pub events: Vec<SessionUpdate>,
    /// The tools.
    pub tools: Vec<ToolSpec>,
}

/// The parts an agent is built from (see [`crate::boot`] for building them from a manifest).
pub struct AgentParts {
    /// The agent's name.
    pub name: String,
    /// The model provider.
    pub harness: Arc<dyn Harness>,
    /// `maxTurnRequests`.
    pub max_turn_requests: u32,
    /// System prompt sections (the session's sections are appended).
    pub system: Vec<String>,
    /// Tools by instance name.
    pub tools: BTreeMap<String, ToolSlot>,
    /// How grant paths resolve.
    pub ctx: PathCtx,
    /// `[permissions]`.
    pub permissions: Permissions,
    /// The session chain.
    pub session: Chain,
    /// The retry policy.
    pub retry: RetryPolicy,
    /// The clock retries wait on.
    pub sleeper: Arc<dyn Sleeper>,
    /// Who answers permission asks (none: headless, asks are refused).
    pub asker: Option<Arc<dyn Asker>>,
    /// Remembered "always" answers (none: nothing is remembered, and "always" counts as once).
    pub approvals: Option<Arc<ApprovalStore>>,
    /// Start in plan mode (see [`Agent::set_plan_mode`]).
    pub plan_mode: bool,
    /// Lifecycle hooks (none declared: `None`).
    pub hooks: Option<Arc<HookRunner>>,
    /// The agent's authority files: no tool writes one, no tool reads a secret store.
    pub authority: Arc<Authority>,
    /// The directory whose project guidance (`AGENTS.md`, `CLAUDE.md`) is read into the system prompt at the start
    /// of every turn; `None`: none is read.
    pub guidance: Option<std::path::PathBuf>,
    /// The working directory the environment block at the top of the system prompt describes, and the sandbox git
    /// is asked through whether the work tree has changes (`None` there: that part is left out); `None`: no block.
    pub environment: Option<(std::path::PathBuf, Option<loom_tools::SandboxEnv>)>,
    /// The deferred MCP tools, when the agent grants `tool_search`: their definitions are sent only once loaded.
    pub tool_search: Option<Arc<crate::tool_search::ToolSearch>>,
    /// The working record (the same handle the record tools hold): kept through compactions, published as the
    /// plan when it changes.
    pub record: loom_tools::RecordLog,
    /// The supervisor's settings.
    pub supervisor: Supervisor,
    /// The background processes its bash started (ended with the session).
    pub processes: loom_tools::ProcessTable,
    /// The background agents its `background_spawn` started: their reports enter the history at step boundaries;
    /// they end with the session.
    pub background: crate::background::BackgroundTable,
}

impl AgentParts {
    /// Parts with no tools, no rules, the default retry policy and the tokio clock.
    pub fn new(harness: Arc<dyn Harness>, session: Chain, ctx: PathCtx) -> AgentParts {
        AgentParts {
            name: "agent".into(),
            harness,
            max_turn_requests: crate::harness::DEFAULT_MAX_TURN_REQUESTS,
            system: Vec::new(),
            tools: BTreeMap::new(),
            ctx,
            permissions: Permissions::default(),
            session,
            retry: RetryPolicy::default(),
            sleeper: Arc::new(TokioSleeper),
            asker: None,
            approvals: None,
            plan_mode: false,
            hooks: None,
            authority: Arc::default(),
            guidance: None,
            environment: None,
            tool_search: None,
            record: loom_tools::RecordLog::in_memory(),
            supervisor: Supervisor::default(),
            processes: loom_tools::ProcessTable::default(),
            background: crate::background::BackgroundTable::default(),
        }
    }
}

/// A booted agent.
pub struct Agent {
    name: String,
    harness: Arc<dyn Harness>,
    max_turn_requests: u32,
    system: Vec<String>,
    /// The guidance directory, and the guidance that existed there when the agent was built.
    guidance: Option<(std::path::PathBuf, crate::guidance::AtStart)>,
    /// Guidance notices already published (each once per agent).
    guidance_notices: StdMutex<std::collections::BTreeSet<String>>,
    /// The deferred tools (see [`AgentParts::tool_search`]).
    tool_search: Option<Arc<crate::tool_search::ToolSearch>>,
    /// The environment block's source (see [`AgentParts::environment`]).
    environment: Option<(std::path::PathBuf, Option<loom_tools::SandboxEnv>)>,
    /// Scoped guidance (nested guidance files, path rules) already added to a tool result (each once per session).
    scoped_seen: StdMutex<std::collections::BTreeSet<String>>,
    /// The working record (see [`AgentParts::record`]).
    record: loom_tools::RecordLog,
    /// The record's version last published as the plan.
    plan_published: AtomicU64,
    /// The supervisor's settings, and whether it is on for this session.
    supervisor: Supervisor,
    supervising: AtomicBool,
    /// The background processes (see [`AgentParts::processes`]).
    processes: loom_tools::ProcessTable,
    /// The background agents (see [`AgentParts::background`]).
    background: crate::background::BackgroundTable,
    tools: BTreeMap<String, ToolSlot>,
    ctx: PathCtx,
    permissions: Permissions,
    session: tokio::sync::Mutex<Chain>,
    bus: Arc<Bus>,
    retry: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
    asker: Option<Arc<dyn Asker>>,
    client_fs: Option<Arc<dyn ClientFs>>,
    terminals: Option<Arc<dyn ClientTerminals>>,
    approvals: Option<Arc<ApprovalStore>>,
    plan_mode: AtomicBool,
    hooks: Option<Arc<HookRunner>>,
    authority: Arc<Authority>,
    turns: AtomicU64,
    steering: StdMutex<Vec<String>>,
    /// Distinguishes this agent instance's message ids from those of earlier runs stored in the same session.
    nonce: String,
}

struct PendingCall {
    id: String,
    name: String,
    json: String,
}

/// Why a turn stopped early (internal).
enum Stop {
    Cancelled,
    MaxTurnRequests(String),
    Failed(String),
    /// A provider error that is transient, after the retries.
    Transient(String),
}

/// The stop for a provider error `e` of harness `name`: transient when a later try may succeed.
fn failed(name: &str, e: &HarnessError) -> Stop {
    let message = format!("{name}: {e}");
    if e.is_retryable() {
        Stop::Transient(message)
    } else {
        Stop::Failed(message)
    }
}

impl From<SessionError> for Stop {
    fn from(e: SessionError) -> Stop {
        Stop::Failed(format!("session: {e}"))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // subscribers must not wait forever on an agent that is gone
        self.bus.close();
    }
}

/// An empty thought chunk of `message_id` carrying provider replay data.
fn thought_meta(meta: ThoughtMeta, message_id: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ThoughtChunk {
        content: Content::text(""),
        message_id: Some(message_id.to_string()),
        meta,
    })
}

/// A per-instance value: the clock's nanoseconds mixed with the process id.
fn nonce() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mixed =
        (nanos as u64 ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) as u32
}

const HEADLESS: &str = "this run is headless (no one can approve it), so it is refused";

impl Agent {
    /// Builds an agent from its parts.
    pub fn new(parts: AgentParts) -> Agent {
        Agent {
            name: parts.name,
            harness: parts.harness,
            max_turn_requests: parts.max_turn_requests.max(1),
            system: parts.system,
            guidance: parts.guidance.map(|dir| {
                let at_start = crate::guidance::at_start(&dir);
                (dir, at_start)
            }),
            guidance_notices: StdMutex::new(std::collections::BTreeSet::new()),
            scoped_seen: StdMutex::new(std::collections::BTreeSet::new()),
            record: parts.record,
            plan_published: AtomicU64::new(0),
            supervising: AtomicBool::new(parts.supervisor.enabled),
            supervisor: parts.supervisor,
            processes: parts.processes,
            background: parts.background,
            environment: parts.environment,
            tool_search: parts.tool_search,
            tools: parts.tools,
            ctx: parts.ctx,
            permissions: parts.permissions,
            session: tokio::sync::Mutex::new(parts.session),
            bus: Arc::new(Bus::default()),
            retry: parts.retry,
            sleeper: parts.sleeper,
            asker: parts.asker,
            client_fs: None,
            terminals: None,
            approvals: parts.approvals,
            authority: parts.authority,
            plan_mode: AtomicBool::new(parts.plan_mode),
            hooks: parts.hooks,
            turns: AtomicU64::new(0),
            steering: StdMutex::new(Vec::new()),
            nonce: format!("{:x}", nonce()),
        }
    }

    /// Sets who answers permission asks (an agent booted from a manifest starts headless).
    pub fn set_asker(&mut self, asker: Arc<dyn Asker>) {
        self.asker = Some(asker);
    }

    /// Sets the client that does the file tools' I/O once the kernel allowed a call (an ACP client advertising
    /// `fs`); an agent booted from a manifest does its own.
    pub fn set_client_fs(&mut self, fs: Arc<dyn ClientFs>) {
        self.client_fs = Some(fs);
    }

    /// Sets the client's terminals, where bash runs when the terminal form keeps the call's confinement (an ACP
    /// client advertising `terminal`).
    pub fn set_client_terminals(&mut self, terminals: Arc<dyn ClientTerminals>) {
        self.terminals = Some(terminals);
    }

    /// The model its requests go to, when the harness says (see [`Harness::model`]).
    pub fn model(&self) -> Option<String> {
        self.harness.model()
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools the model sees.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        let planning = self.plan_mode();
        self.tools
            .values()
            .filter(|s| !planning || plan_mode_verdict(effect_of(s.tool.kind())) == Verdict::Allow)
            .filter(|s| {
                self.tool_search
                    .as_ref()
                    .is_none_or(|t| !t.hides(s.tool.name()))
            })
            .map(|s| s.tool.spec())
            .collect()
    }

    /// Enters or leaves plan mode: while on, tools that change anything (files, commands, sub-agents, anything
    /// loom cannot classify as a read) are left out of requests and refused if called anyway. Only the user
    /// switches it (`/plan`, `/plan off`, `--plan`, an ACP client's `session/set_mode`); no tool can.
    pub fn set_plan_mode(&self, on: bool) {
        self.plan_mode.store(on, Ordering::SeqCst);
        // plan mode refuses new changes; it does not stop what runs already
        let running = self.processes.running();
        if on && running > 0 {
            self.bus.publish(&SessionUpdate::notice(format!(
                "plan mode does not stop the {running} background process(es) still running (process_kill is \
                 refused in plan mode; leave it with /plan off to end them, or they end with the session)"
            )));
        }
        let agents = self.background.running();
        if on && agents > 0 {
            self.bus.publish(&SessionUpdate::notice(format!(
                "plan mode does not stop the {agents} background agent(s) still running: they work outside plan \
                 mode (background_kill is refused in plan mode; leave it with /plan off to end them, or they end \
                 with the session)"
            )));
        }
    }

    /// True in plan mode.
    pub fn plan_mode(&self) -> bool {
        self.plan_mode.load(Ordering::SeqCst)
    }

    /// Subscribes to updates (frames, chunks, tool calls, progress).
    pub fn subscribe(&self, capacity: Capacity) -> Subscription {
        self.bus.subscribe(capacity)
    }

    /// The project guidance sections, read now; with `publish`, a notice about a file left out is published (once
    /// per agent).
    pub(crate) fn guidance_sections(&self, publish: bool) -> Vec<String> {
        let Some((dir, at_start)) = &self.guidance else {
            return Vec::new();
        };
        let g = crate::guidance::read_guidance(dir, at_start);
        if !publish {
            return g.sections;
        }
        if let Ok(mut seen) = self.guidance_notices.lock() {
            for n in g.notices {
                if seen.insert(n.clone()) {
                    self.bus.publish(&SessionUpdate::notice(n));
                }
            }
        }
        g.sections
    }

    /// The scoped guidance a tool result touching `locations` carries: the nested `AGENTS.md` / `CLAUDE.md` of the
    /// directories below the working directory down to each path, and the project rules whose `paths` match it —
    /// each only the first time in the session; empty when there is none (or no guidance directory).
    pub(crate) fn scoped_guidance(
        &self,
        tool: &str,
        locations: &[loom_protocol::update::Location],
    ) -> String {
        let Some((dir, at)) = &self.guidance else {
            return String::new();
        };
        if locations.is_empty() {
            return String::new();
        }
        let Ok(mut seen) = self.scoped_seen.lock() else {
            return String::new();
        };
        let shown_of = |f: &std::path::Path| f.strip_prefix(dir).unwrap_or(f).display().to_string();
        // a file already shown is not read again; one loom may not read is never read
        let nested: Vec<Vec<(std::path::PathBuf, String)>> = {
            let skip = |p: &std::path::Path| {
                let request = loom_kernel::Request::File {
                    path: p.display().to_string(),
                    access: loom_kernel::Access::Read,
                };
                seen.contains(&shown_of(p))
                    || authority_denial(tool, &request, &self.authority).is_some()
            };
            locations
                .iter()
                .map(|loc| {
                    crate::guidance::nested_guidance(dir, std::path::Path::new(&loc.path), &skip)
                })
                .collect()
        };
        let mut parts: Vec<String> = Vec::new();
        let mut rules: Option<Vec<crate::guidance::PathRule>> = None;
        for (loc, found) in locations.iter().zip(nested) {
            let path = std::path::Path::new(&loc.path);
            for (file, text) in found {
                let shown = shown_of(&file);
                if seen.insert(shown.clone()) {
                    parts.push(format!("<guidance file=\"{shown}\">\n{text}\n</guidance>"));
                }
            }
            let Ok(rel) = path.strip_prefix(dir) else {
                continue;
            };
            let rel = rel.to_string_lossy();
            // only the rule files (not the root guidance, not the rules directory's listing): this runs per call
            let rules = rules.get_or_insert_with(|| crate::guidance::path_rules(dir, at));
            for r in rules.iter() {
                if r.globs.iter().any(|g| loom_tools::glob_match(g, &rel))
                    && seen.insert(r.file.clone())
                {
                    parts.push(format!(
                        "<rule file=\"{}\" paths=\"{}\">\n{}\n</rule>",
                        r.file,
                        r.globs.join(", "),
                        r.body
                    ));
                }
            }
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(
            "\n\n<project-guidance note=\"instructions for the paths this call touched, shown once per session\">\n{}\n</project-guidance>",
            parts.join("\n")
        )
    }

    /// The environment block for a turn starting now (`None` when the agent has none).
    pub(crate) async fn environment_block(&self, cancel: &CancellationToken) -> Option<String> {
        let (cwd, sandbox) = self.environment.as_ref()?;
        let git = crate::environment::git_facts(cwd, sandbox.as_ref(), cancel).await;
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Some(crate::environment::render(
            cwd,
            &crate::environment::date_of(secs),
            &git,
        ))
    }

    /// The history the model sees: the session chain pulled, and, when a compaction summary opens it, the working
    /// record appended to that summary — the record is kept apart from the conversation, so a compaction never loses
    /// it.
    pub(crate) fn model_history(
        &self,
        session: &Chain,
    ) -> Result<Vec<SessionUpdate>, SessionError> {
        let mut events = session.pull()?;
        if crate::session::compactor::opening_summary(&mut events).is_some() {
            crate::record::keep_through_compaction(&mut events, &self.record.snapshot());
        }
        Ok(events)
    }

    /// The working record now.
    pub fn record(&self) -> loom_tools::record::Record {
        self.record.snapshot()
    }

    /// Sets (or, with empty text, clears) the session's goal: the user's `/goal`.
    pub fn set_goal(&self, text: &str) -> Result<(), String> {
        self.record.change(|r| r.set_goal(text))?;
        self.publish_plan_if_changed();
        Ok(())
    }

    /// The record as an ACP plan update.
    pub fn plan_update(&self) -> SessionUpdate {
        SessionUpdate::Plan(crate::record::plan_of(&self.record.snapshot()))
    }

    /// Publishes the plan when the record changed since it was last published.
    pub(crate) fn publish_plan_if_changed(&self) {
        let now = self.record.version();
        if self.plan_published.swap(now, Ordering::SeqCst) != now {
            self.bus.publish(&self.plan_update());
        }
    }

    /// Queues user text for the running turn: it enters history after the current tool batch (or at the start of
    /// the next turn when idle).
    pub fn steer(&self, text: impl Into<String>) {
        if let Ok(mut q) = self.steering.lock() {
            q.push(text.into());
        }
    }

    /// What the model would see if `text` were prompted now: the system prompt sections (the agent's, the project
    /// guidance, then the session's), the history events with the prompt appended, and the tools.
    pub async fn preamble(&self, text: &str) -> Result<Preamble, SessionError> {
        let session = self.session.lock().await;
        let mut system_prompt: Vec<String> = self
            .environment_block(&CancellationToken::new())
            .await
            .into_iter()
            .collect();
        system_prompt.extend(self.system.iter().cloned());
        system_prompt.extend(self.guidance_sections(false));
        system_prompt.extend(session.system_prompt_sections());
        let mut events = self.model_history(&session)?;
        events.push(SessionUpdate::UserMessageChunk(Chunk {
            content: Content::text(text),
            message_id: None,
        }));
        Ok(Preamble {
            system_prompt,
            events,
            tools: self.tool_specs(),
        })
    }

    /// The history as the model would see it (the session chain pulled), without a prompt appended.
    pub async fn history(&self) -> Result<Vec<SessionUpdate>, SessionError> {
        self.session.lock().await.pull()
    }

    /// Flushes and closes the session and ends every subscription.
    pub async fn close(&self) -> Result<(), SessionError> {
        // SessionEnd hooks report only; they cannot keep the session open
        self.hook(HookEvent::SessionEnd, None, Map::new()).await;
        // the session's background agents and processes end with it
        let agents = self.background.close().await;
        if agents > 0 {
            self.bus.publish(&SessionUpdate::notice(format!(
                "the session ended: {agents} background agent(s) still running were cancelled"
            )));
        }
        let killed = self.processes.kill_all();
        if killed > 0 {
            self.bus.publish(&SessionUpdate::notice(format!(
                "the session ended: {killed} background process(es) still running were killed"
            )));
        }
        let r = self.session.lock().await.close().await;
        self.bus.close();
        r
    }

    async fn emit(&self, session: &mut Chain, u: SessionUpdate) -> Result<(), SessionError> {
        self.bus.publish(&u);
        if !u.is_progress() {
            session.push(vec![u])?;
        }
        Ok(())
    }

    async fn end_message(&self, session: &mut Chain, id: &str) -> Result<(), SessionError> {
        let frame = SessionUpdate::frame(
            FrameKind::MessageEnd,
            Some(Role::Assistant),
            Some(id.to_string()),
        );
        self.emit(session, frame).await
    }

    async fn user_message(
        &self,
        session: &mut Chain,
        id: String,
        text: String,
    ) -> Result<(), SessionError> {
        self.emit(
            session,
            SessionUpdate::frame(FrameKind::MessageStart, Some(Role::User), Some(id.clone())),
        )
        .await?;
        self.emit(
            session,
            SessionUpdate::UserMessageChunk(Chunk {
                content: Content::text(text),
                message_id: Some(id.clone()),
            }),
        )
        .await?;
        self.emit(
            session,
            SessionUpdate::frame(FrameKind::MessageEnd, Some(Role::User), Some(id)),
        )
        .await
    }

    async fn drain_steering(&self, session: &mut Chain, turn: u64) -> Result<(), SessionError> {
        let queued = self
            .steering
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default();
        for (i, text) in queued.into_iter().enumerate() {
            self.user_message(
                session,
                format!("user-{}-{turn}-steer-{i}", self.nonce),
                text,
            )
            .await?;
        }
        // finished background agents' reports: shown to the user, and given to the model as the child's output
        for report in self.background.take_reports() {
            self.bus.publish(&SessionUpdate::notice(report.headline()));
            self.user_message(
                session,
                format!("user-{}-{turn}-{}", self.nonce, report.id),
                report.message(),
            )
            .await?;
        }
        Ok(())
    }
}
