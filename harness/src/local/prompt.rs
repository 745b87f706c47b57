//! The local model's prompt: the conversation as chat-template messages, with the tools, earlier calls and their
//! results written in the model's own tool-call format ([`ToolFormat`]), and the grammar its response is decoded
//! under. Pure: no model here, so the mapping is tested without one.

use std::collections::BTreeMap;

use loom_local::{GrammarError, Respond, ToolDoc, ToolFormat, ToolShape, Trigger};
use serde_json::{json, Value};

use crate::model::{ContentBlock, Message, ModelRequest, Role};

/// What the model is told the answer step does (`tool_choice = "required"`, where every response is a call).
const ANSWER_DESCRIPTION: &str =
    "Give the user your final answer and end your turn. Call it only after the other \
tools have done the task, with what you found or did in `text`.";

/// The step a turn ends with when every response must be a call (`tool_choice = "required"`): described to the
/// model as a tool named `name`, but never run — the harness turns a call to it into the turn's answer. It is model
/// protocol, not a tool: it reaches neither the kernel nor the session's tool list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnswerStep {
    /// The name the model calls it by: `answer`, unless a granted tool has that name.
    pub name: String,
    schema: Value,
}

impl AnswerStep {
    /// The answer step for `request`: named `answer`, else `final_answer`, else `answer_`, `answer__` … — the
    /// first name none of the request's tools has.
    pub(crate) fn for_request(request: &ModelRequest) -> AnswerStep {
        let taken = |n: &str| request.tools.iter().any(|t| t.name == n);
        let mut name = if taken("answer") {
            "final_answer".to_string()
        } else {
            "answer".to_string()
        };
        if taken(&name) {
            name = "answer_".into();
            while taken(&name) {
                name.push('_');
            }
        }
        AnswerStep {
            name,
            schema: json!({"type": "object", "properties": {"text": {"type": "string",
                "description": "The answer: what you found, or what you did and its result."}},
                "required": ["text"]}),
        }
    }

    /// The answer a call to this step gives, when `tool` names it.
    pub(crate) fn answer_of(&self, tool: &str, input: &Value) -> Option<String> {
        (tool == self.name).then(|| {
            input
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
    }
}

/// Said on the last request of a turn, when only an answer can follow.
const FINAL_NOTE: &str = "(No more tool calls are possible in this turn: answer now, in plain text, with what you know.)";

/// The chat messages (role, content) for `request` in `format`; `final_only` adds the note that only an answer can
/// follow (after the turn's task, when a result came last). With an `answer` step (`tool_choice = "required"`), it
/// is described after the tools on every request (so the prompt, and the engine's cache of it, stays the same
/// through a turn), and an earlier answer is written back as the call to it that gave it. `examples`
/// ([`super::examples::example_messages`]) come before the conversation, written as it is (without the recall:
/// measured, it did worse; benches/README.md).
pub(crate) fn chat_messages(
    request: &ModelRequest,
    final_only: bool,
    format: ToolFormat,
    answer: Option<&AnswerStep>,
    examples: &[Message],
) -> Vec<(String, String)> {
    let mut system = request.system.join("\n\n");
    if !request.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        let mut docs: Vec<ToolDoc<'_>> = request
            .tools
            .iter()
            .map(|t| ToolDoc {
                name: &t.name,
                description: &t.description,
                schema: &t.input_schema,
            })
            .collect();
        if let Some(a) = answer {
            docs.push(ToolDoc {
                name: &a.name,
                description: ANSWER_DESCRIPTION,
                schema: &a.schema,
            });
        }
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
    for m in examples.iter().chain(&request.messages) {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let mut parts: Vec<String> = Vec::new();
        // an answer (an assistant message of text alone) was a call to the answer step
        let answered = match answer {
            Some(a) if m.role == Role::Assistant && !request.tools.is_empty() => {
                let text = m.text();
                let only_text = m.content.iter().all(|b| {
                    !matches!(
                        b,
                        ContentBlock::ToolUse { .. } | ContentBlock::ToolResult { .. }
                    )
                });
                (only_text && !text.is_empty())
                    .then(|| format.call_text(&a.name, &json!({ "text": text })))
            }
            _ => None,
        };
        if let Some(call) = answered {
            push(&mut out, "assistant", call);
            continue;
        }
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
    let note = if request.tools.is_empty() {
        None
    } else if final_only {
        // the task too: a model told only to answer now may answer an example's task instead (seen in the
        // benchmark's transcripts)
        Some(match turn_task(request).as_deref().and_then(repeatable) {
            Some(task) => format!("(The task: {task})\n{FINAL_NOTE}"),
            None => FINAL_NOTE.to_string(),
        })
    } else {
        answer.and_then(|a| turn_task(request).map(|task| recall(&task, a)))
    };
    if let Some(note) = note {
        append_note(&mut out, note);
    }
    out
}

/// `note` at the end of the prompt: in the last user message, or as one.
fn append_note(out: &mut Vec<(String, String)>, note: String) {
    match out.last_mut() {
        Some((r, c)) if r == "user" => {
            c.push_str("\n\n");
            c.push_str(&note);
        }
        _ => out.push(("user".into(), note)),
    }
}

/// The longest task [`recall`] and the last request's note repeat word for word; a longer one is referred to.
const REPEATABLE_TASK_CHARS: usize = 400;

/// `task`, trimmed, when it is short enough to repeat word for word.
fn repeatable(task: &str) -> Option<&str> {
    let task = task.trim();
    (task.chars().count() <= REPEATABLE_TASK_CHARS).then_some(task)
}

/// Whether `m` holds tool results (a user message that answers calls, not a task).
fn holds_results(m: &Message) -> bool {
    m.role == Role::User
        && m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
}

/// After a result (the last message of `request` holds results): the turn's task, the last user message that is
/// not results. `None` on a turn's first request.
fn turn_task(request: &ModelRequest) -> Option<String> {
    if !holds_results(request.messages.last()?) {
        return None;
    }
    let task = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User && !holds_results(m))?;
    Some(task.text().trim().to_string())
}

/// With the answer step, after a result: the task again, and what to do next — a small model otherwise takes the
/// first result for the end of the task (it answers with a file it was asked to transform) or does something else.
/// Only on the request's last message, so the prompt changes just there from one request to the next (the engine's
/// cache keeps the rest); not in the examples.
fn recall(task: &str, answer: &AnswerStep) -> String {
    let next = format!(
        "If a step of it is not done yet, make the call that does it; when every step is done, call {} with \
         the result.",
        answer.name
    );
    match repeatable(task) {
        Some(task) => format!("(The task: {task}\n{next})"),
        None => format!("(Go on with the task above. {next})"),
    }
}

/// The grammar for `request` and, for a lazy one, its trigger ([`ToolFormat::grammar`]); `answer`, the answer step a
/// call may also name (not on the first request of a turn, which must look before it answers).
pub(crate) fn grammar_for(
    request: &ModelRequest,
    respond: Respond,
    format: ToolFormat,
    answer: Option<&AnswerStep>,
) -> Result<(String, Option<Trigger>), GrammarError> {
    let mut shapes: Vec<ToolShape<'_>> = request
        .tools
        .iter()
        .map(|t| ToolShape {
            name: &t.name,
            schema: &t.input_schema,
        })
        .collect();
    if let Some(a) = answer {
        shapes.push(ToolShape {
            name: &a.name,
            schema: &a.schema,
        });
    }
    format.grammar(&shapes, respond)
}

/// The call just made: the previous response's one call when its result is the last message of `request` — so a
/// response that makes it again, unchanged, with nothing done in between, can be drawn again. Its result would be
/// the same (a failure fails again; a file read or a program run again shows what it just showed); a small model
/// that repeats itself otherwise goes on repeating until the turn's last request. (The same call after something
/// else happened, such as a test run again after an edit, is not this.)
pub(crate) fn previous_call(request: &ModelRequest) -> Option<(String, Value)> {
    let [.., asked, answered] = request.messages.as_slice() else {
        return None;
    };
    if asked.role != Role::Assistant || answered.role != Role::User {
        return None;
    }
    let mut calls = asked.content.iter().filter_map(|b| match b {
        ContentBlock::ToolUse { id, name, input } => Some((id, name, input)),
        _ => None,
    });
    let (id, name, input) = calls.next()?;
    if calls.next().is_some() {
        return None;
    }
    let answered = answered
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == id));
    answered.then(|| (name.clone(), input.clone()))
}
