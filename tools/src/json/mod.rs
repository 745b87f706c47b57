//! `read_json` and `json_edit`: a JSON file by JSON Pointer (RFC 6901). `read_json` returns the whole document or
//! the value at a pointer (pretty-printed, bounded); `json_edit` sets (or, with `remove`, removes) the value at a
//! pointer, changing only that value's bytes — the rest of the file keeps its indentation, key order and spacing
//! ([`text`], a pure module) — and writes the file back whole and atomically, recording an undo snapshot.

mod text;

use serde_json::{json, Value};

use super::beneath::{open_read, read_capped, size_of, Target};
use super::read_call::read_call;
use super::rewrite::rewrite_call;
use super::{bool_field, check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
use text::{lookup, parse_pointer, remove_value, set_value, MAX_TEXT_BYTES};

/// The most bytes `read_json` returns.
const READ_CAP: usize = 256 * 1024;

/// The optional `pointer` field ("" — the whole document — when absent), checked.
fn pointer_field(input: &Value, tool: &str, required: bool) -> Result<String, String> {
    let p = match input.get("pointer") {
        None | Some(Value::Null) if !required => String::new(),
        _ => str_field(input, tool, "pointer")?.to_string(),
    };
    parse_pointer(&p).map_err(|e| format!("{tool}: {e}"))?;
    Ok(p)
}

fn read_json_text(target: &Target, tool: &str) -> Result<String, String> {
    let (mut f, st) = open_read(target, &format!("{tool} reads JSON files"))?;
    let cap = MAX_TEXT_BYTES as u64;
    if size_of(&st) > cap {
        return Err(format!(
            "the file is {} bytes; JSON files of at most {cap} bytes are read",
            size_of(&st)
        ));
    }
    let bytes = read_capped(&mut f, cap)?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text, so not JSON".to_string())
}

/// The `read_json` tool.
#[derive(Debug)]
pub struct ReadJsonTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ReadJsonTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("read_json")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Read a JSON file, or the value at a JSON Pointer in it (`/scripts/test`, `/items/0`; `~1` is `/` and \
                 `~0` is `~` inside a key). `path` resolves against {} and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "pointer": { "type": "string", "description": "RFC 6901 JSON Pointer; empty or absent: the whole document." },
                },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "pointer"])?;
        let path = str_field(input, &name, "path")?;
        let pointer = pointer_field(input, &name, false)?;
        read_call(
            &self.env,
            path,
            Box::new(move |target, _abs, _shown, _cancel| {
                let text = read_json_text(target, "read_json")?;
                let doc: Value = serde_json::from_str(&text).map_err(|e| {
                    format!("not JSON (line {}, column {}): {e}", e.line(), e.column())
                })?;
                let v = lookup(&doc, &pointer).map_err(|e| e.to_string())?;
                let mut out = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
                if out.len() > READ_CAP {
                    let mut end = READ_CAP;
                    while !out.is_char_boundary(end) {
                        end -= 1;
                    }
                    let total = out.len();
                    out.truncate(end);
                    out.push_str(&format!(
                        "\n[cut at {READ_CAP} of {total} bytes; read a narrower pointer]"
                    ));
                }
                Ok(ToolOutput::ok(out))
            }),
        )
    }
}

/// The `json_edit` tool.
#[derive(Debug)]
pub struct JsonEditTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for JsonEditTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("json_edit")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Set the value at a JSON Pointer in a JSON file (`/version`, `/scripts/test`, `/items/-` appends to \
                 an array), or remove it with `remove: true`. Only that value changes; the rest of the file keeps \
                 its formatting. Missing parents are not created. `path` resolves against {} and must be inside this \
                 tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "pointer": { "type": "string" },
                    "value": { "description": "The new value (any JSON)." },
                    "remove": { "type": "boolean", "description": "Remove the value at pointer instead. Default false." },
                },
                "required": ["path", "pointer"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "pointer", "value", "remove"])?;
        let raw = str_field(input, &name, "path")?;
        let pointer = pointer_field(input, &name, true)?;
        let remove = bool_field(input, &name, "remove")?;
        let value = match (input.get("value"), remove) {
            (Some(_), true) => {
                return Err(format!("{name}: give either value or remove: true, not both"))
            }
            (None, false) => {
                return Err(format!(
                    "{name}: missing required field \"value\" (or pass remove: true to remove the value)"
                ))
            }
            (v, _) => v.cloned(),
        };
        let what = format!(
            "{} {}",
            if remove { "removed" } else { "set" },
            if pointer.is_empty() {
                "the whole document"
            } else {
                pointer.as_str()
            }
        );
        rewrite_call(
            &self.env,
            raw,
            (
                "json_edit",
                MAX_TEXT_BYTES as u64,
                "json_edit changes existing files; use write_file for a new one",
            ),
            |shown, what| format!("{shown}: {what}"),
            move |old| {
                match &value {
                    Some(v) => set_value(old, &pointer, v),
                    None => remove_value(old, &pointer),
                }
                .map(|new| (new, what))
                .map_err(|e| e.to_string())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn reads_by_pointer_and_edits_one_value_keeping_the_rest() {
        let work = tempfile::tempdir().unwrap();
        let doc = "{\n    \"name\": \"web\",\n    \"scripts\": {\"test\": \"jest\"},\n    \"tags\": [1, 2]\n}\n";
        std::fs::write(work.path().join("p.json"), doc).unwrap();
        std::fs::write(work.path().join("bad.json"), "{\"a\": 1,}").unwrap();
        let e = env("json_edit", work.path(), r#"{ paths = ["./"] }"#);
        let r = ReadJsonTool { env: e.clone() };
        let got = call(
            &r,
            AlgebraKind::Files,
            &e,
            json!({"path": "p.json", "pointer": "/scripts/test"}),
        )
        .await;
        assert_eq!((got.text.as_str(), got.is_error), ("\"jest\"", false));
        let missing = call(
            &r,
            AlgebraKind::Files,
            &e,
            json!({"path": "p.json", "pointer": "/scripts/lint"}),
        )
        .await;
        assert!(
            missing.is_error && missing.text.contains("lint"),
            "{}",
            missing.text
        );
        let bad_ptr = call(
            &r,
            AlgebraKind::Files,
            &e,
            json!({"path": "p.json", "pointer": "scripts"}),
        )
        .await;
        assert!(bad_ptr.is_error, "{}", bad_ptr.text);
        let t = JsonEditTool { env: e.clone() };
        let out = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "p.json", "pointer": "/name", "value": "site"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(work.path().join("p.json")).unwrap(),
            doc.replace("\"web\"", "\"site\"")
        );
        let gone = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "p.json", "pointer": "/tags/1", "remove": true}),
        )
        .await;
        assert!(!gone.is_error, "{}", gone.text);
        assert!(std::fs::read_to_string(work.path().join("p.json"))
            .unwrap()
            .contains("\"tags\": [1]"));
        // a file that is not JSON: a clear error, nothing written
        let bad = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "bad.json", "pointer": "/a", "value": 2}),
        )
        .await;
        assert!(bad.is_error, "{}", bad.text);
        assert_eq!(
            std::fs::read_to_string(work.path().join("bad.json")).unwrap(),
            "{\"a\": 1,}"
        );
    }
}
