//! `notebook_read` and `notebook_edit`: Jupyter notebooks (nbformat 4) by cell. The notebook format itself — how
//! cells are shown, how an edit keeps unrelated metadata and clears a replaced code cell's stale outputs, how the
//! file's own layout is kept — is the pure [`format`] module; these tools read the file beneath the grant (the kernel
//! decides the path like `read_file` / `edit_file`), and `notebook_edit` writes it back whole and atomically,
//! recording an undo snapshot.

mod format;

use serde_json::{json, Value};

use super::beneath::{open_read, read_capped, size_of, Target};
use super::read_call::{int_field, read_call};
use super::rewrite::rewrite_call;
use super::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use format::{edit, render, CellEdit, CellRef, CellType, MAX_NOTEBOOK_BYTES};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The most characters `notebook_read` returns.
const READ_MAX_CHARS: usize = 200_000;

/// The `notebook_read` tool.
#[derive(Debug)]
pub struct NotebookReadTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for NotebookReadTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("notebook_read")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Read a Jupyter notebook (.ipynb, nbformat 4) cell by cell: each cell's number, type, id and source, \
                 and code cells' outputs summarised. `first`/`last` (0-based, inclusive) read a range of cells. \
                 `path` resolves against {} and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "first": { "type": "integer", "minimum": 0 },
                    "last": { "type": "integer", "minimum": 0 },
                },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "first", "last"])?;
        let path = str_field(input, &name, "path")?;
        let range = match (input.get("first"), input.get("last")) {
            (None | Some(Value::Null), None | Some(Value::Null)) => None,
            _ => Some((
                int_field(input, &name, "first", 0, (0, usize::MAX))?,
                int_field(input, &name, "last", usize::MAX, (0, usize::MAX))?,
            )),
        };
        read_call(
            &self.env,
            path,
            Box::new(move |target, _abs, _shown, _cancel| {
                let text = read_notebook(target)?;
                render(&text, range, READ_MAX_CHARS)
                    .map(ToolOutput::ok)
                    .map_err(|e| e.to_string())
            }),
        )
    }
}

fn read_notebook(target: &Target) -> Result<String, String> {
    let (mut f, st) = open_read(target, "notebook_read reads .ipynb files")?;
    let cap = MAX_NOTEBOOK_BYTES as u64;
    if size_of(&st) > cap {
        return Err(format!(
            "the notebook is {} bytes; notebooks of at most {cap} bytes are read",
            size_of(&st)
        ));
    }
    let bytes = read_capped(&mut f, cap)?;
    String::from_utf8(bytes).map_err(|_| "not a notebook: not UTF-8 text".to_string())
}

/// The `notebook_edit` tool.
#[derive(Debug)]
pub struct NotebookEditTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

fn cell_ref(input: &Value, tool: &str) -> Result<CellRef, String> {
    match input.get("cell") {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(CellRef::Index)
            .ok_or_else(|| format!("{tool}: cell must be a 0-based index or a cell id")),
        Some(Value::String(id)) => Ok(CellRef::Id(id.clone())),
        None | Some(Value::Null) => Err(format!(
            "{tool}: missing required field \"cell\" (a 0-based index or a cell id)"
        )),
        Some(_) => Err(format!("{tool}: cell must be a 0-based index or a cell id")),
    }
}

fn cell_type(input: &Value, tool: &str) -> Result<Option<CellType>, String> {
    match input.get("cell_type") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => CellType::from_name(s)
            .map(Some)
            .ok_or_else(|| format!("{tool}: cell_type must be code, markdown or raw")),
        Some(_) => Err(format!("{tool}: cell_type must be code, markdown or raw")),
    }
}

/// The edit the input asks for.
fn parse_edit(input: &Value, tool: &str) -> Result<CellEdit, String> {
    let action = str_field(input, tool, "action")?;
    let source = || str_field(input, tool, "source").map(str::to_string);
    let known: &[&str] = match action {
        "replace" => &["path", "action", "cell", "source", "cell_type"],
        "insert" => &["path", "action", "at", "source", "cell_type"],
        "delete" => &["path", "action", "cell"],
        other => {
            return Err(format!(
                "{tool}: action {other:?} is not one of replace, insert, delete"
            ))
        }
    };
    check_fields(input, tool, known)?;
    Ok(match action {
        "replace" => CellEdit::Replace {
            cell: cell_ref(input, tool)?,
            source: source()?,
            cell_type: cell_type(input, tool)?,
        },
        "insert" => CellEdit::Insert {
            at: int_field(input, tool, "at", usize::MAX, (0, usize::MAX)).and_then(|a| {
                if a == usize::MAX {
                    Err(format!(
                        "{tool}: insert needs \"at\", the 0-based position of the new cell"
                    ))
                } else {
                    Ok(a)
                }
            })?,
            cell_type: cell_type(input, tool)?.unwrap_or(CellType::Code),
            source: source()?,
        },
        _ => CellEdit::Delete {
            cell: cell_ref(input, tool)?,
        },
    })
}

impl Tool for NotebookEditTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("notebook_edit")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Edit one cell of a Jupyter notebook (nbformat 4): `action` replace (the cell's `source`, optionally \
                 its `cell_type`; a code cell's outputs are cleared as stale), insert (a new cell at 0-based `at`, \
                 `cell_type` default code) or delete. `cell` is a 0-based index or a cell id. Everything else in the \
                 file is kept. `path` resolves against {} and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "action": { "type": "string", "enum": ["replace", "insert", "delete"] },
                    "cell": { "type": ["integer", "string"], "description": "0-based index or cell id (replace, delete)." },
                    "at": { "type": "integer", "minimum": 0, "description": "Position of the new cell (insert)." },
                    "source": { "type": "string" },
                    "cell_type": { "type": "string", "enum": ["code", "markdown", "raw"] },
                },
                "required": ["path", "action"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        if !input.is_object() {
            check_fields(input, &name, &["path", "action"])?;
        }
        let change = parse_edit(input, &name)?;
        let raw = str_field(input, &name, "path")?;
        rewrite_call(
            &self.env,
            raw,
            ("notebook_edit", MAX_NOTEBOOK_BYTES as u64, ""),
            |shown, what| format!("{shown}: {what}"),
            move |old| edit(old, &change).map_err(|e| e.to_string()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    const NB: &str = r#"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "a1",
   "metadata": {"tags": ["keep"]},
   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["2\n"]}],
   "source": ["print(1 + 1)"]
  }
 ],
 "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"#;

    #[tokio::test]
    async fn reads_edits_with_stale_outputs_cleared_and_refuses_what_is_not_a_notebook() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("n.ipynb"), NB).unwrap();
        std::fs::write(work.path().join("bad.ipynb"), "{not json").unwrap();
        let e = env("notebook_edit", work.path(), r#"{ paths = ["./"] }"#);
        let r = NotebookReadTool { env: e.clone() };
        let read = call(&r, AlgebraKind::Files, &e, json!({"path": "n.ipynb"})).await;
        assert!(
            !read.is_error && read.text.contains("print(1 + 1)") && read.text.contains('2'),
            "{}",
            read.text
        );
        let t = NotebookEditTool { env: e.clone() };
        let out = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "n.ipynb", "action": "replace", "cell": "a1", "source": "print(2 + 2)"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(work.path().join("n.ipynb")).unwrap())
                .unwrap();
        let cell = &v["cells"][0];
        assert_eq!(cell["source"], json!(["print(2 + 2)"]));
        assert_eq!(cell["outputs"], json!([]));
        assert_eq!(cell["execution_count"], Value::Null);
        assert_eq!(cell["metadata"], json!({"tags": ["keep"]}));
        assert_eq!(v["metadata"]["kernelspec"]["name"], "python3");
        let bad = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "bad.ipynb", "action": "delete", "cell": 0}),
        )
        .await;
        assert!(
            bad.is_error && bad.text.contains("not a notebook: not JSON"),
            "{}",
            bad.text
        );
        assert_eq!(
            std::fs::read_to_string(work.path().join("bad.ipynb")).unwrap(),
            "{not json"
        );
        let undo = crate::UndoTool { env: e.clone() };
        let back = call(&undo, AlgebraKind::Files, &e, json!({"path": "n.ipynb"})).await;
        assert!(!back.is_error, "{}", back.text);
        assert_eq!(
            std::fs::read_to_string(work.path().join("n.ipynb")).unwrap(),
            NB
        );
    }
}
