//! Undo snapshots, and the `undo` tool.
//!
//! Every change tool (`write_file`, `edit_file`, `json_edit`, `apply_patch`, `notebook_edit`) records what it
//! replaced in the agent's [`UndoLog`]: the file's text before the change (or that it did not exist) and the SHA-256
//! of the text loom wrote (or that loom deleted it). `undo {path}` restores the last change of that file only if the
//! file still holds exactly what loom wrote: a change made since by anything else (the user, a command) is kept, and
//! the call says so. The log lives in memory, per agent: it does not survive the process, it is bounded
//! ([`UNDO_MAX_BYTES`] in all, [`UNDO_MAX_PER_FILE`] changes per file, oldest dropped first), and a file larger than
//! [`UNDO_MAX_FILE_BYTES`] is changed without a snapshot (the change tool says so).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use loom_kernel::Access;
use rustix::fs::OFlags;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::beneath::{read_capped, run_blocking, BeneathError, Gate, Place, Target};
use super::{check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{ToolCallContent, ToolKind};

/// The most bytes of old text the log holds for one agent.
pub const UNDO_MAX_BYTES: usize = 64 * 1024 * 1024;
/// The most changes remembered per file.
pub const UNDO_MAX_PER_FILE: usize = 20;
/// The largest file a snapshot is taken of.
pub const UNDO_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The SHA-256 of `bytes`.
pub fn content_hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// One recorded change.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The file's bytes before the change; `None`: it did not exist.
    pub before: Option<Vec<u8>>,
    /// The hash of what loom wrote; `None`: loom deleted the file.
    pub after: Option<[u8; 32]>,
    /// The tool instance that made it.
    pub tool: String,
    seq: u64,
}

#[derive(Default)]
struct Inner {
    files: HashMap<PathBuf, Vec<Snapshot>>,
    bytes: usize,
    seq: u64,
}

/// An agent's undo snapshots, shared by its tools (a cheap handle).
#[derive(Clone, Default)]
pub struct UndoLog(Arc<Mutex<Inner>>);

impl std::fmt::Debug for UndoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (files, bytes) = self.with(|i| (i.files.len(), i.bytes));
        f.debug_struct("UndoLog")
            .field("files", &files)
            .field("bytes", &bytes)
            .finish()
    }
}

impl UndoLog {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    /// Records that `tool` changed `path` from `before` (`None`: it did not exist) to `after` (`None`: deleted).
    pub fn record(&self, path: &Path, before: Option<&[u8]>, after: Option<&[u8]>, tool: &str) {
        self.with(|i| {
            i.seq += 1;
            let snap = Snapshot {
                before: before.map(<[u8]>::to_vec),
                after: after.map(content_hash),
                tool: tool.to_string(),
                seq: i.seq,
            };
            i.bytes += snap.before.as_ref().map_or(0, Vec::len);
            let list = i.files.entry(path.to_path_buf()).or_default();
            list.push(snap);
            if list.len() > UNDO_MAX_PER_FILE {
                let gone = list.remove(0);
                i.bytes -= gone.before.as_ref().map_or(0, Vec::len);
            }
            // over the bound: drop the oldest snapshots, whichever file they belong to
            while i.bytes > UNDO_MAX_BYTES {
                let Some((p, _)) = i
                    .files
                    .iter()
                    .filter_map(|(p, l)| l.first().map(|s| (p.clone(), s.seq)))
                    .min_by_key(|(_, seq)| *seq)
                else {
                    break;
                };
                if let Some(l) = i.files.get_mut(&p) {
                    let gone = l.remove(0);
                    i.bytes -= gone.before.as_ref().map_or(0, Vec::len);
                    if l.is_empty() {
                        i.files.remove(&p);
                    }
                }
            }
        });
    }

    /// The last change recorded for `path`.
    pub(crate) fn last(&self, path: &Path) -> Option<Snapshot> {
        self.with(|i| i.files.get(path).and_then(|l| l.last().cloned()))
    }

    /// The hash of what loom last wrote to `path` (`None`: no change recorded, or the last one deleted it), without
    /// copying the snapshot's old text.
    pub(crate) fn last_written(&self, path: &Path) -> Option<[u8; 32]> {
        self.with(|i| {
            i.files
                .get(path)
                .and_then(|l| l.last())
                .and_then(|s| s.after)
        })
    }

    /// Forgets the change `snap` of `path` (once undone).
    pub(crate) fn forget(&self, path: &Path, snap: &Snapshot) {
        self.with(|i| {
            if let Some(l) = i.files.get_mut(path) {
                if let Some(pos) = l.iter().position(|s| s.seq == snap.seq) {
                    let gone = l.remove(pos);
                    i.bytes -= gone.before.as_ref().map_or(0, Vec::len);
                }
                if l.is_empty() {
                    i.files.remove(path);
                }
            }
        });
    }

    /// How many changes of `path` can be undone.
    pub fn depth(&self, path: &Path) -> usize {
        self.with(|i| i.files.get(path).map_or(0, Vec::len))
    }
}

/// Reads the file at `target` for a snapshot: its bytes, `None` when it does not exist, or an error when it is too
/// large to snapshot.
pub(crate) fn snapshot_of(target: &Target) -> Result<Option<Vec<u8>>, String> {
    let place = match Place::open(target, false) {
        Ok(p) => p,
        // a file in a directory that does not exist yet does not exist either
        Err(BeneathError::NoParent) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match place.existing(OFlags::RDONLY).map_err(String::from)? {
        None => Ok(None),
        Some((mut f, _)) => {
            let bytes = read_capped(&mut f, UNDO_MAX_FILE_BYTES).map_err(String::from)?;
            if bytes.len() as u64 > UNDO_MAX_FILE_BYTES {
                return Err(format!("over {UNDO_MAX_FILE_BYTES} bytes"));
            }
            Ok(Some(bytes))
        }
    }
}

/// The `undo` tool.
#[derive(Debug)]
pub struct UndoTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for UndoTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("undo")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Undo the last change a loom tool (write_file, edit_file, json_edit, apply_patch, notebook_edit) made \
                 to `path` in this session: the file gets back its earlier content (or is removed, if that change \
                 created it). Refused when the file changed since loom wrote it — the newer content is kept. Call \
                 again to undo earlier changes. `path` is resolved against {} and must be inside this tool's grant \
                 ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string" } },
                "required": ["path"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path"])?;
        let raw = str_field(input, &name, "path")?;
        let path = resolve_path(&self.env.cwd, raw, PathMode::MayCreate)
            .map_err(|e| format!("{name}: {e}"))?;
        let shown = path.display().to_string();
        // what the model is told: the path as it would name it (relative below the working directory)
        let told = crate::read_call::shown_from(&self.env.cwd, &path);
        let ctx_paths = self.env.ctx.clone();
        let log = self.env.undo.clone();
        Ok(crate::CallHead::one_path(&name, &shown, Access::Write).then(Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let Some(snap) = log.last(&path) else {
                        return ToolOutput::error(format!(
                            "{told}: no change of this file to undo in this session"
                        ));
                    };
                    let target = match Target::of(&auth, &ctx_paths, &path, Access::Write) {
                        Ok(t) => t,
                        Err(e) => return ToolOutput::error(format!("{told}: {e}")),
                    };
                    let gate = Gate::default();
                    let (g, s) = (gate.clone(), snap.clone());
                    let done =
                        run_blocking(&ctx.cancel, Some(&gate), move || restore(&target, &s, &g))
                            .await;
                    match done {
                        Ok(Restored::Content(now)) => {
                            log.forget(&path, &snap);
                            let before =
                                String::from_utf8_lossy(snap.before.as_deref().unwrap_or_default());
                            ToolOutput {
                                text: format!(
                                    "{told}: undid the last {} change ({} bytes restored; {} earlier change(s) left to undo)",
                                    snap.tool,
                                    before.len(),
                                    log.depth(&path)
                                ),
                                content: vec![ToolCallContent::Diff {
                                    path: shown.clone(),
                                    old_text: now,
                                    new_text: before.into_owned(),
                                }],
                                ..ToolOutput::default()
                            }
                        }
                        Ok(Restored::Removed) => {
                            log.forget(&path, &snap);
                            ToolOutput::ok(format!(
                                "{told}: removed it — the last {} change created it",
                                snap.tool
                            ))
                        }
                        Err(e) => ToolOutput::error(format!("{told}: {e}")),
                    }
                })
            })))
    }
}

/// What an undo did.
enum Restored {
    /// The old content is back; the text it replaced.
    Content(Option<String>),
    /// The file loom had created is gone.
    Removed,
}

/// Puts `snap.before` back at `target` if the file holds exactly what loom wrote (`snap.after`).
fn restore(target: &Target, snap: &Snapshot, gate: &Gate) -> Result<Restored, String> {
    let place = Place::open(target, false).map_err(String::from)?;
    let current = place.existing(OFlags::RDONLY).map_err(String::from)?;
    let (now, stat) = match current {
        Some((mut f, st)) => {
            let bytes = read_capped(&mut f, UNDO_MAX_FILE_BYTES).map_err(String::from)?;
            (Some(bytes), Some(st))
        }
        None => (None, None),
    };
    let unchanged = match (&now, &snap.after) {
        (Some(b), Some(h)) => b.len() as u64 <= UNDO_MAX_FILE_BYTES && content_hash(b) == *h,
        (None, None) => true,
        _ => false,
    };
    if !unchanged {
        return Err(format!(
            "the file changed since {} wrote it (its content is no longer what loom wrote{}), so nothing was undone \
             and the current content is kept; read it and edit it instead",
            snap.tool,
            if now.is_none() { ": it was removed" } else { "" }
        ));
    }
    let now_text = now
        .as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned());
    match &snap.before {
        Some(old) => {
            place
                .replace(old, stat.as_ref(), gate)
                .map_err(String::from)?;
            Ok(Restored::Content(now_text))
        }
        None => {
            if !gate.commit() {
                return Err(BeneathError::Cancelled.into());
            }
            rustix::fs::unlinkat(
                &place.dir,
                place.name.as_os_str(),
                rustix::fs::AtFlags::empty(),
            )
            .map_err(|e| format!("cannot remove it: {e}"))?;
            Ok(Restored::Removed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_bounded_per_file_and_forgets_what_was_undone() {
        let log = UndoLog::default();
        let p = Path::new("/w/a");
        for i in 0..UNDO_MAX_PER_FILE + 5 {
            log.record(
                p,
                Some(format!("v{i}").as_bytes()),
                Some(b"x"),
                "write_file",
            );
        }
        assert_eq!(log.depth(p), UNDO_MAX_PER_FILE);
        let last = log.last(p).unwrap();
        assert_eq!(
            last.before.as_deref(),
            Some(format!("v{}", UNDO_MAX_PER_FILE + 4).as_bytes())
        );
        assert_eq!(last.after, Some(content_hash(b"x")));
        log.forget(p, &last);
        assert_eq!(log.depth(p), UNDO_MAX_PER_FILE - 1);
        log.record(Path::new("/w/new"), None, Some(b"created"), "write_file");
        assert_eq!(log.last(Path::new("/w/new")).unwrap().before, None);
    }

    #[tokio::test]
    async fn undo_walks_back_loom_s_own_changes_and_keeps_a_manual_one() {
        use crate::testutil::{call, env};
        use loom_kernel::AlgebraKind;
        let work = tempfile::tempdir().unwrap();
        let e = env("undo", work.path(), r#"{ paths = ["./"] }"#);
        let named = |n: &str| ToolEnv {
            instance: n.into(),
            ..e.clone()
        };
        let w = crate::WriteFileTool {
            env: named("write_file"),
        };
        let ed = crate::EditFileTool {
            env: named("edit_file"),
        };
        let u = UndoTool { env: e.clone() };
        let file = work.path().join("a.txt");
        let read = || std::fs::read_to_string(&file).ok();
        let ok = |o: ToolOutput| assert!(!o.is_error, "{}", o.text);
        ok(call(
            &w,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "content": "one\n"}),
        )
        .await);
        ok(call(
            &ed,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "edits": [{"old_text": "one", "new_text": "two"}]}),
        )
        .await);
        ok(call(
            &w,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "content": "three\n", "append": true}),
        )
        .await);
        assert_eq!(read().as_deref(), Some("two\nthree\n"));
        let undo = || call(&u, AlgebraKind::Files, &e, json!({"path": "a.txt"}));
        let first = undo().await;
        // the file named as the model names it, not by its absolute path
        assert!(
            first
                .text
                .starts_with("a.txt: undid the last write_file change"),
            "{}",
            first.text
        );
        assert_eq!(read().as_deref(), Some("two\n"));
        ok(undo().await);
        assert_eq!(read().as_deref(), Some("one\n"));
        let gone = undo().await;
        assert!(gone.text.contains("removed it"), "{}", gone.text);
        assert_eq!(read(), None);
        let none = undo().await;
        assert!(
            none.is_error
                && none
                    .text
                    .starts_with("a.txt: no change of this file to undo"),
            "{}",
            none.text
        );
        // a change made since loom wrote the file is kept, and the call says so
        ok(call(
            &w,
            AlgebraKind::Files,
            &e,
            json!({"path": "a.txt", "content": "loom\n"}),
        )
        .await);
        std::fs::write(&file, "by hand\n").unwrap();
        let kept = undo().await;
        assert!(
            kept.is_error && kept.text.contains("changed since write_file wrote it"),
            "{}",
            kept.text
        );
        assert_eq!(read().as_deref(), Some("by hand\n"));
        // outside the grant: refused by the kernel like any write
        let outside = call(&u, AlgebraKind::Files, &e, json!({"path": "/etc/passwd"})).await;
        assert!(
            outside.is_error && outside.text.contains("outside this tool's grant"),
            "{}",
            outside.text
        );
    }

    #[test]
    fn the_log_drops_the_oldest_snapshots_over_its_byte_bound() {
        let log = UndoLog::default();
        let big = vec![b'a'; UNDO_MAX_BYTES / 2 + 1];
        log.record(Path::new("/w/1"), Some(&big), Some(b"x"), "t");
        log.record(Path::new("/w/2"), Some(&big), Some(b"x"), "t");
        assert_eq!(log.depth(Path::new("/w/1")), 0);
        assert_eq!(log.depth(Path::new("/w/2")), 1);
    }
}
