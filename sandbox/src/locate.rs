//! Where the inner-stage executable (`loom-sandbox-exec`) is: next to the running executable. Fails closed: a
//! missing inner stage is an error naming the file and the fix, never a reason to run a command unconfined.

use std::path::{Path, PathBuf};

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

/// The directory of loom's own executables — `loom`, `loom-sandbox-exec`, `loom-shim`, `loom-engine` — that is, of the
/// running executable, canonical. They are authority files: a writable grant root that covers this directory lets a
/// confined command replace what a later loom runs (loom itself runs unconfined, and a replaced `loom-engine` would not
/// confine itself), so `loom doctor` and `loom audit` warn when a grant covers it. (Within one loom process,
/// replacing `loom-sandbox-exec` changes nothing: the sandbox runs a sealed copy made at first use.)
///
/// # Ambient authority
/// Reads the path of the running executable.
pub fn loom_install_dir() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| std::io::Error::other("the running executable has no directory"))?;
    std::fs::canonicalize(dir)
}

/// The roots among `roots` that hold `dir` (pure): those a grant would let a command write loom's executables through
/// when `dir` is [`loom_install_dir`] and `roots` are a profile's writable roots.
pub fn roots_covering<'a>(dir: &Path, roots: &'a [PathBuf]) -> Vec<&'a Path> {
    roots
        .iter()
        .filter(|r| dir.starts_with(r))
        .map(PathBuf::as_path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_cover_the_install_dir_by_whole_components() {
        let roots: Vec<PathBuf> = ["/home/u", "/home/u/proj", "/home/u/pro", "/opt"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            roots_covering(Path::new("/home/u/proj/target/debug"), &roots),
            [Path::new("/home/u"), Path::new("/home/u/proj")]
        );
        assert!(roots_covering(Path::new("/usr/local/bin"), &roots).is_empty());
        assert!(loom_install_dir().unwrap().is_absolute());
    }
}
