//! Where the inner-stage executable (`loom-sandbox-exec`) is: next to the running executable. Fails closed: a
//! missing inner stage is an error naming the file and the fix, never a reason to run a command unconfined.

use std::path::PathBuf;

/// The file name of the inner-stage executable, installed next to `loom`.
pub const INNER_EXE_NAME: &str = "loom-sandbox-exec";

/// The inner stage cannot be found.
#[derive(Debug, thiserror::Error)]
#[error("the sandbox's inner stage {path} is missing ({why}), so nothing ran; install {INNER_EXE_NAME} next to the loom binary (cargo build -p loom-sandbox --bin {INNER_EXE_NAME}, or cargo install --path sandbox --bin {INNER_EXE_NAME})")]
pub struct InnerExeError {
    /// Where it was looked for.
    pub path: PathBuf,
    /// What went wrong.
    pub why: String,
}

/// Where `loom-sandbox-exec` is: next to the running executable.
///
/// # Ambient authority
/// Reads the path of the running executable.
pub fn inner_exe_next_to_current_exe() -> Result<PathBuf, InnerExeError> {
    let exe = std::env::current_exe().map_err(|e| InnerExeError {
        path: PathBuf::from(INNER_EXE_NAME),
        why: format!("cannot locate the running executable: {e}"),
    })?;
    let path = exe
        .parent()
        .map(|d| d.join(INNER_EXE_NAME))
        .unwrap_or_else(|| PathBuf::from(INNER_EXE_NAME));
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(InnerExeError {
            path,
            why: "it is not a regular file".into(),
        }),
        Err(e) => Err(InnerExeError {
            path,
            why: e.to_string(),
        }),
    }
}
