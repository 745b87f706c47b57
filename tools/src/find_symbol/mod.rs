//! `find_symbol`: where a name is declared (not used) in Rust, Python, JavaScript/TypeScript and Go sources below a
//! path — bounded, line-based declaration matching ([`symbols`], a pure module), no language server. The walk is the
//! one `grep` uses: beneath the granted root, never through a symlink, `.gitignore`d and hidden files skipped, and
//! every file's own path put to the kernel's authority check before it is opened (a secret store is never read).

mod symbols;

use std::io::Read;
use std::path::{Path, PathBuf};

use loom_kernel::{authority_denial, Access, Authority, Request};
use serde_json::{json, Value};

use super::beneath::Target;
use super::ignores::Ignores;
use super::read_call::{int_field, path_field, read_call, shown_from};
use super::walk::{open_file, open_top, walk, EntryKind, Visit, Walked};
use super::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
use symbols::{lang_of, Matcher};

/// The most entries one search visits.
pub const SYMBOL_MAX_VISITED: usize = 100_000;
/// The largest source file read.
const MAX_SOURCE_BYTES: u64 = 2 * 1024 * 1024;
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;

/// The `find_symbol` tool.
#[derive(Debug)]
pub struct FindSymbolTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for FindSymbolTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("find_symbol")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Find where `name` is declared — Rust fn/struct/enum/trait/impl/…, Python def/class, JS/TS \
                 function/class/const/method/interface, Go func/type/var — in source files below `path` (default: \
                 the working directory, {}), as `path:line: kind: line`. Line-based matching, not a compiler: usages \
                 are not listed. Must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "An identifier." },
                    "path": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT },
                },
                "required": ["name"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        check_fields(input, &tool, &["name", "path", "limit"])?;
        let name = str_field(input, &tool, "name")?;
        let matcher = Matcher::new(name).map_err(|e| format!("{tool}: {e}"))?;
        let path_in = path_field(input, &tool, "path")?;
        let limit = int_field(input, &tool, "limit", DEFAULT_LIMIT, (1, MAX_LIMIT))?;
        let (cwd, authority) = (self.env.cwd.clone(), self.env.authority.clone());
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, root, _shown, cancel| {
                let s = Search {
                    tool,
                    matcher,
                    limit,
                    cwd,
                    authority,
                    root: root.to_path_buf(),
                };
                s.run(target, cancel)
            }),
        )
    }
}

struct Search {
    tool: String,
    matcher: Matcher,
    limit: usize,
    cwd: PathBuf,
    authority: std::sync::Arc<Authority>,
    root: PathBuf,
}

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    files: usize,
    withheld: Vec<String>,
    skipped: usize,
    limit_reached: bool,
}

impl Search {
    fn run(
        &self,
        target: &Target,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<ToolOutput, String> {
        let mut found = Found::default();
        if self.root.is_file() {
            let (Some(parent), Some(file)) = (target.rel.parent(), target.rel.file_name()) else {
                return Err(format!(
                    "{}: cannot open it",
                    shown_from(&self.cwd, &self.root)
                ));
            };
            let dir_target = Target {
                root: target.root.clone(),
                rel: parent.to_path_buf(),
            };
            let parent_shown = shown_from(&self.cwd, self.root.parent().unwrap_or(Path::new("/")));
            let top = open_top(&dir_target, Path::new(&parent_shown))?;
            self.file(&top, Path::new(file), &mut found);
            return Ok(self.report(found, Walked::Done));
        }
        let top = open_top(target, Path::new(&shown_from(&self.cwd, &self.root)))?;
        let mut ignores = Ignores::new(target, &self.root);
        let walked = walk(&top, SYMBOL_MAX_VISITED, cancel, &mut |e| {
            if ignores.skips(&top, e, false) {
                return Visit::Skip;
            }
            if e.kind == EntryKind::File && lang_of(&e.rel).is_some() {
                self.file(&top, &e.rel, &mut found);
                if found.limit_reached {
                    return Visit::Stop;
                }
            }
            Visit::Continue
        });
        if walked == Walked::Cancelled {
            return Ok(ToolOutput::interrupted(""));
        }
        Ok(self.report(found, walked))
    }

    fn file(&self, top: &std::os::fd::OwnedFd, rel: &Path, found: &mut Found) {
        let Some(lang) = lang_of(rel) else {
            return;
        };
        let abs = if self.root.is_file() {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        let request = Request::File {
            path: abs.display().to_string(),
            access: Access::Read,
        };
        if authority_denial(&self.tool, &request, &self.authority).is_some() {
            found.withheld.push(shown_from(&self.cwd, &abs));
            return;
        }
        let Ok(file) = open_file(top, rel) else {
            found.skipped += 1;
            return;
        };
        if file.metadata().map_or(true, |m| m.len() > MAX_SOURCE_BYTES) {
            found.skipped += 1;
            return;
        }
        let mut text = String::new();
        if Read::take(file, MAX_SOURCE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            found.skipped += 1;
            return;
        }
        found.files += 1;
        if !self.matcher.may_match(&text) {
            return;
        }
        let room = self.limit - found.lines.len();
        let decls = self.matcher.declarations(lang, &text, room + 1);
        let shown = shown_from(&self.cwd, &abs);
        for d in decls {
            if found.lines.len() >= self.limit {
                found.limit_reached = true;
                break;
            }
            found
                .lines
                .push(format!("{shown}:{}: {}: {}", d.line, d.kind, d.text));
        }
    }

    fn report(&self, found: Found, walked: Walked) -> ToolOutput {
        let name = self.matcher.name();
        let mut text = if found.lines.is_empty() {
            format!(
                "no declaration of `{name}` found in {} source file(s) below {}",
                found.files,
                shown_from(&self.cwd, &self.root)
            )
        } else {
            found.lines.join("\n")
        };
        if found.limit_reached {
            text.push_str(&format!(
                "\n[stopped at {} declarations; pass a narrower path or a larger limit]",
                self.limit
            ));
        }
        if walked == Walked::TooMany {
            text.push_str(&format!(
                "\n[the search stopped after {SYMBOL_MAX_VISITED} entries; pass a narrower path]"
            ));
        }
        if !found.withheld.is_empty() {
            text.push_str(&format!(
                "\nnot searched: {} (secret stores are not read)",
                found.withheld.join(", ")
            ));
        }
        if found.skipped > 0 {
            text.push_str(&format!(
                "\n({} file(s) skipped: unreadable, not UTF-8, or over {MAX_SOURCE_BYTES} bytes)",
                found.skipped
            ));
        }
        ToolOutput {
            text,
            raw_output: Some(json!({ "declarations": found.lines.len(), "files": found.files })),
            ..ToolOutput::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn finds_declarations_not_usages_and_stays_in_the_grant() {
        let work = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let p = work.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w("src/lib.rs", "pub struct Parser;\n\nimpl Parser {\n    pub fn parse(&self) {}\n}\nfn main() { Parser.parse(); }\n");
        w(
            "web/app.ts",
            "export function parse(x: string) {\n  return x;\n}\nparse('a');\n",
        );
        w("ignored/x.py", "def parse():\n    pass\n");
        w(".gitignore", "ignored/\n");
        w("README.md", "fn parse() in a readme\n");
        let e = env("find_symbol", work.path(), r#"{ read_paths = ["./"] }"#);
        let t = FindSymbolTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"name": "parse"})).await;
        assert!(!out.is_error, "{}", out.text);
        let mut lines: Vec<&str> = out.text.lines().collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                "src/lib.rs:4: fn: pub fn parse(&self) {}",
                "web/app.ts:1: function: export function parse(x: string) {"
            ]
        );
        let ty = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"name": "Parser", "path": "src"}),
        )
        .await;
        assert_eq!(
            ty.text,
            "src/lib.rs:1: struct: pub struct Parser;\nsrc/lib.rs:3: impl: impl Parser {"
        );
        let bad = call(&t, AlgebraKind::Files, &e, json!({"name": "not a name"})).await;
        assert!(bad.is_error, "{}", bad.text);
        let outside = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"name": "x", "path": "/etc"}),
        )
        .await;
        assert!(
            outside.is_error && outside.text.contains("outside this tool's grant"),
            "{}",
            outside.text
        );
    }
}
