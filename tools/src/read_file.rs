//! `read_file`: read a UTF-8 file.

use loom_kernel::{Access, CallFacts, Request};
use serde_json::{json, Value};

use super::beneath::{open_read, read_capped, size_of, Target};
use super::client::read_text;
use super::{check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolKind};

/// The largest file `read_file` returns (1 MiB).
pub const MAX_READ_BYTES: u64 = 1024 * 1024;

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
                 tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string", "description": "The file to read." } },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = &self.env.instance;
        check_fields(input, name, &["path"])?;
        let raw = str_field(input, name, "path")?;
        let path = resolve_path(&self.env.cwd, raw, PathMode::Existing)
            .map_err(|e| format!("{name}: {e}"))?;
        let shown = path.display().to_string();
        let ctx_paths = self.env.ctx.clone();
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
            locations: vec![Location {
                path: shown.clone(),
            }],
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let target = match Target::of(&auth, &ctx_paths, &path, Access::Read) {
                        Ok(t) => t,
                        Err(e) => return ToolOutput::error(e),
                    };
                    match read_text(&ctx, &path, move || read(&target)).await {
                        Ok(text) if text.len() as u64 > MAX_READ_BYTES => ToolOutput::error(format!(
                            "{shown}: the text is {} bytes; read_file returns at most {MAX_READ_BYTES} — use bash \
                             (head, sed -n) for a part",
                            text.len()
                        )),
                        Ok(text) => ToolOutput::ok(text),
                        Err(e) => ToolOutput::error(format!("{shown}: {e}")),
                    }
                })
            }),
        })
    }
}

/// Reads the regular file `target` beneath its grant root (see [`super::beneath`]).
fn read(target: &Target) -> Result<String, String> {
    let (mut f, st) = open_read(target, "use find to list it")?;
    if size_of(&st) > MAX_READ_BYTES {
        return Err(format!(
            "the file is {} bytes; read_file returns at most {MAX_READ_BYTES} — use bash (head, sed -n) for a part",
            size_of(&st)
        ));
    }
    let bytes = read_capped(&mut f, MAX_READ_BYTES)?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, call_after, env};
    use loom_kernel::AlgebraKind;

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
}
