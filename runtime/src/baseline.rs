//! Reading a baseline manifest for the CI gate: a file, or `git:REV` (the same manifest at a revision, with the
//! sub-manifests it names read at that revision too).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use loom_kernel::{parse_manifest, Manifest, ManifestLoader, PathCtx};

use crate::load::{LoadError, MAX_MANIFEST_BYTES};

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

/// A manifest at a git revision: the work tree's top, the revision and the manifest's path inside the tree.
#[derive(Debug, Clone)]
pub struct GitBaseline {
    top: PathBuf,
    rev: String,
    rel: PathBuf,
}

impl GitBaseline {
    /// The identity of the manifest at the revision (`git:REV:path/in/tree.toml`), as sub-manifests are loaded from.
    pub fn id(&self) -> String {
        format!("git:{}:{}", self.rev, self.rel.display())
    }

    /// The manifest's text at the revision.
    pub fn text(&self) -> Result<String, LoadError> {
        show(&self.top, &self.rev, &self.rel)
    }

    /// The text of a sub-manifest its loader identified as `id` (`git:REV:path/in/tree.toml`), read at the
    /// revision; `None` for another identity or a file that cannot be read there.
    pub fn text_of(&self, id: &str) -> Option<String> {
        let rel = id.strip_prefix(&format!("git:{}:", self.rev))?;
        show(
            &self.top,
            &self.rev,
            Path::new(rel.split('#').next().unwrap_or(rel)),
        )
        .ok()
    }

    /// A loader that reads the sub-manifests this manifest names at the same revision (never from the work tree),
    /// with `${VAR}` values from `env`.
    pub fn loader(&self, ctx: PathCtx, env: BTreeMap<String, String>) -> GitLoader {
        GitLoader {
            baseline: self.clone(),
            ctx,
            env,
        }
    }
}

/// Loads sub-manifests named by path from a git revision: `./helper.toml` next to `git:REV:agent.toml` is
/// `git:REV:helper.toml`. A path that leaves the work tree cannot be read at a revision and is an error.
pub struct GitLoader {
    baseline: GitBaseline,
    ctx: PathCtx,
    env: BTreeMap<String, String>,
}

/// `base/path` with `.` and `..` resolved lexically inside the tree; `None` when it leaves the tree.
fn tree_path(base: &Path, path: &Path) -> Option<PathBuf> {
    let mut out: Vec<std::ffi::OsString> = base.iter().map(|c| c.to_os_string()).collect();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.iter().collect())
}

impl ManifestLoader for GitLoader {
    fn load(&mut self, from: &str, path: &str) -> Result<(String, PathCtx, Manifest), String> {
        let b = &self.baseline;
        let prefix = format!("git:{}:", b.rev);
        let from_file = from.split('#').next().unwrap_or(from);
        let from_rel = from_file
            .strip_prefix(&prefix)
            .ok_or_else(|| format!("{path}: named from {from_file}, which is not at {}", b.rev))?;
        let base = Path::new(from_rel).parent().unwrap_or(Path::new(""));
        let p = Path::new(path);
        let rel = if p.is_absolute() {
            p.strip_prefix(&b.top).ok().map(Path::to_path_buf)
        } else {
            tree_path(base, p)
        }
        .ok_or_else(|| {
            format!(
                "{path}: the sub-manifest is outside the git work tree {}, so it cannot be read at {}; keep \
                 sub-manifests in the repository",
                b.top.display(),
                b.rev
            )
        })?;
        let text = show(&b.top, &b.rev, &rel).map_err(|e| e.to_string())?;
        let shown = format!("{}:{}", b.rev, rel.display());
        let manifest = parse_manifest(&text, &shown, &self.env).map_err(|e| e.to_string())?;
        Ok((
            format!("{prefix}{}", rel.display()),
            self.ctx.clone(),
            manifest,
        ))
    }
}

fn show(top: &Path, rev: &str, rel: &Path) -> Result<String, LoadError> {
    let spec = format!("{rev}:{}", rel.display());
    let text = run_git(top, &["show", &spec]).map_err(|e| match e {
        LoadError::Git(msg) => LoadError::Git(format!(
            "{}: cannot read it at {rev}: {msg} (does the file exist at that revision?)",
            rel.display()
        )),
        other => other,
    })?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(LoadError::TooLarge {
            path: spec,
            size: text.len() as u64,
        });
    }
    Ok(text)
}

/// `manifest` (a path to an existing file inside a git work tree) at revision `rev`.
pub fn git_baseline(manifest: &Path, rev: &str) -> Result<GitBaseline, LoadError> {
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
    Ok(GitBaseline {
        rel: rel.to_path_buf(),
        top: top.clone(),
        rev: rev.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_paths_stay_inside_the_tree() {
        let t = |b: &str, p: &str| {
            tree_path(Path::new(b), Path::new(p)).map(|x| x.display().to_string())
        };
        assert_eq!(
            t("agents", "./helper.toml").as_deref(),
            Some("agents/helper.toml")
        );
        assert_eq!(t("agents", "../sub/h.toml").as_deref(), Some("sub/h.toml"));
        assert_eq!(t("", "h.toml").as_deref(), Some("h.toml"));
        assert_eq!(t("", "../h.toml"), None);
        assert_eq!(t("a", "/etc/h.toml"), None);
    }
}
