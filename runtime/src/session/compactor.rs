//! Compactors: turn the older part of a session into one summary text.
//!
//! [`HeuristicCompactor`] asks no model: it lists each message, call and result of the span, cut short, in order —
//! deterministic, instant, never empty. [`ModelCompactor`] asks a model (the agent's own harness unless it was given
//! another): the transcript is cut into chunks of half the context window (estimated at four characters per token),
//! the first chunk is summarised, and each later chunk is summarised together with the summary so far, so every
//! request fits the window and the partial summaries fold into one handoff. A summarisation that yields no text
//! reports why (the provider's error, a reasoning-only answer, an empty completion) instead of a generic failure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt;

use super::CompactCtx;
use crate::harness::{Harness, HarnessError};
use crate::model::{Message, ModelEvent, ModelRequest};
use crate::update::{SessionUpdate, ToolStatus};

/// The message id prefix of the summary event a compaction leaves in place of the events it summarised.
pub const SUMMARY_ID_PREFIX: &str = "loom-compaction-";

/// The first line of a summary event's text, so the model knows what it is reading.
pub const SUMMARY_HEADER: &str =
    "[loom: the earlier part of this conversation was compacted; this is its summary]";

/// Characters per token, for estimates where no tokenizer is at hand.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Why a compactor produced no summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// The turn was cancelled while summarising; nothing is reported and nothing changes.
    #[error("cancelled")]
    Cancelled,
    /// The summary could not be made; the text is the actual cause.
    #[error("{0}")]
    Failed(String),
}

/// Summarises a span of session events.
pub trait Compactor: Send + Sync {
    /// The compactor's name, for messages (`heuristic`, `model`).
    fn name(&self) -> &str;

    /// A summary of `events` (the oldest part of the history, possibly starting with an earlier summary event).
    fn summarize<'a>(
        &'a self,
        events: &'a [SessionUpdate],
        ctx: &'a CompactCtx<'a>,
    ) -> BoxFuture<'a, Result<String, SummaryError>>;
}

/// One line of a transcript: who, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub who: String,
    pub text: String,
}

/// Renders events as transcript entries, oldest first: consecutive chunks of one message are joined, each call is
/// paired with its result, an earlier summary event is marked as such. Usage, frames and progress are skipped.
pub(crate) fn transcript(events: &[SessionUpdate]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    // (kind, message id) of the chunk run the last entry holds
    let mut run: Option<(&'static str, Option<String>)> = None;
    let mut calls: Vec<(String, usize)> = Vec::new();
    for e in events {
        let (who, chunk) = match e {
            SessionUpdate::UserMessageChunk(c)
                if c.message_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with(SUMMARY_ID_PREFIX)) =>
            {
                let text = c.content.as_text();
                let text = text.strip_prefix(SUMMARY_HEADER).unwrap_or(text).trim();
                out.push(Entry {
                    who: "earlier summary".into(),
                    text: text.to_string(),
                });
                run = None;
                continue;
            }
            SessionUpdate::UserMessageChunk(c) => ("user", (&c.content, &c.message_id)),
            SessionUpdate::AgentMessageChunk(c) => ("assistant", (&c.content, &c.message_id)),
            // a chunk that only carries a signature or redacted reasoning has nothing to summarise
            SessionUpdate::AgentThoughtChunk(c) if c.content.as_text().is_empty() => continue,
            SessionUpdate::AgentThoughtChunk(c) => {
                ("assistant (thinking)", (&c.content, &c.message_id))
            }
            SessionUpdate::ToolCall(call) => {
                calls.push((call.tool_call_id.clone(), out.len()));
                out.push(Entry {
                    who: format!("tool {}", call.title),
                    text: format!("{} -> no result recorded", call.raw_input),
                });
                run = None;
                continue;
            }
            SessionUpdate::ToolCallUpdate(u) => {
                let status = match u.status {
                    Some(ToolStatus::Completed) => "completed",
                    Some(ToolStatus::Failed) => "failed",
                    _ => continue,
                };
                let result = format!("{status}: {}", u.text());
                match calls.iter().find(|(id, _)| *id == u.tool_call_id) {
                    Some((_, i)) => {
                        if let Some(entry) = out.get_mut(*i) {
                            if let Some(input) = entry.text.strip_suffix(" -> no result recorded") {
                                entry.text = format!("{input} -> {result}");
                            }
                        }
                    }
                    None => out.push(Entry {
                        who: "tool result".into(),
                        text: result,
                    }),
                }
                run = None;
                continue;
            }
            SessionUpdate::UsageUpdate(_) | SessionUpdate::Plan(_) | SessionUpdate::Frame(_) => {
                continue
            }
        };
        let (content, message_id) = chunk;
        let key = (who, message_id.clone());
        match out.last_mut() {
            Some(last) if run.as_ref() == Some(&key) => last.text.push_str(content.as_text()),
            _ => out.push(Entry {
                who: who.to_string(),
                text: content.as_text().to_string(),
            }),
        }
        run = Some(key);
    }
    out
}

/// `text` with whitespace runs collapsed to one space, cut to `max` characters (an ellipsis marks a cut).
fn squeeze(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, word) in text.split_whitespace().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(max) {
        Some((at, _)) => {
            out.truncate(at);
            out.push('…');
            out
        }
        None => out,
    }
}

/// The default compactor: a deterministic list of what happened, no model.
///
/// Each entry (message, call with its result) becomes one line cut to [`HeuristicCompactor::LINE`] characters; an
/// earlier summary keeps up to [`HeuristicCompactor::EARLIER`]; past [`HeuristicCompactor::LINES`] lines the first
/// ten and the most recent ones are kept and the middle is elided, so the summary stays bounded however often it is
/// folded into the next one.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeuristicCompactor;

impl HeuristicCompactor {
    /// Characters per line.
    pub const LINE: usize = 200;
    /// Characters kept of an earlier summary.
    pub const EARLIER: usize = 2000;
    /// Lines at most.
    pub const LINES: usize = 60;

    /// The summary of `events`.
    pub fn summary(events: &[SessionUpdate]) -> String {
        let entries = transcript(events);
        let mut lines: Vec<String> = entries
            .iter()
            .map(|e| {
                let max = if e.who == "earlier summary" {
                    Self::EARLIER
                } else {
                    Self::LINE
                };
                format!("- {}: {}", e.who, squeeze(&e.text, max))
            })
            .collect();
        if lines.len() > Self::LINES {
            let head = 10;
            let tail = Self::LINES - head - 1;
            let elided = lines.len() - head - tail;
            lines.splice(
                head..lines.len() - tail,
                [format!("- … {elided} more entries elided …")],
            );
        }
        format!(
            "Heuristic summary of {} earlier events (no model was asked):\n{}",
            events.len(),
            lines.join("\n")
        )
    }
}

impl Compactor for HeuristicCompactor {
    fn name(&self) -> &str {
        "heuristic"
    }

    fn summarize<'a>(
        &'a self,
        events: &'a [SessionUpdate],
        _ctx: &'a CompactCtx<'a>,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move { Ok(HeuristicCompactor::summary(events)) })
    }
}

/// The default instruction of a [`ModelCompactor`].
pub const DEFAULT_INSTRUCTION: &str = "Write a handoff summary of the conversation transcript below so the work \
    can continue without it: the user's goals and constraints, what was decided, which files, commands and tools \
    were involved, what they returned (errors included), and what remains to be done. Be concise and factual, keep \
    names, paths and numbers exact, and write only the summary.";

/// The default system prompt of a [`ModelCompactor`].
pub const DEFAULT_COMPACTOR_SYSTEM: &str =
    "You summarise agent conversations faithfully and concisely for the agent that continues them.";

/// The most transcript characters one request to a model with `window` tokens carries: half the window.
fn chunk_chars_of(window: u64) -> usize {
    usize::try_from((window / 2).max(1).saturating_mul(CHARS_PER_TOKEN)).unwrap_or(usize::MAX)
}

/// The transcript of `events` cut into chunks of at most `max` characters, at entry boundaries where possible (an
/// entry longer than a chunk is split).
fn chunks_of(events: &[SessionUpdate], max: usize) -> Vec<String> {
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_len = 0usize;
    for entry in transcript(events) {
        let line = format!("{}: {}\n", entry.who, entry.text);
        let mut rest: &str = &line;
        while !rest.is_empty() {
            let room = max - current_len;
            let take = match rest.char_indices().nth(room) {
                Some((at, _)) => at,
                None => rest.len(),
            };
            // start a fresh chunk rather than split an entry that would fit in one
            let whole = rest.chars().count();
            if take < rest.len() && current_len > 0 && whole <= max {
                chunks.push(std::mem::take(&mut current));
                current_len = 0;
                continue;
            }
            current.push_str(&rest[..take]);
            current_len += rest[..take].chars().count();
            rest = &rest[take..];
            if current_len >= max {
                chunks.push(std::mem::take(&mut current));
                current_len = 0;
            }
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// The compaction summary that opens `events`, when one does (a user message whose id starts with
/// [`SUMMARY_ID_PREFIX`]): what is kept through a compaction (loaded skills, the working record) is appended to it.
pub(crate) fn opening_summary(events: &mut [SessionUpdate]) -> Option<&mut crate::update::Chunk> {
    match events.first_mut() {
        Some(SessionUpdate::UserMessageChunk(c))
            if c.message_id
                .as_deref()
                .is_some_and(|id| id.starts_with(SUMMARY_ID_PREFIX)) =>
        {
            Some(c)
        }
        _ => None,
    }
}

/// The window a compactor sized by its harness assumes when the harness does not know its own.
pub const AUTO_WINDOW: u64 = 32_000;

/// Compaction requests are numbered apart from user turns: this bit is set in their `ModelRequest::turn`.
pub const COMPACTION_TURN_BIT: u64 = 1 << 63;

/// Summarises through a model, in requests that each fit the model's context window.
pub struct ModelCompactor {
    context_window: u64,
    instruction: String,
    system_prompt: String,
    harness: Option<Arc<dyn Harness>>,
    requests: AtomicU64,
}

impl std::fmt::Debug for ModelCompactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCompactor")
            .field("context_window", &self.context_window)
            .field("harness", &self.harness.as_ref().map(|h| h.name()))
            .finish_non_exhaustive()
    }
}

impl ModelCompactor {
    /// A compactor for a model whose context window holds `context_window` tokens, asking the agent's harness.
    pub fn new(context_window: u64) -> ModelCompactor {
        ModelCompactor {
            context_window: context_window.max(1),
            instruction: DEFAULT_INSTRUCTION.to_string(),
            system_prompt: DEFAULT_COMPACTOR_SYSTEM.to_string(),
            harness: None,
            requests: AtomicU64::new(0),
        }
    }

    /// A compactor whose requests are sized by the context window of the harness it asks (that harness's
    /// `contextWindow` or table of known models, else [`AUTO_WINDOW`]): what `summarizer = "model"` or a named
    /// harness builds from a manifest.
    pub fn sized_by_harness() -> ModelCompactor {
        ModelCompactor {
            context_window: 0,
            ..ModelCompactor::new(1)
        }
    }

    /// Asks `harness` (a smaller model, say) instead of the agent's.
    pub fn with_harness(mut self, harness: Arc<dyn Harness>) -> ModelCompactor {
        self.harness = Some(harness);
        self
    }

    /// Replaces the instruction that precedes the transcript.
    pub fn with_instruction(mut self, instruction: impl Into<String>) -> ModelCompactor {
        self.instruction = instruction.into();
        self
    }

    /// Replaces the system prompt of summarisation requests.
    pub fn with_system_prompt(mut self, system_prompt: impl Into<String>) -> ModelCompactor {
        self.system_prompt = system_prompt.into();
        self
    }

    /// The most transcript characters one request carries: half the context window.
    pub fn chunk_chars(&self) -> usize {
        chunk_chars_of(self.context_window.max(1))
    }

    /// The transcript of `events` cut into chunks of at most [`ModelCompactor::chunk_chars`] characters, at entry
    /// boundaries where possible (an entry longer than a chunk is split).
    pub fn chunks(&self, events: &[SessionUpdate]) -> Vec<String> {
        chunks_of(events, self.chunk_chars())
    }

    fn body(&self, so_far: Option<&str>, chunk: &str, part: usize, parts: usize) -> String {
        let mut body = self.instruction.clone();
        if let Some(s) = so_far {
            body.push_str("\n\nSummary of the transcript so far:\n");
            body.push_str(s);
        }
        if parts > 1 {
            body.push_str(&format!("\n\nTranscript, part {part} of {parts}:\n"));
        } else {
            body.push_str("\n\nTranscript:\n");
        }
        body.push_str(chunk);
        body
    }

    /// One summarisation request; its text, or why there is none.
    async fn ask(
        &self,
        harness: &dyn Harness,
        body: String,
        ctx: &CompactCtx<'_>,
    ) -> Result<String, SummaryError> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        ask_once(
            harness,
            &self.system_prompt,
            body,
            COMPACTION_TURN_BIT | n,
            "summarisation",
            ctx.cancel,
        )
        .await
    }
}

/// One request of `harness` with `system` and one user message `body`, no tools: the answer's text, or why there
/// is none (`what` names the request in errors: "summarisation", "review").
pub(crate) async fn ask_once(
    harness: &dyn Harness,
    system: &str,
    body: String,
    turn: u64,
    what: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<String, SummaryError> {
    let request = ModelRequest {
        system: vec![system.to_string()],
        messages: vec![Message::user_text(body)],
        tools: Vec::new(),
        turn,
        request_in_turn: 0,
    };
    let failed = |e: HarnessError| match e {
        HarnessError::Cancelled => SummaryError::Cancelled,
        e => SummaryError::Failed(format!(
            "the {what} request to {} failed: {e}",
            harness.name()
        )),
    };
    let mut stream = tokio::select! {
        s = harness.stream(request, cancel.child_token()) => s.map_err(failed)?,
        _ = cancel.cancelled() => return Err(SummaryError::Cancelled),
    };
    let (mut text, mut thought) = (String::new(), false);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            _ = cancel.cancelled() => return Err(SummaryError::Cancelled),
        };
        match item {
            Some(Ok(ModelEvent::TextDelta(t))) => text.push_str(&t),
            Some(Ok(ModelEvent::ThinkingDelta(t))) => thought |= !t.trim().is_empty(),
            Some(Ok(ModelEvent::MessageEnd { .. })) => break,
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(failed(e)),
            None => {
                return Err(SummaryError::Failed(format!(
                    "{}: the {what} response ended before it was complete",
                    harness.name()
                )))
            }
        }
    }
    if !text.trim().is_empty() {
        return Ok(text.trim().to_string());
    }
    Err(SummaryError::Failed(if thought {
        format!(
            "{} answered the {what} request with reasoning only and wrote no answer",
            harness.name()
        )
    } else {
        format!(
            "{} returned an empty completion for the {what} request",
            harness.name()
        )
    }))
}

impl Compactor for ModelCompactor {
    fn name(&self) -> &str {
        "model"
    }

    fn summarize<'a>(
        &'a self,
        events: &'a [SessionUpdate],
        ctx: &'a CompactCtx<'a>,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let harness: &dyn Harness = match &self.harness {
                Some(h) => h.as_ref(),
                None => ctx.harness,
            };
            let window = match self.context_window {
                0 => harness.context_window().unwrap_or(AUTO_WINDOW),
                w => w,
            };
            let chunks = chunks_of(events, chunk_chars_of(window));
            let mut so_far: Option<String> = None;
            for (i, chunk) in chunks.iter().enumerate() {
                let body = self.body(so_far.as_deref(), chunk, i + 1, chunks.len());
                so_far = Some(self.ask(harness, body, ctx).await?);
            }
            so_far.ok_or_else(|| SummaryError::Failed("there was nothing to summarise".into()))
        })
    }
}
