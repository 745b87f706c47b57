//! `edit_file`: exact text replacements in an existing UTF-8 file, all applied against the original.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use loom_kernel::{Access, CallFacts, Request};
use serde_json::{json, Value};

use super::client::{read_text, writer};
use super::{
    check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolCtx, ToolEnv, ToolOutput,
};
use crate::model::ToolSpec;
use crate::update::{Location, ToolCallContent, ToolKind};

/// Why a set of edits cannot be applied. Nothing is written when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// No edits.
    #[error("edits is empty; give at least one {{ old_text, new_text }}")]
    Empty,
    /// An empty `old_text`.
    #[error("edits[{0}]: old_text is empty")]
    EmptyOld(usize),
    /// `old_text` is not in the file.
    #[error(
        "edits[{0}]: old_text was not found in the file; read it again and copy the text exactly"
    )]
    NotFound(usize),
    /// `old_text` is in the file more than once.
    #[error("edits[{index}]: old_text occurs {count} times; include more surrounding text so it is unique")]
    NotUnique {
        /// Which edit.
        index: usize,
        /// How often it matched.
        count: usize,
    },
    /// Two edits touch the same text.
    #[error("edits[{0}] and edits[{1}] overlap; merge them into one edit")]
    Overlap(usize, usize),
}

/// One replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Text to find (exactly once).
    pub old_text: String,
    /// Its replacement.
    pub new_text: String,
}

/// Applies `edits` to `original`: each `old_text` must occur exactly once in the ORIGINAL text, and no two matches
/// may overlap (or nest); the result replaces every match at once.
pub fn apply_edits(original: &str, edits: &[Edit]) -> Result<String, EditError> {
    if edits.is_empty() {
        return Err(EditError::Empty);
    }
    let mut spans = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(EditError::EmptyOld(i));
        }
        let mut found = original.match_indices(e.old_text.as_str());
        let Some((start, _)) = found.next() else {
            return Err(EditError::NotFound(i));
        };
        // count overlapping occurrences too: "aa" in "aaa" is not unique
        let count = (0..original.len())
            .filter(|&k| {
                original.is_char_boundary(k) && original[k..].starts_with(e.old_text.as_str())
            })
            .take(2)
            .count();
        if count > 1 {
            let total = (0..original.len())
                .filter(|&k| {
                    original.is_char_boundary(k) && original[k..].starts_with(e.old_text.as_str())
                })
                .count();
            return Err(EditError::NotUnique {
                index: i,
                count: total,
            });
        }
        spans.push((start, start + e.old_text.len(), i));
    }
    spans.sort();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            let (a, b) = (w[0].2.min(w[1].2), w[0].2.max(w[1].2));
            return Err(EditError::Overlap(a, b));
        }
    }
    let mut out = String::with_capacity(original.len());
    let mut at = 0;
    for (start, end, i) in spans {
        out.push_str(&original[at..start]);
        out.push_str(&edits[i].new_text);
        at = end;
    }
    out.push_str(&original[at..]);
    Ok(out)
}

/// The `edit_file` tool.
#[derive(Debug)]
pub struct EditFileTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

fn parse_edits(input: &Value, tool: &str) -> Result<Vec<Edit>, String> {
    let arr = input
        .get("edits")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{tool}: edits must be an array of {{ old_text, new_text }}"))?;
    arr.iter()
        .enumerate()
        .map(|(i, e)| {
            check_fields(e, &format!("{tool}: edits[{i}]"), &["old_text", "new_text"])?;
            Ok(Edit {
                old_text: str_field(e, &format!("{tool}: edits[{i}]"), "old_text")?.to_string(),
                new_text: str_field(e, &format!("{tool}: edits[{i}]"), "new_text")?.to_string(),
            })
        })
        .collect()
}

impl Tool for EditFileTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("edit_file")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Modify an existing UTF-8 file by exact text replacement. Each old_text must match a unique \
                 substring of the file's current content; all edits apply against the original (not one after \
                 another); overlapping edits are rejected. Does not create files (use write_file). `path` is \
                 resolved against {} and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": { "old_text": { "type": "string" }, "new_text": { "type": "string" } },
                            "required": ["old_text", "new_text"],
                        },
                    },
                },
                "required": ["path", "edits"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "edits"])?;
        let raw = str_field(input, &name, "path")?;
        let edits = parse_edits(input, &name)?;
        if edits.is_empty() {
            return Err(format!("{name}: {}", EditError::Empty));
        }
        let path = resolve_path(&self.env.cwd, raw, PathMode::Existing).map_err(|e| {
            format!("{name}: {e} (edit_file does not create files; use write_file)")
        })?;
        let shown = path.display().to_string();
        Ok(Prepared {
            request: Request::File {
                path: shown.clone(),
                access: Access::Write,
            },
            facts: CallFacts {
                tool: name.clone(),
                path: Some(shown.clone()),
                ..CallFacts::default()
            },
            locations: vec![Location {
                path: shown.clone(),
            }],
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    match edit(&ctx, &path, &edits).await {
                        Ok((old, new)) => ToolOutput {
                            text: format!("edited {shown}"),
                            content: vec![ToolCallContent::Diff {
                                path: shown,
                                old_text: Some(old),
                                new_text: new,
                            }],
                            ..ToolOutput::default()
                        },
                        Err(e) => ToolOutput::error(format!("{shown}: {e}")),
                    }
                })
            }),
        })
    }
}

/// Reads the file (through the client when it reads files), applies the edits, and writes the result (through the
/// client when it writes files). Nothing is written when an edit does not apply.
async fn edit(
    ctx: &ToolCtx,
    path: &std::path::Path,
    edits: &[Edit],
) -> Result<(String, String), String> {
    let old = read_text(ctx, path, read_local).await?;
    let new = apply_edits(&old, edits).map_err(|e| e.to_string())?;
    match writer(ctx) {
        Some(client) => client
            .write_text_file(path, new.clone())
            .await
            .map_err(|e| format!("the client could not write it: {e}"))?,
        None => {
            let (p, n) = (path.to_path_buf(), new.clone());
            tokio::task::spawn_blocking(move || write_local(&p, &n))
                .await
                .map_err(|e| e.to_string())??
        }
    }
    Ok((old, new))
}

fn read_local(path: &std::path::Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

fn write_local(path: &std::path::Path, new: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| e.to_string())?;
    f.write_all(new.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    fn e(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    #[test]
    fn edit_rules() {
        let src = "fn a() {}\nfn b() {}\nfn c() {}\n";
        // several edits, all against the original (the second does not see the first's output)
        assert_eq!(
            apply_edits(src, &[e("fn a", "fn b"), e("fn b()", "fn bb()")]).unwrap(),
            "fn b() {}\nfn bb() {}\nfn c() {}\n"
        );
        assert_eq!(apply_edits(src, &[]), Err(EditError::Empty));
        assert_eq!(apply_edits(src, &[e("", "x")]), Err(EditError::EmptyOld(0)));
        assert_eq!(
            apply_edits(src, &[e("fn z", "x")]),
            Err(EditError::NotFound(0))
        );
        assert_eq!(
            apply_edits(src, &[e("() {}", "x")]),
            Err(EditError::NotUnique { index: 0, count: 3 })
        );
        assert_eq!(
            apply_edits("aaa", &[e("aa", "x")]),
            Err(EditError::NotUnique { index: 0, count: 2 })
        );
        assert_eq!(
            apply_edits(src, &[e("fn a() {}\nfn b", "x"), e("b() {}", "y")]),
            Err(EditError::Overlap(0, 1))
        );
        // nested
        assert_eq!(
            apply_edits(src, &[e("fn b() {}", "x"), e("b()", "y")]),
            Err(EditError::Overlap(0, 1))
        );
        // adjacent is fine
        assert_eq!(
            apply_edits("abcd", &[e("cd", "2"), e("ab", "1")]).unwrap(),
            "12"
        );
    }

    #[tokio::test]
    async fn edits_existing_files_only_and_leaves_them_untouched_on_error() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("f.txt"), "hello world").unwrap();
        let en = env("edit_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = EditFileTool { env: en.clone() };
        let ok = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "f.txt", "edits": [{"old_text": "world", "new_text": "loom"}]}),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text);
        assert_eq!(
            std::fs::read_to_string(work.path().join("f.txt")).unwrap(),
            "hello loom"
        );
        let bad = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "f.txt", "edits": [{"old_text": "nope", "new_text": "x"}]}),
        )
        .await;
        assert!(bad.is_error && bad.text.contains("not found"));
        assert_eq!(
            std::fs::read_to_string(work.path().join("f.txt")).unwrap(),
            "hello loom"
        );
        let missing = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "new.txt", "edits": [{"old_text": "a", "new_text": "b"}]}),
        )
        .await;
        assert!(
            missing.is_error && missing.text.contains("use write_file"),
            "{}",
            missing.text
        );
    }
}
