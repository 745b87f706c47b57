//! `write_file`: write (or append to) a UTF-8 file.

use std::io::Write;

use loom_kernel::Access;
use rustix::fs::OFlags;
use serde_json::{json, Value};

use super::beneath::{
    explain, read_capped, run_blocking, size_of, BeneathError, Gate, Place, Target,
};
use super::client::{read_text, reader, writer};
use super::seen::{SeenFiles, Unseen};
use super::undo::{snapshot_of, UndoLog};
use super::{
    bool_field, check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv,
    ToolOutput,
};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{ToolCallContent, ToolKind};

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
        // what the model is told: the path as it would name it (relative below the working directory)
        let told = crate::read_call::shown_from(&self.env.cwd, &path);
        let ctx_paths = self.env.ctx.clone();
        let (log, tool) = (self.env.undo.clone(), name.clone());
        let seen = self.env.seen.clone();
        Ok(
            crate::CallHead::one_path(&name, &shown, Access::Write).then(Box::new(
                move |auth, ctx| {
                    Box::pin(async move {
                        let target = match Target::of(&auth, &ctx_paths, &path, Access::Write) {
                            Ok(t) => t,
                            Err(e) => return ToolOutput::error(format!("{told}: {e}")),
                        };
                        // what the file held, for undo (a file too large to keep is written without a snapshot)
                        let before = {
                            let t = target.clone();
                            run_blocking(&ctx.cancel, None, move || Ok(snapshot_of(&t))).await
                        };
                        let before = match before {
                            Ok(b) => b,
                            Err(e) => return ToolOutput::error(format!("{told}: {e}")),
                        };
                        // read_before_write: an existing file is replaced whole only when the session has seen
                        // the text it holds now (what the client's buffer holds, when the client serves reads)
                        if seen.is_on() && !append {
                            if let Err(refusal) =
                                unseen(&ctx, &path, &target, &before, &seen, &log).await
                            {
                                return ToolOutput::error(refusal.message(&told));
                            }
                        }
                        let done = match writer(&ctx) {
                            // the client writes (its buffer, then its disk); an append is read, extended, written whole.
                            // Missing directories are made here, beneath the root.
                            Some(client) => {
                                let t = target.clone();
                                let ready = run_blocking(&ctx.cancel, None, move || {
                                    Place::open(&t, create_dirs)
                                        .map(|_| ())
                                        .map_err(String::from)
                                })
                                .await;
                                match ready {
                                    Ok(()) => {
                                        let full = if append {
                                            let t = target.clone();
                                            read_text(&ctx, &path, move || read_or_empty(&t))
                                                .await
                                                .map(|old| old + &content)
                                        } else {
                                            Ok(content.clone())
                                        };
                                        match full {
                                            Ok(full) => client
                                                .write_text_file(&path, full)
                                                .await
                                                .map_err(|e| {
                                                    format!("the client could not write it: {e}")
                                                }),
                                            Err(e) => Err(e),
                                        }
                                    }
                                    Err(e) => Err(e),
                                }
                            }
                            None => {
                                let gate = Gate::default();
                                let (g, c) = (gate.clone(), content.clone());
                                run_blocking(&ctx.cancel, Some(&gate), move || {
                                    write(&target, &c, append, create_dirs, &g)
                                })
                                .await
                            }
                        };
                        let undo_note = match (&done, &before) {
                            (Ok(()), Ok(old)) => {
                                let mut after = if append {
                                    old.clone().unwrap_or_default()
                                } else {
                                    Vec::new()
                                };
                                after.extend_from_slice(content.as_bytes());
                                log.record(&path, old.as_deref(), Some(&after), &tool);
                                String::new()
                            }
                            (Ok(()), Err(why)) => {
                                format!(" (no undo snapshot: the old file is {why})")
                            }
                            (Err(_), _) => String::new(),
                        };
                        match done {
                            Ok(()) => ToolOutput {
                                text: format!(
                                    "{} {} bytes to {told}{undo_note}",
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
                            Err(e) => ToolOutput::error(format!("{told}: {e}")),
                        }
                    })
                },
            )),
        )
    }
}

/// Whether the file at `path` (`before`: what it held on disk, `None` for no file) may be replaced whole under
/// `read_before_write`: the text the model would read there now must be the text it last read or loom last wrote.
async fn unseen(
    ctx: &crate::ToolCtx,
    path: &std::path::Path,
    target: &Target,
    before: &Result<Option<Vec<u8>>, String>,
    seen: &SeenFiles,
    log: &UndoLog,
) -> Result<(), Unseen> {
    match (before, reader(ctx)) {
        (Ok(None), _) => Ok(()),
        (Ok(Some(bytes)), None) => seen.check(path, bytes, log),
        (Ok(Some(_)), Some(_)) => {
            let t = target.clone();
            match read_text(ctx, path, move || read_or_empty(&t)).await {
                Ok(text) => seen.check(path, text.as_bytes(), log),
                Err(why) => Err(Unseen::Unchecked(why)),
            }
        }
        // not a file that can be read (too large to keep, not a regular file): the guard cannot tell, so it refuses
        (Err(why), _) => Err(Unseen::Unchecked(why.clone())),
    }
}

/// The file's text, or nothing when it does not exist yet (what an append extends).
fn read_or_empty(target: &Target) -> Result<String, String> {
    let place = Place::open(target, false)?;
    match place.existing(OFlags::RDONLY)? {
        Some((mut f, _)) => {
            let bytes = read_capped(&mut f, u64::MAX - 1)?;
            String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
        }
        None => Ok(String::new()),
    }
}

/// Writes `content` to `target` beneath its root: a new or overwritten file is replaced whole (the old text stays
/// when anything fails); an append extends the existing file and cuts it back to its old length on failure.
fn write(
    target: &Target,
    content: &str,
    append: bool,
    create_dirs: bool,
    gate: &Gate,
) -> Result<(), String> {
    let place = Place::open(target, create_dirs)?;
    if append {
        if let Some((mut f, st)) = place.existing(OFlags::WRONLY | OFlags::APPEND)? {
            if !gate.commit() {
                return Err(BeneathError::Cancelled.into());
            }
            if let Err(e) = f.write_all(content.as_bytes()).and_then(|()| f.sync_all()) {
                let _ = rustix::fs::ftruncate(&f, size_of(&st));
                return Err(explain(e).into());
            }
            return Ok(());
        }
        return Ok(place.replace(content.as_bytes(), None, gate)?);
    }
    // the file being replaced must be a regular file loom may write (opened for writing, never truncated here)
    let old = place.existing(OFlags::WRONLY)?.map(|(_, st)| st);
    Ok(place.replace(content.as_bytes(), old.as_ref(), gate)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, call_after, env};
    use crate::ToolEnv;
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

    /// `read_before_write`: an existing file is replaced only once the session has read (or written) the text it
    /// holds; a new file and an append are not held back; off, a blind overwrite goes through as the seed's does.
    #[tokio::test]
    async fn read_before_write_refuses_a_file_the_session_has_not_seen() {
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("a.txt");
        std::fs::write(&file, "keep me\n").unwrap();
        let e = ToolEnv {
            seen: SeenFiles::guarding(),
            ..env("write_file", work.path(), r#"{ paths = ["./"] }"#)
        };
        let t = WriteFileTool { env: e.clone() };
        let r = crate::ReadFileTool {
            env: ToolEnv {
                instance: "read_file".into(),
                ..e.clone()
            },
        };
        let w = |v: Value| call(&t, AlgebraKind::Files, &e, v);
        let read = || std::fs::read_to_string(&file).unwrap();

        let blind = w(json!({"path": "a.txt", "content": "lost"})).await;
        assert!(blind.is_error, "{}", blind.text);
        assert_eq!(blind.text, Unseen::NeverRead.message("a.txt"));
        assert_eq!(read(), "keep me\n");
        // a new file and an append need no read
        assert!(!w(json!({"path": "b.txt", "content": "new"})).await.is_error);
        assert!(
            !w(json!({"path": "a.txt", "content": "more\n", "append": true}))
                .await
                .is_error
        );
        // read (a range shows part, the whole text is what was seen), then replaced
        let seen = call(
            &r,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "limit": 1}),
        )
        .await;
        assert!(!seen.is_error, "{}", seen.text);
        assert!(!w(json!({"path": "a.txt", "content": "one"})).await.is_error);
        assert_eq!(read(), "one");
        // what loom wrote may be written again; a change made behind the model's back may not
        assert!(!w(json!({"path": "a.txt", "content": "two"})).await.is_error);
        std::fs::write(&file, "changed by a command\n").unwrap();
        let stale = w(json!({"path": "a.txt", "content": "three"})).await;
        assert_eq!(stale.text, Unseen::Changed.message("a.txt"));
        assert_eq!(read(), "changed by a command\n");
        // a file the guard cannot read to compare is refused with the reason, without blocking on it
        crate::testutil::mkfifo(&work.path().join("p"));
        let fifo = w(json!({"path": "p", "content": "x"})).await;
        assert!(
            fifo.is_error
                && fifo
                    .text
                    .starts_with("p already exists and could not be read to check"),
            "{}",
            fifo.text
        );
        // the same calls with the guard off: the seed's write_file, no read needed
        let off = env("write_file", work.path(), r#"{ paths = ["./"] }"#);
        let plain = WriteFileTool { env: off.clone() };
        let out = call(
            &plain,
            AlgebraKind::Files,
            &off,
            json!({"path": "a.txt", "content": "four"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(read(), "four");
    }

    /// An editor's buffers, as an ACP client serves them.
    struct Buffers(std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, String>>);

    impl crate::ClientFs for Buffers {
        fn can_read(&self) -> bool {
            true
        }
        fn can_write(&self) -> bool {
            true
        }
        fn read_text_file(
            &self,
            path: &std::path::Path,
        ) -> futures::future::BoxFuture<'static, Result<String, String>> {
            let text = self.0.lock().unwrap().get(path).cloned();
            Box::pin(async move { text.ok_or_else(|| "no such buffer".to_string()) })
        }
        fn write_text_file(
            &self,
            path: &std::path::Path,
            content: String,
        ) -> futures::future::BoxFuture<'static, Result<(), String>> {
            self.0.lock().unwrap().insert(path.to_path_buf(), content);
            Box::pin(async { Ok(()) })
        }
    }

    /// In an editor the text compared is the buffer's, which is what the model read, not the disk's.
    #[tokio::test]
    async fn read_before_write_in_an_editor_compares_the_buffer() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "on disk\n").unwrap();
        let e = ToolEnv {
            seen: SeenFiles::guarding(),
            ..env("write_file", work.path(), r#"{ paths = ["./"] }"#)
        };
        let file = e.cwd.join("a.txt");
        let buffers = std::sync::Arc::new(Buffers(Default::default()));
        buffers
            .0
            .lock()
            .unwrap()
            .insert(file.clone(), "unsaved\n".into());
        let client = buffers.clone() as std::sync::Arc<dyn crate::ClientFs>;
        let t = WriteFileTool { env: e.clone() };
        let r = crate::ReadFileTool {
            env: ToolEnv {
                instance: "read_file".into(),
                ..e.clone()
            },
        };
        let w = |text: &str| {
            let input = json!({"path": "a.txt", "content": text});
            crate::testutil::call_in_client(&t, AlgebraKind::Files, &e, input, client.clone())
        };
        assert_eq!(w("x").await.text, Unseen::NeverRead.message("a.txt"));
        let read = json!({"path": "a.txt"});
        let seen =
            crate::testutil::call_in_client(&r, AlgebraKind::Files, &e, read, client.clone());
        assert_eq!(seen.await.text, "unsaved\n");
        assert!(!w("one").await.is_error);
        assert_eq!(buffers.0.lock().unwrap()[&file], "one");
        // the user types in the buffer: changed since the model saw it
        buffers
            .0
            .lock()
            .unwrap()
            .insert(file.clone(), "typed\n".into());
        assert_eq!(w("two").await.text, Unseen::Changed.message("a.txt"));
        assert_eq!(buffers.0.lock().unwrap()[&file], "typed\n");
    }

    /// `write_file d/authorized_keys` decided inside the root, then `d` swapped for a symlink to outside: the old
    /// code wrote through the link; now nothing is written anywhere. A pre-placed link in the middle of a path is
    /// refused for `create_dirs` too.
    #[tokio::test]
    async fn a_directory_swapped_for_a_symlink_after_the_decision_is_not_written_through() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        let e = env("write_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = WriteFileTool { env: e.clone() };
        let input = json!({"path": "d/authorized_keys", "content": "ssh-ed25519 AAAA attacker"});
        let swap = || {
            std::fs::rename(work.path().join("d"), work.path().join("d.old")).unwrap();
            std::os::unix::fs::symlink(outside.path(), work.path().join("d")).unwrap();
        };
        let raced = call_after(&t, AlgebraKind::Files, &e, input.clone(), swap).await;
        assert!(
            raced.is_error && raced.text.contains("changed after loom checked it"),
            "{}",
            raced.text
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_dir(work.path().join("d.old"))
                .unwrap()
                .count(),
            0
        );
        // create_dirs below a component swapped for a link
        let raced = call_after(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "n/m/x", "content": "x", "create_dirs": true}),
            || std::os::unix::fs::symlink(outside.path(), work.path().join("n")).unwrap(),
        )
        .await;
        assert!(raced.is_error, "{}", raced.text);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // control: the real directory is written
        std::fs::remove_file(work.path().join("d")).unwrap();
        std::fs::rename(work.path().join("d.old"), work.path().join("d")).unwrap();
        let ok = call(&t, AlgebraKind::Files, &e, input).await;
        assert!(!ok.is_error, "{}", ok.text);
        assert!(work.path().join("d/authorized_keys").is_file());
    }

    /// A grant of one file: the file is its own grant root, opened as a name beneath its parent.
    #[tokio::test]
    async fn a_grant_of_one_file_writes_and_reads_it() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a.txt"), "old").unwrap();
        let e = env("write_file", work.path(), r#"{ paths = ["./a.txt"] }"#);
        let t = WriteFileTool { env: e.clone() };
        let ok = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "content": "new"}),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text);
        let r = crate::ReadFileTool { env: e.clone() };
        let read = call(&r, AlgebraKind::Files, &e, json!({"path": "a.txt"})).await;
        assert_eq!((read.text.as_str(), read.is_error), ("new", false));
        // a granted directory that does not exist yet is created with create_dirs
        let e2 = env("write_file", work.path(), r#"{ paths = ["./out/sub"] }"#);
        let t2 = WriteFileTool { env: e2.clone() };
        let no = call(
            &t2,
            AlgebraKind::Files,
            &e2,
            json!({"path": "out/sub/x", "content": "x"}),
        )
        .await;
        assert!(
            no.is_error && no.text.contains("create_dirs"),
            "{}",
            no.text
        );
        let yes = call(
            &t2,
            AlgebraKind::Files,
            &e2,
            json!({"path": "out/sub/d/x", "content": "x", "create_dirs": true}),
        )
        .await;
        assert!(!yes.is_error, "{}", yes.text);
        assert!(work.path().join("out/sub/d/x").is_file());
        let other = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "b.txt", "content": "x"}),
        )
        .await;
        assert!(
            other.is_error && other.text.contains("outside this tool's grant"),
            "{}",
            other.text
        );
    }

    #[tokio::test]
    async fn overwrites_whole_files_keeps_modes_and_refuses_fifos() {
        use std::os::unix::fs::PermissionsExt;
        let work = tempfile::tempdir().unwrap();
        let e = env("write_file", work.path(), r#"{ paths = ["./"] }"#);
        let t = WriteFileTool { env: e.clone() };
        std::fs::write(work.path().join("run.sh"), "old").unwrap();
        std::fs::set_permissions(
            work.path().join("run.sh"),
            std::fs::Permissions::from_mode(0o750),
        )
        .unwrap();
        let ok = call(
            &t,
            AlgebraKind::Files,
            &e,
            json!({"path": "run.sh", "content": "new"}),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text);
        let meta = std::fs::metadata(work.path().join("run.sh")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o750);
        assert_eq!(
            std::fs::read_to_string(work.path().join("run.sh")).unwrap(),
            "new"
        );
        // no temporary file left behind
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 1);
        let fifo = work.path().join("pipe");
        crate::testutil::mkfifo(&fifo);
        for append in [false, true] {
            let out = call(
                &t,
                AlgebraKind::Files,
                &e,
                json!({"path": "pipe", "content": "x", "append": append}),
            )
            .await;
            assert!(
                out.is_error && out.text.contains("is a FIFO"),
                "{}",
                out.text
            );
        }
    }

    /// The model is told a path below the working directory as it would name it (as grep and glob do), and one
    /// elsewhere in the grant whole; the client's diff keeps the absolute path.
    #[tokio::test]
    async fn tells_the_model_a_path_below_the_working_directory_as_relative() {
        let work = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let other = std::fs::canonicalize(other.path()).unwrap();
        let grant = format!(r#"{{ paths = ["./", "{}"] }}"#, other.display());
        let e = env("write_file", work.path(), &grant);
        let t = WriteFileTool { env: e.clone() };
        let w = |v: Value| call(&t, AlgebraKind::Files, &e, v);
        let below = w(json!({"path": "sub/a.txt", "content": "abc", "create_dirs": true})).await;
        assert_eq!(below.text, "wrote 3 bytes to sub/a.txt");
        match &below.content[..] {
            [ToolCallContent::Diff { path, .. }] => {
                assert_eq!(path, &e.cwd.join("sub/a.txt").display().to_string())
            }
            c => panic!("{c:?}"),
        }
        let elsewhere = other.join("b.txt");
        let out = w(json!({"path": elsewhere.display().to_string(), "content": "x"})).await;
        assert_eq!(
            out.text,
            format!("wrote 1 bytes to {}", elsewhere.display())
        );
        // an error names the path the same way
        let dir = w(json!({"path": "sub", "content": "x"})).await;
        assert!(
            dir.is_error && dir.text.starts_with("sub: "),
            "{}",
            dir.text
        );
    }
}
