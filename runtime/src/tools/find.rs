//! `find`: glob-walk a directory tree. Symlinks are listed by name and never followed, so the walk stays below the
//! (canonical, granted) root.

use std::path::{Path, PathBuf};

use loom_kernel::{wildcard_match, Access, CallFacts, Request};
use serde_json::{json, Value};

use super::{check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use crate::model::ToolSpec;
use crate::update::{Location, ToolKind};

/// The default result limit.
pub const DEFAULT_LIMIT: usize = 200;
/// The most directory entries one call visits.
pub const MAX_VISITED: usize = 200_000;

/// Matches a `/`-separated relative path against a glob: `*` matches any run of non-`/` characters, `?` one
/// non-`/` character, and a `**` segment any number of segments (including none).
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let t: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    segments(&p, &t)
}

fn segments(p: &[&str], t: &[&str]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((&"**", rest)) => (0..=t.len()).any(|k| segments(rest, &t[k..])),
        // within one segment there is no `/`, so the kernel's `*`/`?` matcher is exactly a segment glob
        Some((seg, rest)) => !t.is_empty() && wildcard_match(seg, t[0]) && segments(rest, &t[1..]),
    }
}

/// The `find` tool.
#[derive(Debug)]
pub struct FindTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for FindTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("find")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Find files by glob below a root (default {}). `*` matches within one path segment, `**` any \
                 depth. Symlinks are listed, not followed. The root must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Glob, e.g. **/*.rs or src/*.md." },
                    "root": { "type": "string", "description": "Directory to walk. Default \".\"." },
                    "limit": { "type": "integer", "minimum": 1, "description": "Max results. Default 200." },
                },
                "required": ["pattern"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["pattern", "root", "limit"])?;
        let pattern = str_field(input, &name, "pattern")?.to_string();
        let root_in = match input.get("root") {
            None | Some(Value::Null) => ".",
            Some(_) => str_field(input, &name, "root")?,
        };
        let limit = match input.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("{name}: limit must be a positive integer"))?,
        };
        let root = resolve_path(&self.env.cwd, root_in, PathMode::Existing)
            .map_err(|e| format!("{name}: {e}"))?;
        let shown = root.display().to_string();
        Ok(Prepared {
            request: Request::File {
                path: shown.clone(),
                access: Access::Read,
            },
            facts: CallFacts {
                tool: name.clone(),
                path: Some(shown.clone()),
                ..CallFacts::default()
            },
            locations: vec![Location { path: shown }],
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    let cancel = ctx.cancel.clone();
                    let walk =
                        tokio::task::spawn_blocking(move || walk(&root, &pattern, limit, &cancel));
                    match walk.await {
                        Ok(Ok(out)) => out,
                        Ok(Err(e)) => ToolOutput::error(e),
                        Err(e) => ToolOutput::error(e.to_string()),
                    }
                })
            }),
        })
    }
}

fn walk(
    root: &Path,
    pattern: &str,
    limit: usize,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    if !root.is_dir() {
        return Err(format!("{}: not a directory", root.display()));
    }
    let mut found = Vec::new();
    let mut more = 0usize;
    let mut visited = 0usize;
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        if cancel.is_cancelled() {
            return Ok(ToolOutput::interrupted(""));
        }
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > MAX_VISITED {
                break;
            }
            let r = rel.join(entry.file_name());
            let text = r.to_string_lossy().into_owned();
            if glob_match(pattern, &text) {
                if found.len() < limit {
                    found.push(text.clone());
                } else {
                    more += 1;
                }
            }
            // file_type() does not follow symlinks: linked directories are never entered
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(r);
            }
        }
    }
    found.sort();
    let mut text = found.join("\n");
    if found.is_empty() {
        text = format!("no files match {pattern:?} below {}", root.display());
    }
    if more > 0 {
        text.push_str(&format!("\n(limit {limit} reached; {more} more not shown)"));
    }
    if visited > MAX_VISITED {
        text.push_str(&format!(
            "\n(stopped after visiting {MAX_VISITED} entries; narrow the root)"
        ));
    }
    Ok(ToolOutput::ok(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[test]
    fn globs() {
        for (p, t, want) in [
            ("*.rs", "a.rs", true),
            ("*.rs", "src/a.rs", false),
            ("**/*.rs", "a.rs", true),
            ("**/*.rs", "src/x/a.rs", true),
            ("src/*.md", "src/a.md", true),
            ("src/**", "src/a/b", true),
            ("a?c", "abc", true),
            ("a?c", "a/c", false),
        ] {
            assert_eq!(glob_match(p, t), want, "{p} vs {t}");
        }
    }

    #[tokio::test]
    async fn finds_below_the_root_without_following_links() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("src/x")).unwrap();
        for f in ["src/a.rs", "src/x/b.rs", "top.rs", "note.md"] {
            std::fs::write(work.path().join(f), "").unwrap();
        }
        std::fs::write(outside.path().join("hidden.rs"), "").unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("link")).unwrap();
        let en = env("find", work.path(), r#"{ paths = ["./"] }"#);
        let t = FindTool { env: en.clone() };
        let out = call(&t, AlgebraKind::Files, &en, json!({"pattern": "**/*.rs"})).await;
        assert_eq!(out.text, "src/a.rs\nsrc/x/b.rs\ntop.rs");
        let lim = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"pattern": "**/*.rs", "limit": 1}),
        )
        .await;
        assert!(lim.text.contains("2 more not shown"), "{}", lim.text);
        let via = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"pattern": "*", "root": "link"}),
        )
        .await;
        assert!(
            via.is_error && via.text.contains("outside this tool's grant"),
            "{}",
            via.text
        );
    }
}
