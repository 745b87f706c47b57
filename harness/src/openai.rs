//! `openai`: OpenAI through the Responses API (`POST {apiBase}/responses`), streamed as typed server-sent events
//! (`stream = true`, the default) or read as one response object.
//!
//! As for `anthropic`: [`OpenAiConfig::from_config`] reads `[harness]`, [`responses_request_body`] maps a
//! [`ModelRequest`] onto the wire (stateless: `store = false`, the whole conversation as input items),
//! [`ResponsesDecoder`] maps the events back onto [`ModelEvent`]s, and [`OpenAiHarness`] does the HTTP. The key
//! (`OPENAI_API_KEY`, from the secrets chain only, required) is sent as `Authorization: Bearer`.

use std::collections::HashMap;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::client::{http_client, post_json, read_json, sse_stream, vec_stream, Decoder, Header};
use super::openai_chat::OPENAI_API_KEY;
use super::settings::{Effort, Settings};
use super::{classify_http, EventStream, Harness, HarnessConfigError, HarnessError, SseEvent};
use crate::model::{ContentBlock, ModelEvent, ModelRequest, Role, StopReason, Usage};
use loom_protocol::{Secret, SecretLookup};

const KEYS: &[&str] = &[
    "provider",
    "model",
    "apiBase",
    "maxOutputTokens",
    "maxTurnRequests",
    "stream",
    "contextWindow",
    "effort",
];

/// The `[harness]` settings of `openai` (the seed's keys and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// `model`.
    pub model: String,
    /// `apiBase`, without a trailing `/`.
    pub api_base: String,
    /// `maxOutputTokens` (`max_output_tokens`); unset leaves the server's default.
    pub max_output_tokens: Option<u64>,
    /// `stream`.
    pub stream: bool,
    /// `contextWindow`: the model's context window in tokens, overriding the table of known models.
    pub context_window: Option<u64>,
    /// `effort`: sent as `reasoning.effort` to a reasoning model ([`reasons`]); other models take no such setting
    /// and are sent none.
    pub effort: Option<Effort>,
}

impl OpenAiConfig {
    /// Reads `[harness]` (unknown keys are refused, naming the known ones).
    pub fn from_config(config: &toml::Table) -> Result<OpenAiConfig, HarnessConfigError> {
        let effort = Settings::new("openai", config, KEYS)?.effort()?;
        // the same keys and rules as openai-chat
        let mut t = config.clone();
        t.remove("provider");
        t.remove("effort");
        let c = super::openai_chat::OpenAiChatConfig::from_config(&t)?;
        Ok(OpenAiConfig {
            model: c.model,
            api_base: c.api_base,
            max_output_tokens: c.max_output_tokens,
            stream: c.stream,
            context_window: c.context_window,
            effort,
        })
    }
}

/// The Responses API body for `request`: system sections as `instructions`, the conversation as input items
/// (user and assistant text as messages, calls as `function_call`, results as `function_call_output`, `reasoning`
/// items replayed verbatim where they came; other providers' thinking is not replayed), tools as function tools,
/// `store = false`, and for reasoning models `include = ["reasoning.encrypted_content"]`.
pub fn responses_request_body(request: &ModelRequest, config: &OpenAiConfig) -> Value {
    let mut input = Vec::new();
    for m in &request.messages {
        let mut text = String::new();
        let flush = |text: &mut String, input: &mut Vec<Value>| {
            if !text.is_empty() {
                let role = match m.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                input.push(json!({"role": role, "content": std::mem::take(text)}));
            }
        };
        for b in &m.content {
            match b {
                ContentBlock::Text { text: t } => text.push_str(t),
                ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
                // a reasoning item goes back exactly as the API returned it, in its place
                ContentBlock::ProviderItem { item } if item["type"] == "reasoning" => {
                    flush(&mut text, &mut input);
                    input.push(item.clone());
                }
                // another provider's item
                ContentBlock::ProviderItem { .. } => {}
                ContentBlock::ToolUse {
                    id,
                    name,
                    input: args,
                } => {
                    flush(&mut text, &mut input);
                    input.push(json!({
                        "type": "function_call",
                        "call_id": id,
                        "name": name,
                        "arguments": match args {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        },
                    }));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    flush(&mut text, &mut input);
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": tool_use_id,
                        "output": content,
                    }));
                }
            }
        }
        flush(&mut text, &mut input);
    }
    let mut body = json!({"model": config.model, "input": input, "store": false});
    if reasons(&config.model) {
        // stateless (store = false): the reasoning comes back encrypted, to be replayed in later requests
        body["include"] = json!(["reasoning.encrypted_content"]);
        if let Some(e) = config.effort {
            body["reasoning"] = json!({ "effort": e.word() });
        }
    }
    let system: Vec<&str> = request
        .system
        .iter()
        .map(String::as_str)
        .filter(|s| !s.trim().is_empty())
        .collect();
    if !system.is_empty() {
        body["instructions"] = json!(system.join("\n\n"));
    }
    if let Some(n) = config.max_output_tokens {
        body["max_output_tokens"] = json!(n);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                })
            })
            .collect();
    }
    if config.stream {
        body["stream"] = json!(true);
    }
    body
}

/// True for the model families that reason (and so return `reasoning` items): `gpt-5*`, `o1*`, `o3*`, `o4*`,
/// `codex*`. Other models refuse the `reasoning.encrypted_content` include.
pub fn reasons(model: &str) -> bool {
    ["gpt-5", "o1", "o3", "o4", "codex"]
        .iter()
        .any(|p| model.starts_with(p))
}

fn protocol(message: impl Into<String>) -> HarnessError {
    HarnessError::Protocol {
        message: message.into(),
    }
}

/// An open function call: its call id, and whether any argument fragment arrived.
#[derive(Debug)]
struct Call {
    call_id: String,
    streamed: bool,
}

/// The Responses API event stream -> [`ModelEvent`]s.
#[derive(Debug, Default)]
pub struct ResponsesDecoder {
    started: bool,
    finished: bool,
    /// Open function calls by output index.
    calls: HashMap<u64, Call>,
    called: bool,
}

impl ResponsesDecoder {
    /// The events one SSE event produces; `error` and `response.failed` are classified like HTTP errors.
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
                "an event of the Responses stream is not JSON ({e}): {}",
                event.data.chars().take(120).collect::<String>()
            ))
        })?;
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        if !self.started && !matches!(ty, "response.created" | "error") {
            return Err(protocol(format!(
                "the Responses stream sent {ty:?} before response.created"
            )));
        }
        let index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = || {
            v.get("delta")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut out = Vec::new();
        match ty {
            "response.created" => {
                self.started = true;
                let id = v["response"]
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("resp");
                out.push(ModelEvent::MessageStart {
                    message_id: id.to_string(),
                });
            }
            "response.output_item.added" => {
                let item = &v["item"];
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                    let call_id = if s("call_id").is_empty() {
                        s("id")
                    } else {
                        s("call_id")
                    };
                    if call_id.is_empty() || s("name").is_empty() {
                        return Err(protocol("a function_call item has no call_id or name"));
                    }
                    self.called = true;
                    out.push(ModelEvent::ToolUseStart {
                        id: call_id.to_string(),
                        name: s("name").to_string(),
                    });
                    self.calls.insert(
                        index,
                        Call {
                            call_id: call_id.to_string(),
                            streamed: false,
                        },
                    );
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                out.push(ModelEvent::TextDelta(delta()))
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push(ModelEvent::ThinkingDelta(delta()))
            }
            "response.function_call_arguments.delta" => {
                let call = self.calls.get_mut(&index).ok_or_else(|| {
                    protocol(format!(
                        "function call arguments for output {index}, which is not an open call"
                    ))
                })?;
                call.streamed = true;
                out.push(ModelEvent::ToolUseInputDelta {
                    id: call.call_id.clone(),
                    partial_json: delta(),
                });
            }
            "response.output_item.done" => {
                let item = &v["item"];
                if item.get("type").and_then(Value::as_str) == Some("reasoning") {
                    if item.get("id").and_then(Value::as_str).is_none() {
                        return Err(protocol("a reasoning item has no id"));
                    }
                    out.push(ModelEvent::ProviderItem(item.clone()));
                }
                if let Some(call) = self.calls.remove(&index) {
                    let args = v["item"]
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if !call.streamed && !args.is_empty() {
                        out.push(ModelEvent::ToolUseInputDelta {
                            id: call.call_id.clone(),
                            partial_json: args.to_string(),
                        });
                    }
                    out.push(ModelEvent::ToolUseEnd { id: call.call_id });
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = &v["response"];
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    out.push(ModelEvent::Usage(Usage {
                        input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
                        output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
                        ..Usage::default()
                    }));
                }
                let mut open: Vec<_> = self.calls.drain().collect();
                open.sort_by_key(|(i, _)| *i);
                for (_, call) in open {
                    out.push(ModelEvent::ToolUseEnd { id: call.call_id });
                }
                let reason = r
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str);
                let stop_reason = match (ty, reason) {
                    (_, Some("max_output_tokens")) => StopReason::MaxTokens,
                    (_, Some("content_filter")) => StopReason::Refusal,
                    (_, Some(other)) => StopReason::Other(other.to_string()),
                    _ if self.called => StopReason::ToolUse,
                    _ => StopReason::EndTurn,
                };
                self.finished = true;
                out.push(ModelEvent::MessageEnd { stop_reason });
            }
            "response.failed" => {
                let err = v["response"].get("error").cloned().unwrap_or(Value::Null);
                return Err(classify_http(200, None, None, &err.to_string()));
            }
            "error" => return Err(classify_http(200, None, None, &event.data)),
            // in_progress, content_part.*, *.done, and kinds added after this was written
            _ => {}
        }
        Ok(out)
    }

    /// The events of a complete (non-streamed) response object, by replaying it as its stream.
    pub fn decode_response(&mut self, response: &Value) -> Vec<Result<ModelEvent, HarnessError>> {
        let mut events =
            vec![json!({"type": "response.created", "response": {"id": response.get("id")}})];
        let items = response
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            match item.get("type").and_then(Value::as_str) {
                Some("function_call") => {
                    events.push(
                        json!({"type": "response.output_item.added", "output_index": i, "item": item}),
                    );
                    events.push(
                        json!({"type": "response.output_item.done", "output_index": i, "item": item}),
                    );
                }
                Some("reasoning") => {
                    for part in item
                        .get("summary")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(t) = part.get("text").and_then(Value::as_str) {
                            events.push(json!({"type": "response.reasoning_summary_text.delta", "output_index": i, "delta": t}));
                        }
                    }
                    events.push(
                        json!({"type": "response.output_item.done", "output_index": i, "item": item}),
                    );
                }
                Some("message") => {
                    for part in item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let text = part.get("text").or_else(|| part.get("refusal"));
                        if let Some(t) = text.and_then(Value::as_str) {
                            events.push(json!({"type": "response.output_text.delta", "output_index": i, "delta": t}));
                        }
                    }
                }
                _ => {}
            }
        }
        let end = if response.get("status").and_then(Value::as_str) == Some("failed") {
            "response.failed"
        } else if response.get("status").and_then(Value::as_str) == Some("incomplete") {
            "response.incomplete"
        } else {
            "response.completed"
        };
        events.push(json!({"type": end, "response": response}));
        let mut out = Vec::new();
        for e in events {
            let produced = self.decode(&SseEvent {
                event: String::new(),
                data: e.to_string(),
            });
            let failed = produced.iter().any(Result::is_err);
            out.extend(produced);
            if failed {
                break;
            }
        }
        out
    }
}

impl Decoder for ResponsesDecoder {
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
        vec![Err(if self.started {
            HarnessError::Network {
                message: "the connection closed mid-response (no response.completed)".into(),
            }
        } else {
            protocol(
                "the server closed the response without sending an event; is apiBase an OpenAI Responses API endpoint?",
            )
        })]
    }
}

/// The `openai` harness.
pub struct OpenAiHarness {
    config: OpenAiConfig,
    key: Secret,
    url: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for OpenAiHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiHarness")
            .field("config", &self.config)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenAiHarness {
    /// Builds the harness from `[harness]` and `OPENAI_API_KEY` in `secrets`.
    pub fn from_config(
        config: &toml::Table,
        secrets: &dyn SecretLookup,
    ) -> Result<OpenAiHarness, HarnessConfigError> {
        let config = OpenAiConfig::from_config(config)?;
        let key = secrets
            .lookup(OPENAI_API_KEY)
            .ok_or_else(|| HarnessConfigError::MissingSecret(OPENAI_API_KEY.into()))?;
        OpenAiHarness::new(config, key)
    }

    /// Builds the harness from settings and a key.
    pub fn new(config: OpenAiConfig, key: Secret) -> Result<OpenAiHarness, HarnessConfigError> {
        Ok(OpenAiHarness {
            url: format!("{}/responses", config.api_base),
            config,
            key,
            client: http_client()?,
        })
    }
}

impl Harness for OpenAiHarness {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> Option<String> {
        Some(self.config.model.clone())
    }

    fn with_model(&self, model: &str) -> Option<std::sync::Arc<dyn Harness>> {
        let mut config = self.config.clone();
        config.model = model.to_string();
        // `contextWindow` describes the configured model, not this one
        config.context_window = None;
        Some(std::sync::Arc::new(OpenAiHarness {
            config,
            key: self.key.clone(),
            url: self.url.clone(),
            client: self.client.clone(),
        }))
    }

    fn context_window(&self) -> Option<u64> {
        self.config
            .context_window
            .or_else(|| super::known_context_window("openai", &self.config.model))
    }

    fn small_model(&self) -> Option<String> {
        Some("gpt-5-mini".into())
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        Box::pin(async move {
            let body = responses_request_body(&request, &self.config);
            let headers = [Header {
                name: "authorization",
                value: format!("Bearer {}", self.key.expose()),
                secret: true,
            }];
            let resp = post_json(&self.client, &self.url, &headers, &body, &cancel).await?;
            if self.config.stream {
                Ok(sse_stream(resp, ResponsesDecoder::default(), cancel))
            } else {
                let response = read_json(resp, &cancel).await?;
                Ok(vec_stream(
                    ResponsesDecoder::default().decode_response(&response),
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests;
