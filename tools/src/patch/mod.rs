//! `apply_patch`: a unified diff (as `git diff` or `diff -u` writes it) applied to one or more files, all or
//! nothing. The diff is parsed first ([`unified`], a pure module); every file it touches is a path the kernel decides
//! for writing (the first as the call's request, the rest as [`super::Prepared::more`], each judged by the rules), so
//! one path outside the grant refuses the whole call. Once allowed, every file is read and patched in memory; only
//! when every hunk of every file applies is anything written — each file replaced whole and atomically (a created
//! file's missing directories made beneath its root, a deleted file unlinked), an undo snapshot recorded for each.
//! A write that fails part-way puts back the files already written. Files are read and written by loom itself,
//! beneath the grant root, never through a client.

mod unified;

use std::path::PathBuf;

use loom_kernel::{Access, Authorization, CallFacts, Request};
use rustix::fs::{OFlags, Stat};
use serde_json::{json, Value};

use super::beneath::{read_capped, run_blocking, BeneathError, Gate, Place, Target};
use super::read_call::shown_from;
use super::{
    check_fields, resolve_path, str_field, PathMode, Prepared, Tool, ToolEnv, ToolOutput, UndoLog,
};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolCallContent, ToolKind};
use unified::{apply_file, parse_patch, FilePatch};

/// The largest patch text.
pub const MAX_PATCH_BYTES: usize = 4 * 1024 * 1024;
/// The largest file a patch changes.
pub const MAX_PATCHED_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// The most files one patch touches.
pub const MAX_PATCHED_FILES: usize = 200;

/// The `apply_patch` tool.
#[derive(Debug)]
pub struct ApplyPatchTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ApplyPatchTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("apply_patch")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Apply a unified diff (`git diff` format: `--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks with \
                 ` `/`-`/`+` lines; `/dev/null` creates or deletes a file) to one or more files, all or nothing: if \
                 any hunk does not apply, nothing is written and the error says which and why. Context lines must \
                 match exactly. Paths resolve against {} and every file must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": { "patch": { "type": "string", "description": "The unified diff." } },
                "required": ["patch"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["patch"])?;
        let text = str_field(input, &name, "patch")?;
        if text.len() > MAX_PATCH_BYTES {
            return Err(format!(
                "{name}: the patch is {} bytes; at most {MAX_PATCH_BYTES} — split it into several calls",
                text.len()
            ));
        }
        let patches = parse_patch(text).map_err(|e| format!("{name}: {e}"))?;
        if patches.len() > MAX_PATCHED_FILES {
            return Err(format!(
                "{name}: the patch touches {} files; at most {MAX_PATCHED_FILES} per call",
                patches.len()
            ));
        }
        let mut files: Vec<(PathBuf, FilePatch)> = Vec::with_capacity(patches.len());
        for p in patches {
            let mode = if p.is_creation() {
                PathMode::MayCreate
            } else {
                PathMode::Existing
            };
            let path =
                resolve_path(&self.env.cwd, p.path(), mode).map_err(|e| format!("{name}: {e}"))?;
            if files.iter().any(|(q, _)| *q == path) {
                return Err(format!(
                    "{name}: two parts of the patch name the same file {}",
                    path.display()
                ));
            }
            files.push((path, p));
        }
        let mut requests = files.iter().map(|(p, _)| {
            let shown = p.display().to_string();
            (
                Request::File {
                    path: shown.clone(),
                    access: Access::Write,
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
            .ok_or_else(|| format!("{name}: the patch changes no file"))?;
        let more: Vec<(Request, CallFacts)> = requests.collect();
        let locations = files
            .iter()
            .map(|(p, _)| Location {
                path: p.display().to_string(),
            })
            .collect();
        let (ctx_paths, cwd, log) = (
            self.env.ctx.clone(),
            self.env.cwd.clone(),
            self.env.undo.clone(),
        );
        Ok(Prepared {
            request,
            more,
            facts,
            locations,
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let auths: Vec<Authorization> =
                        std::iter::once(auth).chain(ctx.more.clone()).collect();
                    if auths.len() != files.len() {
                        return ToolOutput::error(
                            "apply_patch: the kernel did not decide every file; nothing was written",
                        );
                    }
                    let mut targets = Vec::with_capacity(files.len());
                    for (a, (path, _)) in auths.iter().zip(&files) {
                        match Target::of(a, &ctx_paths, path, Access::Write) {
                            Ok(t) => targets.push(t),
                            Err(e) => {
                                return ToolOutput::error(format!(
                                    "{}: {e}; nothing was written",
                                    shown_from(&cwd, path)
                                ))
                            }
                        }
                    }
                    let gate = Gate::default();
                    let g = gate.clone();
                    let done = run_blocking(&ctx.cancel, Some(&gate), move || {
                        apply_all(&cwd, files, targets, &g, &log, "apply_patch")
                    })
                    .await;
                    match done {
                        Ok(out) => out,
                        Err(e) => ToolOutput::error(e),
                    }
                })
            }),
        })
    }
}

/// One file's state before and after.
struct Change {
    path: PathBuf,
    target: Target,
    before: Option<String>,
    after: Option<String>,
    /// The file's status before (its mode is kept when a rollback re-creates a deleted file).
    stat: Option<Stat>,
}

/// Reads and patches every file in memory, then (only if all applied) writes them.
fn apply_all(
    cwd: &std::path::Path,
    files: Vec<(PathBuf, FilePatch)>,
    targets: Vec<Target>,
    gate: &Gate,
    log: &UndoLog,
    tool: &str,
) -> Result<ToolOutput, String> {
    let mut changes: Vec<Change> = Vec::with_capacity(files.len());
    for ((path, patch), target) in files.into_iter().zip(targets) {
        let shown = shown_from(cwd, &path);
        let (before, stat) = match read_current(&target)
            .map_err(|e| format!("{shown}: {e}; nothing was written"))?
        {
            Some((text, st)) => (Some(text), Some(st)),
            None => (None, None),
        };
        let after = apply_file(before.as_deref(), &patch)
            .map_err(|e| format!("{e}; nothing was written"))?;
        changes.push(Change {
            path,
            target,
            before,
            after,
            stat,
        });
    }
    if !gate.commit() {
        return Err(BeneathError::Cancelled.into());
    }
    // the commit: each file replaced whole; a failure puts back the ones already written
    let never_cancel = Gate::default();
    commit_all(cwd, &changes, &|c| write_one(c, &never_cancel))?;
    let mut lines = Vec::with_capacity(changes.len());
    let mut content = Vec::with_capacity(changes.len());
    for c in &changes {
        let shown = shown_from(cwd, &c.path);
        log.record(
            &c.path,
            c.before.as_deref().map(str::as_bytes),
            c.after.as_deref().map(str::as_bytes),
            tool,
        );
        lines.push(match (&c.before, &c.after) {
            (None, _) => format!("created {shown}"),
            (_, None) => format!("deleted {shown}"),
            _ => format!("modified {shown}"),
        });
        content.push(ToolCallContent::Diff {
            path: c.path.display().to_string(),
            old_text: c.before.clone(),
            new_text: c.after.clone().unwrap_or_default(),
        });
    }
    Ok(ToolOutput {
        text: format!(
            "applied the patch to {} file(s):\n{}",
            changes.len(),
            lines.join("\n")
        ),
        content,
        raw_output: Some(json!({ "files": changes.len() })),
        ..ToolOutput::default()
    })
}

/// The file's text, or `None` when it does not exist.
fn read_current(target: &Target) -> Result<Option<(String, Stat)>, String> {
    let place = match Place::open(target, false) {
        Ok(p) => p,
        Err(BeneathError::NoParent) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match place.existing(OFlags::RDONLY)? {
        None => Ok(None),
        Some((mut f, st)) => {
            let bytes = read_capped(&mut f, MAX_PATCHED_FILE_BYTES)?;
            if bytes.len() as u64 > MAX_PATCHED_FILE_BYTES {
                return Err(format!(
                    "over {MAX_PATCHED_FILE_BYTES} bytes; apply_patch changes smaller files"
                ));
            }
            String::from_utf8(bytes)
                .map(|text| Some((text, st)))
                .map_err(|_| "not UTF-8 text; apply_patch changes text files".to_string())
        }
    }
}

/// Writes every change in order with `write`; when one fails, puts back the ones already written (newest first)
/// and says exactly which were put back and which could not be.
fn commit_all(
    cwd: &std::path::Path,
    changes: &[Change],
    write: &dyn Fn(&Change) -> Result<(), String>,
) -> Result<(), String> {
    for (i, change) in changes.iter().enumerate() {
        let Err(e) = write(change) else { continue };
        let mut restored = Vec::new();
        let mut stuck = Vec::new();
        for c in changes[..i].iter().rev() {
            let back = Change {
                path: c.path.clone(),
                target: c.target.clone(),
                before: c.after.clone(),
                after: c.before.clone(),
                stat: c.stat,
            };
            match write(&back) {
                Ok(()) => restored.push(shown_from(cwd, &c.path)),
                Err(why) => stuck.push(format!("{} ({why})", shown_from(cwd, &c.path))),
            }
        }
        let failed = shown_from(cwd, &change.path);
        return Err(if i == 0 {
            format!("{failed}: {e}; nothing was written")
        } else if stuck.is_empty() {
            format!(
                "{failed}: {e}; the {i} file(s) already written were put back ({})",
                restored.join(", ")
            )
        } else {
            format!(
                "{failed}: {e}; the patch is HALF APPLIED: {} could not be put back — check them by hand{}",
                stuck.join(", "),
                if restored.is_empty() {
                    String::new()
                } else {
                    format!(" ({} were put back)", restored.join(", "))
                }
            )
        });
    }
    Ok(())
}

/// Writes `c.after` at its place (or removes the file when it is `None`). A file created anew takes the mode of
/// `c.stat` when there is one (a rollback re-creating a file the patch deleted).
fn write_one(c: &Change, gate: &Gate) -> Result<(), String> {
    let place = Place::open(&c.target, c.after.is_some())?;
    let old = place.existing(OFlags::RDONLY)?.map(|(_, st)| st);
    match &c.after {
        Some(text) => Ok(place.replace(text.as_bytes(), old.as_ref().or(c.stat.as_ref()), gate)?),
        None => match old {
            Some(_) => rustix::fs::unlinkat(
                &place.dir,
                place.name.as_os_str(),
                rustix::fs::AtFlags::empty(),
            )
            .map_err(|e| format!("cannot remove it: {e}")),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    /// A write that fails part-way: the files already written are put back — a deleted one with its mode — and a
    /// file that cannot be put back is named, never claimed restored.
    #[test]
    fn a_failed_write_puts_back_what_was_written_and_names_what_was_not() {
        use std::os::unix::fs::PermissionsExt;
        let work = tempfile::tempdir().unwrap();
        let root = work.path().canonicalize().unwrap();
        let file = |name: &str, text: &str, mode: u32| {
            std::fs::write(root.join(name), text).unwrap();
            std::fs::set_permissions(root.join(name), std::fs::Permissions::from_mode(mode))
                .unwrap();
        };
        file("run.sh", "#!/bin/sh\n", 0o750);
        file("a.txt", "a\n", 0o644);
        let change = |name: &str, after: Option<&str>| {
            let path = root.join(name);
            let target = Target::within(&root, &path).unwrap();
            let (before, stat) = read_current(&target).unwrap().unzip();
            Change {
                path,
                target,
                before,
                after: after.map(str::to_string),
                stat,
            }
        };
        let changes = [
            change("run.sh", None),
            change("a.txt", Some("A\n")),
            change("b.txt", Some("born\n")),
        ];
        let never = Gate::default();
        // the third write fails: the first two are put back, the deleted script with its mode
        let fails_b = |c: &Change| {
            if c.path.ends_with("b.txt") {
                return Err("disk full".to_string());
            }
            write_one(c, &never)
        };
        let e = commit_all(&root, &changes, &fails_b).unwrap_err();
        assert_eq!(
            e,
            "b.txt: disk full; the 2 file(s) already written were put back (a.txt, run.sh)"
        );
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
        let meta = std::fs::metadata(root.join("run.sh")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o750);
        // putting a.txt back fails too: the message says the patch is half applied, and names it
        let fails_more = |c: &Change| {
            if c.path.ends_with("b.txt")
                || (c.path.ends_with("a.txt") && c.after.as_deref() == Some("a\n"))
            {
                return Err("disk full".to_string());
            }
            write_one(c, &never)
        };
        let e = commit_all(&root, &changes, &fails_more).unwrap_err();
        assert!(
            e.contains("HALF APPLIED: a.txt (disk full) could not be put back")
                && e.contains("(run.sh were put back)"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "A\n");
    }

    #[tokio::test]
    async fn applies_across_files_all_or_nothing_and_inside_the_grant_only() {
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("src")).unwrap();
        std::fs::write(work.path().join("src/a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(work.path().join("src/gone.txt"), "bye\n").unwrap();
        std::fs::write(work.path().join("top.txt"), "top\n").unwrap();
        let e = env("apply_patch", work.path(), r#"{ paths = ["./src"] }"#);
        let t = ApplyPatchTool { env: e.clone() };
        let read = |p: &str| std::fs::read_to_string(work.path().join(p)).ok();
        let patch = "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n\
                     --- /dev/null\n+++ b/src/new/b.txt\n@@ -0,0 +1 @@\n+born\n\
                     --- a/src/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
        let ok = call(&t, AlgebraKind::Files, &e, json!({ "patch": patch })).await;
        assert!(!ok.is_error, "{}", ok.text);
        assert_eq!(
            ok.text,
            "applied the patch to 3 file(s):\nmodified src/a.txt\ncreated src/new/b.txt\ndeleted src/gone.txt"
        );
        assert_eq!(read("src/a.txt").as_deref(), Some("one\nTWO\nthree\n"));
        assert_eq!(read("src/new/b.txt").as_deref(), Some("born\n"));
        assert_eq!(read("src/gone.txt"), None);
        // a hunk that does not apply in the second file: the first is not written either
        let bad = "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n\
                   --- a/src/new/b.txt\n+++ b/src/new/b.txt\n@@ -1 +1 @@\n-not there\n+x\n";
        let no = call(&t, AlgebraKind::Files, &e, json!({ "patch": bad })).await;
        assert!(
            no.is_error && no.text.contains("nothing was written"),
            "{}",
            no.text
        );
        assert_eq!(read("src/a.txt").as_deref(), Some("one\nTWO\nthree\n"));
        // a file outside the grant: the kernel refuses the whole call
        let out = "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n\
                   --- a/top.txt\n+++ b/top.txt\n@@ -1 +1 @@\n-top\n+TOP\n";
        let no = call(&t, AlgebraKind::Files, &e, json!({ "patch": out })).await;
        assert!(
            no.is_error && no.text.contains("outside this tool's grant"),
            "{}",
            no.text
        );
        assert_eq!(read("src/a.txt").as_deref(), Some("one\nTWO\nthree\n"));
        assert_eq!(read("top.txt").as_deref(), Some("top\n"));
        // garbage: a clear error before any decision
        let junk = call(&t, AlgebraKind::Files, &e, json!({ "patch": "hello" })).await;
        assert!(junk.is_error, "{}", junk.text);
        // undo walks back the patch's change of a file
        let u = crate::UndoTool { env: e.clone() };
        let back = call(&u, AlgebraKind::Files, &e, json!({"path": "src/a.txt"})).await;
        assert!(!back.is_error, "{}", back.text);
        assert_eq!(read("src/a.txt").as_deref(), Some("one\ntwo\nthree\n"));
    }
}
