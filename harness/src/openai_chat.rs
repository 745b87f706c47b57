//! `openai-chat`: any Chat Completions server (`POST {apiBase}/chat/completions`): OpenAI itself, and through
//! `apiBase` local and third-party servers such as Ollama, vLLM, llama.cpp and OpenRouter.
//!
//! As for `anthropic`: [`OpenAiChatConfig::from_config`] reads `[harness]`, [`chat_request_body`] maps a
//! [`ModelRequest`] onto the wire, [`ChatDecoder`] maps the `data:` chunks back onto [`ModelEvent`]s, and
//! [`OpenAiChatHarness`] does the HTTP. The key (`OPENAI_API_KEY`, from the secrets chain only) is sent as
//! `Authorization: Bearer`; it is required for the default OpenAI endpoint and optional for any other `apiBase`
//! (local servers take none).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::client::{http_client, post_json, read_json, sse_stream, vec_stream, Decoder, Header};
use super::settings::Settings;
use super::{classify_http, EventStream, Harness, HarnessConfigError, HarnessError, SseEvent};
use crate::model::{ContentBlock, ModelEvent, ModelRequest, Role, StopReason, Usage};
use loom_protocol::{Secret, SecretLookup};

/// The secret that holds the API key.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// The default model (the seed's default for OpenAI).
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-5.1";
/// The default API base.
pub const OPENAI_DEFAULT_API_BASE: &str = "https://api.openai.com/v1";

const KEYS: &[&str] = &[
    "provider",
    "model",
    "apiBase",
    "maxOutputTokens",
    "maxTurnRequests",
    "stream",
    "contextWindow",
];

/// The `[harness]` settings of `openai-chat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiChatConfig {
    /// `model`.
    pub model: String,
    /// `apiBase`, without a trailing `/`.
    pub api_base: String,
    /// `maxOutputTokens` (sent as `max_completion_tokens`); unset leaves the server's default.
    pub max_output_tokens: Option<u64>,
    /// `stream`.
    pub stream: bool,
    /// `contextWindow`: the model's context window in tokens, overriding the table of known models.
    pub context_window: Option<u64>,
}

impl OpenAiChatConfig {
    /// Reads `[harness]` (unknown keys are refused, naming the known ones).
    pub fn from_config(config: &toml::Table) -> Result<OpenAiChatConfig, HarnessConfigError> {
        let settings = Settings::new("openai-chat", config, KEYS)?;
        let model = settings.string("model", OPENAI_DEFAULT_MODEL)?;
        let api_base = settings.api_base(OPENAI_DEFAULT_API_BASE)?;
        let max_output_tokens = settings.positive("maxOutputTokens")?;
        let stream = settings.flag("stream", true)?;
        let context_window = settings.positive("contextWindow")?;
        Ok(OpenAiChatConfig {
            model,
            api_base,
            max_output_tokens,
            stream,
            context_window,
        })
    }
}

/// The Chat Completions body for `request`: the system sections as one `system` message; a user message's tool
/// results as `tool` messages (right after the assistant message that called them) before its text; an assistant
/// message's calls as `tool_calls` with their input as a JSON string (thinking is not replayed: the API has no
/// place for it).
pub fn chat_request_body(request: &ModelRequest, config: &OpenAiChatConfig) -> Value {
    let mut messages = Vec::new();
    let system: Vec<&str> = request
        .system
        .iter()
        .map(String::as_str)
        .filter(|s| !s.trim().is_empty())
        .collect();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    for m in &request.messages {
        let text: String = m
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        match m.role {
            Role::User => {
                for b in &m.content {
                    if let ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } = b
                    {
                        messages.push(
                            json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}),
                        );
                    }
                }
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolUse { id, name, input } => Some(json!({
                            "id": id,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": match input {
                                    Value::String(raw) => raw.clone(),
                                    other => other.to_string(),
                                },
                            },
                        })),
                        _ => None,
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut msg = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::String(text) },
                });
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }
    let mut body = json!({"model": config.model, "messages": messages});
    if let Some(n) = config.max_output_tokens {
        body["max_completion_tokens"] = json!(n);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                })
            })
            .collect();
    }
    if config.stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn protocol(message: impl Into<String>) -> HarnessError {
    HarnessError::Protocol {
        message: message.into(),
    }
}

fn finish_reason(s: &str) -> StopReason {
    match s {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

/// The Chat Completions chunk stream -> [`ModelEvent`]s. The message ends at `data: [DONE]` (or, for servers that
/// omit it, when the stream closes after a `finish_reason`).
#[derive(Debug, Default)]
pub struct ChatDecoder {
    started: bool,
    finished: bool,
    /// Open tool calls by their `index`: the call id.
    calls: BTreeMap<u64, String>,
    stop_reason: Option<StopReason>,
}

impl ChatDecoder {
    /// The events one `data:` chunk produces.
    pub fn decode(&mut self, event: &SseEvent) -> Vec<Result<ModelEvent, HarnessError>> {
        match self.decode_inner(event) {
            Ok(events) => events.into_iter().map(Ok).collect(),
            Err(e) => {
                self.finished = true;
                vec![Err(e)]
            }
        }
    }

    fn start(&mut self, id: Option<&str>, out: &mut Vec<ModelEvent>) {
        if !self.started {
            self.started = true;
            out.push(ModelEvent::MessageStart {
                message_id: id.unwrap_or("chatcmpl").to_string(),
            });
        }
    }

    fn close_calls(&mut self, out: &mut Vec<ModelEvent>) {
        for (_, id) in std::mem::take(&mut self.calls) {
            out.push(ModelEvent::ToolUseEnd { id });
        }
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) {
        self.close_calls(out);
        self.finished = true;
        out.push(ModelEvent::MessageEnd {
            stop_reason: self.stop_reason.take().unwrap_or(StopReason::EndTurn),
        });
    }

    fn decode_inner(&mut self, event: &SseEvent) -> Result<Vec<ModelEvent>, HarnessError> {
        let mut out = Vec::new();
        if event.data.trim() == "[DONE]" {
            if !self.started {
                return Err(protocol("the stream ended ([DONE]) before any chunk"));
            }
            self.end(&mut out);
            return Ok(out);
        }
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            protocol(format!(
                "a chunk of the chat completions stream is not JSON ({e}): {}",
                event.data.chars().take(120).collect::<String>()
            ))
        })?;
        if v.get("error").is_some_and(|e| !e.is_null()) || event.event == "error" {
            return Err(classify_http(200, None, None, &event.data));
        }
        if v.get("choices").is_none() && v.get("usage").is_none() {
            return Err(protocol(format!(
                "a chunk of the chat completions stream has no choices: {}",
                event.data.chars().take(120).collect::<String>()
            )));
        }
        self.start(v.get("id").and_then(Value::as_str), &mut out);
        for choice in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(d) = delta {
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(t) = d.get(key).and_then(Value::as_str) {
                        if !t.is_empty() {
                            out.push(ModelEvent::ThinkingDelta(t.to_string()));
                        }
                    }
                }
                if let Some(t) = d.get("content").and_then(Value::as_str) {
                    if !t.is_empty() {
                        out.push(ModelEvent::TextDelta(t.to_string()));
                    }
                }
                for (pos, call) in d
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(pos as u64);
                    let f = call.get("function").unwrap_or(&Value::Null);
                    if let std::collections::btree_map::Entry::Vacant(slot) =
                        self.calls.entry(index)
                    {
                        let id = call
                            .get("id")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("call_{index}"));
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                        if name.is_empty() {
                            return Err(protocol(format!(
                                "tool call {index} of the chat completions stream has no function name"
                            )));
                        }
                        slot.insert(id.clone());
                        out.push(ModelEvent::ToolUseStart {
                            id,
                            name: name.to_string(),
                        });
                    }
                    let args = match f.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        // some servers send the arguments as an object
                        Some(v @ Value::Object(_)) => v.to_string(),
                        _ => String::new(),
                    };
                    if !args.is_empty() {
                        if let Some(id) = self.calls.get(&index) {
                            out.push(ModelEvent::ToolUseInputDelta {
                                id: id.clone(),
                                partial_json: args,
                            });
                        }
                    }
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop_reason = Some(finish_reason(r));
                self.close_calls(&mut out);
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.push(ModelEvent::Usage(Usage {
                input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                output_tokens: u
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                ..Usage::default()
            }));
        }
        Ok(out)
    }

    /// The events of a complete (non-streamed) response.
    pub fn decode_response(&mut self, response: &Value) -> Vec<Result<ModelEvent, HarnessError>> {
        let mut out = self.decode(&SseEvent {
            event: String::new(),
            data: response.to_string(),
        });
        if out.iter().all(Result::is_ok) {
            out.extend(self.decode(&SseEvent {
                event: String::new(),
                data: "[DONE]".into(),
            }));
        }
        out
    }
}

impl Decoder for ChatDecoder {
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
        if !self.started {
            return vec![Err(protocol(
                "the server closed the response without sending a chunk; is apiBase a Chat Completions endpoint?",
            ))];
        }
        if self.stop_reason.is_some() {
            let mut out = Vec::new();
            self.end(&mut out);
            return out.into_iter().map(Ok).collect();
        }
        vec![Err(HarnessError::Network {
            message: "the connection closed mid-message (no finish_reason or [DONE])".into(),
        })]
    }
}

/// The `openai-chat` harness.
pub struct OpenAiChatHarness {
    config: OpenAiChatConfig,
    key: Option<Secret>,
    url: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for OpenAiChatHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChatHarness")
            .field("config", &self.config)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenAiChatHarness {
    /// Builds the harness from `[harness]` and `OPENAI_API_KEY` in `secrets` (required for the default apiBase).
    pub fn from_config(
        config: &toml::Table,
        secrets: &dyn SecretLookup,
    ) -> Result<OpenAiChatHarness, HarnessConfigError> {
        let config = OpenAiChatConfig::from_config(config)?;
        let key = secrets.lookup(OPENAI_API_KEY);
        if key.is_none() && config.api_base == OPENAI_DEFAULT_API_BASE {
            return Err(HarnessConfigError::MissingSecret(OPENAI_API_KEY.into()));
        }
        OpenAiChatHarness::new(config, key)
    }

    /// Builds the harness from settings and an optional key.
    pub fn new(
        config: OpenAiChatConfig,
        key: Option<Secret>,
    ) -> Result<OpenAiChatHarness, HarnessConfigError> {
        Ok(OpenAiChatHarness {
            url: format!("{}/chat/completions", config.api_base),
            config,
            key,
            client: http_client()?,
        })
    }
}

impl Harness for OpenAiChatHarness {
    fn name(&self) -> &str {
        "openai-chat"
    }

    fn model(&self) -> Option<String> {
        Some(self.config.model.clone())
    }

    fn with_model(&self, model: &str) -> Option<std::sync::Arc<dyn Harness>> {
        let mut config = self.config.clone();
        config.model = model.to_string();
        // `contextWindow` describes the configured model, not this one
        config.context_window = None;
        Some(std::sync::Arc::new(OpenAiChatHarness {
            config,
            key: self.key.clone(),
            url: self.url.clone(),
            client: self.client.clone(),
        }))
    }

    /// `contextWindow`, else the OpenAI table, which applies only at OpenAI itself: a local or third-party server
    /// names its models its own way.
    fn context_window(&self) -> Option<u64> {
        self.config.context_window.or_else(|| {
            (self.config.api_base == OPENAI_DEFAULT_API_BASE)
                .then(|| super::known_context_window("openai", &self.config.model))
                .flatten()
        })
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        Box::pin(async move {
            let body = chat_request_body(&request, &self.config);
            let headers: Vec<Header> = self
                .key
                .iter()
                .map(|k| Header {
                    name: "authorization",
                    value: format!("Bearer {}", k.expose()),
                    secret: true,
                })
                .collect();
            let resp = post_json(&self.client, &self.url, &headers, &body, &cancel).await?;
            if self.config.stream {
                Ok(sse_stream(resp, ChatDecoder::default(), cancel))
            } else {
                let response = read_json(resp, &cancel).await?;
                Ok(vec_stream(
                    ChatDecoder::default().decode_response(&response),
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests;
