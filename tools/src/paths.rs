//! Resolving a path the model named into the canonical path the kernel decides on: relative to the agent's working
//! directory, every symlink resolved BEFORE containment is checked.

use std::path::{Component, Path, PathBuf};

/// What the tool will do with the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMode {
    /// It must exist.
    Existing,
    /// It may be created: the nearest existing ancestor is canonicalised and the rest appended.
    MayCreate,
}

/// Resolves `input` against `cwd`. For a path that does not exist (yet), in either mode, the nearest existing
/// ancestor is canonicalised and the missing components appended; `..` among missing components and a dangling
/// symlink as the final component are refused (either could land outside what the kernel was shown). A path
/// [`PathMode::Existing`] names that is missing resolves too: the kernel decides it first, and the tool's I/O finds
/// it missing only once the grant allows it.
pub fn resolve_path(cwd: &Path, input: &str, mode: PathMode) -> Result<PathBuf, String> {
    if input.is_empty() {
        return Err("the path is empty".into());
    }
    if input.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    let joined = if Path::new(input).is_absolute() {
        PathBuf::from(input)
    } else {
        cwd.join(input)
    };
    match std::fs::canonicalize(&joined) {
        Ok(p) => return Ok(p),
        // a path that must exist but does not is resolved as one that may be created, so the kernel decides it
        // before anything says it is missing: the tool's own I/O reports that, and only inside its grant — a
        // missing path outside the grant is refused as an existing one is, and says nothing about what exists there
        Err(e)
            if mode == PathMode::Existing
                && !matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
        {
            return Err(format!("{input}: {e}"))
        }
        Err(_) => {}
    }
    if std::fs::symlink_metadata(&joined).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(match mode {
            PathMode::Existing => format!("{input}: is a symlink whose target does not exist"),
            PathMode::MayCreate => format!(
                "{input}: is a symlink whose target does not exist; write to the target path itself"
            ),
        });
    }
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    let mut cur = joined.as_path();
    loop {
        match std::fs::canonicalize(cur) {
            Ok(base) => {
                let mut out = base;
                for c in missing.iter().rev() {
                    out.push(c);
                }
                return Ok(out);
            }
            Err(_) => {
                let name = match cur.components().next_back() {
                    Some(Component::Normal(n)) => n.to_os_string(),
                    Some(Component::CurDir) => std::ffi::OsString::new(),
                    _ => {
                        return Err(format!(
                        "{input}: `..` through a directory that does not exist cannot be resolved"
                    ))
                    }
                };
                if !name.is_empty() {
                    missing.push(name);
                }
                cur = cur
                    .parent()
                    .ok_or_else(|| format!("{input}: no existing ancestor directory"))?;
            }
        }
    }
}

/// The absolute path of program `name` on loom's `PATH` (a relative `PATH` entry is never used): what a tool runs is
/// named exactly in its argv.
pub(crate) fn program_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_absolute() && c.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_resolve_before_anything_else() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let out_c = std::fs::canonicalize(out.path()).unwrap();
        std::os::unix::fs::symlink(&out_c, root.join("link")).unwrap();
        std::fs::write(out_c.join("f"), "x").unwrap();
        assert_eq!(
            resolve_path(&root, "link/f", PathMode::Existing).unwrap(),
            out_c.join("f")
        );
        assert_eq!(
            resolve_path(&root, "link/new/g", PathMode::MayCreate).unwrap(),
            out_c.join("new/g")
        );
        assert_eq!(
            resolve_path(&root, "a/b/c", PathMode::MayCreate).unwrap(),
            root.join("a/b/c")
        );
        // a missing path resolves in both modes (the kernel decides it before any error says it is missing)
        assert_eq!(
            resolve_path(&root, "missing/f", PathMode::Existing).unwrap(),
            root.join("missing/f")
        );
        assert_eq!(
            resolve_path(&root, "/no/such/dir", PathMode::Existing).unwrap(),
            Path::new("/no/such/dir")
        );
        std::fs::write(root.join("file"), "").unwrap();
        assert_eq!(
            resolve_path(&root, "file/below", PathMode::Existing).unwrap(),
            root.join("file/below")
        );
        assert!(resolve_path(&root, "nope/../../x", PathMode::MayCreate).is_err());
        std::os::unix::fs::symlink(out_c.join("ghost"), root.join("dangling")).unwrap();
        assert!(resolve_path(&root, "dangling", PathMode::MayCreate)
            .unwrap_err()
            .contains("symlink"));
    }
}
