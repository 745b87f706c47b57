//! `read_file`: read a UTF-8 file, whole or a range of its lines (numbered).

use loom_kernel::Access;
use serde_json::{json, Value};

use super::beneath::{is_missing, open_read, read_capped, size_of, BeneathError, Target};
use super::client::read_text;
use super::walk::names_near;
use super::{check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The largest file `read_file` returns whole, and the most text a ranged read returns (1 MiB).
pub const MAX_READ_BYTES: u64 = 1024 * 1024;
/// The largest file a ranged read (`offset` / `limit`) reads from (16 MiB).
pub const MAX_RANGED_READ_BYTES: u64 = 16 * 1024 * 1024;
/// The most lines one ranged read may ask for.
pub const MAX_LINES: u64 = 10_000;

/// A range of lines: the first (counted from 1) and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    offset: usize,
    limit: usize,
}

/// The `read_file` tool.
#[derive(Debug)]
pub struct ReadFileTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("read_file")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Read a UTF-8 text file. `path` is resolved against {} unless absolute and must be inside this \
                 tool's grant ({}). With `offset` and/or `limit`, only those lines are returned, each prefixed \
                 with its number — use it for large files and to read on where a previous read stopped.",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The file to read." },
                    "offset": { "type": "integer", "minimum": 1, "description": "First line to return, counted from 1." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LINES, "description": "How many lines to return (default: to the end, within the size bound)." },
                },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = &self.env.instance;
        check_fields(input, name, &["path", "offset", "limit"])?;
        let raw = str_field(input, name, "path")?;
        let line_arg = |key: &str, max: u64| match input.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=max).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("{name}: {key} must be an integer from 1 to {max}")),
        };
        let range = match (line_arg("offset", u64::MAX)?, line_arg("limit", MAX_LINES)?) {
            (None, None) => None,
            (offset, limit) => Some(Range {
                offset: offset.unwrap_or(1),
                limit: limit.unwrap_or(usize::MAX),
            }),
        };
        let cap = if range.is_some() {
            MAX_RANGED_READ_BYTES
        } else {
            MAX_READ_BYTES
        };
        let path = resolve_path(&self.env.cwd, raw, PathMode::Existing)
            .map_err(|e| format!("{name}: {e}"))?;
        let shown = path.display().to_string();
        // what the model is told: the path as it would name it (relative below the working directory)
        let told = crate::read_call::shown_from(&self.env.cwd, &path);
        let ctx_paths = self.env.ctx.clone();
        let cwd = self.env.cwd.clone();
        let seen = self.env.seen.clone();
        Ok(
            crate::CallHead::one_path(name, &shown, Access::Read).then(Box::new(
                move |auth, ctx| {
                    Box::pin(async move {
                        let target = match Target::of(&auth, &ctx_paths, &path, Access::Read) {
                            Ok(t) => t,
                            Err(e) => return ToolOutput::error(format!("{told}: {e}")),
                        };
                        // the directories a missing file's error may name the entries of: its ancestors that a
                        // root of the row that allowed this call holds, deepest first (never one outside the grant);
                        // worked out only when the file is missing
                        let p = path.clone();
                        let near = move || -> Vec<(String, Target)> {
                            p.ancestors()
                                .skip(1)
                                .filter_map(|a| {
                                    let t = Target::of(&auth, &ctx_paths, a, Access::Read).ok()?;
                                    Some((crate::read_call::shown_from(&cwd, a), t))
                                })
                                .collect()
                        };
                        match read_text(&ctx, &path, move || read(&target, cap, near)).await {
                            Ok(text) if text.len() as u64 > cap => ToolOutput::error(format!(
                                "{told}: {}",
                                too_big(text.len() as u64, cap)
                            )),
                            Ok(text) => {
                                // the whole file was read, whether all of it or a range is shown
                                seen.saw(&path, text.as_bytes());
                                match range {
                                    None => ToolOutput::ok(text),
                                    Some(r) => lines_of(&text, r, &told),
                                }
                            }
                            Err(e) => ToolOutput::error(format!("{told}: {e}")),
                        }
                    })
                },
            )),
        )
    }
}

/// The most entries a missing file's error names of the directory nearest it.
const NAMES_NEAR_MISSING: usize = 20;

/// Reads the regular file `target` beneath its grant root (see [`super::beneath`]), at most `cap` bytes. A file that
/// is not there is reported with the entries of the nearest directory of `near` (see [`missing`]).
fn read(
    target: &Target,
    cap: u64,
    near: impl FnOnce() -> Vec<(String, Target)>,
) -> Result<String, String> {
    let (mut f, st) = match open_read(target, "use find to list it") {
        Ok(opened) => opened,
        Err(e) if is_missing(&e) => return Err(missing(&e, &near())),
        Err(e) => return Err(e.into()),
    };
    if size_of(&st) > cap {
        return Err(too_big(size_of(&st), cap));
    }
    let bytes = read_capped(&mut f, cap)?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// The error for a file that is not there: the I/O error, and what the nearest directory the grant holds does hold,
/// so the next call can name a file that exists instead of guessing again.
fn missing(e: &BeneathError, near: &[(String, Target)]) -> String {
    let Some((dir, names, total)) = names_near(near, NAMES_NEAR_MISSING) else {
        return e.to_string();
    };
    let dir = match dir {
        "." => "the working directory".to_string(),
        d => d.to_string(),
    };
    match total {
        0 => format!("{e} ({dir} is empty)"),
        n if n > names.len() => format!(
            "{e} ({dir} holds {n} entries, among them: {}; use find or grep to search it)",
            names.join(", ")
        ),
        _ => format!("{e} ({dir} holds: {})", names.join(", ")),
    }
}

fn too_big(size: u64, cap: u64) -> String {
    if cap == MAX_READ_BYTES {
        format!(
            "the file is {size} bytes; read_file returns at most {MAX_READ_BYTES} whole — pass offset and limit to \
             read it a range of lines at a time"
        )
    } else {
        format!(
            "the file is {size} bytes; read_file reads ranges from files of at most {cap} bytes"
        )
    }
}

/// The lines `r` asks for, numbered, within [`MAX_READ_BYTES`], with a note saying where to read on.
fn lines_of(text: &str, r: Range, shown: &str) -> ToolOutput {
    let total = text.lines().count();
    if r.offset > total.max(1) {
        return ToolOutput::error(format!(
            "{shown}: offset {} is past the end: the file has {total} lines",
            r.offset
        ));
    }
    let mut out = String::new();
    let mut last = r.offset - 1;
    for (i, line) in text.lines().enumerate().skip(r.offset - 1).take(r.limit) {
        let numbered = format!("{:>6}\t{line}\n", i + 1);
        if (out.len() + numbered.len()) as u64 > MAX_READ_BYTES {
            break;
        }
        out.push_str(&numbered);
        last = i + 1;
    }
    if last < total {
        out.push_str(&format!(
            "(lines {}-{last} of {total}; pass offset {} to read on)\n",
            r.offset,
            last + 1
        ));
    }
    ToolOutput::ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, call_after, env};
    use loom_kernel::AlgebraKind;

    /// A file that is not there is reported with what the nearest directory the grant holds does hold, so the model
    /// can name one that exists; never a directory outside the grant.
    #[tokio::test]
    async fn a_missing_file_names_what_the_nearest_granted_directory_holds() {
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("src/lib")).unwrap();
        for f in ["src/main.py", "src/parse.py", "top.txt"] {
            std::fs::write(work.path().join(f), "x").unwrap();
        }
        let read = |grant: &str, p: &str| {
            let e = env("read_file", work.path(), grant);
            let t = ReadFileTool { env: e.clone() };
            let input = json!({ "path": p });
            async move { call(&t, AlgebraKind::Files, &e, input).await }
        };
        let all = r#"{ paths = ["./"] }"#;
        let out = read(all, "src/todo.txt").await;
        assert!(out.is_error);
        assert!(
            out.text.starts_with("src/todo.txt: No such file")
                && out.text.ends_with("(src holds: lib/, main.py, parse.py)"),
            "{}",
            out.text
        );
        // a missing directory on the way: the nearest one that exists
        let out = read(all, "src/gone/deeper/a.txt").await;
        assert!(
            out.text.ends_with("(src holds: lib/, main.py, parse.py)"),
            "{}",
            out.text
        );
        let out = read(all, "nope.txt").await;
        assert!(
            out.text
                .ends_with("(the working directory holds: src/, top.txt)"),
            "{}",
            out.text
        );
        let out = read(all, "src/lib/x").await;
        assert!(out.text.ends_with("(src/lib is empty)"), "{}", out.text);
        // a file below another: the directory holding that file
        let out = read(all, "top.txt/x").await;
        assert!(
            out.text
                .ends_with("(the working directory holds: src/, top.txt)"),
            "{}",
            out.text
        );
        // nothing above the grant is listed: a grant of one directory (that does not exist yet), or of one file
        let out = read(r#"{ paths = ["./src/lib"] }"#, "src/lib/a/b.txt").await;
        assert!(out.text.ends_with("(src/lib is empty)"), "{}", out.text);
        for (grant, p) in [
            (r#"{ paths = ["./src/lib/sub"] }"#, "src/lib/sub/x.txt"),
            (r#"{ paths = ["./src/lib/one.txt"] }"#, "src/lib/one.txt"),
        ] {
            let out = read(grant, p).await;
            assert!(
                out.is_error && out.text.ends_with("No such file or directory (os error 2)"),
                "{grant}: {}",
                out.text
            );
        }
        // many entries: the first few, and how many there are
        for i in 0..30 {
            std::fs::write(work.path().join(format!("src/lib/f{i:02}")), "").unwrap();
        }
        let out = read(all, "src/lib/zz").await;
        assert!(
            out.text
                .contains("(src/lib holds 30 entries, among them: f00, f01,")
                && out.text.ends_with("f19; use find or grep to search it)"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn reads_inside_and_refuses_outside_and_via_symlinks() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("in.txt"), "inside").unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), work.path().join("link"))
            .unwrap();
        let e = env("read_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = ReadFileTool { env: e.clone() };
        let ok = call(&t, AlgebraKind::Files, &e, json!({"path": "in.txt"})).await;
        assert_eq!((ok.text.as_str(), ok.is_error), ("inside", false));
        let abs = outside.path().join("secret").display().to_string();
        for p in [abs.as_str(), "link", "../"] {
            let out = call(&t, AlgebraKind::Files, &e, json!({ "path": p })).await;
            assert!(
                out.is_error && out.text.contains("outside this tool's grant"),
                "{p}: {}",
                out.text
            );
            assert!(!out.text.contains("s3cret"));
        }
        let bad = call(&t, AlgebraKind::Files, &e, json!({"path": 3})).await;
        assert!(bad.is_error && bad.text.contains("path must be a string"));
    }

    /// A directory swapped for a symlink to outside the root after the decision: the old code followed it and read
    /// the outside file; now the open refuses. The same call without the swap is the control.
    #[tokio::test]
    async fn a_directory_swapped_for_a_symlink_after_the_decision_is_not_followed() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        std::fs::write(work.path().join("d/f"), "inside").unwrap();
        std::fs::write(outside.path().join("f"), "s3cret").unwrap();
        let e = env("read_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = ReadFileTool { env: e.clone() };
        let ok = call(&t, AlgebraKind::Files, &e, json!({"path": "d/f"})).await;
        assert_eq!((ok.text.as_str(), ok.is_error), ("inside", false));
        let swap = || {
            std::fs::rename(work.path().join("d"), work.path().join("d.old")).unwrap();
            std::os::unix::fs::symlink(outside.path(), work.path().join("d")).unwrap();
        };
        let raced = call_after(&t, AlgebraKind::Files, &e, json!({"path": "d/f"}), swap).await;
        assert!(raced.is_error, "{}", raced.text);
        assert!(
            raced.text.contains("changed after loom checked it"),
            "{}",
            raced.text
        );
        assert!(!raced.text.contains("s3cret"));
    }

    #[tokio::test]
    async fn fifos_and_devices_are_refused_without_blocking() {
        let work = tempfile::tempdir().unwrap();
        let fifo = work.path().join("pipe");
        crate::testutil::mkfifo(&fifo);
        let e = env("read_file", work.path(), r#""*""#);
        let t = ReadFileTool { env: e.clone() };
        // no writer on the FIFO: the old blocking open never returned
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "pipe"})).await;
        assert!(
            out.is_error && out.text.contains("is a FIFO"),
            "{}",
            out.text
        );
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "/dev/zero"})).await;
        assert!(
            out.is_error && out.text.contains("character device"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn a_range_of_lines_is_numbered_and_says_where_to_read_on() {
        let work = tempfile::tempdir().unwrap();
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(work.path().join("f.txt"), &text).unwrap();
        let e = env("read_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = ReadFileTool { env: e.clone() };
        let read = |input: Value| {
            let (t, e) = (&t, &e);
            async move { call(t, AlgebraKind::Files, e, input).await }
        };
        let out = read(json!({"path": "f.txt", "offset": 10, "limit": 2})).await;
        assert_eq!(
            out.text,
            "    10\tline 10\n    11\tline 11\n(lines 10-11 of 30; pass offset 12 to read on)\n"
        );
        // to the end: no note
        let out = read(json!({"path": "f.txt", "offset": 29})).await;
        assert_eq!(out.text, "    29\tline 29\n    30\tline 30\n");
        // a limit alone starts at line 1; no range: the text as it is
        let out = read(json!({"path": "f.txt", "limit": 1})).await;
        assert!(
            out.text.starts_with("     1\tline 1\n(lines 1-1 of 30"),
            "{}",
            out.text
        );
        assert_eq!(read(json!({"path": "f.txt"})).await.text, text);
        // past the end, and bad numbers
        let out = read(json!({"path": "f.txt", "offset": 31})).await;
        assert!(
            out.is_error
                && out
                    .text
                    .contains("offset 31 is past the end: the file has 30 lines")
                // the path as the model named it (below the working directory)
                && out.text.starts_with("f.txt: "),
            "{}",
            out.text
        );
        for bad in [
            json!({"path": "f.txt", "offset": 0}),
            json!({"path": "f.txt", "limit": 10_001}),
        ] {
            let err = t.prepare(&bad).err().unwrap_or_default();
            assert!(err.contains("must be an integer from 1 to"), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn a_file_too_big_to_read_whole_can_be_read_by_ranges() {
        let work = tempfile::tempdir().unwrap();
        let line = "x".repeat(99) + "\n";
        let big = line.repeat(11_000); // 1.1 MB
        std::fs::write(work.path().join("big.txt"), &big).unwrap();
        let e = env("read_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = ReadFileTool { env: e.clone() };
        let whole = call(&t, AlgebraKind::Files, &e, json!({"path": "big.txt"})).await;
        assert!(
            whole.is_error && whole.text.contains("pass offset and limit"),
            "{}",
            whole.text
        );
        let part = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "big.txt", "offset": 10_999, "limit": 5}),
        )
        .await;
        assert!(!part.is_error, "{}", part.text);
        assert!(
            part.text.starts_with(" 10999\t") && part.text.lines().count() == 2,
            "{}",
            part.text
        );
    }
}
