//! `read_many`: several UTF-8 files in one call. Every path is decided by the kernel like a `read_file` call (the
//! first as the call's request, the rest as [`super::Prepared::more`]), so one path outside the grant, an authority
//! file, or a `[permissions]` rule refuses the whole call before anything is read.

use std::path::PathBuf;

use loom_kernel::{Access, Authorization, CallFacts, Request};
use serde_json::{json, Value};

use super::beneath::{open_read, read_capped, size_of, Target};
use super::client::read_text;
use super::read_call::{int_field, shown_from};
use super::{check_fields, resolve_path, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolKind};

/// The most files one call reads.
pub const READ_MANY_MAX_FILES: usize = 32;
/// The default and largest bytes shown of each file.
const PER_FILE_DEFAULT: usize = 64 * 1024;
const PER_FILE_MAX: usize = 1024 * 1024;
/// The most bytes one call returns in all.
pub const READ_MANY_TOTAL: usize = 1024 * 1024;

/// The `read_many` tool.
#[derive(Debug)]
pub struct ReadManyTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ReadManyTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("read_many")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Read several UTF-8 files at once, each under a `==> path <==` header (at most {READ_MANY_MAX_FILES} \
                 files; each cut at `max_bytes`, default {PER_FILE_DEFAULT}). Paths resolve against {} and every one \
                 must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "paths": { "type": "array", "items": { "type": "string" }, "minItems": 1, "maxItems": READ_MANY_MAX_FILES },
                    "max_bytes": { "type": "integer", "minimum": 1, "maximum": PER_FILE_MAX },
                },
                "required": ["paths"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["paths", "max_bytes"])?;
        let raw: Vec<&str> = input
            .get("paths")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
            .ok_or_else(|| format!("{name}: paths must be an array of path strings"))?;
        if raw.is_empty() || raw.len() > READ_MANY_MAX_FILES {
            return Err(format!(
                "{name}: paths must name 1 to {READ_MANY_MAX_FILES} files (it names {})",
                raw.len()
            ));
        }
        let cap = int_field(
            input,
            &name,
            "max_bytes",
            PER_FILE_DEFAULT,
            (1, PER_FILE_MAX),
        )?;
        let mut paths: Vec<PathBuf> = Vec::with_capacity(raw.len());
        for r in raw {
            let p = resolve_path(&self.env.cwd, r, PathMode::Existing)
                .map_err(|e| format!("{name}: {r}: {e}"))?;
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        let mut requests = paths.iter().map(|p| {
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
        });
        let (request, facts) = requests
            .next()
            .ok_or_else(|| format!("{name}: paths is empty"))?;
        let more: Vec<(Request, CallFacts)> = requests.collect();
        let (ctx_paths, cwd) = (self.env.ctx.clone(), self.env.cwd.clone());
        let seen = self.env.seen.clone();
        Ok(Prepared {
            request,
            more,
            facts,
            locations: paths
                .iter()
                .map(|p| Location {
                    path: p.display().to_string(),
                })
                .collect(),
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let auths: Vec<Authorization> =
                        std::iter::once(auth).chain(ctx.more.clone()).collect();
                    if auths.len() != paths.len() {
                        return ToolOutput::error(
                            "read_many: the kernel did not decide every path; nothing was read",
                        );
                    }
                    let mut text = String::new();
                    let mut failed = 0usize;
                    for (a, path) in auths.into_iter().zip(&paths) {
                        let shown = shown_from(&cwd, path);
                        text.push_str(&format!("==> {shown} <==\n"));
                        if text.len() >= READ_MANY_TOTAL {
                            text.push_str("[not read: the call's output reached its bound; read it on its own]\n\n");
                            continue;
                        }
                        // each file within its own cap and what is left of the call's bound
                        let room = cap.min(READ_MANY_TOTAL - text.len());
                        let body = match Target::of(&a, &ctx_paths, path, Access::Read) {
                            Ok(target) => {
                                let c = room as u64;
                                read_text(&ctx, path, move || read_head(&target, c)).await
                            }
                            Err(e) => Err(e.to_string()),
                        };
                        match body {
                            Ok(mut b) => {
                                if b.len() <= room {
                                    seen.saw(path, b.as_bytes());
                                }
                                if b.len() > room {
                                    let mut end = room;
                                    while !b.is_char_boundary(end) {
                                        end -= 1;
                                    }
                                    b.truncate(end);
                                    b.push_str(&format!(
                                        "\n[cut at {room} bytes{}; read_file with offset/limit reads the rest]",
                                        if room < cap {
                                            " (the call's output reached its bound)"
                                        } else {
                                            ""
                                        }
                                    ));
                                }
                                text.push_str(&b);
                                if !b.ends_with('\n') {
                                    text.push('\n');
                                }
                            }
                            Err(e) => {
                                failed += 1;
                                text.push_str(&format!("[error: {e}]\n"));
                            }
                        }
                        text.push('\n');
                    }
                    ToolOutput {
                        is_error: failed == paths.len(),
                        raw_output: Some(json!({ "files": paths.len(), "failed": failed })),
                        text,
                        ..ToolOutput::default()
                    }
                })
            }),
        })
    }
}

/// The first `cap` bytes of the regular file at `target` (one more, to tell it was cut), as UTF-8 text.
fn read_head(target: &Target, cap: u64) -> Result<String, String> {
    let (mut f, st) = open_read(
        target,
        "read_many reads files; list a directory with list_directory",
    )?;
    let bytes = read_capped(&mut f, cap)?;
    if bytes.contains(&0) {
        return Err(format!("a binary file ({} bytes)", size_of(&st)));
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        // a cut may fall inside a character: keep the valid prefix
        Err(e) if e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut b = e.into_bytes();
            b.truncate(valid);
            String::from_utf8(b).map_err(|_| "not UTF-8 text".to_string())
        }
        Err(_) => Err("not UTF-8 text".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn reads_each_file_and_refuses_the_call_when_one_path_is_outside() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(work.path().join("b.txt"), "beta").unwrap();
        std::fs::write(work.path().join("bin"), b"\x00\x01").unwrap();
        std::fs::write(outside.path().join("c.txt"), "secret").unwrap();
        let e = env("read_many", work.path(), r#"{ read_paths = ["./"] }"#);
        let t = ReadManyTool { env: e.clone() };
        let ok = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"paths": ["a.txt", "b.txt", "bin"]}),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text);
        assert_eq!(
            ok.text,
            "==> a.txt <==\nalpha\n\n==> b.txt <==\nbeta\n\n==> bin <==\n[error: a binary file (2 bytes)]\n\n"
        );
        let c = outside.path().join("c.txt").display().to_string();
        let no = call(&t, AlgebraKind::Files, &e, json!({"paths": ["a.txt", c]})).await;
        assert!(
            no.is_error && no.text.contains("outside this tool's grant"),
            "{}",
            no.text
        );
        assert!(
            !no.text.contains("alpha") && !no.text.contains("secret"),
            "{}",
            no.text
        );
        let cut = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"paths": ["a.txt"], "max_bytes": 3}),
        )
        .await;
        assert!(
            cut.text.starts_with("==> a.txt <==\nalp\n[cut at 3 bytes"),
            "{}",
            cut.text
        );
    }

    /// `read_before_write`: a file read whole counts as seen; one cut short does not.
    #[tokio::test]
    async fn only_a_file_read_whole_counts_as_seen() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(work.path().join("b.txt"), "beta, a longer text\n").unwrap();
        let e = crate::ToolEnv {
            seen: crate::SeenFiles::guarding(),
            ..env("read_many", work.path(), r#"{ read_paths = ["./"] }"#)
        };
        let t = ReadManyTool { env: e.clone() };
        let args = json!({"paths": ["a.txt", "b.txt"], "max_bytes": 8});
        assert!(!call(&t, AlgebraKind::Files, &e, args).await.is_error);
        let check = |name: &str, text: &[u8]| e.seen.check(&e.cwd.join(name), text, &e.undo);
        assert_eq!(check("a.txt", b"alpha\n"), Ok(()));
        assert_eq!(
            check("b.txt", b"beta, a longer text\n"),
            Err(crate::Unseen::NeverRead)
        );
    }

    #[tokio::test]
    async fn the_whole_call_stays_within_its_bound() {
        let work = tempfile::tempdir().unwrap();
        for n in ["a", "b", "c"] {
            std::fs::write(work.path().join(n), "x".repeat(600 * 1024)).unwrap();
        }
        let e = env("read_many", work.path(), r#"{ read_paths = ["./"] }"#);
        let t = ReadManyTool { env: e.clone() };
        let out = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"paths": ["a", "b", "c"], "max_bytes": PER_FILE_MAX}),
        )
        .await;
        assert!(!out.is_error);
        assert!(
            out.text.len() <= READ_MANY_TOTAL + 512,
            "{} bytes",
            out.text.len()
        );
        assert!(out.text.contains("(the call's output reached its bound)"));
        assert!(out
            .text
            .contains("==> c <==\n[not read: the call's output reached its bound"));
    }
}
