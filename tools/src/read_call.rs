//! The shape every read-only tool on one path shares (`find`, `grep`, `glob`, `tree`, `list_directory`,
//! `file_info`, `project_info`): the path the call names, resolved against the working directory, is what the kernel
//! decides for reading; once the call is authorised, the work runs on the blocking pool with that path split at the
//! root of the row that allowed it ([`Target::of`]), and stops waiting when the call is cancelled.

use std::path::{Path, PathBuf};

use loom_kernel::Access;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::beneath::{run_blocking, Target};
use super::{resolve_path, str_field, PathMode, Prepared, ToolEnv, ToolOutput};

/// The work of a read call: the decided path split at its grant root, the path itself (canonical), the path as
/// shown to the model (relative to the working directory when below it: [`shown_from`]), the call's cancellation.
pub(crate) type ReadWork =
    Box<dyn FnOnce(&Target, &Path, &Path, &CancellationToken) -> Result<ToolOutput, String> + Send>;

/// The optional string field `key` naming a path, `"."` when absent.
pub(crate) fn path_field<'a>(input: &'a Value, tool: &str, key: &str) -> Result<&'a str, String> {
    match input.get(key) {
        None | Some(Value::Null) => Ok("."),
        Some(_) => Ok(str_field(input, tool, key)?),
    }
}

/// The optional integer field `key`, `default` when absent, else from `min` to `max`.
pub(crate) fn int_field(
    input: &Value,
    tool: &str,
    key: &str,
    default: usize,
    (min, max): (usize, usize),
) -> Result<usize, String> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("{tool}: {key} must be an integer from {min} to {max}")),
    }
}

/// `abs` as shown to the model: relative to the working directory `cwd` when below it (`.` for `cwd` itself).
pub(crate) fn shown_from(cwd: &Path, abs: &Path) -> String {
    match abs.strip_prefix(cwd) {
        Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
        Ok(r) => r.display().to_string(),
        Err(_) => abs.display().to_string(),
    }
}

/// The call of tool `env` reading `path_in` (resolved against the working directory; it must exist): the kernel
/// decides the resolved path for reading, then `work` runs.
pub(crate) fn read_call(env: &ToolEnv, path_in: &str, work: ReadWork) -> Result<Prepared, String> {
    let name = &env.instance;
    let path: PathBuf =
        resolve_path(&env.cwd, path_in, PathMode::Existing).map_err(|e| format!("{name}: {e}"))?;
    let shown = path.display().to_string();
    let told = shown_from(&env.cwd, &path);
    let ctx_paths = env.ctx.clone();
    Ok(
        crate::CallHead::one_path(name, &shown, Access::Read).then(Box::new(move |auth, ctx| {
            Box::pin(async move {
                let target = match Target::of(&auth, &ctx_paths, &path, Access::Read) {
                    Ok(t) => t,
                    Err(e) => return ToolOutput::error(format!("{told}: {e}")),
                };
                let cancel = ctx.cancel.clone();
                let done = run_blocking(&ctx.cancel, None, move || {
                    work(&target, &path, Path::new(&told), &cancel)
                });
                match done.await {
                    Ok(out) => out,
                    Err(e) => ToolOutput::error(e),
                }
            })
        })),
    )
}

#[cfg(test)]
mod tests {
    use super::shown_from;
    use std::path::Path;

    #[test]
    fn a_path_is_shown_relative_below_the_working_directory_and_whole_elsewhere() {
        let cwd = Path::new("/w/proj");
        assert_eq!(shown_from(cwd, Path::new("/w/proj/src/a.rs")), "src/a.rs");
        assert_eq!(shown_from(cwd, Path::new("/w/proj")), ".");
        // a sibling sharing a prefix is not below it
        assert_eq!(
            shown_from(cwd, Path::new("/w/project/a.rs")),
            "/w/project/a.rs"
        );
        assert_eq!(shown_from(cwd, Path::new("/etc/hosts")), "/etc/hosts");
    }
}
