//! `grep`: search file contents for a regular expression below a path, with ripgrep's engine (`grep-regex`,
//! `grep-searcher`) and its `.gitignore` rules (`ignore`).
//!
//! The kernel decides the call on the path it names (a directory or one file), as for `find`. Below it the walk
//! stays beneath the granted root ([`super::walk`]): symlinks are never followed, and a directory swapped for a link
//! mid-walk is skipped. Each file's contents are read only after the kernel's authority check on that file's own
//! path ([`loom_kernel::authority_denial`]): a secret store below the path is left out and counted, never searched,
//! whatever the grant says. Hidden files and directories, `.git`, what `.gitignore` files (from the grant root down)
//! ignore, binary files and files over [`MAX_FILE_BYTES`] are skipped as ripgrep skips them; the output is bounded
//! by a match limit and [`MAX_OUTPUT_BYTES`].

use std::io::Read;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use loom_kernel::{authority_denial, Access, Authority, Request};
use serde_json::{json, Value};

use super::beneath::Target;
use super::find::glob_match;
use super::ignores::Ignores;
use super::read_call::{int_field, path_field, read_call, shown_from};
use super::walk::{open_file_len, open_top, walk, EntryKind, Visit, Walked};
use super::{bool_field, check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The default number of matching lines returned.
pub const DEFAULT_LIMIT: usize = 100;
/// The most matching lines one call may ask for.
pub const MAX_LIMIT: usize = 2000;
/// The most context lines around a match.
pub const MAX_CONTEXT: usize = 10;
/// Files larger than this are skipped (and counted).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// The most entries one call visits.
pub const MAX_VISITED: usize = 200_000;
/// The most bytes of result text; the rest is cut with a note.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// A longer line is cut to this many characters in the output.
pub const MAX_LINE_CHARS: usize = 400;
/// The compiled pattern's size bound (a pathological pattern is refused, not built).
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;

/// The `grep` tool.
#[derive(Debug)]
pub struct GrepTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

/// One call's parameters.
#[derive(Debug, Clone)]
struct Query {
    pattern: String,
    glob: Option<String>,
    case_insensitive: bool,
    context: usize,
    limit: usize,
    hidden: bool,
}

impl Tool for GrepTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("grep")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Search file contents for a regular expression (Rust regex syntax) below a path (default {}), \
                 like ripgrep: .gitignore'd, hidden and binary files are skipped, symlinks are not followed. \
                 Prints `path:line:text` for each match (`path-line-text` for context lines). The path must be \
                 inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Regular expression, e.g. fn\\s+main or TODO." },
                    "path": { "type": "string", "description": "File or directory to search. Default \".\"." },
                    "glob": { "type": "string", "description": "Only files whose name (or, with a /, whose path below `path`) matches, e.g. *.rs or src/**/*.ts." },
                    "case_insensitive": { "type": "boolean", "description": "Default false." },
                    "context": { "type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match. Default 0." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("Max matching lines. Default {DEFAULT_LIMIT}.") },
                    "hidden": { "type": "boolean", "description": "Also search hidden files and directories (never .git). Default false." },
                },
                "required": ["pattern"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(
            input,
            &name,
            &[
                "pattern",
                "path",
                "glob",
                "case_insensitive",
                "context",
                "limit",
                "hidden",
            ],
        )?;
        let pattern = str_field(input, &name, "pattern")?.to_string();
        let path_in = path_field(input, &name, "path")?;
        let glob = match input.get("glob") {
            None | Some(Value::Null) => None,
            Some(_) => Some(str_field(input, &name, "glob")?.to_string()),
        };
        let query = Query {
            // checked now, so a bad pattern is the model's error before any decision
            pattern: check_pattern(&name, &pattern)?,
            glob,
            case_insensitive: bool_field(input, &name, "case_insensitive")?,
            context: int_field(input, &name, "context", 0, (0, MAX_CONTEXT))?,
            limit: int_field(input, &name, "limit", DEFAULT_LIMIT, (1, MAX_LIMIT))?,
            hidden: bool_field(input, &name, "hidden")?,
        };
        let (cwd, authority) = (self.env.cwd.clone(), self.env.authority.clone());
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, root, _shown, cancel| {
                let search = Search {
                    tool: name,
                    query,
                    root: root.to_path_buf(),
                    cwd,
                    authority,
                };
                search.run(target, cancel)
            }),
        )
    }
}

/// Builds the pattern once to check it; the error names the tool and what is wrong.
fn check_pattern(tool: &str, pattern: &str) -> Result<String, String> {
    if pattern.is_empty() {
        return Err(format!("{tool}: pattern is empty"));
    }
    matcher(pattern, false).map_err(|e| format!("{tool}: pattern {pattern:?}: {e}"))?;
    Ok(pattern.to_string())
}

fn matcher(pattern: &str, case_insensitive: bool) -> Result<grep_regex::RegexMatcher, String> {
    RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build(pattern)
        .map_err(|e| e.to_string())
}

/// One search, run on the blocking pool.
struct Search {
    tool: String,
    query: Query,
    /// The path the kernel decided on (canonical): a directory or one file.
    root: PathBuf,
    cwd: PathBuf,
    authority: std::sync::Arc<Authority>,
}

/// What the search found and left out.
#[derive(Default)]
struct Found {
    /// The read buffer, reused from file to file.
    buf: Vec<u8>,
    text: String,
    matches: usize,
    /// Matches beyond the limit (counted in the file where the limit was reached only).
    limit_reached: bool,
    cut: bool,
    files: usize,
    withheld: Vec<String>,
    too_large: usize,
    binary: usize,
    unreadable: usize,
}

impl Search {
    fn run(
        &self,
        target: &Target,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<ToolOutput, String> {
        let matcher = matcher(&self.query.pattern, self.query.case_insensitive)
            .map_err(|e| format!("{}: {e}", self.tool))?;
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(self.query.context)
            .after_context(self.query.context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut found = Found::default();
        // one file named: search it, under the same authority check
        if self.root.is_file() {
            let (Some(parent), Some(file)) = (target.rel.parent(), target.rel.file_name()) else {
                return Err(format!(
                    "{}: not a file below its root",
                    self.shown(&self.root)
                ));
            };
            let dir_target = Target {
                root: target.root.clone(),
                rel: parent.to_path_buf(),
            };
            let shown_dir = self.shown(self.root.parent().unwrap_or(Path::new("/")));
            let top = open_top(&dir_target, Path::new(&shown_dir))?;
            self.search_file(&mut searcher, &matcher, &top, Path::new(file), &mut found);
            return Ok(self.report(found, Walked::Done));
        }
        let top = open_top(target, Path::new(&self.shown(&self.root)))?;
        let mut ignores = Ignores::new(target, &self.root);
        let walked = walk(&top, MAX_VISITED, cancel, &mut |e| {
            if ignores.skips(&top, e, self.query.hidden) {
                return Visit::Skip;
            }
            if e.kind != EntryKind::File || !self.glob_matches(&e.rel) {
                return Visit::Continue;
            }
            self.search_file(&mut searcher, &matcher, &top, &e.rel, &mut found);
            if found.limit_reached || found.cut {
                Visit::Stop
            } else {
                Visit::Continue
            }
        });
        if walked == Walked::Cancelled {
            return Ok(ToolOutput::interrupted(""));
        }
        Ok(self.report(found, walked))
    }

    fn glob_matches(&self, rel: &Path) -> bool {
        match &self.query.glob {
            None => true,
            Some(g) if g.contains('/') => glob_match(g, &rel.to_string_lossy()),
            Some(g) => rel
                .file_name()
                .is_some_and(|n| glob_match(g, &n.to_string_lossy())),
        }
    }

    /// The path shown for a file: relative to the agent's working directory when below it.
    fn shown(&self, abs: &Path) -> String {
        shown_from(&self.cwd, abs)
    }

    fn search_file(
        &self,
        searcher: &mut Searcher,
        matcher: &grep_regex::RegexMatcher,
        top: &std::os::fd::OwnedFd,
        rel: &Path,
        found: &mut Found,
    ) {
        let abs = if self.root.is_file() {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        // the kernel's authority check on this file's own path: a secret store is never read
        let request = Request::File {
            path: abs.display().to_string(),
            access: Access::Read,
        };
        if authority_denial(&self.tool, &request, &self.authority).is_some() {
            found.withheld.push(self.shown(&abs));
            return;
        }
        let Ok((mut file, len)) = open_file_len(top, rel) else {
            found.unreadable += 1;
            return;
        };
        if len > MAX_FILE_BYTES {
            found.too_large += 1;
            return;
        }
        // one buffer for the whole search, sized from the fstat: no growth per file
        let mut bytes = std::mem::take(&mut found.buf);
        bytes.clear();
        bytes.reserve(usize::try_from(len).unwrap_or(0).saturating_add(1));
        if Read::take(&mut file, MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .is_err()
        {
            found.unreadable += 1;
            found.buf = bytes;
            return;
        }
        found.files += 1;
        let mut sink = FileSink {
            shown: None,
            abs: &abs,
            cwd: &self.cwd,
            lines: Vec::new(),
            matches: 0,
            room: self.query.limit - found.matches,
            binary: false,
            last: None,
        };
        let searched = searcher.search_slice(matcher, &bytes, &mut sink);
        let FileSink {
            lines,
            matches,
            binary,
            ..
        } = sink;
        found.buf = bytes;
        if searched.is_err() {
            found.unreadable += 1;
            return;
        }
        if binary {
            found.binary += 1;
            return;
        }
        found.matches += matches;
        if found.matches >= self.query.limit {
            found.limit_reached = true;
        }
        for line in lines {
            if found.text.len() + line.len() + 1 > MAX_OUTPUT_BYTES {
                found.cut = true;
                break;
            }
            found.text.push_str(&line);
            found.text.push('\n');
        }
    }

    fn report(&self, found: Found, walked: Walked) -> ToolOutput {
        let mut text = if found.matches == 0 {
            format!(
                "no match for {:?} in {}",
                self.query.pattern,
                self.shown(&self.root)
            )
        } else {
            found.text.trim_end().to_string()
        };
        let mut notes = Vec::new();
        if found.limit_reached {
            notes.push(format!(
                "stopped at the limit of {} matching lines; narrow the pattern, the path or the glob, or raise limit",
                self.query.limit
            ));
        }
        if found.cut {
            notes.push(format!(
                "output cut at {MAX_OUTPUT_BYTES} bytes; narrow the search"
            ));
        }
        if walked == Walked::TooMany {
            notes.push(format!(
                "stopped after visiting {MAX_VISITED} entries; search a narrower path"
            ));
        }
        if !found.withheld.is_empty() {
            notes.push(format!(
                "not searched: {} (secret stores, withheld by loom)",
                found.withheld.join(", ")
            ));
        }
        if found.too_large > 0 {
            notes.push(format!(
                "{} over {MAX_FILE_BYTES} bytes skipped",
                files(found.too_large)
            ));
        }
        if found.binary > 0 {
            notes.push(format!("binary: {} skipped", files(found.binary)));
        }
        if found.unreadable > 0 {
            notes.push(format!("{} could not be read", files(found.unreadable)));
        }
        for n in notes {
            text.push_str(&format!("\n({n})"));
        }
        ToolOutput {
            text,
            raw_output: Some(json!({
                "matches": found.matches,
                "filesSearched": found.files,
                "withheld": found.withheld,
            })),
            ..ToolOutput::default()
        }
    }
}

/// "1 file", "2 files".
fn files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

/// Collects one file's lines in `path:line:text` / `path-line-text` form, `--` between separate groups.
struct FileSink<'a> {
    /// The file as shown, made at its first line (most files match nothing).
    shown: Option<String>,
    abs: &'a Path,
    cwd: &'a Path,
    lines: Vec<String>,
    matches: usize,
    /// Matching lines this file may still add before the call's limit.
    room: usize,
    binary: bool,
    /// The last line number written, to place `--` between groups.
    last: Option<u64>,
}

impl FileSink<'_> {
    fn push(&mut self, line_number: Option<u64>, sep: char, bytes: &[u8]) {
        let n = line_number.unwrap_or(0);
        if let Some(last) = self.last {
            if n > last + 1 {
                self.lines.push("--".into());
            }
        }
        self.last = Some(n);
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text: String = if text.chars().count() > MAX_LINE_CHARS {
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            format!("{cut}… (line cut)")
        } else {
            text.to_string()
        };
        let (abs, cwd) = (self.abs, self.cwd);
        let shown = self.shown.get_or_insert_with(|| shown_from(cwd, abs));
        self.lines.push(format!("{shown}{sep}{n}{sep}{text}"));
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if self.matches >= self.room {
            return Ok(false);
        }
        self.matches += 1;
        self.push(mat.line_number(), ':', mat.bytes());
        Ok(self.matches < self.room)
    }

    fn context(&mut self, _s: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        self.push(ctx.line_number(), '-', ctx.bytes());
        Ok(true)
    }

    fn binary_data(&mut self, _s: &Searcher, _offset: u64) -> Result<bool, std::io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::{AlgebraKind, AuthorityFile, AuthorityKind};

    fn tree(root: &Path) {
        let w = |p: &str, t: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w(
            "src/main.rs",
            "fn main() {\n    // TODO: greet\n    println!(\"hi\");\n}\n",
        );
        w("src/lib.rs", "pub fn todo_list() {}\n// todo: lower case\n");
        w("notes.md", "TODO write docs\n");
        w("target/debug/out.txt", "TODO in a build artefact\n");
        w(".hidden/x.txt", "TODO hidden\n");
        w("bin.dat", "TODO\0binary\n");
        w(".gitignore", "target/\n");
    }

    async fn grep(dir: &Path, grant: &str, input: Value) -> ToolOutput {
        let e = env("grep", dir, grant);
        let t = GrepTool { env: e.clone() };
        call(&t, AlgebraKind::Files, &e, input).await
    }

    #[tokio::test]
    async fn finds_matches_with_line_numbers_and_skips_what_ripgrep_skips() {
        let work = tempfile::tempdir().unwrap();
        tree(work.path());
        let out = grep(
            work.path(),
            r#"{ paths = ["./"] }"#,
            json!({"pattern": "TODO"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        let lines: Vec<&str> = out.text.lines().collect();
        assert!(
            lines.contains(&"src/main.rs:2:    // TODO: greet"),
            "{}",
            out.text
        );
        assert!(
            lines.contains(&"notes.md:1:TODO write docs"),
            "{}",
            out.text
        );
        // .gitignore'd, hidden and binary files are not searched
        for absent in ["target/debug", ".hidden/x.txt", "bin.dat:"] {
            assert!(!out.text.contains(absent), "{absent}: {}", out.text);
        }
        assert!(
            out.text.contains("(binary: 1 file skipped)"),
            "{}",
            out.text
        );
        // hidden on request; case-insensitive; a glob on the file name
        let out = grep(
            work.path(),
            r#"{ paths = ["./"] }"#,
            json!({"pattern": "todo", "case_insensitive": true, "glob": "*.rs", "hidden": true}),
        )
        .await;
        assert_eq!(
            out.text.lines().filter(|l| !l.starts_with('(')).count(),
            3,
            "{}",
            out.text
        );
        assert!(!out.text.contains("notes.md"));
    }

    #[tokio::test]
    async fn context_lines_limit_and_a_single_file() {
        let work = tempfile::tempdir().unwrap();
        tree(work.path());
        let out = grep(
            work.path(),
            r#"{ paths = ["./"] }"#,
            json!({"pattern": "TODO", "path": "src/main.rs", "context": 1}),
        )
        .await;
        assert_eq!(
            out.text,
            "src/main.rs-1-fn main() {\nsrc/main.rs:2:    // TODO: greet\nsrc/main.rs-3-    println!(\"hi\");"
        );
        let out = grep(
            work.path(),
            r#"{ paths = ["./"] }"#,
            json!({"pattern": "TODO", "limit": 1}),
        )
        .await;
        assert!(
            out.text.contains("stopped at the limit of 1"),
            "{}",
            out.text
        );
        assert_eq!(out.raw_output.as_ref().unwrap()["matches"], 1);
    }

    #[tokio::test]
    async fn the_grant_decides_the_path_and_secret_stores_are_never_read() {
        let work = tempfile::tempdir().unwrap();
        tree(work.path());
        std::fs::write(work.path().join("public.txt"), "s3cret in a plain file\n").unwrap();
        std::fs::write(work.path().join("vault.env"), "TODO-s3cret\n").unwrap();
        let root = std::fs::canonicalize(work.path()).unwrap();
        let mut e = env("grep", work.path(), r#"{ paths = ["./src"] }"#);
        // outside the grant: refused by the kernel before anything is read
        let t = GrepTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"pattern": "TODO"})).await;
        assert!(
            out.is_error && out.text.contains("outside this tool's grant"),
            "{}",
            out.text
        );
        // a secret store below a granted directory: left out and named, never searched
        e = env("grep", work.path(), r#"{ paths = ["./"] }"#);
        e.authority = std::sync::Arc::new(Authority::new([AuthorityFile::new(
            root.join("vault.env").display().to_string(),
            AuthorityKind::SecretStore,
            "[secrets] file",
        )]));
        let t = GrepTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"pattern": "s3cret"})).await;
        assert!(!out.text.contains("vault.env:"), "{}", out.text);
        assert!(
            out.text.contains("not searched: vault.env (secret stores"),
            "{}",
            out.text
        );
        // the control: the same word in a file that is no secret store is found
        assert!(
            out.text.contains("public.txt:1:s3cret in a plain file"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_any_decision() {
        let work = tempfile::tempdir().unwrap();
        let e = env("grep", work.path(), r#"{ paths = ["./"] }"#);
        let t = GrepTool { env: e };
        for (input, says) in [
            (json!({"pattern": "("}), "pattern \"(\""),
            (json!({"pattern": ""}), "pattern is empty"),
            (
                json!({"pattern": "x", "context": 11}),
                "context must be an integer from 0 to 10",
            ),
            (
                json!({"pattern": "x", "limit": 0}),
                "limit must be an integer from 1 to 2000",
            ),
        ] {
            let e = t.prepare(&input).err().unwrap_or_default();
            assert!(e.contains(says), "{input}: {e}");
        }
        // a path that is not there is decided first, like any other (nothing says what is missing outside the
        // grant), and then reported
        assert!(t.prepare(&json!({"pattern": "x", "path": "nope"})).is_ok());
    }

    #[tokio::test]
    async fn a_symlinked_directory_is_not_followed() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "TODO outside\n").unwrap();
        std::fs::write(work.path().join("in.txt"), "TODO inside\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("link")).unwrap();
        let out = grep(
            work.path(),
            r#"{ paths = ["./"] }"#,
            json!({"pattern": "TODO"}),
        )
        .await;
        assert!(out.text.contains("in.txt:1:TODO inside"), "{}", out.text);
        assert!(!out.text.contains("outside"), "{}", out.text);
    }
}
