//! Updates: what an agent tells its host, shaped as ACP `session/update` payloads (`sessionUpdate` discriminator,
//! camelCase fields), plus non-wire lifecycle frames.
//!
//! Frames (`{"sessionUpdate":"frame","frame":"turn_start"}` …) bracket each turn and each message; an assistant
//! `message_end` always precedes the execution of any tool that message called, so hosts can use it as a barrier.
//! Frames flow through the session chain (layers may observe them) but storage layers do not persist them. Tool
//! progress (`tool_call_update` with status `in_progress`) goes to subscribers only, never to the session.

use serde::{Deserialize, Serialize};

use crate::model::Role;

/// An ACP content block (text only, for now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
}

impl Content {
    /// A text block.
    pub fn text(t: impl Into<String>) -> Content {
        Content::Text { text: t.into() }
    }

    /// Its text.
    pub fn as_text(&self) -> &str {
        match self {
            Content::Text { text } => text,
        }
    }
}

/// A message chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chunk {
    /// The content.
    pub content: Content,
    /// The message it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// A reasoning chunk (`agent_thought_chunk`): a [`Chunk`] plus what the provider needs to see again when the
/// history is replayed to it.
///
/// The replay data travels in ACP's `_meta` extension object, under `loom/`-prefixed keys that ACP clients ignore;
/// it is present only on the chunk that carries it. Anthropic's thinking blocks end with a signature: the chunk that
/// brings it (usually with empty text) closes the block, and the next thought chunk starts a new one. A redacted
/// thinking block is one chunk with empty text and its opaque data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThoughtChunk {
    /// The reasoning text (empty on a chunk that only carries replay data).
    pub content: Content,
    /// The message it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Provider replay data, when this chunk carries some.
    #[serde(
        rename = "_meta",
        default,
        skip_serializing_if = "ThoughtMeta::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub meta: ThoughtMeta,
}

/// ACP: an omitted `_meta` and `"_meta": null` mean the same.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ThoughtMeta, D::Error> {
    Ok(Option::<ThoughtMeta>::deserialize(d)?.unwrap_or_default())
}

impl ThoughtChunk {
    /// A chunk of reasoning text without replay data.
    pub fn text(text: impl Into<String>, message_id: Option<String>) -> ThoughtChunk {
        ThoughtChunk {
            content: Content::text(text),
            message_id,
            meta: ThoughtMeta::default(),
        }
    }
}

/// The `_meta` of a [`ThoughtChunk`]: provider data that must be replayed verbatim (other `_meta` keys are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThoughtMeta {
    /// The signature that closes the current thinking block (Anthropic `signature_delta`).
    #[serde(
        rename = "loom/thinkingSignature",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub signature: Option<String>,
    /// A whole redacted thinking block's opaque data (Anthropic `redacted_thinking`).
    #[serde(
        rename = "loom/redactedThinking",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub redacted: Option<String>,
    /// A provider's opaque item to replay verbatim (OpenAI Responses `reasoning` with its `encrypted_content`,
    /// Anthropic server tool blocks).
    #[serde(
        rename = "loom/providerItem",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_item: Option<serde_json::Value>,
}

impl ThoughtMeta {
    /// True when it carries nothing.
    pub fn is_empty(&self) -> bool {
        self.signature.is_none() && self.redacted.is_none() && self.provider_item.is_none()
    }
}

/// ACP tool kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reading files.
    Read,
    /// Writing or editing files.
    Edit,
    /// Searching.
    Search,
    /// Running commands.
    Execute,
    /// Thinking or planning (the working record's bookkeeping): nothing outside the session changes.
    Think,
    /// Anything else.
    Other,
}

/// ACP tool call status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Announced, not started.
    Pending,
    /// Running (progress updates carry this).
    InProgress,
    /// Finished successfully.
    Completed,
    /// Failed, refused or interrupted.
    Failed,
}

/// Rich content of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// A content block.
    Content {
        /// The block.
        content: Content,
    },
    /// A file diff.
    Diff {
        /// The file.
        path: String,
        /// The text before (absent for a new file).
        #[serde(rename = "oldText", default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        /// The text after.
        #[serde(rename = "newText")]
        new_text: String,
    },
    /// A terminal the client created (`terminal/create`) for the call, shown live by the client.
    Terminal {
        /// The client's terminal id.
        #[serde(rename = "terminalId")]
        terminal_id: String,
    },
}

/// A file a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// Its path.
    pub path: String,
}

/// `tool_call`: a call the model made, announced before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call id.
    pub tool_call_id: String,
    /// The tool instance name the model called (loom uses it as the title, and history replays it as the tool's
    /// name, so it is never decorated).
    pub title: String,
    /// Its kind.
    pub kind: ToolKind,
    /// Its status (`pending`).
    pub status: ToolStatus,
    /// The arguments as the model sent them (a string when they were not valid JSON).
    pub raw_input: serde_json::Value,
    /// Content (none yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    /// Files it touches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
}

/// `tool_call_update`: progress or the final result of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call id.
    pub tool_call_id: String,
    /// The new status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    /// The content so far (progress: the cumulative tail) or the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// Structured output (exit code, spill path, `interrupted`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<serde_json::Value>,
}

impl ToolCallUpdate {
    /// The text of its content blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in self.content.iter().flatten() {
            if let ToolCallContent::Content { content } = c {
                out.push_str(content.as_text());
            }
        }
        out
    }
}

/// Lifecycle frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// A prompt turn begins.
    TurnStart,
    /// It ended (see `stopReason`).
    TurnEnd,
    /// A message begins.
    MessageStart,
    /// It is complete.
    MessageEnd,
    /// Something the user should know that is not part of the conversation (an automatic compaction that failed);
    /// the text is in `text`. Never stored in the session; on the ACP wire it is a thought chunk.
    Notice,
}

/// Why a turn ended (ACP `StopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStop {
    /// The model gave its final answer.
    EndTurn,
    /// The output cap was hit.
    MaxTokens,
    /// `maxTurnRequests` was reached.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The turn was cancelled.
    Cancelled,
    /// The provider failed (see the error).
    Error,
}

/// A lifecycle frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
    /// Which frame.
    pub frame: FrameKind,
    /// The message's author (message frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The message id (message frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Why the turn ended (`turn_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<TurnStop>,
    /// What a `notice` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Token usage of the context (ACP `usage_update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageUpdate {
    /// Tokens used by the last request (input + output).
    pub used: u64,
    /// The model's context window in tokens, when the harness knows it (its `contextWindow` key or its table of
    /// known models); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The provider's prompt-cache use in the last request, when it reported any (under `_meta`, ACP's place for
    /// what its schema does not name).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<UsageMeta>,
}

/// Prompt-cache use of one request: tokens of its input read from the cache, and written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMeta {
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

/// One update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// User text.
    UserMessageChunk(Chunk),
    /// Model text.
    AgentMessageChunk(Chunk),
    /// Model reasoning.
    AgentThoughtChunk(ThoughtChunk),
    /// A tool call, announced.
    ToolCall(ToolCall),
    /// A tool call's progress or result.
    ToolCallUpdate(ToolCallUpdate),
    /// Token usage.
    UsageUpdate(UsageUpdate),
    /// The agent's plan (its working record's checklist and tasks), whole, after it changed: published, not
    /// stored in the history (the record itself is kept apart from the conversation).
    Plan(Plan),
    /// A lifecycle frame (not on the ACP wire, not persisted).
    Frame(Frame),
}

/// ACP `plan`: every entry of the agent's plan, in order (a client replaces the plan it shows with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The entries.
    pub entries: Vec<PlanEntry>,
}

/// One entry of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What it is.
    pub content: String,
    /// How much it matters: `high`, `medium` or `low`.
    pub priority: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

impl SessionUpdate {
    /// A frame.
    pub fn frame(
        frame: FrameKind,
        role: Option<Role>,
        message_id: Option<String>,
    ) -> SessionUpdate {
        SessionUpdate::Frame(Frame {
            frame,
            role,
            message_id,
            stop_reason: None,
            text: None,
        })
    }

    /// A notice frame saying `text`.
    pub fn notice(text: impl Into<String>) -> SessionUpdate {
        SessionUpdate::Frame(Frame {
            frame: FrameKind::Notice,
            role: None,
            message_id: None,
            stop_reason: None,
            text: Some(text.into()),
        })
    }

    /// The text of a notice frame.
    pub fn notice_text(&self) -> Option<&str> {
        match self {
            SessionUpdate::Frame(f) if f.frame == FrameKind::Notice => f.text.as_deref(),
            _ => None,
        }
    }

    /// True for frames.
    pub fn is_frame(&self) -> bool {
        matches!(self, SessionUpdate::Frame(_))
    }

    /// True for tool progress (ephemeral).
    pub fn is_progress(&self) -> bool {
        matches!(self, SessionUpdate::ToolCallUpdate(u) if u.status == Some(ToolStatus::InProgress))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn acp_shapes() {
        let chunk = SessionUpdate::AgentMessageChunk(Chunk {
            content: Content::text("hi"),
            message_id: Some("m1".into()),
        });
        assert_eq!(
            serde_json::to_value(&chunk).unwrap(),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}, "messageId": "m1"})
        );
        let call = SessionUpdate::ToolCall(ToolCall {
            tool_call_id: "c1".into(),
            title: "bash".into(),
            kind: ToolKind::Execute,
            status: ToolStatus::Pending,
            raw_input: json!({"command": "ls"}),
            content: vec![],
            locations: vec![],
        });
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "bash", "kind": "execute",
                   "status": "pending", "rawInput": {"command": "ls"}})
        );
        let upd = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: "c1".into(),
            status: Some(ToolStatus::Completed),
            content: Some(vec![ToolCallContent::Content {
                content: Content::text("ok"),
            }]),
            raw_output: None,
        });
        assert_eq!(
            serde_json::to_value(&upd).unwrap(),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]})
        );
        let frame = SessionUpdate::frame(
            FrameKind::MessageEnd,
            Some(Role::Assistant),
            Some("m1".into()),
        );
        assert_eq!(
            serde_json::to_value(&frame).unwrap(),
            json!({"sessionUpdate": "frame", "frame": "message_end", "role": "assistant", "messageId": "m1"})
        );
        let signed = SessionUpdate::AgentThoughtChunk(ThoughtChunk {
            content: Content::text(""),
            message_id: Some("m1".into()),
            meta: ThoughtMeta {
                signature: Some("EqQB".into()),
                redacted: None,
                provider_item: None,
            },
        });
        assert_eq!(
            serde_json::to_value(&signed).unwrap(),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": ""}, "messageId": "m1",
                   "_meta": {"loom/thinkingSignature": "EqQB"}})
        );
        let plain = SessionUpdate::AgentThoughtChunk(ThoughtChunk::text("hm", None));
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}})
        );
        // other `_meta` keys (another agent's, trace context) and a null `_meta` are ignored
        let null: SessionUpdate =
            serde_json::from_value(json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "x"}, "_meta": null}))
            .unwrap();
        assert_eq!(
            null,
            SessionUpdate::AgentThoughtChunk(ThoughtChunk::text("x", None))
        );
        let foreign: SessionUpdate =
            serde_json::from_value(json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "x"}, "_meta": {"traceparent": "00-ab"}}))
            .unwrap();
        assert_eq!(
            foreign,
            SessionUpdate::AgentThoughtChunk(ThoughtChunk::text("x", None))
        );
        let usage = SessionUpdate::UsageUpdate(UsageUpdate {
            used: 5,
            size: Some(200_000),
            meta: Some(UsageMeta {
                cache_read_tokens: 3,
                cache_write_tokens: 1,
            }),
        });
        assert_eq!(
            serde_json::to_value(&usage).unwrap(),
            json!({"sessionUpdate": "usage_update", "used": 5, "size": 200_000,
                   "_meta": {"cacheReadTokens": 3, "cacheWriteTokens": 1}})
        );
        assert_eq!(
            serde_json::to_value(SessionUpdate::UsageUpdate(UsageUpdate {
                used: 5,
                size: None,
                meta: None,
            }))
            .unwrap(),
            json!({"sessionUpdate": "usage_update", "used": 5})
        );
        for u in [chunk, call, upd, frame, signed, plain, usage] {
            let back: SessionUpdate =
                serde_json::from_value(serde_json::to_value(&u).unwrap()).unwrap();
            assert_eq!(back, u);
        }
    }
}
