//! `find`: glob-walk a directory tree. Symlinks are listed by name and never followed, so the walk stays below the
//! (canonical, granted) root.

use std::path::Path;

use loom_kernel::wildcard_match;
use serde_json::{json, Value};

use super::beneath::Target;
use super::read_call::read_call;
use super::walk::{open_top, walk as walk_tree, Visit, Walked};
use super::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The default result limit.
pub const DEFAULT_LIMIT: usize = 200;
/// The most directory entries one call visits.
pub const MAX_VISITED: usize = 200_000;

/// The most bytes of result text `find` returns; the rest is cut with a note saying so.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Matches a `/`-separated relative path against a glob: `*` matches any run of non-`/` characters, `?` one
/// non-`/` character, and a `**` segment any number of segments (including none).
///
/// The match runs over the path's segments once, keeping the set of pattern positions still alive (an NFA
/// simulation, no backtracking), so it costs at most `(segments of the pattern + 1) · (segments of the path + 1)`
/// segment matches whatever the pattern — `**/**/**/x` is as cheap as `**/x`.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    glob_steps(pattern, path).0
}

/// [`glob_match`] and the number of segment steps it took.
fn glob_steps(pattern: &str, path: &str) -> (bool, usize) {
    let p: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let mut steps = 0usize;
    // alive[i]: pattern segments before i have matched the path segments seen so far
    let mut alive = vec![false; p.len() + 1];
    alive[0] = true;
    let close = |alive: &mut Vec<bool>, steps: &mut usize| {
        // a `**` may match no segment: whoever reaches it also reaches the segment after it
        for i in 0..p.len() {
            *steps += 1;
            if alive[i] && p[i] == "**" {
                alive[i + 1] = true;
            }
        }
    };
    close(&mut alive, &mut steps);
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let mut next = vec![false; p.len() + 1];
        for i in 0..p.len() {
            steps += 1;
            if !alive[i] {
                continue;
            }
            if p[i] == "**" {
                next[i] = true;
            } else if wildcard_match(p[i], seg) {
                // within one segment there is no `/`, so the kernel's `*`/`?` matcher is exactly a segment glob
                next[i + 1] = true;
            }
        }
        close(&mut next, &mut steps);
        alive = next;
        if !alive.contains(&true) {
            return (false, steps);
        }
    }
    (alive[p.len()], steps)
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
        read_call(
            &self.env,
            root_in,
            Box::new(move |target, _root, shown, cancel| {
                walk(target, shown, &pattern, limit, cancel)
            }),
        )
    }
}

/// Walks the tree below `target` (the `find` root, `shown` for messages) beneath its grant root (see
/// [`super::walk`]): a directory swapped for a link mid-walk is skipped, never entered.
fn walk(
    target: &Target,
    shown: &Path,
    pattern: &str,
    limit: usize,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    let top = open_top(target, shown)?;
    let mut found = Vec::new();
    let mut more = 0usize;
    let walked = walk_tree(&top, MAX_VISITED, cancel, &mut |e| {
        let text = e.rel.to_string_lossy().into_owned();
        if glob_match(pattern, &text) {
            if found.len() < limit {
                found.push(text);
            } else {
                more += 1;
            }
        }
        Visit::Continue
    });
    if walked == Walked::Cancelled {
        return Ok(ToolOutput::interrupted(""));
    }
    found.sort();
    let mut text = String::new();
    let mut cut = 0usize;
    for f in &found {
        if text.len() + f.len() + 1 > MAX_OUTPUT_BYTES {
            cut += 1;
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(f);
    }
    if found.is_empty() {
        text = format!("no files match {pattern:?} below {}", shown.display());
    }
    if cut > 0 {
        text.push_str(&format!(
            "\n(output cut at {MAX_OUTPUT_BYTES} bytes; {cut} more matches not shown — narrow the pattern or the root)"
        ));
    }
    if more > 0 {
        text.push_str(&format!("\n(limit {limit} reached; {more} more not shown)"));
    }
    if walked == Walked::TooMany {
        text.push_str(&format!(
            "\n(stopped after visiting {MAX_VISITED} entries; narrow the root)"
        ));
    }
    Ok(ToolOutput::ok(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
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

    /// `**` is matched without backtracking: a pattern of many `**` against a deep path of long names costs at most
    /// (pattern segments + 1) · (path segments + 1) segment steps (the old recursion tried every split: C(d+k, k)).
    #[test]
    fn globstar_matching_is_polynomial() {
        let name = "n".repeat(200);
        let deep: Vec<&str> = std::iter::repeat_n(name.as_str(), 40).collect();
        let path = deep.join("/");
        for stars in [8usize, 40] {
            let mut pattern = "**/".repeat(stars);
            pattern.push('x');
            let (hit, steps) = glob_steps(&pattern, &path);
            assert!(!hit);
            let bound = (stars + 2) * (deep.len() + 2) * 2;
            assert!(steps <= bound, "{stars} stars: {steps} steps > {bound}");
            let mut yes = pattern.clone();
            yes.pop();
            yes.push_str(&name);
            assert!(glob_steps(&yes, &path).0);
        }
        assert!(glob_match("a/**/**/b", "a/b"));
        assert!(glob_match("a/**/b/**", "a/x/y/b"));
        assert!(!glob_match("a/**/b", "a/x/c"));
    }

    #[tokio::test]
    async fn the_output_is_capped_with_a_note() {
        let work = tempfile::tempdir().unwrap();
        let long = "f".repeat(200);
        for i in 0..600 {
            std::fs::write(work.path().join(format!("{long}{i:04}")), "").unwrap();
        }
        let en = env("find", work.path(), r#"{ paths = ["./"] }"#);
        let t = FindTool { env: en.clone() };
        let out = call(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"pattern": "*", "limit": 100000}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert!(
            out.text.len() <= MAX_OUTPUT_BYTES + 200,
            "{}",
            out.text.len()
        );
        assert!(
            out.text.contains("output cut at"),
            "{}",
            &out.text[out.text.len() - 200..]
        );
    }

    #[tokio::test]
    async fn a_directory_swapped_for_a_link_mid_walk_is_not_entered() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        std::fs::write(work.path().join("d/in.rs"), "").unwrap();
        std::fs::write(outside.path().join("hidden.rs"), "").unwrap();
        let en = env("find", work.path(), r#"{ paths = ["./"] }"#);
        let t = FindTool { env: en.clone() };
        let out = crate::testutil::call_after(
            &t,
            AlgebraKind::Files,
            &en,
            json!({"pattern": "**/*.rs", "root": "d"}),
            || {
                std::fs::rename(work.path().join("d"), work.path().join("d.old")).unwrap();
                std::os::unix::fs::symlink(outside.path(), work.path().join("d")).unwrap();
            },
        )
        .await;
        assert!(
            out.is_error && out.text.contains("changed after loom checked it"),
            "{}",
            out.text
        );
        assert!(!out.text.contains("hidden"));
    }
}
