//! `write_file`: write (or append to) a UTF-8 file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use loom_kernel::{Access, CallFacts, Request};
use serde_json::{json, Value};

use super::client::{read_text, writer};
use super::{
    bool_field, check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv,
    ToolOutput,
};
use crate::model::ToolSpec;
use crate::update::{Location, ToolCallContent, ToolKind};

/// The `write_file` tool.
#[derive(Debug)]
pub struct WriteFileTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for WriteFileTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("write_file")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Write a UTF-8 file in full (or append to it). For targeted changes to an existing file prefer \
                 edit_file. `path` is resolved against {} unless absolute and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "content": { "type": "string", "description": "Full file contents." },
                    "append": { "type": "boolean", "description": "Append instead of overwriting. Default false." },
                    "create_dirs": { "type": "boolean", "description": "Create missing parent directories. Default false." },
                },
                "required": ["path", "content"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "content", "append", "create_dirs"])?;
        let raw = str_field(input, &name, "path")?;
        let content = str_field(input, &name, "content")?.to_string();
        let append = bool_field(input, &name, "append")?;
        let create_dirs = bool_field(input, &name, "create_dirs")?;
        let path = resolve_path(&self.env.cwd, raw, PathMode::MayCreate)
            .map_err(|e| format!("{name}: {e}"))?;
        let shown = path.display().to_string();
        Ok(Prepared {
            request: Request::File {
                path: shown.clone(),
                access: Access::Write,
            },
            facts: CallFacts {
                tool: name.clone(),
                path: Some(shown.clone()),
                ..CallFacts::default()
            },
            locations: vec![Location {
                path: shown.clone(),
            }],
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    let p = path.clone();
                    let c = content.clone();
                    let done = match writer(&ctx) {
                        // the client writes (its buffer, then its disk); an append is read, extended, written whole
                        Some(client) => {
                            let p2 = p.clone();
                            match tokio::task::spawn_blocking(move || {
                                parent_ready(&p2, create_dirs)
                            })
                            .await
                            {
                                Ok(Ok(())) => Ok(async {
                                    let full = if append {
                                        read_text(&ctx, &p, read_or_empty).await? + &c
                                    } else {
                                        c
                                    };
                                    client
                                        .write_text_file(&p, full)
                                        .await
                                        .map_err(|e| format!("the client could not write it: {e}"))
                                }
                                .await),
                                other => other,
                            }
                        }
                        None => {
                            tokio::task::spawn_blocking(move || write(&p, &c, append, create_dirs))
                                .await
                        }
                    };
                    match done {
                        Ok(Ok(())) => ToolOutput {
                            text: format!(
                                "{} {} bytes to {shown}",
                                if append { "appended" } else { "wrote" },
                                content.len()
                            ),
                            content: if append {
                                vec![]
                            } else {
                                vec![ToolCallContent::Diff {
                                    path: shown.clone(),
                                    old_text: None,
                                    new_text: content,
                                }]
                            },
                            ..ToolOutput::default()
                        },
                        Ok(Err(e)) => ToolOutput::error(format!("{shown}: {e}")),
                        Err(e) => ToolOutput::error(format!("{shown}: {e}")),
                    }
                })
            }),
        })
    }
}

/// The file's text, or nothing when it does not exist yet (what an append extends).
fn read_or_empty(path: &std::path::Path) -> Result<String, String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e.to_string()),
    }
}

fn write(
    path: &std::path::Path,
    content: &str,
    append: bool,
    create_dirs: bool,
) -> Result<(), String> {
    parent_ready(path, create_dirs)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).custom_flags(libc::O_NOFOLLOW);
    if append {
        opts.append(true);
    } else {
        opts.truncate(true);
    }
    let mut f = opts.open(path).map_err(|e| e.to_string())?;
    f.write_all(content.as_bytes()).map_err(|e| e.to_string())?;
    f.flush().map_err(|e| e.to_string())
}

/// Creates the parent directory (`create_dirs`) or checks that it exists.
fn parent_ready(path: &std::path::Path, create_dirs: bool) -> Result<(), String> {
    if create_dirs {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
    } else if path.parent().is_some_and(|p| !p.is_dir()) {
        return Err(
            "the parent directory does not exist; pass create_dirs = true to create it".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn writes_appends_creates_dirs_and_refuses_outside() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let e = env("write_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = WriteFileTool { env: e.clone() };
        let w = |v: Value| call(&t, AlgebraKind::Files, &e, v);
        assert!(!w(json!({"path": "a.txt", "content": "one"})).await.is_error);
        assert!(
            !w(json!({"path": "a.txt", "content": "two", "append": true}))
                .await
                .is_error
        );
        assert_eq!(
            std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
            "onetwo"
        );
        let nested = w(json!({"path": "d/e/f.txt", "content": "x"})).await;
        assert!(
            nested.is_error && nested.text.contains("create_dirs"),
            "{}",
            nested.text
        );
        assert!(
            !w(json!({"path": "d/e/f.txt", "content": "x", "create_dirs": true}))
                .await
                .is_error
        );
        std::os::unix::fs::symlink(outside.path(), work.path().join("out")).unwrap();
        for p in [
            "out/evil.txt".to_string(),
            outside.path().join("x").display().to_string(),
        ] {
            let r = w(json!({"path": p, "content": "x"})).await;
            assert!(
                r.is_error && r.text.contains("may not write"),
                "{p}: {}",
                r.text
            );
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
