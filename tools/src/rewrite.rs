//! The read–change–write step of the tools that change an existing UTF-8 file in place (`edit_file`, `json_edit`,
//! `notebook_edit`): the file is read whole (through the client when it reads files, else beneath the grant root),
//! changed by a pure function on the blocking pool, and written back whole (through the client, or atomically
//! beneath the root, keeping its mode). Nothing is written when the change fails; the text before and after is
//! returned for the undo log and the host's diff.

use std::path::Path;

use rustix::fs::OFlags;

use super::beneath::{
    is_missing, open_read, read_capped, run_blocking, size_of, Gate, Place, Target,
};
use super::client::{read_text, writer};
use super::ToolCtx;

/// Reads the file, applies `change`, writes the result; `Ok((old, new))`. `tool`, `cap` (the largest file it
/// changes) and `hint` (what to use for a file that is not there) are for messages.
async fn rewrite(
    ctx: &ToolCtx,
    path: &Path,
    target: &Target,
    (tool, cap, hint): (&'static str, u64, String),
    change: impl FnOnce(&str) -> Result<String, String> + Send + 'static,
) -> Result<(String, String), String> {
    let t = target.clone();
    let old = read_text(ctx, path, move || read_local(&t, tool, cap, &hint)).await?;
    if old.len() as u64 > cap {
        return Err(too_big(tool, old.len() as u64, cap));
    }
    let o = old.clone();
    let new = run_blocking(&ctx.cancel, None, move || change(&o)).await?;
    match writer(ctx) {
        Some(client) => client
            .write_text_file(path, new.clone())
            .await
            .map_err(|e| format!("the client could not write it: {e}"))?,
        None => {
            let (t, n) = (target.clone(), new.clone());
            let gate = Gate::default();
            let g = gate.clone();
            run_blocking(&ctx.cancel, Some(&gate), move || {
                write_local(&t, tool, &n, &g)
            })
            .await?;
        }
    }
    Ok((old, new))
}

fn too_big(tool: &str, len: u64, cap: u64) -> String {
    format!(
        "the file is {len} bytes; {tool} changes files of at most {cap} bytes — use bash (sed, patch) for a larger one"
    )
}

/// Reads the regular file `target` beneath its root, refusing one over `cap` bytes before reading it.
/// A file that is not there says so, followed by `hint` when there is one (what to use instead).
fn read_local(target: &Target, tool: &str, cap: u64, hint: &str) -> Result<String, String> {
    let (mut f, st) = match open_read(target, &format!("{tool} changes files, not directories")) {
        Ok(opened) => opened,
        Err(e) if is_missing(&e) && !hint.is_empty() => return Err(format!("{e} ({hint})")),
        Err(e) => return Err(e.into()),
    };
    if size_of(&st) > cap {
        return Err(too_big(tool, size_of(&st), cap));
    }
    let bytes = read_capped(&mut f, cap)?;
    if bytes.len() as u64 > cap {
        return Err(too_big(tool, bytes.len() as u64, cap));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Replaces the file whole beneath its root (it must still be a regular file loom may write), keeping its mode.
fn write_local(target: &Target, tool: &str, new: &str, gate: &Gate) -> Result<(), String> {
    let place = Place::open(target, false)?;
    let old = place
        .existing(OFlags::WRONLY)?
        .map(|(_, st)| st)
        .ok_or_else(|| {
            format!("the file is gone; nothing was written ({tool} does not create files)")
        })?;
    Ok(place.replace(new.as_bytes(), Some(&old), gate)?)
}

/// What a change gives back: the new text, and the summary line the result opens with (after the file's name).
pub(crate) type Changed = (String, String);

/// The call of an in-place editor `env` changing the existing file `raw` (resolved against the working directory):
/// the kernel decides the path for writing; once allowed, [`rewrite`] reads it, `change` makes the new text and a
/// summary, the file is written, the undo snapshot recorded, and the result is `render(path, summary)` with the
/// diff. `hint` follows a path that does not resolve or is not there (what to use instead).
pub(crate) fn rewrite_call(
    env: &super::ToolEnv,
    raw: &str,
    (builtin, cap, hint): (&'static str, u64, &str),
    render: fn(&str, &str) -> String,
    change: impl FnOnce(&str) -> Result<Changed, String> + Send + 'static,
) -> Result<super::Prepared, String> {
    use loom_kernel::Access;
    use loom_protocol::update::ToolCallContent;

    let name = env.instance.clone();
    let path =
        super::resolve_path(&env.cwd, raw, super::PathMode::Existing).map_err(|e| match hint {
            "" => format!("{name}: {e}"),
            h => format!("{name}: {e} ({h})"),
        })?;
    let shown = path.display().to_string();
    // what the model is told: the path as it would name it (relative below the working directory)
    let told = super::read_call::shown_from(&env.cwd, &path);
    let (ctx_paths, log, hint) = (env.ctx.clone(), env.undo.clone(), hint.to_string());
    Ok(
        super::CallHead::one_path(&name, &shown, Access::Write).then(Box::new(move |auth, ctx| {
            Box::pin(async move {
                let target = match Target::of(&auth, &ctx_paths, &path, Access::Write) {
                    Ok(t) => t,
                    Err(e) => return super::ToolOutput::error(format!("{told}: {e}")),
                };
                // the summary comes out of the blocking change beside the text
                let summary = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
                let said = summary.clone();
                let done = rewrite(&ctx, &path, &target, (builtin, cap, hint), move |old| {
                    let (new, what) = change(old)?;
                    if let Ok(mut s) = said.lock() {
                        *s = what;
                    }
                    Ok(new)
                })
                .await;
                match done {
                    Ok((old, new)) => {
                        log.record(&path, Some(old.as_bytes()), Some(new.as_bytes()), &name);
                        let what = summary.lock().map(|s| s.clone()).unwrap_or_default();
                        super::ToolOutput {
                            text: render(&told, &what),
                            content: vec![ToolCallContent::Diff {
                                path: shown,
                                old_text: Some(old),
                                new_text: new,
                            }],
                            ..super::ToolOutput::default()
                        }
                    }
                    Err(e) => super::ToolOutput::error(format!("{told}: {e}")),
                }
            })
        })),
    )
}
