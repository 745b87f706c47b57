//! `file_compare`: a unified diff of two UTF-8 files (the `similar` crate's line diff, bounded in time and size).
//! Both paths are decided by the kernel like `read_file` calls, the second as [`super::Prepared::more`].

use std::time::Duration;

use loom_kernel::{Access, CallFacts, Request};
use serde_json::{json, Value};
use similar::TextDiff;

use super::beneath::{open_read, read_capped, size_of, Target};
use super::client::read_text;
use super::read_call::{int_field, shown_from};
use super::{check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolKind};

/// The largest file compared.
pub const COMPARE_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// The most bytes of diff returned.
const DIFF_CAP: usize = 256 * 1024;
/// How long the diff may search for a minimal answer before it settles for a correct, larger one.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// The `file_compare` tool.
#[derive(Debug)]
pub struct FileCompareTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for FileCompareTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("file_compare")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Compare two UTF-8 files: a unified diff from `a` to `b` with `context` lines (default 3). Paths \
                 resolve against {} and both must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "a": { "type": "string" },
                    "b": { "type": "string" },
                    "context": { "type": "integer", "minimum": 0, "maximum": 50 },
                },
                "required": ["a", "b"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["a", "b", "context"])?;
        let context = int_field(input, &name, "context", 3, (0, 50))?;
        let mut paths = Vec::with_capacity(2);
        for key in ["a", "b"] {
            let raw = str_field(input, &name, key)?;
            paths.push(
                resolve_path(&self.env.cwd, raw, PathMode::Existing)
                    .map_err(|e| format!("{name}: {key}: {e}"))?,
            );
        }
        let [a, b]: [std::path::PathBuf; 2] = paths
            .try_into()
            .map_err(|_| format!("{name}: needs a and b"))?;
        let req = |p: &std::path::Path| {
            let shown = p.display().to_string();
            (
                Request::File {
                    path: shown.clone(),
                    access: Access::Read,
                },
                CallFacts {
                    tool: name.clone(),
                    path: Some(shown),
                    ..CallFacts::default()
                },
            )
        };
        let (request, facts) = req(&a);
        let second = req(&b);
        let (ctx_paths, cwd) = (self.env.ctx.clone(), self.env.cwd.clone());
        Ok(Prepared {
            request,
            more: vec![second],
            facts,
            locations: vec![
                Location {
                    path: a.display().to_string(),
                },
                Location {
                    path: b.display().to_string(),
                },
            ],
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let Some(auth_b) = ctx.more.first().cloned() else {
                        return ToolOutput::error(
                            "file_compare: the kernel did not decide `b`; nothing was read",
                        );
                    };
                    let mut texts = Vec::with_capacity(2);
                    for (au, p) in [(auth, &a), (auth_b, &b)] {
                        let shown = shown_from(&cwd, p);
                        let got = match Target::of(&au, &ctx_paths, p, Access::Read) {
                            Ok(t) => read_text(&ctx, p, move || read_whole(&t)).await,
                            Err(e) => Err(e.to_string()),
                        };
                        match got {
                            Ok(t) => texts.push((shown, t)),
                            Err(e) => return ToolOutput::error(format!("{shown}: {e}")),
                        }
                    }
                    let (ta, tb) = (&texts[0], &texts[1]);
                    if ta.1 == tb.1 {
                        return ToolOutput::ok(format!("{} and {} are identical", ta.0, tb.0));
                    }
                    let diff = TextDiff::configure()
                        .timeout(DIFF_TIMEOUT)
                        .diff_lines(ta.1.as_str(), tb.1.as_str());
                    let mut text = diff
                        .unified_diff()
                        .context_radius(context)
                        .header(&ta.0, &tb.0)
                        .to_string();
                    if text.len() > DIFF_CAP {
                        let mut end = DIFF_CAP;
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        let total = text.len();
                        text.truncate(end);
                        text.push_str(&format!("\n[diff cut at {DIFF_CAP} of {total} bytes]"));
                    }
                    ToolOutput {
                        raw_output: Some(json!({ "ratio": diff.ratio() })),
                        text,
                        ..ToolOutput::default()
                    }
                })
            }),
        })
    }
}

fn read_whole(target: &Target) -> Result<String, String> {
    let (mut f, st) = open_read(target, "file_compare compares files, not directories")?;
    if size_of(&st) > COMPARE_MAX_BYTES {
        return Err(format!(
            "the file is {} bytes; file_compare compares files of at most {COMPARE_MAX_BYTES} bytes",
            size_of(&st)
        ));
    }
    let bytes = read_capped(&mut f, COMPARE_MAX_BYTES)?;
    if bytes.contains(&0) {
        return Err("a binary file; file_compare compares text".into());
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn a_unified_diff_of_two_files_and_both_paths_decided() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(work.path().join("b.txt"), "one\n2\nthree\n").unwrap();
        std::fs::write(outside.path().join("c.txt"), "one\n").unwrap();
        let e = env("file_compare", work.path(), r#"{ read_paths = ["./"] }"#);
        let t = FileCompareTool { env: e.clone() };
        let d = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"a": "a.txt", "b": "b.txt", "context": 1}),
        )
        .await;
        assert_eq!(
            d.text, "--- a.txt\n+++ b.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
            "{}",
            d.text
        );
        let same = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"a": "a.txt", "b": "a.txt"}),
        )
        .await;
        assert_eq!(same.text, "a.txt and a.txt are identical");
        let c = outside.path().join("c.txt").display().to_string();
        let no = call(&t, AlgebraKind::Files, &e, json!({"a": "a.txt", "b": c})).await;
        assert!(
            no.is_error && no.text.contains("outside this tool's grant"),
            "{}",
            no.text
        );
    }
}
