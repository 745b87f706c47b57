//! MCP per-argument grants as pre-binding: what the model sees of an upstream tool, and what is actually sent.
//!
//! A grant row over an MCP tool names its arguments: a literal binds the argument (hidden from the model, supplied
//! on every call), an array narrows it to an enum, `"*"` keeps it open, and an argument the row does not name
//! disappears — from the schema AND from the call. Whole-tool `"*"` passes the upstream schema through.

use serde_json::{Map, Value as Json};

use crate::lattice::grant::{Grant, Row};
use crate::lattice::value::Value;

/// One MCP tool instance as `loom audit` shows it: its server and the schema the model sees after pre-binding.
#[derive(Debug, Clone, PartialEq)]
pub struct McpResolution {
    /// The server's handle.
    pub server: String,
    /// The upstream tool's description.
    pub description: String,
    /// The model-visible input schema (after the grant's pre-binding).
    pub schema: Json,
}

/// What the model sees of one argument, and how the call gets it.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgBinding {
    /// `"*"`: the model supplies it freely.
    Open,
    /// An array: the model picks one of these.
    OneOf(Vec<Json>),
    /// A literal: hidden from the model, always this value.
    Bound(Json),
}

/// An upstream MCP tool after its grant is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundTool {
    /// The schema the model sees.
    pub visible_schema: Json,
    /// Per-argument bindings; `None` means whole-tool `"*"` (every argument passes through as the server sent it).
    pub bindings: Option<Vec<(String, ArgBinding)>>,
}

/// Why a grant cannot be applied to a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// Per-argument grants take exactly one row.
    #[error("{tool}: an MCP per-argument grant must be one row (found {rows}); split the tool into renamed instances, one per row")]
    NotOneRow {
        /// Tool instance.
        tool: String,
        /// Rows found.
        rows: usize,
    },
    /// The grant names an argument the tool does not have.
    #[error("{tool}: the grant names argument `{arg}`, which the server's tool does not have (it has: {known})")]
    UnknownArgument {
        /// Tool instance.
        tool: String,
        /// The argument.
        arg: String,
        /// The tool's arguments.
        known: String,
    },
    /// A required upstream argument would be neither bound, narrowed nor open (assertRequires).
    #[error("{tool}: the server requires argument `{arg}`, but the grant neither binds it, narrows it nor keeps it open; add `{arg} = \"*\"` or a value to the grant")]
    RequiredArgumentMissing {
        /// Tool instance.
        tool: String,
        /// The argument.
        arg: String,
    },
    /// A `"*"` below the top level of an argument (inside an object or a list) would be sent as the literal string
    /// `"*"`, which a server may read as "all"; only a whole argument can be open.
    #[error("{tool}: the grant's `{at}` is \"*\" inside argument `{arg}`; a nested \"*\" would be sent as the literal string \"*\" (which a server may read as \"all\"), so it is refused — open the whole argument (`{arg} = \"*\"`) or write the literal values you mean")]
    NestedStar {
        /// Tool instance.
        tool: String,
        /// The argument.
        arg: String,
        /// Where the star is, as a dotted path (`filter.owner`).
        at: String,
    },
    /// The upstream schema is not an object schema.
    #[error("{tool}: the server's input schema is not a JSON object schema")]
    MalformedSchema {
        /// Tool instance.
        tool: String,
    },
}

/// Where a `"*"` sits inside `value` (written at `at`), if anywhere: `filter.owner`, `tags[1]` (the first tag).
fn nested_star(value: &Value, at: &str) -> Option<String> {
    match value {
        Value::Star => Some(at.to_string()),
        Value::List(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nested_star(v, &crate::lattice::value::position(at, i))),
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| nested_star(v, &format!("{at}.{k}"))),
        _ => None,
    }
}

/// Applies `grant` to the upstream `schema` of tool instance `tool`.
pub fn bind_schema(tool: &str, schema: &Json, grant: &Grant) -> Result<BoundTool, BindError> {
    let obj = schema
        .as_object()
        .ok_or_else(|| BindError::MalformedSchema { tool: tool.into() })?;
    let row: &Row = match grant {
        Grant::Unrestricted => {
            return Ok(BoundTool {
                visible_schema: schema.clone(),
                bindings: None,
            })
        }
        Grant::Set(rows) if rows.is_empty() => &Row::default(),
        Grant::Set(rows) if rows.len() == 1 => &rows[0],
        Grant::Set(rows) => {
            return Err(BindError::NotOneRow {
                tool: tool.into(),
                rows: rows.len(),
            })
        }
    };
    let props = match obj.get("properties") {
        None => Map::new(),
        Some(Json::Object(p)) => p.clone(),
        Some(_) => return Err(BindError::MalformedSchema { tool: tool.into() }),
    };
    for arg in row.0.keys() {
        if !props.contains_key(arg) {
            let known: Vec<&str> = props.keys().map(String::as_str).collect();
            return Err(BindError::UnknownArgument {
                tool: tool.into(),
                arg: arg.clone(),
                known: known.join(", "),
            });
        }
    }
    let required: Vec<String> = obj
        .get("required")
        .and_then(Json::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    for arg in &required {
        if row.get(arg).is_none() {
            return Err(BindError::RequiredArgumentMissing {
                tool: tool.into(),
                arg: arg.clone(),
            });
        }
    }
    for (arg, value) in row.0.iter() {
        if matches!(value, Value::Star) {
            continue;
        }
        if let Some(at) = nested_star(value, arg) {
            return Err(BindError::NestedStar {
                tool: tool.into(),
                arg: arg.clone(),
                at,
            });
        }
    }
    let mut visible = Map::new();
    let mut bindings = Vec::new();
    for (arg, value) in row.0.iter() {
        let binding = match value {
            Value::Star => ArgBinding::Open,
            Value::List(items) => ArgBinding::OneOf(items.iter().map(Value::to_json).collect()),
            literal => ArgBinding::Bound(literal.to_json()),
        };
        match &binding {
            ArgBinding::Open => {
                visible.insert(arg.clone(), props[arg].clone());
            }
            ArgBinding::OneOf(choices) => {
                let mut p = props[arg].as_object().cloned().unwrap_or_default();
                p.insert("enum".into(), Json::Array(choices.clone()));
                visible.insert(arg.clone(), Json::Object(p));
            }
            ArgBinding::Bound(_) => {}
        }
        bindings.push((arg.clone(), binding));
    }
    let mut out = obj.clone();
    let still_required: Vec<Json> = required
        .iter()
        .filter(|a| visible.contains_key(*a))
        .map(|a| Json::String(a.clone()))
        .collect();
    out.insert("properties".into(), Json::Object(visible));
    if still_required.is_empty() {
        out.remove("required");
    } else {
        out.insert("required".into(), Json::Array(still_required));
    }
    Ok(BoundTool {
        visible_schema: Json::Object(out),
        bindings: Some(bindings),
    })
}

/// Why the model's arguments to a bound MCP tool cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// The arguments are not a JSON object.
    #[error("{tool}: arguments must be a JSON object")]
    NotAnObject {
        /// The tool instance.
        tool: String,
    },
    /// An argument bound to a list of choices got another value.
    #[error("{tool}: `{arg}` must be one of {}; got {got}", .choices.join(", "))]
    NotAChoice {
        /// The tool instance.
        tool: String,
        /// The argument.
        arg: String,
        /// The choices, as JSON.
        choices: Vec<String>,
        /// What the model passed, as JSON.
        got: String,
    },
}

impl BoundTool {
    /// Builds the arguments actually sent upstream from what the model passed: unnamed arguments are stripped, enum
    /// choices checked, and bound literals supplied (a bound argument the model passes anyway is overridden).
    pub fn apply(&self, tool: &str, model_input: &Json) -> Result<Json, ArgumentError> {
        let input = match model_input {
            Json::Object(m) => m,
            Json::Null => &Map::new(),
            _ => {
                return Err(ArgumentError::NotAnObject {
                    tool: tool.to_string(),
                })
            }
        };
        let Some(bindings) = &self.bindings else {
            return Ok(Json::Object(input.clone()));
        };
        let mut out = Map::new();
        for (arg, binding) in bindings {
            match binding {
                ArgBinding::Bound(v) => {
                    out.insert(arg.clone(), v.clone());
                }
                ArgBinding::Open => {
                    if let Some(v) = input.get(arg) {
                        out.insert(arg.clone(), v.clone());
                    }
                }
                ArgBinding::OneOf(choices) => {
                    if let Some(v) = input.get(arg) {
                        if !choices.contains(v) {
                            return Err(ArgumentError::NotAChoice {
                                tool: tool.to_string(),
                                arg: arg.clone(),
                                choices: choices.iter().map(Json::to_string).collect(),
                                got: v.to_string(),
                            });
                        }
                        out.insert(arg.clone(), v.clone());
                    }
                }
            }
        }
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::lattice::grant::test_grant as g;

    fn schema() -> Json {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "status": { "type": "string" },
                "limit": { "type": "integer" }
            },
            "required": ["path"]
        })
    }

    #[test]
    fn a_literal_binds_and_hides_the_argument() {
        let b = bind_schema("read_one_doc", &schema(), &g("{ path = \"/welcome.md\" }")).unwrap();
        assert_eq!(b.visible_schema["properties"], json!({}));
        assert!(b.visible_schema.get("required").is_none());
        let sent = b
            .apply(
                "read_one_doc",
                &json!({ "path": "/etc/shadow", "limit": 5 }),
            )
            .unwrap();
        assert_eq!(
            sent,
            json!({ "path": "/welcome.md" }),
            "the bound value wins and unnamed args are stripped"
        );
    }

    #[test]
    fn an_array_narrows_to_an_enum_and_star_keeps_it_open() {
        let b = bind_schema(
            "s",
            &schema(),
            &g("{ path = \"*\", status = [\"online\", \"away\"] }"),
        )
        .unwrap();
        assert_eq!(
            b.visible_schema["properties"]["status"]["enum"],
            json!(["away", "online"])
        );
        assert_eq!(
            b.visible_schema["properties"]["path"],
            json!({ "type": "string" })
        );
        assert!(
            b.visible_schema["properties"].get("limit").is_none(),
            "unnamed arguments disappear"
        );
        assert_eq!(b.visible_schema["required"], json!(["path"]));
        assert!(b
            .apply("s", &json!({ "path": "/a", "status": "busy" }))
            .is_err());
        assert_eq!(
            b.apply("s", &json!({ "path": "/a", "status": "away" }))
                .unwrap(),
            json!({ "path": "/a", "status": "away" })
        );
    }

    #[test]
    fn assert_requires() {
        let err = bind_schema("s", &schema(), &g("{ status = \"*\" }")).unwrap_err();
        assert!(
            matches!(err, BindError::RequiredArgumentMissing { ref arg, .. } if arg == "path"),
            "{err}"
        );
        let err = bind_schema("s", &schema(), &g("{ path = \"*\", pth = \"x\" }")).unwrap_err();
        assert!(err.to_string().contains("`pth`"), "{err}");
    }

    #[test]
    fn a_nested_star_is_refused_not_sent_as_a_literal() {
        let schema = json!({"type": "object", "properties": {
            "filter": {"type": "object"}, "tags": {"type": "array"}}});
        let obj = g("{ filter = { owner = \"*\" } }");
        let e = bind_schema("search", &schema, &obj).unwrap_err();
        assert!(
            matches!(&e, BindError::NestedStar { at, .. } if at == "filter.owner"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("open the whole argument (`filter = \"*\"`)"),
            "{e}"
        );
        // the whole argument open, and a literal object, bind (the controls)
        for ok in [
            "{ filter = \"*\" }",
            "{ filter = { owner = \"me\" } }",
            "{ tags = [\"a\", \"b\"] }",
        ] {
            assert!(bind_schema("search", &schema, &g(ok)).is_ok(), "{ok}");
        }
        let e =
            bind_schema("search", &schema, &g("{ tags = [\"a\", { any = \"*\" }] }")).unwrap_err();
        assert!(
            matches!(&e, BindError::NestedStar { at, .. } if at.starts_with("tags[")),
            "{e}"
        );
    }

    #[test]
    fn whole_tool_star_passes_through() {
        let b = bind_schema("s", &schema(), &Grant::Unrestricted).unwrap();
        assert_eq!(b.visible_schema, schema());
        assert_eq!(
            b.apply("s", &json!({ "limit": 1 })).unwrap(),
            json!({ "limit": 1 })
        );
    }
}
