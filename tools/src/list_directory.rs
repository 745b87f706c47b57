//! `list_directory`: the entries of one directory — subdirectories first, then files with their sizes — opened beneath
//! the granted root like every file tool ([`super::walk`]); a symlink is shown as one and never followed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::FileType;
use serde_json::{json, Value};

use super::beneath::Target;
use super::read_call::{int_field, path_field, read_call};
use super::walk::{open_dir, open_top};
use super::{bool_field, check_fields, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The default number of entries listed.
pub const DEFAULT_LIMIT: usize = 500;
/// The most entries one call may ask for.
pub const MAX_LIMIT: usize = 5000;

/// The `list_directory` tool.
#[derive(Debug)]
pub struct ListDirectoryTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ListDirectoryTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("list_directory")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "List one directory (default {}): subdirectories first (ending in /), then files with their sizes; \
                 symlinks are marked @ and not followed. The directory must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The directory. Default \".\"." },
                    "hidden": { "type": "boolean", "description": "Include names starting with a dot. Default true." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("Max entries. Default {DEFAULT_LIMIT}.") },
                },
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path", "hidden", "limit"])?;
        let path_in = path_field(input, &name, "path")?;
        let hidden = match input.get("hidden") {
            None | Some(Value::Null) => true,
            Some(_) => bool_field(input, &name, "hidden")?,
        };
        let limit = int_field(input, &name, "limit", DEFAULT_LIMIT, (1, MAX_LIMIT))?;
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, _dir, shown, _| list(target, shown, hidden, limit)),
        )
    }
}

/// Lists the directory `target` (`shown` in messages).
fn list(
    target: &Target,
    shown: &std::path::Path,
    hidden: bool,
    limit: usize,
) -> Result<ToolOutput, String> {
    let top = open_top(target, shown)?;
    let fd = open_dir(&top, std::path::Path::new(""))
        .map_err(|e| format!("{}: {e}", shown.display()))?;
    let entries =
        rustix::fs::Dir::read_from(&fd).map_err(|e| format!("{}: {e}", shown.display()))?;
    let (mut dirs, mut others) = (Vec::new(), Vec::new());
    for entry in entries.flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." || (!hidden && name.as_bytes().starts_with(b".")) {
            continue;
        }
        let text = name.to_string_lossy().into_owned();
        let st = rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok();
        match st.map(|s| (FileType::from_raw_mode(s.st_mode), s.st_size)) {
            Some((FileType::Directory, _)) => dirs.push(format!("{text}/")),
            Some((FileType::RegularFile, size)) => others.push(format!("{text}  ({size} bytes)")),
            Some((FileType::Symlink, _)) => {
                others.push(format!("{text}@  (symlink, not followed)"))
            }
            Some((FileType::Fifo, _)) => others.push(format!("{text}  (FIFO)")),
            Some((FileType::Socket, _)) => others.push(format!("{text}  (socket)")),
            Some((FileType::CharacterDevice | FileType::BlockDevice, _)) => {
                others.push(format!("{text}  (device)"))
            }
            _ => others.push(format!("{text}  (unknown)")),
        }
    }
    dirs.sort();
    others.sort();
    let total = dirs.len() + others.len();
    let mut lines: Vec<String> = dirs.into_iter().chain(others).take(limit).collect();
    if lines.is_empty() {
        lines.push(format!("{} is empty", shown.display()));
    }
    if total > limit {
        lines.push(format!(
            "({} more entries not shown; raise limit, or use find or grep)",
            total - limit
        ));
    }
    Ok(ToolOutput {
        text: lines.join("\n"),
        raw_output: Some(json!({ "entries": total })),
        ..ToolOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn lists_dirs_first_with_sizes_and_marks_links() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("src")).unwrap();
        std::fs::write(work.path().join("b.txt"), "12345").unwrap();
        std::fs::write(work.path().join(".env"), "").unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("out")).unwrap();
        let e = env("list_directory", work.path(), r#"{ paths = ["./"] }"#);
        let t = ListDirectoryTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({})).await;
        assert_eq!(
            out.text,
            "src/\n.env  (0 bytes)\nb.txt  (5 bytes)\nout@  (symlink, not followed)"
        );
        let out = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"hidden": false, "limit": 1}),
        )
        .await;
        assert_eq!(
            out.text,
            "src/\n(2 more entries not shown; raise limit, or use find or grep)"
        );
        // the grant decides the directory; a link to outside is refused by the kernel (resolved first)
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "out"})).await;
        assert!(
            out.is_error && out.text.contains("outside this tool's grant"),
            "{}",
            out.text
        );
        // messages name a path as the model names it, relative to the working directory
        let file = call(&t, AlgebraKind::Files, &e, json!({"path": "b.txt"})).await;
        assert!(
            file.is_error && file.text == "b.txt: not a directory",
            "{}",
            file.text
        );
        let empty = call(&t, AlgebraKind::Files, &e, json!({"path": "src"})).await;
        assert_eq!(empty.text, "src is empty");
    }
}
