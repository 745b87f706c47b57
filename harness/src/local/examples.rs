//! `[harness] examples`: worked turns a local model is shown before the conversation, each a task, the calls that
//! did it with their results, and the answer — written into the prompt as earlier turns in the model's own
//! tool-call format, so a small model sees what a finished task looks like in the very form it must produce
//! (benches/README.md: "Local models on real tasks").
//!
//! They are text the manifest holds, like the system prompt: nothing in them runs, and a call in them grants
//! nothing (the kernel decides every call the model makes). An example that calls a tool the request does not
//! offer (a tool left out in plan mode) is left out of that request, so no example shows the model a tool it
//! cannot call.

use serde_json::Value;

use crate::model::{ContentBlock, Message, ModelRequest};
use crate::HarnessConfigError;

/// One worked turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Example {
    /// What the user asked.
    pub task: String,
    /// The calls that did it, in order.
    pub calls: Vec<ExampleCall>,
    /// The final answer.
    pub answer: String,
}

/// One call of an [`Example`] and what it gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExampleCall {
    /// The tool called (one of the manifest's `[tools]`; the kernel checks the name).
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// What the tool gave back.
    pub result: String,
    /// True when the call failed (the example shows a recovery).
    pub error: bool,
}

fn invalid(key: &str, what: &str) -> HarnessConfigError {
    HarnessConfigError::Invalid(format!(
        "{key} {what} (an example is {{ task = \"…\", calls = [{{ tool = \"read_file\", input = {{ path = \"a.txt\" }}, \
         result = \"…\" }}], answer = \"…\" }})"
    ))
}

/// Key `key` of the table at `at`, as `pick` takes it; missing, or not what `pick` takes ("must be …"), it is named.
fn want<'a, T>(
    t: &'a toml::Table,
    at: &str,
    key: &str,
    pick: impl FnOnce(&'a toml::Value) -> Option<T>,
    must: &str,
) -> Result<T, HarnessConfigError> {
    let named = format!("{at}.{key}");
    match t.get(key) {
        Some(v) => pick(v).ok_or_else(|| invalid(&named, must)),
        None => Err(invalid(&named, "is missing")),
    }
}

fn text<'a>(t: &'a toml::Table, at: &str, key: &str) -> Result<&'a str, HarnessConfigError> {
    let words = |v: &'a toml::Value| v.as_str().filter(|s| !s.trim().is_empty());
    want(t, at, key, words, "must be a non-empty string")
}

/// `v`, the table at `at`, which may hold only `keys`.
fn table_of<'a>(
    v: &'a toml::Value,
    at: &str,
    keys: &[&str],
) -> Result<&'a toml::Table, HarnessConfigError> {
    let t = v.as_table().ok_or_else(|| invalid(at, "must be a table"))?;
    match t.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(invalid(
            &format!("{at}.{k}"),
            &format!("is not a key here (the keys: {})", keys.join(", ")),
        )),
        None => Ok(t),
    }
}

/// The examples of `[harness] examples` (none when absent). Errors count positions from 1, as the kernel's do.
pub(crate) fn parse_examples<'a>(
    config: &'a toml::Table,
) -> Result<Vec<Example>, HarnessConfigError> {
    let Some(v) = config.get("examples") else {
        return Ok(Vec::new());
    };
    let list = v
        .as_array()
        .ok_or_else(|| invalid("examples", "must be an array of tables"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let at = format!("examples[{}]", i + 1);
        let t = table_of(e, &at, &["task", "calls", "answer"])?;
        let calls_at = format!("{at}.calls");
        let some = |v: &'a toml::Value| v.as_array().filter(|a| !a.is_empty());
        let calls = want(t, &at, "calls", some, "must be a non-empty array of tables")?;
        let mut parsed = Vec::with_capacity(calls.len());
        for (j, c) in calls.iter().enumerate() {
            let cat = format!("{calls_at}[{}]", j + 1);
            let c = table_of(c, &cat, &["tool", "input", "result", "error"])?;
            let input = want(c, &cat, "input", toml::Value::as_table, "must be a table")?;
            let input = serde_json::to_value(input)
                .map_err(|e| invalid(&format!("{cat}.input"), &format!("cannot be JSON: {e}")))?;
            let error = match c.get("error") {
                None => false,
                Some(toml::Value::Boolean(b)) => *b,
                Some(_) => return Err(invalid(&format!("{cat}.error"), "must be true or false")),
            };
            parsed.push(ExampleCall {
                tool: text(c, &cat, "tool")?.to_string(),
                input,
                // a result may be empty: a command that printed nothing
                result: want(c, &cat, "result", toml::Value::as_str, "must be a string")?
                    .to_string(),
                error,
            });
        }
        out.push(Example {
            task: text(t, &at, "task")?.to_string(),
            calls: parsed,
            answer: text(t, &at, "answer")?.to_string(),
        });
    }
    Ok(out)
}

/// The examples `request` can show, as earlier turns: the task, each call and its result, the answer. An example
/// calling a tool the request does not offer is left out. A call's input is written with its keys in the order of
/// the tool's schema, the order the grammar has the model write its own calls in (a manifest's tables come without
/// their order: a model shown `{"content": …, "path": …}` in the examples, and made to write `{"path": …, "content":
/// …}`, sees two ways where there is one; measured: benches/README.md).
pub(crate) fn example_messages(examples: &[Example], request: &ModelRequest) -> Vec<Message> {
    let schema = |name: &str| {
        request
            .tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| &t.input_schema)
    };
    let mut out = Vec::new();
    for (i, e) in examples
        .iter()
        .enumerate()
        .filter(|(_, e)| e.calls.iter().all(|c| schema(&c.tool).is_some()))
    {
        out.push(Message::user_text(e.task.clone()));
        for (j, c) in e.calls.iter().enumerate() {
            let id = format!("call_example_{i}_{j}");
            out.push(Message {
                role: crate::model::Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: id.clone(),
                    name: c.tool.clone(),
                    input: match schema(&c.tool) {
                        Some(s) => in_schema_order(&c.input, s),
                        None => c.input.clone(),
                    },
                }],
            });
            out.push(Message {
                role: crate::model::Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id,
                    content: c.result.clone(),
                    is_error: c.error,
                }],
            });
        }
        out.push(Message {
            role: crate::model::Role::Assistant,
            content: vec![ContentBlock::Text {
                text: e.answer.clone(),
            }],
        });
    }
    out
}

/// `value` with the keys of each object in the order of `schema`'s `properties` (then any others, as they were),
/// through nested objects and arrays.
fn in_schema_order(value: &Value, schema: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = serde_json::Map::new();
            if let Some(props) = props {
                for (key, sub) in props {
                    if let Some(v) = map.get(key) {
                        out.insert(key.clone(), in_schema_order(v, sub));
                    }
                }
            }
            for (key, v) in map {
                if !out.contains_key(key) {
                    out.insert(key.clone(), v.clone());
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let item = schema.get("items").unwrap_or(&Value::Null);
            Value::Array(items.iter().map(|v| in_schema_order(v, item)).collect())
        }
        other => other.clone(),
    }
}
