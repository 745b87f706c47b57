//! The local model's prompt: the conversation as chat-template messages, and the tool protocol the grammar enforces.
//! Pure: no model here, so the mapping is tested without one.

use std::collections::BTreeMap;

use loom_local::{call_text, response_grammar, spaced_json, GrammarError, ToolShape};

use crate::model::{ContentBlock, ModelRequest, Role};

/// What the model is told about calling tools (the grammar makes it true whatever the model makes of it).
const TOOL_PROTOCOL: &str =
    "You can use tools. To call one, reply with only a JSON object of the form \
{\"tool\": \"<tool name>\", \"input\": {<arguments>}} and nothing else, for example \
{\"tool\": \"bash\", \"input\": {\"command\": \"ls\"}}; the result comes back in the next message. \
When you have the answer, reply in plain text instead. The tools:";

/// Said on the last request of a turn, when only an answer can follow.
const FINAL_NOTE: &str = "(No more tool calls are possible in this turn: answer now, in plain text, with what you know.)";

/// The chat messages (role, content) for `request`; `final_only` adds the note that only an answer can follow.
pub(crate) fn chat_messages(request: &ModelRequest, final_only: bool) -> Vec<(String, String)> {
    let mut system = request.system.join("\n\n");
    if !request.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(TOOL_PROTOCOL);
        for t in &request.tools {
            system.push_str(&format!(
                "\n- {}: {}\n  input schema: {}",
                t.name,
                t.description.lines().next().unwrap_or_default(),
                spaced_json(&t.input_schema)
            ));
        }
    }
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(("system".to_string(), system));
    }
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for m in &request.messages {
        let mut parts: Vec<String> = Vec::new();
        for b in &m.content {
            match b {
                ContentBlock::Text { text } => parts.push(text.clone()),
                ContentBlock::ToolUse { id, name, input } => {
                    names.insert(id, name);
                    parts.push(call_text(name, input));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let tool = names.get(tool_use_id.as_str()).copied().unwrap_or("tool");
                    let what = if *is_error { "error" } else { "result" };
                    parts.push(format!("[{tool} {what}]\n{content}"));
                }
                // reasoning and other providers' items mean nothing to this model
                ContentBlock::Thinking { .. }
                | ContentBlock::RedactedThinking { .. }
                | ContentBlock::ProviderItem { .. } => {}
            }
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let text = parts.join("\n\n");
        match out.last_mut() {
            // two messages of one role in a row (a result after a result) read as one
            Some((r, c)) if r == role => {
                c.push_str("\n\n");
                c.push_str(&text);
            }
            _ => out.push((role.to_string(), text)),
        }
    }
    if final_only && !request.tools.is_empty() {
        match out.last_mut() {
            Some((r, c)) if r == "user" => {
                c.push_str("\n\n");
                c.push_str(FINAL_NOTE);
            }
            _ => out.push(("user".into(), FINAL_NOTE.into())),
        }
    }
    out
}

/// The grammar for `request`: calls of its tools or an answer, or an answer alone when `final_only`.
pub(crate) fn grammar_for(
    request: &ModelRequest,
    final_only: bool,
) -> Result<String, GrammarError> {
    let shapes: Vec<ToolShape<'_>> = request
        .tools
        .iter()
        .map(|t| ToolShape {
            name: &t.name,
            schema: &t.input_schema,
        })
        .collect();
    response_grammar(&shapes, final_only)
}
