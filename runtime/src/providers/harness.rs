//! A harness a provider contributes (runtime/PROVIDERS.md, "Harnesses"): `[harness] provider = "<handle>"` where the
//! handle is a `[providers]` source whose `initialize` lists a harness. Each model request is one `harness/request`;
//! the final result (the whole assistant message) becomes the event stream the turn loop consumes. The process is
//! the one the handle's tools and session layers use.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value as Json};
use tokio_util::sync::CancellationToken;

use crate::mcp::McpServer;
use crate::model::{ContentBlock, Message, ModelEvent, ModelRequest, StopReason, Usage};
use loom_harness::HarnessConfigError;
use loom_protocol::{EventStream, Harness, HarnessError};

/// A provider's harness.
pub struct ProviderHarness {
    server: Arc<McpServer>,
    harness: String,
}

impl ProviderHarness {
    /// The harness `harness` (the `[harness]` table's `harness` key; else the provider's first) of the started
    /// provider `server`.
    pub fn new(
        server: Arc<McpServer>,
        harness: Option<&str>,
    ) -> Result<ProviderHarness, HarnessConfigError> {
        let chosen = super::pick_contribution(&server, "harnesses", harness, "harness")
            .map_err(|e| HarnessConfigError::Invalid(format!("[harness]: {e}")))?;
        Ok(ProviderHarness {
            server,
            harness: chosen,
        })
    }
}

impl Harness for ProviderHarness {
    fn name(&self) -> &str {
        &self.server.handle
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        let server = self.server.clone();
        let params = json!({
            "harness": self.harness,
            "request": {
                "system": request.system,
                "messages": request.messages,
                "tools": request.tools,
                "turn": request.turn,
                "requestInTurn": request.request_in_turn,
            }
        });
        Box::pin(async move {
            let stop = cancel.clone();
            let answer = tokio::task::spawn_blocking(move || {
                server.request_until("harness/request", params, &|| stop.is_cancelled())
            })
            .await
            .map_err(|e| HarnessError::Protocol {
                message: format!("the provider's request thread failed: {e}"),
            })?;
            if cancel.is_cancelled() {
                return Err(HarnessError::Cancelled);
            }
            let result = answer.map_err(|e| match e {
                loom_mcp::CallError::Cancelled(_) => HarnessError::Cancelled,
                other => HarnessError::Protocol {
                    message: other.to_string(),
                },
            })?;
            let events =
                events_of(&result).map_err(|message| HarnessError::Protocol { message })?;
            Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))) as EventStream)
        })
    }
}

/// The events of a `harness/request` result `{ message, stopReason, usage? }`.
fn events_of(result: &Json) -> Result<Vec<ModelEvent>, String> {
    let bad = |what: String| {
        format!("the provider's harness/request result {what} (runtime/PROVIDERS.md)")
    };
    let message: Message =
        serde_json::from_value(result.get("message").cloned().unwrap_or(Json::Null))
            .map_err(|e| bad(format!("has no valid `message` ({e})")))?;
    let stop_reason: StopReason = serde_json::from_value(
        result
            .get("stopReason")
            .cloned()
            .unwrap_or(json!("end_turn")),
    )
    .map_err(|e| bad(format!("has an unknown `stopReason` ({e})")))?;
    let mut out = vec![ModelEvent::MessageStart {
        message_id: result
            .get("id")
            .and_then(Json::as_str)
            .unwrap_or("provider")
            .to_string(),
    }];
    for block in message.content {
        match block {
            ContentBlock::Text { text } => out.push(ModelEvent::TextDelta(text)),
            ContentBlock::Thinking { text, signature } => {
                out.push(ModelEvent::ThinkingDelta(text));
                out.extend(signature.map(ModelEvent::ThinkingSignature));
            }
            ContentBlock::RedactedThinking { data } => out.push(ModelEvent::RedactedThinking(data)),
            ContentBlock::ProviderItem { item } => out.push(ModelEvent::ProviderItem(item)),
            ContentBlock::ToolUse { id, name, input } => {
                out.push(ModelEvent::ToolUseStart {
                    id: id.clone(),
                    name,
                });
                out.push(ModelEvent::ToolUseInputDelta {
                    id: id.clone(),
                    partial_json: input.to_string(),
                });
                out.push(ModelEvent::ToolUseEnd { id });
            }
            other => {
                return Err(bad(format!(
                    "holds a block an assistant cannot write: {other:?}"
                )))
            }
        }
    }
    if let Some(u) = result.get("usage") {
        let usage: Usage = serde_json::from_value(u.clone())
            .map_err(|e| bad(format!("has a malformed `usage` ({e})")))?;
        out.push(ModelEvent::Usage(usage));
    }
    out.push(ModelEvent::MessageEnd { stop_reason });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_message_becomes_a_well_formed_stream() {
        let ev = events_of(&json!({
            "message": { "role": "assistant", "content": [
                { "type": "text", "text": "hi" },
                { "type": "tool_use", "id": "c1", "name": "note_add", "input": { "text": "x" } }
            ]},
            "stopReason": "tool_use",
            "usage": { "input_tokens": 3, "output_tokens": 4 }
        }))
        .unwrap();
        assert!(matches!(ev[0], ModelEvent::MessageStart { .. }));
        assert_eq!(ev[1], ModelEvent::TextDelta("hi".into()));
        assert_eq!(
            ev[3],
            ModelEvent::ToolUseInputDelta {
                id: "c1".into(),
                partial_json: r#"{"text":"x"}"#.into()
            }
        );
        assert_eq!(
            ev.last(),
            Some(&ModelEvent::MessageEnd {
                stop_reason: StopReason::ToolUse
            })
        );
        assert!(events_of(&json!({ "stopReason": "end_turn" })).is_err());
        assert!(
            events_of(&json!({ "message": { "role": "assistant", "content": [
                { "type": "tool_result", "tool_use_id": "c", "content": "x", "is_error": false }
            ]}}))
            .is_err()
        );
    }
}
