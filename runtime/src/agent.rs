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

use futures::future::BoxFuture;
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

/// A question the turn loop puts to the user: a `[permissions]` ask rule matched an allowed call, or the doom-loop
/// guard saw the same call repeated. Only calls the kernel allowed are ever asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// The call, as it was announced (status `pending`).
    pub call: ToolCall,
    /// Why approval is needed.
    pub reason: String,
    /// True when an "always" answer can be remembered for this call (an ask rule asked; the doom-loop guard's
    /// asks are about this run and are never remembered). A client offers "always" only then.
    pub rememberable: bool,
}

/// The user's answer to a [`PermissionAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskAnswer {
    /// Run this one call.
    AllowOnce,
    /// Run it, and remember the answer for this exact call (see [`loom_kernel::Approval`]); for an ask that is not
    /// [`rememberable`](PermissionAsk::rememberable) it means the same as `AllowOnce`.
    AllowAlways,
    /// Refuse it; the text says why (the user rejected it, the client went away, …) and is fed back to the model.
    Reject(String),
}

/// Who answers [`PermissionAsk`]s. Without one, an agent is headless and every ask is a refusal.
pub trait Asker: Send + Sync {
    /// Puts `ask` to the user. The turn loop stops waiting (and marks the call interrupted) when the turn is
    /// cancelled, dropping the future.
    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'static, AskAnswer>;
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
        }
    }
}

/// A booted agent.
pub struct Agent {
    name: String,
    harness: Arc<dyn Harness>,
    max_turn_requests: u32,
    system: Vec<String>,
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
            .map(|s| s.tool.spec())
            .collect()
    }

    /// Enters or leaves plan mode: while on, tools that change anything (files, commands, sub-agents, anything
    /// loom cannot classify as a read) are left out of requests and refused if called anyway. Only the user
    /// switches it (`/plan`, `/plan off`, `--plan`, an ACP client's `session/set_mode`); no tool can.
    pub fn set_plan_mode(&self, on: bool) {
        self.plan_mode.store(on, Ordering::SeqCst);
    }

    /// True in plan mode.
    pub fn plan_mode(&self) -> bool {
        self.plan_mode.load(Ordering::SeqCst)
    }

    /// Subscribes to updates (frames, chunks, tool calls, progress).
    pub fn subscribe(&self, capacity: Capacity) -> Subscription {
        self.bus.subscribe(capacity)
    }

    /// Queues user text for the running turn: it enters history after the current tool batch (or at the start of
    /// the next turn when idle).
    pub fn steer(&self, text: impl Into<String>) {
        if let Ok(mut q) = self.steering.lock() {
            q.push(text.into());
        }
    }

    /// What the model would see if `text` were prompted now: the system prompt sections (the agent's, then the
    /// session's), the history events with the prompt appended, and the tools.
    pub async fn preamble(&self, text: &str) -> Result<Preamble, SessionError> {
        let session = self.session.lock().await;
        let mut system_prompt = self.system.clone();
        system_prompt.extend(session.system_prompt_sections());
        let mut events = session.pull()?;
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
        Ok(())
    }

    /// Runs one prompt turn. `cancel` is the turn's root token.
    pub async fn prompt(&self, text: &str, cancel: CancellationToken) -> TurnOutcome {
        let mut session = self.session.lock().await;
        let turn = self.turns.fetch_add(1, Ordering::SeqCst);
        let mut final_text = String::new();
        // hooks before the prompt enters the history: SessionStart once, then UserPromptSubmit (which can block it)
        let mut context = Vec::new();
        if turn == 0 {
            let started = self.hook(HookEvent::SessionStart, None, Map::new()).await;
            context.extend(started.into_iter().filter_map(|o| o.verdict.context));
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), Value::String(text.to_string()));
        let submitted = self.hook(HookEvent::UserPromptSubmit, None, fields).await;
        if let Some(blocked) = submitted
            .iter()
            .find(|o| o.verdict.decision == Some(Verdict::Deny))
        {
            let why = format!(
                "the prompt was blocked by a UserPromptSubmit hook ({}): {}",
                blocked.what,
                blocked
                    .verdict
                    .reason
                    .as_deref()
                    .unwrap_or("no reason given")
            );
            return self.refused_turn(&mut session, why).await;
        }
        context.extend(submitted.into_iter().filter_map(|o| o.verdict.context));
        let text = if context.is_empty() {
            text.to_string()
        } else {
            format!(
                "{text}\n\n<hook-context>\n{}\n</hook-context>",
                context.join("\n")
            )
        };
        let result = self
            .turn(&mut session, turn, &text, &cancel, &mut final_text)
            .await;
        if let Err(Stop::Failed(e) | Stop::Transient(e)) = &result {
            let mut fields = Map::new();
            fields.insert("error".into(), Value::String(e.clone()));
            self.hook(HookEvent::StopFailure, None, fields).await;
        }
        let transient = matches!(result, Err(Stop::Transient(_)));
        let (stop, error) = match result {
            Ok(s) => (s, None),
            Err(Stop::Cancelled) => (TurnStop::Cancelled, None),
            Err(Stop::MaxTurnRequests(e)) => (TurnStop::MaxTurnRequests, Some(e)),
            Err(Stop::Failed(e) | Stop::Transient(e)) => (TurnStop::Error, Some(e)),
        };
        let end = SessionUpdate::Frame(Frame {
            frame: FrameKind::TurnEnd,
            role: None,
            message_id: None,
            stop_reason: Some(stop),
            text: None,
        });
        // a failing store must not hide the outcome: the frame still reaches subscribers
        let _ = self.emit(&mut session, end).await;
        TurnOutcome {
            stop,
            final_text,
            error,
            transient,
        }
    }

    async fn turn(
        &self,
        session: &mut Chain,
        turn: u64,
        text: &str,
        cancel: &CancellationToken,
        final_text: &mut String,
    ) -> Result<TurnStop, Stop> {
        self.emit(
            session,
            SessionUpdate::frame(FrameKind::TurnStart, None, None),
        )
        .await?;
        self.drain_steering(session, turn).await?;
        self.user_message(
            session,
            format!("user-{}-{turn}", self.nonce),
            text.to_string(),
        )
        .await?;
        session.prepare_turn().await?;
        // a skill dropped by the rescan: the user is told why it left the catalog
        for notice in session.take_notices() {
            self.bus.publish(&SessionUpdate::notice(notice));
        }
        let mut system = self.system.clone();
        system.extend(session.system_prompt_sections());
        let specs = self.tool_specs();
        let mut doom = DoomGuard::default();
        let mut stop_hooks_ran = false;
        for request_in_turn in 0u32.. {
            if cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            if request_in_turn >= self.max_turn_requests {
                return Err(Stop::MaxTurnRequests(format!(
                    "maxTurnRequests ({}) reached: the model kept calling tools; raise [harness] maxTurnRequests or \
                     ask for a smaller step",
                    self.max_turn_requests
                )));
            }
            let ctx = CompactCtx {
                harness: self.harness.as_ref(),
                cancel,
            };
            // a failed automatic compaction keeps the history and pauses itself; the request goes ahead, and the
            // user is told why the history was not shortened
            for report in session.compact(CompactMode::Auto, &ctx).await? {
                if let Compaction::Failed { .. } = report {
                    self.bus.publish(&SessionUpdate::notice(format!(
                        "{report}; the turn goes on with the full history, and automatic compaction pauses \
                         for {} s",
                        crate::session::PAUSE_AFTER_FAILURE.as_secs()
                    )));
                }
            }
            // a context overflow gets one forced compaction and one retry of the request
            let mut compacted: Option<String> = None;
            let (mut stream, first) = loop {
                let request = ModelRequest {
                    system: system.clone(),
                    messages: to_messages(&session.pull()?),
                    tools: specs.clone(),
                    turn,
                    request_in_turn,
                };
                match self.start(request, cancel).await {
                    Ok(s) => break s,
                    Err(HarnessError::Cancelled) => return Err(Stop::Cancelled),
                    Err(e @ HarnessError::ContextOverflow { .. }) => {
                        if let Some(done) = compacted {
                            return Err(Stop::Failed(format!(
                                "{}: {e} (it still did not fit after compaction ({done}) and one retry)",
                                self.harness.name()
                            )));
                        }
                        compacted = Some(self.compact_for_overflow(session, &e, cancel).await?);
                    }
                    Err(e) => return Err(failed(self.harness.name(), &e)),
                }
            };
            let mut next = Some(first);
            let mut message_id = format!("assistant-{}-{turn}-{request_in_turn}", self.nonce);
            let mut started = false;
            let mut calls: Vec<PendingCall> = Vec::new();
            let mut text_now = String::new();
            let stop_reason = loop {
                let event = match next.take() {
                    Some(e) => e,
                    None => {
                        let item = tokio::select! {
                            item = stream.next() => item,
                            _ = cancel.cancelled() => None,
                        };
                        if cancel.is_cancelled() {
                            if started {
                                self.end_message(session, &message_id).await?;
                            }
                            return Err(Stop::Cancelled);
                        }
                        match item {
                            Some(Ok(e)) => e,
                            Some(Err(e)) => {
                                if started {
                                    self.end_message(session, &message_id).await?;
                                }
                                return Err(failed(self.harness.name(), &e));
                            }
                            None => {
                                if started {
                                    self.end_message(session, &message_id).await?;
                                }
                                return Err(Stop::Failed(format!(
                                    "{}: the response ended before the message was complete",
                                    self.harness.name()
                                )));
                            }
                        }
                    }
                };
                if !started {
                    started = true;
                    if let ModelEvent::MessageStart { message_id: id } = &event {
                        message_id = id.clone();
                    }
                    self.emit(
                        session,
                        SessionUpdate::frame(
                            FrameKind::MessageStart,
                            Some(Role::Assistant),
                            Some(message_id.clone()),
                        ),
                    )
                    .await?;
                }
                match event {
                    ModelEvent::MessageStart { .. } => {}
                    ModelEvent::TextDelta(t) => {
                        text_now.push_str(&t);
                        self.emit(
                            session,
                            SessionUpdate::AgentMessageChunk(Chunk {
                                content: Content::text(t),
                                message_id: Some(message_id.clone()),
                            }),
                        )
                        .await?;
                    }
                    ModelEvent::ThinkingDelta(t) => {
                        self.emit(
                            session,
                            SessionUpdate::AgentThoughtChunk(ThoughtChunk::text(
                                t,
                                Some(message_id.clone()),
                            )),
                        )
                        .await?;
                    }
                    // replay data rides on an empty thought chunk of the same message, in stream order, so the
                    // history rebuilds each thinking block with its own signature
                    ModelEvent::ThinkingSignature(signature) => {
                        let meta = ThoughtMeta {
                            signature: Some(signature),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::RedactedThinking(data) => {
                        let meta = ThoughtMeta {
                            redacted: Some(data),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::ProviderItem(item) => {
                        let meta = ThoughtMeta {
                            provider_item: Some(item),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::ToolUseStart { id, name } => calls.push(PendingCall {
                        id,
                        name,
                        json: String::new(),
                    }),
                    ModelEvent::ToolUseInputDelta { id, partial_json } => {
                        if let Some(c) = calls.iter_mut().rev().find(|c| c.id == id) {
                            c.json.push_str(&partial_json);
                        }
                    }
                    ModelEvent::ToolUseEnd { .. } => {}
                    ModelEvent::Usage(u) => {
                        self.emit(
                            session,
                            SessionUpdate::UsageUpdate(UsageUpdate {
                                used: u.input_tokens + u.output_tokens,
                                size: self.harness.context_window(),
                            }),
                        )
                        .await?;
                    }
                    ModelEvent::MessageEnd { stop_reason: r } => break r,
                }
            };
            // the barrier: the assistant message is complete before any of its tools runs
            self.end_message(session, &message_id).await?;
            *final_text = text_now;
            if calls.is_empty() && stop_reason == StopReason::PauseTurn {
                // the provider paused its own server tools mid-turn: the next request carries the paused message
                // back as it is, so the model goes on (still bounded by maxTurnRequests)
                continue;
            }
            if calls.is_empty() {
                let stop = match stop_reason {
                    StopReason::MaxTokens => TurnStop::MaxTokens,
                    StopReason::Refusal => TurnStop::Refusal,
                    _ => TurnStop::EndTurn,
                };
                // a Stop hook may send the agent back to work with its reason (bounded by maxTurnRequests)
                let mut fields = Map::new();
                fields.insert("stop_hook_active".into(), Value::Bool(stop_hooks_ran));
                fields.insert(
                    "last_assistant_message".into(),
                    Value::String(final_text.clone()),
                );
                let stopping = if stop == TurnStop::EndTurn {
                    self.hook(HookEvent::Stop, None, fields).await
                } else {
                    Vec::new()
                };
                stop_hooks_ran = true;
                let reasons: Vec<String> = stopping
                    .into_iter()
                    .filter_map(|o| o.verdict.continue_with)
                    .collect();
                if reasons.is_empty() {
                    return Ok(stop);
                }
                self.user_message(
                    session,
                    format!("user-{}-{turn}-stop-{request_in_turn}", self.nonce),
                    reasons.join("\n"),
                )
                .await?;
                continue;
            }
            for call in calls {
                if cancel.is_cancelled() {
                    self.announce(
                        session,
                        &call,
                        &serde_json::Value::Null,
                        ToolKind::Other,
                        vec![],
                    )
                    .await?;
                    self.finish(
                        session,
                        &call.id,
                        ToolOutput::interrupted("not started: the turn was cancelled"),
                    )
                    .await?;
                    continue;
                }
                self.call(session, call, &mut doom, cancel).await?;
            }
            if cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            self.drain_steering(session, turn).await?;
        }
        Err(Stop::Failed("the turn loop ended unexpectedly".into()))
    }

    /// The forced compaction after a context overflow: what it did, or why the turn must end (nothing compacted).
    async fn compact_for_overflow(
        &self,
        session: &mut Chain,
        overflow: &HarnessError,
        cancel: &CancellationToken,
    ) -> Result<String, Stop> {
        let ctx = CompactCtx {
            harness: self.harness.as_ref(),
            cancel,
        };
        let reports = session.compact(CompactMode::Forced, &ctx).await?;
        if cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        let done: Vec<String> = reports
            .iter()
            .filter(|r| matches!(r, Compaction::Compacted { .. }))
            .map(Compaction::to_string)
            .collect();
        if !done.is_empty() {
            return Ok(done.join("; "));
        }
        let why = if !reports.is_empty() {
            reports
                .iter()
                .map(Compaction::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        } else if session.compacts() {
            "compacting: the history is no longer than the events compaction keeps".to_string()
        } else {
            "the session has no compacting layer (add \"compacting\" to [session] layers)"
                .to_string()
        };
        Err(Stop::Failed(format!(
            "{}: {overflow} (compaction could not shorten it: {why})",
            self.harness.name()
        )))
    }

    /// Compacts the session now, regardless of thresholds or a pause after a failed summary (the `/compact`
    /// command). Returns what each compacting layer did.
    pub async fn compact_now(
        &self,
        cancel: CancellationToken,
    ) -> Result<Vec<Compaction>, SessionError> {
        let mut session = self.session.lock().await;
        let ctx = CompactCtx {
            harness: self.harness.as_ref(),
            cancel: &cancel,
        };
        let mut fields = Map::new();
        fields.insert("trigger".into(), Value::String("manual".into()));
        self.hook(HookEvent::PreCompact, None, fields.clone()).await;
        let reports = session.compact(CompactMode::Forced, &ctx).await?;
        if reports
            .iter()
            .any(|r| matches!(r, Compaction::Compacted { .. }))
        {
            self.hook(HookEvent::PostCompact, None, fields).await;
        }
        Ok(reports)
    }

    /// Runs the hooks of `event` (for `tool`) and publishes a notice for each problem worth the user's attention
    /// (a post hook that failed, output that is not JSON). No hooks: nothing.
    async fn hook(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        fields: Map<String, Value>,
    ) -> Vec<HookOutcome> {
        let Some(hooks) = &self.hooks else {
            return Vec::new();
        };
        let outcomes = hooks.run(event, tool, fields).await;
        for o in &outcomes {
            if let Some(problem) = &o.verdict.problem {
                self.bus.publish(&SessionUpdate::notice(format!(
                    "hook {}: {problem}",
                    o.what
                )));
            }
        }
        outcomes
    }

    /// A turn that ends before the prompt enters the history (a UserPromptSubmit hook blocked it).
    async fn refused_turn(&self, session: &mut Chain, why: String) -> TurnOutcome {
        let _ = self
            .emit(
                session,
                SessionUpdate::frame(FrameKind::TurnStart, None, None),
            )
            .await;
        let end = SessionUpdate::Frame(Frame {
            frame: FrameKind::TurnEnd,
            role: None,
            message_id: None,
            stop_reason: Some(TurnStop::Refusal),
            text: None,
        });
        let _ = self.emit(session, end).await;
        TurnOutcome {
            stop: TurnStop::Refusal,
            final_text: String::new(),
            error: Some(why),
            transient: false,
        }
    }

    /// The tokens the last request used, as the session's compacting layer knows them (none before the first
    /// response or right after a compaction).
    pub async fn tokens_in_context(&self) -> Option<u64> {
        self.session.lock().await.tokens_in_context()
    }

    /// Starts a request, retrying its start (up to and including the first event) under the retry policy.
    async fn start(
        &self,
        request: ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<(EventStream, ModelEvent), HarnessError> {
        let mut retry = 0u32;
        loop {
            let attempt = async {
                let mut s = self
                    .harness
                    .stream(request.clone(), cancel.child_token())
                    .await?;
                match s.next().await {
                    Some(Ok(first)) => Ok((s, first)),
                    Some(Err(e)) => Err(e),
                    None => Err(HarnessError::Protocol {
                        message: "the response ended before its first event".into(),
                    }),
                }
            };
            let err = tokio::select! {
                r = attempt => match r {
                    Ok(ok) => return Ok(ok),
                    Err(e) => e,
                },
                _ = cancel.cancelled() => return Err(HarnessError::Cancelled),
            };
            let Some(delay) = self.retry.delay(&err, retry, jitter()) else {
                return Err(err);
            };
            // never silent: a retry says which, how many, how long, and why
            self.bus
                .publish(&SessionUpdate::notice(crate::retry::retry_notice(
                    self.harness.name(),
                    retry + 1,
                    self.retry.max_attempts.saturating_sub(1),
                    delay,
                    &err,
                )));
            if !wait(self.sleeper.as_ref(), delay, cancel).await {
                return Err(HarnessError::Cancelled);
            }
            retry += 1;
        }
    }

    async fn announce(
        &self,
        session: &mut Chain,
        call: &PendingCall,
        raw_input: &serde_json::Value,
        kind: ToolKind,
        locations: Vec<crate::update::Location>,
    ) -> Result<(), SessionError> {
        self.emit(
            session,
            SessionUpdate::ToolCall(ToolCall {
                tool_call_id: call.id.clone(),
                title: call.name.clone(),
                kind,
                status: ToolStatus::Pending,
                raw_input: raw_input.clone(),
                content: vec![],
                locations,
            }),
        )
        .await
    }

    async fn finish(
        &self,
        session: &mut Chain,
        id: &str,
        out: ToolOutput,
    ) -> Result<(), SessionError> {
        let mut content = vec![ToolCallContent::Content {
            content: Content::text(out.text),
        }];
        content.extend(out.content);
        self.emit(
            session,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: id.to_string(),
                status: Some(if out.is_error {
                    ToolStatus::Failed
                } else {
                    ToolStatus::Completed
                }),
                content: Some(content),
                raw_output: out.raw_output,
            }),
        )
        .await
    }

    /// Runs one call: parse, look up, gather facts, decide, then (only when allowed) run.
    async fn call(
        &self,
        session: &mut Chain,
        call: PendingCall,
        doom: &mut DoomGuard,
        cancel: &CancellationToken,
    ) -> Result<(), SessionError> {
        let text = if call.json.trim().is_empty() {
            "{}"
        } else {
            call.json.as_str()
        };
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(text);
        let slot = self.tools.get(&call.name);
        let kind = slot.map_or(ToolKind::Other, |s| s.tool.kind());
        let input = match parsed {
            Ok(v) => v,
            Err(e) => {
                self.announce(
                    session,
                    &call,
                    &serde_json::Value::String(call.json.clone()),
                    kind,
                    vec![],
                )
                .await?;
                let out = ToolOutput::error(format!(
                    "{}: the input is not valid JSON ({e}); send the arguments as one JSON object",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
        };
        let Some(slot) = slot else {
            self.announce(session, &call, &input, kind, vec![]).await?;
            let names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            let out = ToolOutput::error(format!(
                "there is no tool named {:?} in this agent; the tools are: {}",
                call.name,
                if names.is_empty() {
                    "(none)".to_string()
                } else {
                    names.join(", ")
                }
            ));
            return self.finish(session, &call.id, out).await;
        };
        // PreToolUse hooks see the call first: they can deny it, ask about it, add context, or rewrite its input
        // (which the kernel then decides afresh, like any input)
        let mut fields = Map::new();
        fields.insert("tool_name".into(), Value::String(call.name.clone()));
        fields.insert("tool_input".into(), input.clone());
        let pre = self
            .hook(HookEvent::PreToolUse, Some(&call.name), fields)
            .await;
        let hooked = combine_hooks(&pre.iter().map(|o| o.verdict.clone()).collect::<Vec<_>>());
        let mut input = input;
        if let Some(updated) = pre
            .iter()
            .rev()
            .find_map(|o| o.verdict.updated_input.clone())
        {
            input = updated;
        }
        let pre_context: Vec<String> = pre
            .iter()
            .filter_map(|o| o.verdict.context.clone())
            .collect();
        if hooked == Verdict::Deny {
            self.announce(session, &call, &input, kind, vec![]).await?;
            let why = pre
                .iter()
                .find(|o| o.verdict.decision == Some(Verdict::Deny))
                .map(|o| {
                    format!(
                        "{}: refused by a PreToolUse hook ({}): {}",
                        call.name,
                        o.what,
                        o.verdict.reason.as_deref().unwrap_or("no reason given")
                    )
                })
                .unwrap_or_default();
            return self.finish(session, &call.id, ToolOutput::error(why)).await;
        }
        let prepared = match slot.tool.prepare(&input) {
            Ok(p) => p,
            Err(e) => {
                self.announce(session, &call, &input, kind, vec![]).await?;
                return self.finish(session, &call.id, ToolOutput::error(e)).await;
            }
        };
        self.announce(session, &call, &input, kind, prepared.locations.clone())
            .await?;
        let (decision, judged) = self.judge(&call.name, slot, &prepared);
        let stuck = doom.check(&call.name, &input);
        let plan = if self.plan_mode() {
            plan_mode_verdict(effect_of(kind))
        } else {
            Verdict::Allow
        };
        let verdict = combine(&decision, judged.verdict, &[stuck, plan, hooked]);
        let mut remember_failed = None;
        let auth = match (decision, verdict) {
            (Decision::Deny(d), _) => {
                return self
                    .finish(session, &call.id, ToolOutput::error(d.reason))
                    .await
            }
            (Decision::Allow(_), Verdict::Deny) if plan == Verdict::Deny => {
                let out = ToolOutput::error(format!(
                    "{}: refused in plan mode — it can change the workspace, and the user is planning; describe \
                     the change instead (only the user can leave plan mode)",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
            (Decision::Allow(_), Verdict::Deny) => {
                let which = match (judged.verdict, judged.rule) {
                    (Verdict::Deny, Some((kind, index))) => format!(
                        " ({}{})",
                        loom_kernel::position(kind.key(), index),
                        judged
                            .matched
                            .as_ref()
                            .map(|m| format!(", which matched {m}"))
                            .unwrap_or_default()
                    ),
                    _ => String::new(),
                };
                let out = ToolOutput::error(format!(
                    "{}: refused by a [permissions] deny rule{which}",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
            (Decision::Allow(a), Verdict::Ask) => {
                let rememberable =
                    judged.rememberable() && stuck != Verdict::Ask && hooked != Verdict::Ask;
                let hook_asks = pre
                    .iter()
                    .find(|o| o.verdict.decision == Some(Verdict::Ask))
                    .filter(|_| judged.verdict != Verdict::Ask);
                let reason = if let Some(o) = hook_asks.filter(|_| stuck != Verdict::Ask) {
                    format!(
                        "{}: a PreToolUse hook ({}) asks for the user's approval: {}",
                        call.name,
                        o.what,
                        o.verdict.reason.as_deref().unwrap_or("no reason given")
                    )
                } else if stuck == Verdict::Ask {
                    format!(
                        "{}: this is the same call with the same input {} times in a row — the model appears stuck \
                         repeating it; it needs the user's approval",
                        call.name,
                        loom_kernel::DOOM_LOOP_THRESHOLD
                    )
                } else {
                    let (kind, index) = judged.rule.unwrap_or((RuleKind::Ask, 0));
                    format!(
                        "{}: a [permissions] ask rule ({}) needs the user's approval for this call",
                        call.name,
                        loom_kernel::position(kind.key(), index)
                    )
                };
                let Some(asker) = &self.asker else {
                    let why = if stuck == Verdict::Ask {
                        format!("{reason} and {HEADLESS}. Try a different approach")
                    } else {
                        format!("{reason}; {HEADLESS}")
                    };
                    return self.finish(session, &call.id, ToolOutput::error(why)).await;
                };
                let ask = PermissionAsk {
                    call: ToolCall {
                        tool_call_id: call.id.clone(),
                        title: call.name.clone(),
                        kind,
                        status: ToolStatus::Pending,
                        raw_input: input.clone(),
                        content: vec![],
                        locations: prepared.locations.clone(),
                    },
                    reason: reason.clone(),
                    rememberable,
                };
                // a cancelled turn stops waiting even when an answer is ready too
                let answer = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        let out = ToolOutput::interrupted("not started: the turn was cancelled while waiting for the user's approval");
                        return self.finish(session, &call.id, out).await;
                    }
                    answer = asker.ask(ask) => answer,
                };
                match answer {
                    AskAnswer::AllowOnce => a,
                    AskAnswer::AllowAlways if rememberable => {
                        if let Some(store) = &self.approvals {
                            let approval = Approval::for_call(&prepared.facts);
                            if let Err(e) = store.remember(approval, now_secs()) {
                                remember_failed = Some(e);
                            }
                        }
                        a
                    }
                    AskAnswer::AllowAlways => a,
                    AskAnswer::Reject(why) => {
                        let out = ToolOutput::error(format!("{reason}, and it was refused: {why}"));
                        return self.finish(session, &call.id, out).await;
                    }
                }
            }
            (Decision::Allow(a), Verdict::Allow) => a,
        };
        let history = if slot.tool.wants_history() {
            Some(session.pull()?)
        } else {
            None
        };
        let bus = self.bus.clone();
        let id = call.id.clone();
        let ctx = ToolCtx {
            history,
            client_fs: self.client_fs.clone(),
            terminals: self.terminals.clone(),
            cancel: cancel.child_token(),
            progress: Arc::new(move |p: Progress| {
                bus.publish(&SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: id.clone(),
                    status: Some(ToolStatus::InProgress),
                    content: Some(vec![match p.terminal {
                        Some(terminal_id) => ToolCallContent::Terminal { terminal_id },
                        None => ToolCallContent::Content {
                            content: Content::text(p.content),
                        },
                    }]),
                    raw_output: p.raw_output,
                }));
            }),
        };
        // tools honour ctx.cancel themselves (bash kills its process tree), so the call is never dropped mid-way
        let mut out = (prepared.run)(auth, ctx).await;
        if cancel.is_cancelled() && !out.interrupted {
            out.interrupted = true;
            out.is_error = true;
            out.text = format!("interrupted\n{}", out.text);
        }
        if let Some(e) = remember_failed {
            out.text = format!(
                "{}\n(the user answered \"always\", but loom could not remember it, so the next such call is asked \
                 about again: {e})",
                out.text
            );
        }
        // PostToolUse (or PostToolUseFailure) hooks see the result; what they add is model-visible, and they
        // cannot undo the call
        let event = if out.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let mut fields = Map::new();
        fields.insert("tool_name".into(), Value::String(call.name.clone()));
        fields.insert("tool_input".into(), input.clone());
        fields.insert(
            "tool_response".into(),
            serde_json::json!({"text": out.text, "is_error": out.is_error}),
        );
        let post = self.hook(event, Some(&call.name), fields).await;
        let context: Vec<String> = pre_context
            .into_iter()
            .chain(post.into_iter().filter_map(|o| o.verdict.context))
            .collect();
        if !context.is_empty() {
            out.text = format!(
                "{}\n\n<hook-context>\n{}\n</hook-context>",
                out.text,
                context.join("\n")
            );
        }
        self.finish(session, &call.id, out).await
    }

    /// The kernel's decision on a prepared call, and the `[permissions]` rules' verdict inside it (remembered
    /// "always" answers included). The turn loop and [`Agent::explain`] both decide through here.
    fn judge(&self, name: &str, slot: &ToolSlot, prepared: &Prepared) -> (Decision, RulesVerdict) {
        // an authority file is refused whatever the grant says (the kernel's one set; the sandbox enforces the same)
        let decision =
            authority_denial(name, &prepared.request, &self.authority).unwrap_or_else(|| {
                decide(
                    name,
                    slot.algebra,
                    &self.ctx,
                    &slot.grant,
                    &prepared.request,
                )
            });
        let approvals = self
            .approvals
            .as_ref()
            .map(|s| s.approvals())
            .unwrap_or_default();
        let judged =
            self.permissions
                .judge(&rule_facts(slot, prepared), Verdict::Allow, &approvals);
        (decision, judged)
    }

    /// What the turn loop would decide about a call of `tool` with `input`, without running it (`loom explain`):
    /// the grant, the kernel's decision with the authorising row, the `[permissions]` rule and remembered answer
    /// that applied, and the final verdict. The doom-loop guard is not part of it (it depends on the calls before).
    pub fn explain(&self, tool: &str, input: &serde_json::Value) -> Result<Explanation, String> {
        let Some(slot) = self.tools.get(tool) else {
            let names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            return Err(format!(
                "there is no tool named {tool:?} in this agent; the tools are: {}",
                if names.is_empty() {
                    "(none)".to_string()
                } else {
                    names.join(", ")
                }
            ));
        };
        let prepared = slot
            .tool
            .prepare(input)
            .map_err(|e| format!("the tool refuses this input before any decision: {e}"))?;
        let (decision, rules) = self.judge(tool, slot, &prepared);
        let verdict = combine(&decision, rules.verdict, &[]);
        let approval = rules
            .approval
            .and_then(|i| self.approvals.as_ref()?.entries().into_iter().nth(i));
        let rule = rules.rule.map(|(kind, index)| {
            let list = match kind {
                RuleKind::Allow => &self.permissions.allow,
                RuleKind::Ask => &self.permissions.ask,
                RuleKind::Deny => &self.permissions.deny,
            };
            (kind, index, list.get(index).cloned().unwrap_or_default())
        });
        Ok(Explanation {
            tool: tool.to_string(),
            algebra: slot.algebra,
            grant: slot.grant.clone(),
            facts: rule_facts(slot, &prepared),
            decision,
            rule,
            matched: rules.matched,
            approval,
            verdict,
            headless: self.asker.is_none(),
            pre_hooks: self
                .hooks
                .as_ref()
                .map(|h| h.describe(HookEvent::PreToolUse, Some(tool)))
                .unwrap_or_default(),
        })
    }
}

/// The facts `[permissions]` rules read for a call: the tool's own, and the built-in it is (a rule written for
/// `bash` also judges a built-in renamed `run`).
fn rule_facts(slot: &ToolSlot, prepared: &Prepared) -> CallFacts {
    let mut facts = prepared.facts.clone();
    facts.builtin = slot.tool.builtin().map(str::to_string);
    facts
}

/// What a tool of `kind` does, for plan mode: only reads and searches are known to change nothing.
fn effect_of(kind: ToolKind) -> Effect {
    match kind {
        ToolKind::Read | ToolKind::Search => Effect::Reads,
        ToolKind::Edit | ToolKind::Execute | ToolKind::Other => Effect::Changes,
    }
}

/// What [`Agent::explain`] found.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The tool instance.
    pub tool: String,
    /// Its algebra.
    pub algebra: AlgebraKind,
    /// Its grant.
    pub grant: Grant,
    /// The facts the rules matched against.
    pub facts: CallFacts,
    /// The kernel's decision (the authorising row, or the denial and its reason).
    pub decision: Decision,
    /// The rule that matched: its list, its index and the rule.
    pub rule: Option<(RuleKind, usize, Rule)>,
    /// What the rule matched when the rule alone does not say: the simple command an ask or deny command rule found
    /// in the line.
    pub matched: Option<String>,
    /// The remembered "always" answer that answered an ask rule.
    pub approval: Option<Remembered>,
    /// The verdict: allow, ask (a headless run refuses it) or deny.
    pub verdict: Verdict,
    /// True when no one can answer an ask (the agent as `loom explain` boots it is headless).
    pub headless: bool,
    /// The PreToolUse hooks that would run before the decision (not run by explain), described.
    pub pre_hooks: Vec<String>,
}
