//! `file_info`: what a path is — its type, size, permissions and modification time, and for a text file its line
//! count — from the file opened beneath its granted root like every file tool; a regular file's content is read (to
//! count lines) only up to [`MAX_COUNTED_BYTES`].

use std::io::Read;
use std::os::unix::fs::MetadataExt;

use rustix::fs::{FileType, Mode, OFlags};
use serde_json::{json, Value};

use super::beneath::{open_beneath, Target};
use super::read_call::read_call;
use super::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// Lines are counted in files up to this size.
pub const MAX_COUNTED_BYTES: u64 = 16 * 1024 * 1024;

/// The `file_info` tool.
#[derive(Debug)]
pub struct FileInfoTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for FileInfoTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("file_info")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Describe a file or directory: type, size, permissions, modification time (UTC), and for a text \
                 file its line count. `path` is resolved against {} and must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string", "description": "The file or directory." } },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path"])?;
        let raw = str_field(input, &name, "path")?;
        read_call(
            &self.env,
            raw,
            Box::new(|target, _path, shown, _| describe(target, &shown.display().to_string())),
        )
    }
}

fn describe(target: &Target, shown: &str) -> Result<ToolOutput, String> {
    let root = target.open_root()?;
    // O_PATH: any kind of file, never through a symlink, nothing read yet
    let fd = open_beneath(
        std::os::fd::AsFd::as_fd(&root),
        &target.rel,
        OFlags::PATH,
        Mode::empty(),
    )
    .map_err(|e| format!("{shown}: {}", super::beneath::explain(e)))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("{shown}: {e}"))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        FileType::Unknown => "unknown",
    };
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let mut lines = vec![
        format!("path      {shown}"),
        format!("type      {kind}"),
        format!("size      {size} bytes"),
        format!("mode      {:o}", st.st_mode & 0o7777),
        format!("modified  {}", utc(st.st_mtime)),
    ];
    let mut info =
        json!({ "type": kind, "size": size, "mode": st.st_mode & 0o7777, "modified": st.st_mtime });
    if kind == "file" && size <= MAX_COUNTED_BYTES {
        // reopened for reading beneath the same root (non-blocking: a file swapped for a FIFO cannot hang it)
        let file = open_beneath(
            std::os::fd::AsFd::as_fd(&root),
            &target.rel,
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| format!("{shown}: {}", super::beneath::explain(e)))?;
        let mut file = std::fs::File::from(file);
        if file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.ino() == st.st_ino)
        {
            let mut bytes = Vec::new();
            if Read::take(&mut file, MAX_COUNTED_BYTES)
                .read_to_end(&mut bytes)
                .is_ok()
            {
                match std::str::from_utf8(&bytes) {
                    Ok(text) if !bytes.contains(&0) => {
                        let count = text.lines().count();
                        lines.push(format!("lines     {count} (UTF-8 text)"));
                        info["lines"] = json!(count);
                    }
                    _ => lines.push("content   binary or not UTF-8".into()),
                }
            }
        }
    }
    Ok(ToolOutput {
        text: lines.join("\n"),
        raw_output: Some(info),
        ..ToolOutput::default()
    })
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian, from the days-to-civil algorithm).
fn utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_342_400 + 3661), "2026-12-04 01:01:01 UTC");
        assert_eq!(utc(-1), "1969-12-31 23:59:59 UTC");
    }

    #[tokio::test]
    async fn describes_files_and_directories_inside_the_grant_only() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "one\ntwo\n").unwrap();
        std::fs::write(work.path().join("b.bin"), [0u8, 1, 2]).unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        let e = env("file_info", work.path(), r#"{ paths = ["./"] }"#);
        let t = FileInfoTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "a.txt"})).await;
        // the path as the model names it, relative to the working directory
        assert!(out.text.starts_with("path      a.txt\n"), "{}", out.text);
        assert!(
            out.text.contains("type      file\nsize      8 bytes"),
            "{}",
            out.text
        );
        assert!(
            out.text.ends_with("lines     2 (UTF-8 text)"),
            "{}",
            out.text
        );
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "b.bin"})).await;
        assert!(
            out.text.ends_with("content   binary or not UTF-8"),
            "{}",
            out.text
        );
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "d"})).await;
        assert!(out.text.contains("type      directory"), "{}", out.text);
        let out = call(&t, AlgebraKind::Files, &e, json!({"path": "/etc/passwd"})).await;
        assert!(
            out.is_error && out.text.contains("outside this tool's grant"),
            "{}",
            out.text
        );
    }
}
