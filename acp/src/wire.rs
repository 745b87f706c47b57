//! The pure translations the ACP server needs on top of JSON-RPC (`loom-jsonrpc`): a session update -> a
//! `session/update` notification, the `initialize` answer, the config options, a prompt's content blocks -> the
//! turn's text, and a turn's stop -> ACP `stopReason`. No I/O here.

use loom_jsonrpc::{notification, RpcError};
use serde_json::{json, Map, Value};

use loom_protocol::update::{SessionUpdate, ToolCall, TurnStop};

/// The ACP protocol version this server speaks.
pub const ACP_PROTOCOL_VERSION: u64 = 1;

/// A `session/update` notification, or `None` for what is not on the ACP wire: lifecycle frames, the user's own
/// prompt echoed back (the client sent it), and a `usage_update` without the context window's `size` (ACP requires
/// it, and loom does not invent one when the harness does not know its window).
pub fn session_update(session_id: &str, update: &SessionUpdate) -> Option<Value> {
    // a notice (an automatic compaction that failed) reaches the client as a thought, which clients show aside
    if let Some(text) = update.notice_text() {
        let thought = json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": format!("loom: {text}")}});
        return Some(update_notification(session_id, thought));
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
    Some(update_notification(session_id, update))
}

fn update_notification(session_id: &str, update: Value) -> Value {
    notification(
        "session/update",
        json!({"sessionId": session_id, "update": update}),
    )
}

/// A stored history event replayed by `session/load`: as [`session_update`], and the user's own messages too (the
/// client has not seen them in this connection), without the terminals of earlier calls (released, and created by
/// another connection: the text result stands for them).
pub fn replay_update(session_id: &str, update: &SessionUpdate) -> Option<Value> {
    match update {
        SessionUpdate::UserMessageChunk(_) => {
            let update = serde_json::to_value(update).ok()?;
            Some(update_notification(session_id, update))
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

/// The option id of "allow once".
pub const ALLOW_ONCE: &str = "allow_once";
/// The option id of "reject once".
pub const REJECT_ONCE: &str = "reject_once";
/// The option id of "allow always".
pub const ALLOW_ALWAYS: &str = "allow_always";

/// The `session/request_permission` params for `call`, asked because of `reason`: "allow once" and "reject once"
/// are always offered, "allow always" only when the answer can be remembered (an ask rule asked — the doom-loop
/// guard's asks are about this run).
pub fn permission_request(session_id: &str, call: &ToolCall, reason: &str, always: bool) -> Value {
    let mut tool_call = serde_json::to_value(call).unwrap_or(Value::Null);
    if let Some(obj) = tool_call.as_object_mut() {
        obj.insert(
            "content".into(),
            json!([{"type": "content", "content": {"type": "text", "text": reason}}]),
        );
    }
    let mut options =
        vec![json!({"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"})];
    if always {
        options.push(
            json!({"optionId": ALLOW_ALWAYS, "name": "Always allow this call", "kind": "allow_always"}),
        );
    }
    options.push(json!({"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}));
    json!({
        "sessionId": session_id,
        "toolCall": tool_call,
        "options": options,
    })
}

/// The id of the default session mode.
pub const MODE_DEFAULT: &str = "default";
/// The id of plan mode.
pub const MODE_PLAN: &str = "plan";

/// The session modes loom offers (ACP `SessionModeState`), with plan mode current or not.
pub fn modes(plan: bool) -> Value {
    json!({
        "currentModeId": if plan { MODE_PLAN } else { MODE_DEFAULT },
        "availableModes": [
            {"id": MODE_DEFAULT, "name": "Default", "description": "every granted tool, decided by the grant and the rules"},
            {"id": MODE_PLAN, "name": "Plan", "description": "tools that change anything are neither offered nor run"},
        ],
    })
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
