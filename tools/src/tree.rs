//! `tree`: a directory's layout to a depth, indented, directories first — `.gitignore`d and hidden entries left out as
//! `grep` and `glob` leave them ([`super::ignores`]); the walk stays beneath the granted root and never follows a
//! symlink ([`super::walk`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::beneath::Target;
use super::ignores::Ignores;
use super::read_call::{int_field, path_field, read_call};
use super::walk::{open_top, walk, EntryKind, Visit, Walked};
use super::{bool_field, check_fields, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The default depth.
pub const DEFAULT_DEPTH: usize = 3;
/// The deepest a call may ask for.
pub const MAX_DEPTH: usize = 10;
/// The most entries shown.
pub const MAX_ENTRIES: usize = 1000;

/// The `tree` tool.
#[derive(Debug)]
pub struct TreeTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for TreeTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("tree")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Show a directory's layout (default {}) to a depth, indented, directories first; .gitignore'd and \
                 hidden entries are left out, symlinks are marked @ and not followed. The directory must be inside \
                 this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The directory. Default \".\"." },
                    "depth": { "type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": format!("Levels below it. Default {DEFAULT_DEPTH}.") },
                    "hidden": { "type": "boolean", "description": "Include hidden entries (never .git). Default false." },
                },
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "depth", "hidden"])?;
        let path_in = path_field(input, &name, "path")?;
        let depth = int_field(input, &name, "depth", DEFAULT_DEPTH, (1, MAX_DEPTH))?;
        let hidden = bool_field(input, &name, "hidden")?;
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, root, shown, cancel| {
                draw(target, root, shown, depth, hidden, cancel)
            }),
        )
    }
}

fn draw(
    target: &Target,
    root: &Path,
    shown: &Path,
    depth: usize,
    hidden: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    let top = open_top(target, shown)?;
    let mut ignores = Ignores::new(target, root);
    // each directory's children: (is a directory, name shown)
    let mut children: BTreeMap<PathBuf, Vec<(bool, String)>> = BTreeMap::new();
    let mut seen = 0usize;
    let mut more = false;
    let walked = walk(&top, MAX_ENTRIES * 20, cancel, &mut |e| {
        if ignores.skips(&top, e, hidden) {
            return Visit::Skip;
        }
        let is_dir = e.kind == EntryKind::Dir;
        seen += 1;
        if seen > MAX_ENTRIES {
            more = true;
            return Visit::Stop;
        }
        let name = e.name.to_string_lossy();
        let label = match e.kind {
            EntryKind::Dir => format!("{name}/"),
            EntryKind::Link => format!("{name}@"),
            _ => name.into_owned(),
        };
        let parent = e.rel.parent().unwrap_or(Path::new("")).to_path_buf();
        children.entry(parent).or_default().push((is_dir, label));
        if is_dir && e.rel.components().count() >= depth {
            Visit::Skip
        } else {
            Visit::Continue
        }
    });
    if walked == Walked::Cancelled {
        return Ok(ToolOutput::interrupted(""));
    }
    for list in children.values_mut() {
        // directories first, then by name
        list.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    }
    let mut lines = vec![format!("{}/", shown.display())];
    fn emit(
        dir: &Path,
        level: usize,
        children: &BTreeMap<PathBuf, Vec<(bool, String)>>,
        lines: &mut Vec<String>,
    ) {
        let Some(list) = children.get(dir) else {
            return;
        };
        for (is_dir, label) in list {
            lines.push(format!("{}{label}", "  ".repeat(level)));
            if *is_dir {
                emit(
                    &dir.join(label.trim_end_matches('/')),
                    level + 1,
                    children,
                    lines,
                );
            }
        }
    }
    emit(Path::new(""), 1, &children, &mut lines);
    if more || walked == Walked::TooMany {
        lines.push(format!(
            "(stopped at {MAX_ENTRIES} entries; show a narrower path or a smaller depth)"
        ));
    }
    Ok(ToolOutput::ok(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn draws_to_the_depth_asked_dirs_first_ignores_honoured() {
        let work = tempfile::tempdir().unwrap();
        let w = |p: &str| {
            let p = work.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        };
        w("src/a/deep.rs");
        w("src/main.rs");
        w("README.md");
        w("target/x");
        w(".env");
        std::fs::write(work.path().join(".gitignore"), "target/\n").unwrap();
        std::os::unix::fs::symlink("/etc", work.path().join("etc")).unwrap();
        let e = env("tree", work.path(), r#"{ paths = ["./"] }"#);
        let t = TreeTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"depth": 2})).await;
        // the root as the model names it: the working directory is `./`, a directory below it relative
        assert_eq!(
            out.text,
            "./\n  src/\n    a/\n    main.rs\n  README.md\n  etc@"
        );
        let out = call(&t, AlgebraKind::Files, &e, json!({"depth": 0})).await;
        assert!(out.is_error, "{}", out.text);
        let t2 = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "src", "hidden": true}),
        )
        .await;
        assert!(t2.text.starts_with("src/\n"), "{}", t2.text);
        assert!(t2.text.contains("    deep.rs"), "{}", t2.text);
    }
}
