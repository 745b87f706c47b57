//! The local model's prompt: the conversation as chat-template messages, with the tools, earlier calls and their
//! results written in the model's own tool-call format ([`ToolFormat`]), and the grammar its response is decoded
//! under. Pure: no model here, so the mapping is tested without one.

use std::collections::BTreeMap;

use loom_local::{GrammarError, Respond, ToolDoc, ToolFormat, ToolShape, Trigger};

use crate::model::{ContentBlock, ModelRequest, Role};

/// Said on the last request of a turn, when only an answer can follow.
const FINAL_NOTE: &str = "(No more tool calls are possible in this turn: answer now, in plain text, with what you know.)";

/// The chat messages (role, content) for `request` in `format`; `final_only` adds the note that only an answer can
/// follow.
pub(crate) fn chat_messages(
    request: &ModelRequest,
    final_only: bool,
    format: ToolFormat,
) -> Vec<(String, String)> {
    let mut system = request.system.join("\n\n");
    if !request.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        let docs: Vec<ToolDoc<'_>> = request
            .tools
            .iter()
            .map(|t| ToolDoc {
                name: &t.name,
                description: &t.description,
                schema: &t.input_schema,
            })
            .collect();
        system.push_str(&format.tools_section(&docs));
    }
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(("system".to_string(), system));
    }
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    // a message of one role after another of the same role reads as one (a result after a result)
    let push = |out: &mut Vec<(String, String)>, role: &str, text: String| match out.last_mut() {
        Some((r, c)) if r == role => {
            c.push_str("\n\n");
            c.push_str(&text);
        }
        _ => out.push((role.to_string(), text)),
    };
    for m in &request.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let mut parts: Vec<String> = Vec::new();
        for b in &m.content {
            match b {
                ContentBlock::Text { text } => parts.push(text.clone()),
                ContentBlock::ToolUse { id, name, input } => {
                    names.insert(id, name);
                    parts.push(format.call_text(name, input));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    // a result is a message of its own role in some formats (Llama's `ipython`)
                    if !parts.is_empty() {
                        push(&mut out, role, parts.join("\n\n"));
                        parts.clear();
                    }
                    let tool = names.get(tool_use_id.as_str()).copied().unwrap_or("tool");
                    let (r, text) = format.result_message(tool, content, *is_error);
                    push(&mut out, r, text);
                }
                // reasoning and other providers' items mean nothing to this model
                ContentBlock::Thinking { .. }
                | ContentBlock::RedactedThinking { .. }
                | ContentBlock::ProviderItem { .. } => {}
            }
        }
        if !parts.is_empty() {
            push(&mut out, role, parts.join("\n\n"));
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

/// The grammar for `request` and, for a lazy one, its trigger ([`ToolFormat::grammar`]).
pub(crate) fn grammar_for(
    request: &ModelRequest,
    respond: Respond,
    format: ToolFormat,
) -> Result<(String, Option<Trigger>), GrammarError> {
    let shapes: Vec<ToolShape<'_>> = request
        .tools
        .iter()
        .map(|t| ToolShape {
            name: &t.name,
            schema: &t.input_schema,
        })
        .collect();
    format.grammar(&shapes, respond)
}
