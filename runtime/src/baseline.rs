//! Reading a baseline manifest for the CI gate: a file, or `git:REV` (the same manifest at a revision).

use std::path::Path;
use std::process::Command;

use crate::load::LoadError;

/// Where the baseline comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaselineSpec {
    /// A manifest file.
    File(std::path::PathBuf),
    /// The new manifest's path at a git revision.
    GitRev(String),
}

impl BaselineSpec {
    /// Parses `git:REV` or a path.
    pub fn parse(s: &str) -> BaselineSpec {
        match s.strip_prefix("git:") {
            Some(rev) => BaselineSpec::GitRev(rev.to_string()),
            None => BaselineSpec::File(s.into()),
        }
    }
}

/// The text of `manifest` (a path to an existing file inside a git work tree) at revision `rev`.
pub fn git_show(manifest: &Path, rev: &str) -> Result<String, LoadError> {
    if rev.is_empty() || rev.starts_with('-') {
        return Err(LoadError::Git(format!(
            "--baseline git:{rev}: name a revision, e.g. git:HEAD or git:origin/main"
        )));
    }
    let canonical = std::fs::canonicalize(manifest).map_err(|source| LoadError::Io {
        path: manifest.display().to_string(),
        source,
    })?;
    let dir = canonical.parent().unwrap_or(Path::new("/"));
    let top = run_git(dir, &["rev-parse", "--show-toplevel"])?;
    let top = std::fs::canonicalize(top.trim())
        .map_err(|e| LoadError::Git(format!("git work tree: {e}")))?;
    let rel = canonical.strip_prefix(&top).map_err(|_| {
        LoadError::Git(format!(
            "{}: not inside the git work tree {}",
            manifest.display(),
            top.display()
        ))
    })?;
    let spec = format!("{rev}:{}", rel.display());
    run_git(&top, &["show", &spec]).map_err(|e| match e {
        LoadError::Git(msg) => LoadError::Git(format!(
            "{}: cannot read the baseline at {rev}: {msg} (does the file exist at that revision?)",
            manifest.display()
        )),
        other => other,
    })
}

fn run_git(dir: &Path, args: &[&str]) -> Result<String, LoadError> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| {
            LoadError::Git(format!(
                "cannot run git: {e} (install git, or pass --baseline OLD.toml)"
            ))
        })?;
    if !out.status.success() {
        return Err(LoadError::Git(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| LoadError::Git("git printed a non-UTF-8 manifest".into()))
}
