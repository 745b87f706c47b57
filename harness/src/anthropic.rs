//! `anthropic`: Claude through the Messages API (`POST {apiBase}/v1/messages`), streamed as server-sent events
//! (`stream = true`, the default) or read as one JSON message (`stream = false`).
//!
//! Three pure pieces and one effectful one: [`AnthropicConfig::from_config`] reads `[harness]`, [`request_body`]
//! maps a [`ModelRequest`] onto the wire, [`AnthropicDecoder`] maps the event stream back onto [`ModelEvent`]s, and
//! [`AnthropicHarness`] does the HTTP. The API key comes only from the secrets chain (`ANTHROPIC_API_KEY`) and is
//! sent only as the sensitive `x-api-key` header.

use std::collections::HashMap;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::client::{http_client, post_json, read_json, sse_stream, vec_stream, Decoder, Header};
use super::settings::{Effort, Settings};
use super::{classify_http, EventStream, Harness, HarnessConfigError, HarnessError, SseEvent};
use crate::model::{ContentBlock, ModelEvent, ModelRequest, Role, StopReason, Usage};
use loom_protocol::{Secret, SecretLookup};

/// The secret that holds the API key.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
/// The default model.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5-latest";
/// The default API base.
pub const ANTHROPIC_DEFAULT_API_BASE: &str = "https://api.anthropic.com";
/// The default per-response output cap.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u64 = 4096;
/// The smallest extended-thinking budget the API accepts.
pub const ANTHROPIC_MIN_THINKING_BUDGET: u64 = 1024;
/// The API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The keys `[harness]` may hold for `anthropic`.
const KEYS: &[&str] = &[
    "provider",
    "model",
    "apiBase",
    "maxTokens",
    "maxTurnRequests",
    "stream",
    "contextWindow",
    "thinkingBudget",
    "effort",
];

/// The `[harness]` settings of `anthropic`, with the seed's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// `model`.
    pub model: String,
    /// `apiBase`, without a trailing `/`.
    pub api_base: String,
    /// `maxTokens`.
    pub max_tokens: u64,
    /// `stream`.
    pub stream: bool,
    /// `contextWindow`: the model's context window in tokens, overriding the table of known models.
    pub context_window: Option<u64>,
    /// `thinkingBudget`: turns on extended thinking with this many tokens of reasoning per response (at least
    /// 1024, below `maxTokens`); unset sends no `thinking` parameter.
    pub thinking_budget: Option<u64>,
    /// Server tool definitions sent with every request (`web_search_20250305`, `web_fetch_20250910`), set at boot
    /// from the granted `web_search` / `web_fetch = "anthropic"` tools; never from `[harness]`.
    pub server_tools: Vec<Value>,
}

impl AnthropicConfig {
    /// Reads `[harness]` (unknown keys are refused, naming the known ones).
    pub fn from_config(config: &toml::Table) -> Result<AnthropicConfig, HarnessConfigError> {
        let settings = Settings::new("anthropic", config, KEYS)?;
        let model = settings.string("model", ANTHROPIC_DEFAULT_MODEL)?;
        let api_base = settings.api_base(ANTHROPIC_DEFAULT_API_BASE)?;
        let max_tokens = settings
            .positive("maxTokens")?
            .unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS);
        let stream = settings.flag("stream", true)?;
        let context_window = settings.positive("contextWindow")?;
        let mut thinking_budget = settings.positive("thinkingBudget")?;
        if let Some(b) = thinking_budget {
            if b < ANTHROPIC_MIN_THINKING_BUDGET || b >= max_tokens {
                return Err(HarnessConfigError::Invalid(format!(
                    "thinkingBudget {b} must be at least {ANTHROPIC_MIN_THINKING_BUDGET} and below maxTokens \
                     ({max_tokens}), which also holds the answer; e.g. thinkingBudget = 2048 with maxTokens = 8192"
                )));
            }
        }
        if let Some(effort) = settings.effort()? {
            if thinking_budget.is_some() {
                return Err(HarnessConfigError::Invalid(
                    "effort and thinkingBudget both set how much the model thinks; keep one".into(),
                ));
            }
            thinking_budget = effort_budget(effort, max_tokens);
        }
        Ok(AnthropicConfig {
            model,
            api_base,
            max_tokens,
            stream,
            context_window,
            thinking_budget,
            server_tools: Vec::new(),
        })
    }
}

/// The thinking budget `effort` stands for: none for `low`; 4096 tokens for `medium` and 16384 for `high`, each
/// kept 1024 tokens below `max_tokens` (which also holds the answer) — none when that leaves less than the API's
/// minimum.
pub fn effort_budget(effort: Effort, max_tokens: u64) -> Option<u64> {
    let want = match effort {
        Effort::Low => return None,
        Effort::Medium => 4096,
        Effort::High => 16384,
    };
    let budget = want.min(max_tokens.saturating_sub(1024));
    (budget >= ANTHROPIC_MIN_THINKING_BUDGET).then_some(budget)
}

/// Prompt-cache breakpoints (`cache_control: ephemeral`, at most three of the API's four): after the last of loom's
/// tools (the tool list is the most stable prefix), after the last system block (the system prompt: environment,
/// agent prompt, guidance, skills catalog), and after the last block of the conversation when it is the user's (so
/// the next request of the turn reads the conversation so far from the cache).
fn mark_cache_breakpoints(body: &mut Value) {
    let ephemeral = || json!({"type": "ephemeral"});
    if let Some(tool) = body
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.iter_mut().rev().find(|t| t.get("input_schema").is_some()))
    {
        tool["cache_control"] = ephemeral();
    }
    if let Some(last) = body
        .get_mut("system")
        .and_then(Value::as_array_mut)
        .and_then(|s| s.last_mut())
    {
        last["cache_control"] = ephemeral();
    }
    if let Some(last) = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .and_then(|m| m.last_mut())
        .filter(|m| m["role"] == "user")
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|c| c.last_mut())
        .filter(|b| matches!(b["type"].as_str(), Some("text" | "tool_result" | "image")))
    {
        last["cache_control"] = ephemeral();
    }
}

/// The Messages API body for `request`. Empty text blocks are dropped (the API refuses them), thinking blocks are
/// replayed in their place (before the calls they led to) with their exact text and signature, and only with one
/// (reasoning from another provider has none and the API would refuse it); redacted thinking goes back as its data; a tool call whose input was not a JSON object is replayed as
/// `{"_raw": <text>}` so the model sees what it sent, and empty messages are left out.
pub fn request_body(request: &ModelRequest, config: &AnthropicConfig) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .filter_map(|m| {
            let content: Vec<Value> = m.content.iter().filter_map(block).collect();
            (!content.is_empty()).then(|| {
                json!({
                    "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
                    "content": content,
                })
            })
        })
        .collect();
    let mut body = json!({
        "model": config.model,
        "max_tokens": config.max_tokens,
        "messages": messages,
    });
    let system: Vec<Value> = request
        .system
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| json!({"type": "text", "text": s}))
        .collect();
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !request.tools.is_empty() || !config.server_tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .chain(config.server_tools.iter().cloned())
            .collect();
    }
    mark_cache_breakpoints(&mut body);
    if let Some(budget) = config.thinking_budget {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if config.stream {
        body["stream"] = Value::Bool(true);
    }
    body
}

fn block(b: &ContentBlock) -> Option<Value> {
    match b {
        ContentBlock::Text { text } if text.is_empty() => None,
        ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
        ContentBlock::Thinking { text, signature } => signature
            .as_ref()
            .map(|s| json!({"type": "thinking", "thinking": text, "signature": s})),
        ContentBlock::RedactedThinking { data } => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        // a server tool's call and result go back verbatim; another provider's items are not replayable here
        ContentBlock::ProviderItem { item } => SERVER_BLOCKS
            .contains(&item["type"].as_str()?)
            .then(|| item.clone()),
        ContentBlock::ToolUse { id, name, input } => {
            let input = match input {
                Value::Object(_) => input.clone(),
                Value::String(raw) => json!({ "_raw": raw }),
                other => json!({ "_raw": other.to_string() }),
            };
            Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => Some(json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        })),
    }
}

/// The content blocks of Anthropic's server tools: kept in history whole and replayed as they came.
const SERVER_BLOCKS: &[&str] = &[
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
];

/// The `anthropic-beta` flag `web_fetch_20250910` needs.
const WEB_FETCH_BETA: &str = "web-fetch-2025-09-10";

/// What kind of content block an index holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    ToolUse {
        id: String,
    },
    /// A server tool block: the start event's block, and its input JSON as streamed so far.
    Server {
        block: Value,
        json: String,
    },
    Other,
}

/// The Messages API event stream -> [`ModelEvent`]s. Feed it every SSE event in order.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    started: bool,
    finished: bool,
}

fn protocol(message: impl Into<String>) -> HarnessError {
    HarnessError::Protocol {
        message: message.into(),
    }
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        "pause_turn" => StopReason::PauseTurn,
        other => StopReason::Other(other.to_string()),
    }
}

fn tokens(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl AnthropicDecoder {
    /// The events one SSE event produces; an `error` event (even after HTTP 200) is classified like an HTTP error.
    pub fn decode(&mut self, event: &SseEvent) -> Vec<Result<ModelEvent, HarnessError>> {
        match self.decode_inner(event) {
            Ok(events) => events.into_iter().map(Ok).collect(),
            Err(e) => {
                self.finished = true;
                vec![Err(e)]
            }
        }
    }

    fn decode_inner(&mut self, event: &SseEvent) -> Result<Vec<ModelEvent>, HarnessError> {
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            protocol(format!(
                "an event of the Anthropic stream is not JSON ({e}): {}",
                event.data.chars().take(120).collect::<String>()
            ))
        })?;
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        if !self.started && !matches!(ty, "message_start" | "ping" | "error") {
            return Err(protocol(format!(
                "the Anthropic stream sent {ty:?} before message_start"
            )));
        }
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut out = Vec::new();
        match ty {
            "message_start" => {
                self.started = true;
                let message = &v["message"];
                let id = message
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("msg")
                    .to_string();
                out.push(ModelEvent::MessageStart { message_id: id });
                if let Some(u) = message.get("usage") {
                    self.usage.cache_read_tokens =
                        tokens(u, "cache_read_input_tokens").unwrap_or(0);
                    self.usage.cache_write_tokens =
                        tokens(u, "cache_creation_input_tokens").unwrap_or(0);
                    self.usage.input_tokens = tokens(u, "input_tokens").unwrap_or(0)
                        + self.usage.cache_read_tokens
                        + self.usage.cache_write_tokens;
                    self.usage.output_tokens = tokens(u, "output_tokens").unwrap_or(0);
                    out.push(ModelEvent::Usage(self.usage));
                }
            }
            "content_block_start" => {
                let cb = &v["content_block"];
                let str_of = |k: &str| cb.get(k).and_then(Value::as_str).unwrap_or("");
                let block = match str_of("type") {
                    "text" => {
                        if !str_of("text").is_empty() {
                            out.push(ModelEvent::TextDelta(str_of("text").to_string()));
                        }
                        Block::Text
                    }
                    "thinking" => {
                        if !str_of("thinking").is_empty() {
                            out.push(ModelEvent::ThinkingDelta(str_of("thinking").to_string()));
                        }
                        if !str_of("signature").is_empty() {
                            out.push(ModelEvent::ThinkingSignature(
                                str_of("signature").to_string(),
                            ));
                        }
                        Block::Thinking
                    }
                    // encrypted reasoning arrives whole, in the start event
                    "redacted_thinking" => {
                        let data = str_of("data");
                        if data.is_empty() {
                            return Err(protocol("a redacted_thinking block has no data"));
                        }
                        out.push(ModelEvent::RedactedThinking(data.to_string()));
                        Block::Other
                    }
                    "tool_use" => {
                        let (id, name) = (str_of("id"), str_of("name"));
                        if id.is_empty() || name.is_empty() {
                            return Err(protocol("a tool_use block has no id or name"));
                        }
                        out.push(ModelEvent::ToolUseStart {
                            id: id.to_string(),
                            name: name.to_string(),
                        });
                        // streamed calls start with `{}` and send their input as deltas; a complete message
                        // (stream = false) carries it here
                        if let Some(input) = cb.get("input").and_then(Value::as_object) {
                            if !input.is_empty() {
                                out.push(ModelEvent::ToolUseInputDelta {
                                    id: id.to_string(),
                                    partial_json: Value::Object(input.clone()).to_string(),
                                });
                            }
                        }
                        Block::ToolUse { id: id.to_string() }
                    }
                    t if SERVER_BLOCKS.contains(&t) => {
                        if t == "server_tool_use"
                            && (str_of("id").is_empty() || str_of("name").is_empty())
                        {
                            return Err(protocol("a server_tool_use block has no id or name"));
                        }
                        Block::Server {
                            block: cb.clone(),
                            json: String::new(),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let d = &v["delta"];
                let str_of = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
                let block = self.blocks.get(&index);
                match (str_of("type"), block) {
                    ("text_delta", Some(Block::Text)) => {
                        out.push(ModelEvent::TextDelta(str_of("text").to_string()))
                    }
                    ("thinking_delta", Some(Block::Thinking)) => {
                        out.push(ModelEvent::ThinkingDelta(str_of("thinking").to_string()))
                    }
                    ("signature_delta", Some(Block::Thinking)) => out.push(
                        ModelEvent::ThinkingSignature(str_of("signature").to_string()),
                    ),
                    ("input_json_delta", Some(Block::ToolUse { id })) => {
                        out.push(ModelEvent::ToolUseInputDelta {
                            id: id.clone(),
                            partial_json: str_of("partial_json").to_string(),
                        })
                    }
                    ("input_json_delta", Some(Block::Server { .. })) => {
                        if let Some(Block::Server { json, .. }) = self.blocks.get_mut(&index) {
                            json.push_str(str_of("partial_json"));
                        }
                    }
                    (_, Some(Block::Other)) => {}
                    (
                        t @ ("text_delta" | "thinking_delta" | "signature_delta"
                        | "input_json_delta"),
                        b,
                    ) => {
                        return Err(protocol(format!(
                        "the Anthropic stream sent a {t} for content block {index}, which is {}",
                        match b {
                            None => "not open".to_string(),
                            Some(b) => format!("a {b:?} block"),
                        }
                    )))
                    }
                    // newer delta kinds (citations, …) carry nothing this runtime shows
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::ToolUse { id }) => out.push(ModelEvent::ToolUseEnd { id }),
                // a server tool's call is complete with its streamed input: kept whole for replay
                Some(Block::Server { mut block, json }) => {
                    if !json.is_empty() {
                        block["input"] = serde_json::from_str(&json).map_err(|e| {
                            protocol(format!(
                                "the input of server tool block {index} is not JSON ({e})"
                            ))
                        })?;
                    }
                    out.push(ModelEvent::ProviderItem(block));
                }
                _ => {}
            },
            "message_delta" => {
                if let Some(r) = v["delta"].get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(r));
                }
                if let Some(u) = v.get("usage") {
                    if let Some(n) = tokens(u, "input_tokens") {
                        self.usage.cache_read_tokens =
                            tokens(u, "cache_read_input_tokens").unwrap_or(0);
                        self.usage.cache_write_tokens =
                            tokens(u, "cache_creation_input_tokens").unwrap_or(0);
                        self.usage.input_tokens =
                            n + self.usage.cache_read_tokens + self.usage.cache_write_tokens;
                    }
                    if let Some(n) = tokens(u, "output_tokens") {
                        self.usage.output_tokens = n;
                    }
                    out.push(ModelEvent::Usage(self.usage));
                }
            }
            "message_stop" => {
                self.finished = true;
                out.push(ModelEvent::MessageEnd {
                    stop_reason: self.stop_reason.take().unwrap_or(StopReason::EndTurn),
                });
            }
            "error" => return Err(classify_http(200, None, None, &event.data)),
            // "ping" and event kinds added after this was written
            _ => {}
        }
        Ok(out)
    }

    /// The events of a complete (non-streamed) message, by replaying it as the stream it would have been.
    pub fn decode_message(&mut self, message: &Value) -> Vec<Result<ModelEvent, HarnessError>> {
        if message.get("type").and_then(Value::as_str) == Some("error") {
            return vec![Err(classify_http(200, None, None, &message.to_string()))];
        }
        let mut start = message.clone();
        start["content"] = json!([]);
        let mut events = vec![json!({"type": "message_start", "message": start})];
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, b) in blocks.into_iter().enumerate() {
            events.push(json!({"type": "content_block_start", "index": i, "content_block": b}));
            events.push(json!({"type": "content_block_stop", "index": i}));
        }
        events.push(json!({
            "type": "message_delta",
            "delta": {"stop_reason": message.get("stop_reason").cloned().unwrap_or(Value::Null)},
            "usage": message.get("usage").cloned().unwrap_or(json!({})),
        }));
        events.push(json!({"type": "message_stop"}));
        let mut out = Vec::new();
        for e in events {
            let ev = SseEvent {
                event: String::new(),
                data: e.to_string(),
            };
            let produced = self.decode(&ev);
            let failed = produced.iter().any(Result::is_err);
            out.extend(produced);
            if failed {
                break;
            }
        }
        out
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: SseEvent) -> Vec<Result<ModelEvent, HarnessError>> {
        self.decode(&event)
    }

    fn done(&self) -> bool {
        self.finished
    }

    fn finish(&mut self) -> Vec<Result<ModelEvent, HarnessError>> {
        if self.finished {
            return Vec::new();
        }
        let err = if !self.started {
            protocol(
                "the provider closed the response without sending a message; is apiBase an Anthropic Messages API endpoint?",
            )
        } else {
            HarnessError::Network {
                message: "the connection closed mid-message (no message_stop)".into(),
            }
        };
        vec![Err(err)]
    }
}

/// The `anthropic` harness.
pub struct AnthropicHarness {
    config: AnthropicConfig,
    key: Secret,
    url: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for AnthropicHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicHarness")
            .field("config", &self.config)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl AnthropicHarness {
    /// Builds the harness from `[harness]` and the API key in `secrets`.
    pub fn from_config(
        config: &toml::Table,
        secrets: &dyn SecretLookup,
    ) -> Result<AnthropicHarness, HarnessConfigError> {
        let config = AnthropicConfig::from_config(config)?;
        let key = secrets
            .lookup(ANTHROPIC_API_KEY)
            .ok_or_else(|| HarnessConfigError::MissingSecret(ANTHROPIC_API_KEY.into()))?;
        AnthropicHarness::new(config, key)
    }

    /// This harness (same key, endpoint and connection pool) with other settings.
    fn with_config(&self, config: AnthropicConfig) -> std::sync::Arc<dyn Harness> {
        std::sync::Arc::new(AnthropicHarness {
            config,
            key: self.key.clone(),
            url: self.url.clone(),
            client: self.client.clone(),
        })
    }

    /// Builds the harness from settings and a key.
    pub fn new(
        config: AnthropicConfig,
        key: Secret,
    ) -> Result<AnthropicHarness, HarnessConfigError> {
        Ok(AnthropicHarness {
            url: format!("{}/v1/messages", config.api_base),
            config,
            key,
            client: http_client()?,
        })
    }
}

impl Harness for AnthropicHarness {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> Option<String> {
        Some(self.config.model.clone())
    }

    fn with_model(&self, model: &str) -> Option<std::sync::Arc<dyn Harness>> {
        let mut config = self.config.clone();
        config.model = model.to_string();
        // `contextWindow` describes the configured model, not this one
        config.context_window = None;
        // server tools are the parent's grants, not the sub-agent's: its own boot adds those it is granted
        config.server_tools = Vec::new();
        Some(self.with_config(config))
    }

    fn context_window(&self) -> Option<u64> {
        self.config
            .context_window
            .or_else(|| super::known_context_window("anthropic", &self.config.model))
    }

    fn small_model(&self) -> Option<String> {
        Some("claude-haiku-4-5".into())
    }

    fn with_server_tools(&self, tools: Vec<Value>) -> Option<std::sync::Arc<dyn Harness>> {
        let mut config = self.config.clone();
        config.server_tools = tools;
        Some(self.with_config(config))
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        Box::pin(async move {
            let body = request_body(&request, &self.config);
            let mut headers = vec![
                Header {
                    name: "x-api-key",
                    value: self.key.expose().to_string(),
                    secret: true,
                },
                Header {
                    name: "anthropic-version",
                    value: ANTHROPIC_VERSION.into(),
                    secret: false,
                },
            ];
            if self
                .config
                .server_tools
                .iter()
                .any(|t| t["name"] == "web_fetch")
            {
                headers.push(Header {
                    name: "anthropic-beta",
                    value: WEB_FETCH_BETA.into(),
                    secret: false,
                });
            }
            let resp = post_json(&self.client, &self.url, &headers, &body, &cancel).await?;
            if self.config.stream {
                Ok(sse_stream(resp, AnthropicDecoder::default(), cancel))
            } else {
                let message = read_json(resp, &cancel).await?;
                Ok(vec_stream(
                    AnthropicDecoder::default().decode_message(&message),
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests;
