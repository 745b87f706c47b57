//! `edit_file`: exact text replacements in an existing UTF-8 file, all applied against the original.

use serde_json::{json, Value};

use super::rewrite::rewrite_call;
use super::{check_fields, str_field, Prepared, Tool, ToolEnv};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

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

/// The largest file `edit_file` changes (4 MiB): it reads the whole file and writes it back whole.
pub const MAX_EDIT_BYTES: u64 = 4 * 1024 * 1024;
/// The most edits one call applies.
pub const MAX_EDITS: usize = 64;

/// Applies `edits` to `original`: each `old_text` must occur exactly once in the ORIGINAL text, and no two matches
/// may overlap (or nest); the result replaces every match at once. Each edit costs time linear in the sizes of the
/// text and of its `old_text` (two substring searches; a count of all occurrences only to report a repeated one).
pub fn apply_edits(original: &str, edits: &[Edit]) -> Result<String, EditError> {
    if edits.is_empty() {
        return Err(EditError::Empty);
    }
    let mut spans = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        let old = e.old_text.as_str();
        if old.is_empty() {
            return Err(EditError::EmptyOld(i));
        }
        let found = scan(original.as_bytes(), old.as_bytes());
        let Some(start) = found.first else {
            return Err(EditError::NotFound(i));
        };
        // overlapping occurrences count too: "aa" in "aaa" is not unique
        if found.count > 1 {
            return Err(EditError::NotUnique {
                index: i,
                count: found.count,
            });
        }
        spans.push((start, start + old.len(), i));
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

/// Where and how often a needle occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scan {
    /// The byte offset of the first occurrence.
    first: Option<usize>,
    /// How many occurrences, overlapping ones included.
    count: usize,
    /// The comparison steps it took: at most `2·(|hay| + |pat|)` (Knuth–Morris–Pratt), whatever the text.
    steps: usize,
}

/// Finds every occurrence of `pat` in `hay` in one linear pass. Both are UTF-8 text, so a byte match always starts
/// on a character boundary.
fn scan(hay: &[u8], pat: &[u8]) -> Scan {
    let mut out = Scan {
        first: None,
        count: 0,
        steps: 0,
    };
    if pat.is_empty() {
        return out;
    }
    // fail[i]: the length of the longest proper border of pat[..=i]
    let mut fail = vec![0usize; pat.len()];
    let mut k = 0usize;
    for i in 1..pat.len() {
        while k > 0 && pat[i] != pat[k] {
            k = fail[k - 1];
            out.steps += 1;
        }
        if pat[i] == pat[k] {
            k += 1;
        }
        fail[i] = k;
        out.steps += 1;
    }
    k = 0;
    for (at, &b) in hay.iter().enumerate() {
        while k > 0 && b != pat[k] {
            k = fail[k - 1];
            out.steps += 1;
        }
        if b == pat[k] {
            k += 1;
        }
        if k == pat.len() {
            out.count += 1;
            out.first = out.first.or(Some(at + 1 - pat.len()));
            k = fail[k - 1];
        }
        out.steps += 1;
    }
    out
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
        if edits.len() > MAX_EDITS {
            return Err(format!(
                "{name}: {} edits in one call; edit_file applies at most {MAX_EDITS} — split them over several calls",
                edits.len()
            ));
        }
        rewrite_call(
            &self.env,
            raw,
            (
                "edit_file",
                MAX_EDIT_BYTES,
                "edit_file does not create files; use write_file",
            ),
            |shown, _| format!("edited {shown}"),
            move |old| {
                apply_edits(old, &edits)
                    .map(|new| (new, String::new()))
                    .map_err(|e| e.to_string())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, call_after, env};
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
        // the path as the model named it (below the working directory)
        assert_eq!(ok.text, "edited f.txt");
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
        assert!(
            bad.is_error && bad.text.starts_with("f.txt: ") && bad.text.contains("not found"),
            "{}",
            bad.text
        );
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

    /// The uniqueness check is one linear pass whatever the text: `a…ab` against `a…ab` (the old per-offset scan
    /// compared up to |old| bytes at each of the |text| offsets) takes at most 2·(|text| + |old|) steps.
    #[test]
    fn matching_is_linear() {
        let text = format!("{}b", "a".repeat(200_000));
        let old = format!("{}b", "a".repeat(50_000));
        let s = scan(text.as_bytes(), old.as_bytes());
        assert_eq!((s.first, s.count), (Some(150_000), 1));
        assert!(
            s.steps <= 2 * (text.len() + old.len()),
            "{} steps for {} + {} bytes",
            s.steps,
            text.len(),
            old.len()
        );
        let many = "ab".repeat(100_000);
        let s = scan(many.as_bytes(), b"abab");
        assert_eq!(s.count, 99_999);
        assert!(s.steps <= 2 * (many.len() + 4));
        assert_eq!(
            apply_edits(&text, &[e(&old, "x")]).unwrap(),
            format!("{}x", "a".repeat(150_000))
        );
        // multi-byte text: matches start on characters
        assert_eq!(
            apply_edits("ééé", &[e("éé", "x")]),
            Err(EditError::NotUnique { index: 0, count: 2 })
        );
        assert_eq!(apply_edits("aé", &[e("é", "e")]).unwrap(), "ae");
    }

    #[tokio::test]
    async fn big_files_fifos_and_too_many_edits_are_refused_with_the_cap() {
        let work = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(work.path().join("big")).unwrap();
        // sparse: no disk used, and never read
        f.set_len(15 * 1024 * 1024 * 1024).unwrap();
        let en = env("edit_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = EditFileTool { env: en.clone() };
        let one = json!([{"old_text": "a", "new_text": "b"}]);
        let out = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "big", "edits": one}),
        )
        .await;
        assert!(
            out.is_error
                && out
                    .text
                    .contains(&format!("at most {MAX_EDIT_BYTES} bytes")),
            "{}",
            out.text
        );
        let fifo = work.path().join("pipe");
        crate::testutil::mkfifo(&fifo);
        let out = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "pipe", "edits": one}),
        )
        .await;
        assert!(
            out.is_error && out.text.contains("is a FIFO"),
            "{}",
            out.text
        );
        let edits: Vec<Value> = (0..=MAX_EDITS)
            .map(|i| json!({"old_text": format!("k{i}"), "new_text": "v"}))
            .collect();
        std::fs::write(work.path().join("f"), "x").unwrap();
        let out = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"path": "f", "edits": edits}),
        )
        .await;
        assert!(
            out.is_error && out.text.contains(&format!("at most {MAX_EDITS}")),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn a_swap_after_the_decision_edits_nothing() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        std::fs::write(work.path().join("d/f"), "hello").unwrap();
        std::fs::write(outside.path().join("f"), "hello").unwrap();
        let en = env("edit_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = EditFileTool { env: en.clone() };
        let input = json!({"path": "d/f", "edits": [{"old_text": "hello", "new_text": "owned"}]});
        let out = call_after(&t, AlgebraKind::Files, &en, input, || {
            std::fs::rename(work.path().join("d"), work.path().join("d.old")).unwrap();
            std::os::unix::fs::symlink(outside.path(), work.path().join("d")).unwrap();
        })
        .await;
        assert!(
            out.is_error && out.text.contains("changed after loom checked it"),
            "{}",
            out.text
        );
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "hello"
        );
    }
}
