//! `glob`: the files below a directory whose path matches a glob, newest first — like `find`, but honouring
//! `.gitignore` and skipping hidden entries as `grep` does ([`super::ignores`]), and listing files only. The walk stays
//! beneath the granted root and never follows a symlink ([`super::walk`]).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::beneath::Target;
use super::find::glob_match;
use super::ignores::Ignores;
use super::read_call::{int_field, path_field, read_call, shown_from};
use super::walk::{open_file, open_top, walk, EntryKind, Visit, Walked};
use super::{bool_field, check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The default number of paths returned.
pub const DEFAULT_LIMIT: usize = 200;
/// The most paths one call may ask for.
pub const MAX_LIMIT: usize = 5000;
/// The most entries one call visits.
pub const MAX_VISITED: usize = 200_000;

/// The `glob` tool.
#[derive(Debug)]
pub struct GlobTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for GlobTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("glob")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "List the files whose path below `path` (default {}) matches a glob (`*` within a segment, `**` \
                 any depth), most recently modified first; .gitignore'd and hidden files are skipped, symlinks are \
                 not followed. The path must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Glob, e.g. **/*.rs or src/**/test_*.py." },
                    "path": { "type": "string", "description": "Directory to search. Default \".\"." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("Max paths. Default {DEFAULT_LIMIT}.") },
                    "hidden": { "type": "boolean", "description": "Also hidden files and directories (never .git). Default false." },
                },
                "required": ["pattern"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["pattern", "path", "limit", "hidden"])?;
        let pattern = str_field(input, &name, "pattern")?.to_string();
        if pattern.is_empty() {
            return Err(format!("{name}: pattern is empty"));
        }
        let path_in = path_field(input, &name, "path")?;
        let limit = int_field(input, &name, "limit", DEFAULT_LIMIT, (1, MAX_LIMIT))?;
        let hidden = bool_field(input, &name, "hidden")?;
        let cwd = self.env.cwd.clone();
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, root, _shown, cancel| {
                matching(target, root, &cwd, &pattern, limit, hidden, cancel)
            }),
        )
    }
}

fn matching(
    target: &Target,
    root: &Path,
    cwd: &Path,
    pattern: &str,
    limit: usize,
    hidden: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    // the root as the model names it, for messages
    let told = shown_from(cwd, root);
    let top = open_top(target, Path::new(&told))?;
    let mut ignores = Ignores::new(target, root);
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    let walked = walk(&top, MAX_VISITED, cancel, &mut |e| {
        if ignores.skips(&top, e, hidden) {
            return Visit::Skip;
        }
        if e.kind == EntryKind::File && glob_match(pattern, &e.rel.to_string_lossy()) {
            // the file's modification time, from the file opened beneath the top (never through a link)
            let mtime = open_file(&top, &e.rel)
                .and_then(|f| f.metadata())
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            found.push((mtime, e.rel.clone()));
        }
        Visit::Continue
    });
    if walked == Walked::Cancelled {
        return Ok(ToolOutput::interrupted(""));
    }
    // newest first; equal times by path, so the order is stable
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let shown = |rel: &Path| shown_from(cwd, &root.join(rel));
    let mut lines: Vec<String> = found.iter().take(limit).map(|(_, r)| shown(r)).collect();
    if lines.is_empty() {
        lines.push(format!("no files match {pattern:?} below {told}"));
    }
    if total > limit {
        lines.push(format!(
            "({} more not shown; narrow the pattern or raise limit)",
            total - limit
        ));
    }
    if walked == Walked::TooMany {
        lines.push(format!(
            "(stopped after visiting {MAX_VISITED} entries; search a narrower path)"
        ));
    }
    Ok(ToolOutput {
        text: lines.join("\n"),
        raw_output: Some(json!({ "matches": total })),
        ..ToolOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn newest_first_gitignore_and_hidden_honoured_links_not_followed() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = |p: &str| {
            let p = work.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
            p
        };
        let old = w("src/old.rs");
        w("src/new.rs");
        w("target/gen.rs");
        w(".hidden/h.rs");
        std::fs::write(work.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::write(outside.path().join("o.rs"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("link")).unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(past)
            .unwrap();
        let e = env("glob", work.path(), r#"{ paths = ["./"] }"#);
        let t = GlobTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"pattern": "**/*.rs"})).await;
        assert_eq!(out.text, "src/new.rs\nsrc/old.rs");
        let out = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"pattern": "**/*.rs", "hidden": true, "limit": 1}),
        )
        .await;
        assert!(
            out.text
                .ends_with("(2 more not shown; narrow the pattern or raise limit)"),
            "{}",
            out.text
        );
        let out = call(&t, AlgebraKind::Files, &e, json!({"pattern": "*.py"})).await;
        assert!(
            out.text.starts_with("no files match \"*.py\""),
            "{}",
            out.text
        );
    }
}
