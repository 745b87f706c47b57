//! The conversation as a model sees it: messages of content blocks, one request, and the events a harness streams
//! back. Provider-neutral: each HTTP harness maps these onto its own wire format.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (prompts and tool results).
    User,
    /// The model.
    Assistant,
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning.
    Thinking {
        /// The reasoning text.
        text: String,
        /// A provider signature that must be replayed with the block (Anthropic), when the provider sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted (Anthropic `redacted_thinking`): opaque data replayed as it came.
    RedactedThinking {
        /// The opaque data.
        data: String,
    },
    /// A provider's opaque item, replayed verbatim to the provider that knows its `type` and skipped by the others:
    /// an OpenAI Responses `reasoning` item (id, summary, `encrypted_content`), an Anthropic server tool's
    /// `server_tool_use` and its `web_search_tool_result` / `web_fetch_tool_result`.
    ProviderItem {
        /// The item as the API returned it.
        item: serde_json::Value,
    },
    /// A tool call the model made.
    ToolUse {
        /// The call id (unique within the conversation).
        id: String,
        /// The tool instance name.
        name: String,
        /// The arguments (the raw text when the model sent JSON that does not parse).
        input: serde_json::Value,
    },
    /// The result of a tool call, sent back in a user message.
    ToolResult {
        /// The call id it answers.
        tool_use_id: String,
        /// The result text.
        content: String,
        /// True when the call failed or was refused.
        is_error: bool,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding `text`.
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The instance name the model calls.
    pub name: String,
    /// What it does (and, for bash, the grant it runs under).
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: serde_json::Value,
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    /// System prompt sections, in order (kept separate: providers may place cache breakpoints between them).
    pub system: Vec<String>,
    /// The conversation so far; the last message is the user's prompt or the results of the previous tool calls.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Which user turn of this agent this request belongs to (0-based, counted by the runtime).
    pub turn: u64,
    /// Which request of that turn this is (0-based).
    pub request_in_turn: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// It called tools and waits for their results.
    ToolUse,
    /// The output cap was hit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused.
    Refusal,
    /// The provider paused a long turn of its own server tools (Anthropic's `pause_turn`): the runtime sends the
    /// conversation back as it is, and the model goes on where it stopped.
    PauseTurn,
    /// Anything else the provider reported.
    Other(String),
}

/// Token accounting for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens (including cached).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Of the input, tokens read from the provider's prompt cache (0 when it reports none).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Of the input, tokens written to the provider's prompt cache (0 when it reports none).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// One event of a streamed response. A well-formed stream is `MessageStart`, then any deltas (a tool use is
/// `ToolUseStart`, its `ToolUseInputDelta`s, `ToolUseEnd`), then `MessageEnd`. `Usage` may come anywhere.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// The assistant message begins.
    MessageStart {
        /// The provider's message id (or one the harness made up).
        message_id: String,
    },
    /// Visible text.
    TextDelta(String),
    /// Reasoning text.
    ThinkingDelta(String),
    /// The signature of the current thinking block; it closes that block (reasoning after it is a new block).
    ThinkingSignature(String),
    /// A whole redacted thinking block (its opaque data).
    RedactedThinking(String),
    /// A provider's opaque item to replay verbatim (OpenAI `reasoning`, Anthropic server tool blocks).
    ProviderItem(serde_json::Value),
    /// A tool call begins.
    ToolUseStart {
        /// The call id.
        id: String,
        /// The tool instance name.
        name: String,
    },
    /// A fragment of the call's JSON input.
    ToolUseInputDelta {
        /// The call id.
        id: String,
        /// The fragment.
        partial_json: String,
    },
    /// The call's input is complete.
    ToolUseEnd {
        /// The call id.
        id: String,
    },
    /// Token usage so far.
    Usage(Usage),
    /// The message is complete.
    MessageEnd {
        /// Why the model stopped.
        stop_reason: StopReason,
    },
}
