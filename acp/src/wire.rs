//! The JSON-RPC 2.0 framing of ACP and the pure translations the server needs: classifying an incoming line,
//! building replies and notifications, the `initialize` answer, a prompt's content blocks -> the turn's text, and a
//! turn's stop -> ACP `stopReason`. No I/O here.

use serde_json::{json, Map, Value};

use loom_protocol::update::{SessionUpdate, TurnStop};

/// The ACP protocol version this server speaks.
pub const ACP_PROTOCOL_VERSION: u64 = 1;

/// JSON-RPC: the line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: JSON, but not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the params are wrong (a missing field, an unknown session).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the agent failed (boot, the provider, the session store).
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error: code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// `-32602`.
    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// One incoming line, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered.
    Request {
        /// Its id (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A response to one of our requests.
    Response {
        /// The id we sent.
        id: Value,
        /// The result, or the error object.
        outcome: Result<Value, Value>,
    },
    /// Not a valid message: answer with this error (and this id, when one could be read).
    Invalid {
        /// The id, or `null`.
        id: Value,
        /// The error.
        error: RpcError,
    },
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Classifies one line of input.
pub fn classify(line: &str) -> Incoming {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(
                    PARSE_ERROR,
                    format!("parse error: the line is not JSON ({e})"),
                ),
            }
        }
    };
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                "invalid request: a message is one JSON object per line (batches are not supported)",
            ),
        };
    };
    let id = obj.remove("id");
    let invalid = |id: Option<Value>, message: &str| Incoming::Invalid {
        id: id.filter(valid_id).unwrap_or(Value::Null),
        error: RpcError::new(INVALID_REQUEST, format!("invalid request: {message}")),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "\"jsonrpc\" must be \"2.0\"");
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => {
            Incoming::Request { id, method, params }
        }
        (Some(Value::String(_)), Some(id)) => {
            invalid(Some(id), "\"id\" must be a string or an integer")
        }
        (Some(_), id) => invalid(id, "\"method\" must be a string"),
        (None, Some(id)) if valid_id(&id) => match (obj.remove("result"), obj.remove("error")) {
            (Some(result), None) => Incoming::Response {
                id,
                outcome: Ok(result),
            },
            (None, Some(error)) => Incoming::Response {
                id,
                outcome: Err(error),
            },
            _ => invalid(
                Some(id),
                "a response carries exactly one of \"result\" and \"error\"",
            ),
        },
        (None, id) => invalid(id, "no \"method\", and not a response to a request of ours"),
    }
}

/// A successful reply.
pub fn reply(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error reply.
pub fn reply_error(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}})
}

/// A request of ours to the client.
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `session/update` notification, or `None` for what is not on the ACP wire: lifecycle frames, the user's own
/// prompt echoed back (the client sent it), and a `usage_update` without the context window's `size` (ACP requires
/// it, and loom does not invent one when the harness does not know its window).
pub fn session_update(session_id: &str, update: &SessionUpdate) -> Option<Value> {
    // a notice (an automatic compaction that failed) reaches the client as a thought, which clients show aside
    if let Some(text) = update.notice_text() {
        return Some(json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session_id, "update": {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": format!("loom: {text}")}}}}));
    }
    if matches!(
        update,
        SessionUpdate::Frame(_) | SessionUpdate::UserMessageChunk(_)
    ) {
        return None;
    }
    let update = serde_json::to_value(update).ok()?;
    if update["sessionUpdate"] == "usage_update" && update["size"].is_null() {
        return None;
    }
    Some(json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": session_id, "update": update}}))
}

/// A stored history event replayed by `session/load`: as [`session_update`], and the user's own messages too (the
/// client has not seen them in this connection), without the terminals of earlier calls (released, and created by
/// another connection: the text result stands for them).
pub fn replay_update(session_id: &str, update: &SessionUpdate) -> Option<Value> {
    match update {
        SessionUpdate::UserMessageChunk(_) => {
            let update = serde_json::to_value(update).ok()?;
            Some(json!({"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": session_id, "update": update}}))
        }
        SessionUpdate::ToolCallUpdate(u) => {
            let mut u = u.clone();
            if let Some(c) = u.content.as_mut() {
                c.retain(|c| !matches!(c, loom_protocol::update::ToolCallContent::Terminal { .. }));
            }
            session_update(session_id, &SessionUpdate::ToolCallUpdate(u))
        }
        other => session_update(session_id, other),
    }
}

/// What the agent can take in a prompt, by harness provider. Every harness gets text and embedded context (loom
/// flattens embedded resources into the turn's text); none takes images or audio yet, because loom's model messages
/// carry no image or audio blocks.
pub fn prompt_capabilities(_provider: &str) -> Value {
    json!({"image": false, "audio": false, "embeddedContext": true})
}

/// The `initialize` result.
pub fn initialize_result(provider: &str, load_session: bool) -> Value {
    json!({
        "protocolVersion": ACP_PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": load_session,
            "promptCapabilities": prompt_capabilities(provider),
            "mcpCapabilities": {"http": false, "sse": false},
        },
        "authMethods": [],
        "agentInfo": {"name": "loom", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The id of the model config option.
pub const MODEL_CONFIG: &str = "model";

/// The session config options (ACP `configOptions`): the model, when the harness names it, as a select whose only
/// value is the model the manifest configures — loom offers no model the manifest does not name.
pub fn config_options(model: Option<&str>) -> Value {
    match model {
        Some(m) => json!([{
            "id": MODEL_CONFIG,
            "name": "Model",
            "description": "the model of the manifest's [harness]; change it there",
            "category": "model",
            "type": "select",
            "currentValue": m,
            "options": [{"value": m, "name": m}],
        }]),
        None => json!([]),
    }
}

/// Checks `session/set_config_option` against the options offered: the model option may be set only to the model
/// in use (the manifest's). The error names what is offered and where to change it.
pub fn check_config_value(
    params: &Value,
    model: Option<&str>,
    manifest: &str,
) -> Result<(), RpcError> {
    let id = str_param(params, "configId")?;
    if params["type"] == "boolean" {
        return Err(RpcError::params(format!(
            "session/set_config_option: {id:?} is a select option; send {{\"configId\", \"value\"}} with one of its \
             values"
        )));
    }
    let value = params
        .get("value")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params("invalid params: \"value\" must be a string"))?;
    match (id, model) {
        (MODEL_CONFIG, Some(m)) if value == m => Ok(()),
        (MODEL_CONFIG, Some(m)) => Err(RpcError::params(format!(
            "session/set_config_option: model {value:?} is not offered: {manifest} configures {m:?} ([harness] model), \
             the only model this session may use; change [harness] model in the manifest to use another"
        ))),
        _ => Err(RpcError::params(format!(
            "session/set_config_option: unknown configId {id:?} (the session's options: {})",
            if model.is_some() { "\"model\"" } else { "none" }
        ))),
    }
}

/// A field of `params` as a string, or a `-32602` naming it.
pub fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params(format!("invalid params: \"{key}\" must be a string")))
}

/// A prompt's content blocks as the turn's text. Text blocks are joined as they come; an embedded text resource
/// becomes its text under a `[resource <uri>]` line; a resource link becomes one `[resource link <name> <uri>]`
/// line. Images, audio and binary resources are refused (not advertised).
pub fn prompt_text(params: &Value) -> Result<String, RpcError> {
    let Some(blocks) = params.get("prompt").and_then(Value::as_array) else {
        return Err(RpcError::params(
            "invalid params: \"prompt\" must be an array of content blocks",
        ));
    };
    let mut parts: Vec<String> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let empty = Map::new();
        let obj = b.as_object().unwrap_or(&empty);
        let s = |k: &str| obj.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => match s("text") {
                Some(t) => parts.push(t.to_string()),
                None => {
                    return Err(RpcError::params(format!(
                        "invalid params: prompt[{i}]: a text block needs \"text\""
                    )))
                }
            },
            Some("resource") => {
                let r = obj.get("resource");
                let uri = r
                    .and_then(|r| r.get("uri"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match r.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    Some(t) => parts.push(format!("[resource {uri}]\n{t}")),
                    None => {
                        return Err(RpcError::params(format!(
                            "invalid params: prompt[{i}]: embedded resource {uri:?} is not text; loom takes text \
                             resources only"
                        )))
                    }
                }
            }
            Some("resource_link") => {
                let uri = s("uri").unwrap_or("");
                let name = s("name").unwrap_or("");
                parts.push(format!("[resource link {name} {uri}]"));
            }
            Some(kind @ ("image" | "audio")) => {
                return Err(RpcError::params(format!(
                    "invalid params: prompt[{i}]: this agent does not take {kind} content \
                     (promptCapabilities.{kind} is false)"
                )))
            }
            other => {
                return Err(RpcError::params(format!(
                    "invalid params: prompt[{i}]: unknown content block type {:?}",
                    other.unwrap_or("(none)")
                )))
            }
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err(RpcError::params("invalid params: the prompt is empty"));
    }
    Ok(text)
}

/// A turn's stop as ACP's `stopReason`; `None` for a failed turn (answered with an error instead, since ACP has no
/// stop reason for failure).
pub fn stop_reason(stop: TurnStop) -> Option<&'static str> {
    match stop {
        TurnStop::EndTurn => Some("end_turn"),
        TurnStop::MaxTokens => Some("max_tokens"),
        TurnStop::MaxTurnRequests => Some("max_turn_requests"),
        TurnStop::Refusal => Some("refusal"),
        TurnStop::Cancelled => Some("cancelled"),
        TurnStop::Error => None,
    }
}
