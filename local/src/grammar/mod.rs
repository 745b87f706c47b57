//! GBNF grammars from tool schemas: every response the local model decodes under one of these is either a call of a
//! granted tool whose input has the shape of that tool's schema, or a final answer in plain text.
//!
//! The call form is one JSON object with fixed spacing, `{"tool": "<name>", "input": {...}}`; the answer form is
//! text whose first character is neither `{` nor white space, so the first character decides which form a response
//! takes. The grammar expresses a schema's structure (types, properties, required keys, enums, arrays, `anyOf`);
//! value constraints it cannot express (`pattern`, `maximum`, `maxItems`, string formats, …) are left to the tool,
//! which checks its input before anything runs. Structure it cannot express (`$ref`, `allOf`, `not`, …) is refused
//! with an error naming the tool and the keyword, never loosened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

pub use loom_engine_protocol::ROOT;

/// Why a tool's schema has no grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {tool:?}: the input schema at {at} {why}; the local model cannot call this tool — remove it from [tools] or use a cloud harness for this agent")]
pub struct GrammarError {
    /// The tool instance.
    pub tool: String,
    /// Where in its schema (a JSON pointer).
    pub at: String,
    /// What is wrong.
    pub why: String,
}

/// A tool the model may call: its instance name and input schema.
#[derive(Debug, Clone, Copy)]
pub struct ToolShape<'a> {
    /// The instance name.
    pub name: &'a str,
    /// The JSON Schema of its input object.
    pub schema: &'a Value,
}

/// Structural keywords with no grammar here: refusing them keeps a call from being decoded against a shape wider or
/// narrower than the schema says.
const UNSUPPORTED: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "prefixItems",
    "dependentSchemas",
    "dependentRequired",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
];

/// Deepest schema nesting accepted.
const MAX_DEPTH: usize = 24;

/// The primitives every grammar carries (JSON values with fixed spacing).
const PRIMITIVES: &str = r#"string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
nonneg-integer ::= "0" | [1-9] [0-9]{0,15}
pos-integer ::= [1-9] [0-9]{0,15}
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ( string ": " value ( ", " string ": " value )* )? "}"
array ::= "[" ( value ( ", " value )* )? "]"
answer ::= [^{ \t\r\n\x00] [^\x00]*
"#;

/// How a call is spelled: the text before the tool's name (a JSON string), between the name and the input object,
/// and after the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSyntax {
    /// Before the name, e.g. `{"tool": `.
    pub open: &'static str,
    /// Between the name and the input, e.g. `, "input": `.
    pub between: &'static str,
    /// After the input, e.g. `}`.
    pub close: &'static str,
}

/// loom's own call form, `{"tool": "<name>", "input": {...}}`.
pub const LOOM_CALL: CallSyntax = CallSyntax {
    open: "{\"tool\": ",
    between: ", \"input\": ",
    close: "}",
};

/// The grammar for one response: a call of one of `tools` (in loom's form) or a final answer; with `final_only`
/// (the last request of a turn, or no tools), the answer form alone.
pub fn response_grammar(tools: &[ToolShape<'_>], final_only: bool) -> Result<String, GrammarError> {
    build(tools, &LOOM_CALL, !final_only, true)
}

/// The grammar of one call of one of `tools` spelled as `syntax`, and nothing else: for a lazy grammar, which
/// applies from where the model opens a call (the `open` text) in free text.
pub fn call_grammar(tools: &[ToolShape<'_>], syntax: &CallSyntax) -> Result<String, GrammarError> {
    build(tools, syntax, true, false)
}

fn build(
    tools: &[ToolShape<'_>],
    syntax: &CallSyntax,
    with_calls: bool,
    with_answer: bool,
) -> Result<String, GrammarError> {
    let mut g = Builder::default();
    let mut calls = Vec::new();
    if with_calls {
        for (i, t) in tools.iter().enumerate() {
            let mut at = Walk {
                tool: t.name,
                pointer: String::new(),
                depth: 0,
            };
            if !matches!(t.schema.get("type"), Some(Value::String(s)) if s == "object") {
                return Err(at.err("is not {\"type\": \"object\"}"));
            }
            let input = g.schema(t.schema, &mut at, &format!("t{i}"))?;
            let rule = format!("call-{i}");
            g.define(
                &rule,
                format!(
                    "{} {} {input}",
                    literal(&json_str(t.name)),
                    literal(syntax.between)
                ),
            );
            calls.push(rule);
        }
    }
    let mut out = String::new();
    if calls.is_empty() {
        // no tools: an answer is all there is (a harness asks for no lazy call grammar then)
        let _ = writeln!(out, "{ROOT} ::= answer");
    } else {
        let alternatives = if with_answer { "call | answer" } else { "call" };
        let _ = writeln!(out, "{ROOT} ::= {alternatives}");
        let _ = writeln!(
            out,
            "call ::= {} ( {} ) {}",
            literal(syntax.open),
            calls.join(" | "),
            literal(syntax.close)
        );
    }
    for (name, body) in &g.rules {
        let _ = writeln!(out, "{name} ::= {body}");
    }
    out.push_str(PRIMITIVES);
    Ok(out)
}

/// Where the walk is, for errors.
struct Walk<'a> {
    tool: &'a str,
    pointer: String,
    depth: usize,
}

impl Walk<'_> {
    fn err(&self, why: impl Into<String>) -> GrammarError {
        GrammarError {
            tool: self.tool.to_string(),
            at: if self.pointer.is_empty() {
                "/".into()
            } else {
                self.pointer.clone()
            },
            why: why.into(),
        }
    }
}

#[derive(Default)]
struct Builder {
    rules: BTreeMap<String, String>,
}

impl Builder {
    fn define(&mut self, name: &str, body: String) {
        self.rules.insert(name.to_string(), body);
    }

    /// The grammar expression for `schema` (a rule reference or a short inline expression); `hint` names new rules.
    fn schema(
        &mut self,
        schema: &Value,
        at: &mut Walk<'_>,
        hint: &str,
    ) -> Result<String, GrammarError> {
        if at.depth > MAX_DEPTH {
            return Err(at.err(format!("nests deeper than {MAX_DEPTH} levels")));
        }
        let obj = match schema {
            Value::Bool(true) => return Ok("value".into()),
            Value::Bool(false) => return Err(at.err("is `false` (no value is allowed)")),
            Value::Object(o) => o,
            _ => return Err(at.err("is not a schema object")),
        };
        if let Some(k) = UNSUPPORTED.iter().find(|k| obj.contains_key(**k)) {
            return Err(at.err(format!("uses {k:?}, which a grammar here cannot express")));
        }
        if let Some(v) = obj.get("const") {
            return Ok(literal(&json_text(v)));
        }
        if let Some(e) = obj.get("enum") {
            let Some(values) = e.as_array().filter(|a| !a.is_empty()) else {
                return Err(at.err("has an `enum` that is not a non-empty array"));
            };
            let alts: Vec<String> = values.iter().map(|v| literal(&json_text(v))).collect();
            return Ok(format!("( {} )", alts.join(" | ")));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = obj.get(key) {
                let Some(list) = list.as_array().filter(|a| !a.is_empty()) else {
                    return Err(at.err(format!("has an `{key}` that is not a non-empty array")));
                };
                let mut alts = Vec::new();
                for (i, s) in list.iter().enumerate() {
                    alts.push(self.nested(
                        s,
                        at,
                        &format!("/{key}/{i}"),
                        &format!("{hint}-{i}"),
                    )?);
                }
                return Ok(format!("( {} )", alts.join(" | ")));
            }
        }
        match obj.get("type") {
            None => Ok("value".into()),
            Some(Value::String(t)) => self.typed(t, obj, at, hint),
            Some(Value::Array(ts)) if !ts.is_empty() => {
                let mut alts = Vec::new();
                for (i, t) in ts.iter().enumerate() {
                    let Some(t) = t.as_str() else {
                        return Err(at.err("has a `type` list holding a non-string"));
                    };
                    alts.push(self.typed(t, obj, at, &format!("{hint}-{i}"))?);
                }
                Ok(format!("( {} )", alts.join(" | ")))
            }
            Some(_) => Err(at.err("has a `type` that is neither a string nor a non-empty list")),
        }
    }

    fn nested(
        &mut self,
        schema: &Value,
        at: &mut Walk<'_>,
        step: &str,
        hint: &str,
    ) -> Result<String, GrammarError> {
        let len = at.pointer.len();
        at.pointer.push_str(step);
        at.depth += 1;
        let r = self.schema(schema, at, hint);
        at.depth -= 1;
        at.pointer.truncate(len);
        r
    }

    fn typed(
        &mut self,
        t: &str,
        obj: &serde_json::Map<String, Value>,
        at: &mut Walk<'_>,
        hint: &str,
    ) -> Result<String, GrammarError> {
        match t {
            "string" => Ok("string".into()),
            "boolean" => Ok("boolean".into()),
            "null" => Ok("null".into()),
            "number" => Ok("number".into()),
            "integer" => {
                let min = obj.get("minimum").and_then(Value::as_f64);
                Ok(match min {
                    Some(m) if m > 0.0 => "pos-integer",
                    Some(m) if m >= 0.0 => "nonneg-integer",
                    _ => "integer",
                }
                .into())
            }
            "array" => {
                let item = match obj.get("items") {
                    None => "value".to_string(),
                    Some(s) => self.nested(s, at, "/items", &format!("{hint}-item"))?,
                };
                let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0);
                let rule = format!("{hint}-array");
                let body = if min == 0 {
                    format!("\"[\" ( {item} ( \", \" {item} )* )? \"]\"")
                } else {
                    let more = min.saturating_sub(1).min(64);
                    format!("\"[\" {item} ( \", \" {item} ){{{more},}} \"]\"")
                };
                self.define(&rule, body);
                Ok(rule)
            }
            "object" => self.object(obj, at, hint),
            other => Err(at.err(format!("has an unknown type {other:?}"))),
        }
    }

    fn object(
        &mut self,
        obj: &serde_json::Map<String, Value>,
        at: &mut Walk<'_>,
        hint: &str,
    ) -> Result<String, GrammarError> {
        let props = match obj.get("properties") {
            None => serde_json::Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(at.err("has `properties` that is not an object")),
        };
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(at.err("has `required` that is not a list")),
        };
        if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
            if props.is_empty() {
                // required keys with no property schemas: any values under those names
            } else {
                return Err(at.err(format!(
                    "requires {missing:?} but has no property of that name"
                )));
            }
        }
        if props.is_empty() {
            let closed = matches!(obj.get("additionalProperties"), Some(Value::Bool(false)));
            return Ok(if closed && required.is_empty() {
                "\"{}\"".into()
            } else {
                "object".into()
            });
        }
        // each property as `"key": value`
        let mut pairs: Vec<(String, bool, String)> = Vec::new();
        for (i, (key, schema)) in props.iter().enumerate() {
            let step = format!("/properties/{}", key.replace('~', "~0").replace('/', "~1"));
            let value = self.nested(schema, at, &step, &format!("{hint}-{i}"))?;
            let rule = format!("{hint}-{i}-kv");
            self.define(&rule, format!("{} \": \" {value}", literal(&json_str(key))));
            pairs.push((rule, required.contains(&key.as_str()), key.clone()));
        }
        let req: Vec<&String> = pairs.iter().filter(|p| p.1).map(|p| &p.0).collect();
        let opt: Vec<&String> = pairs.iter().filter(|p| !p.1).map(|p| &p.0).collect();
        // optional keys follow the required ones, in schema order, each present or not: `rest-k` is any non-empty,
        // order-keeping choice among opt[k..]
        for k in (0..opt.len()).rev() {
            let name = format!("{hint}-rest-{k}");
            let body = if k + 1 == opt.len() {
                opt[k].clone()
            } else {
                format!(
                    "{} ( \", \" {hint}-rest-{} )? | {hint}-rest-{}",
                    opt[k],
                    k + 1,
                    k + 1
                )
            };
            self.define(&name, body);
        }
        let rule = format!("{hint}-object");
        let body = match (req.is_empty(), opt.is_empty()) {
            (true, true) => "\"{}\"".to_string(),
            (false, true) => format!("\"{{\" {} \"}}\"", join_req(&req)),
            (true, false) => format!("\"{{\" {hint}-rest-0? \"}}\""),
            (false, false) => format!("\"{{\" {} ( \", \" {hint}-rest-0 )? \"}}\"", join_req(&req)),
        };
        self.define(&rule, body);
        Ok(rule)
    }
}

fn join_req(req: &[&String]) -> String {
    req.iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(" \", \" ")
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// `v` as compact JSON text.
fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// `text` as a GBNF string literal.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A decoded response: a call or an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// A call of `tool` with `input`.
    Call {
        /// The tool instance.
        tool: String,
        /// Its input object.
        input: Value,
    },
    /// Final answer text.
    Answer(String),
}

/// Reads a complete response text decoded under [`response_grammar`]. `None`: the text is a call form that did not
/// finish (the output cap cut it off).
pub fn parse_response(text: &str) -> Option<Response> {
    if !text.starts_with('{') {
        return Some(Response::Answer(text.to_string()));
    }
    let v: Value = serde_json::from_str(text).ok()?;
    let tool = v.get("tool")?.as_str()?.to_string();
    let input = v.get("input")?.clone();
    Some(Response::Call { tool, input })
}

/// The text of a call in the call form, as the model would have written it (for replaying history).
pub fn call_text(tool: &str, input: &Value) -> String {
    format!(
        "{{\"tool\": {}, \"input\": {}}}",
        json_str(tool),
        spaced_json(input)
    )
}

/// `v` as JSON with the grammar's fixed spacing (`": "` and `", "`).
pub fn spaced_json(v: &Value) -> String {
    let mut out = String::new();
    write_spaced(v, &mut out);
    out
}

fn write_spaced(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&json_str(k));
                out.push_str(": ");
                write_spaced(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&json_text(other)),
    }
}

pub(crate) mod matcher;
#[cfg(test)]
mod tests;
