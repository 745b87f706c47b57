//! Loading manifests from disk: the I/O half of manifest parsing. The kernel parses; this module reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loom_kernel::{
    parse_manifest, resolve_rule_prefixes, rule_prefixes, Manifest, ManifestError, ManifestLoader,
    PathCtx, Permissions,
};

/// The largest manifest loom reads (1 MiB), checked before reading.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// A manifest read from disk and parsed.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The canonical path of the file.
    pub path: PathBuf,
    /// The directory it lives in.
    pub dir: PathBuf,
    /// The parsed manifest.
    pub manifest: Manifest,
}

/// Why a manifest could not be loaded. Each message names the file and says how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read the manifest: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is larger than `MAX_MANIFEST_BYTES` (1 MiB).
    #[error("{path}: the manifest is {size} bytes; the limit is 1 MiB (1048576 bytes) — is this the right file?")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
    },
    /// The file is not UTF-8.
    #[error("{path}: the manifest is not valid UTF-8 text")]
    NotUtf8 {
        /// The path as given.
        path: String,
    },
    /// The text did not parse.
    #[error("{0}")]
    Manifest(#[from] ManifestError),
    /// A git baseline could not be read.
    #[error("{0}")]
    Git(String),
}

/// The process environment as the map `${VAR}` substitution reads (variables that are not UTF-8 are left out).
pub fn env_map() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// The path facts grants resolve against: the working directory and `$HOME`.
pub fn path_ctx(cwd: &Path) -> PathCtx {
    let home = std::env::var("HOME").ok().filter(|h| h.starts_with('/'));
    PathCtx::new(cwd.to_string_lossy().into_owned(), home)
}

/// Reads a manifest's text, refusing files over 1 MiB before reading them.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: shown.clone(),
        source,
    })?;
    if !meta.is_file() {
        return Err(LoadError::Io {
            path: shown,
            source: std::io::Error::other("not a regular file"),
        });
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(LoadError::TooLarge {
            path: shown,
            size: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
        path: shown.clone(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|_| LoadError::NotUtf8 { path: shown })
}

/// Reads and parses the manifest at `path` with the process environment.
pub fn load_manifest(path: &Path) -> Result<Loaded, LoadError> {
    load_manifest_with_env(path, &env_map())
}

/// Reads and parses the manifest at `path`, with `env` as the only source of `${VAR}` values (the CI gate's
/// `--env-free` passes an empty map: defaults only).
pub fn load_manifest_with_env(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Loaded, LoadError> {
    let text = read_text(path)?;
    let canonical = std::fs::canonicalize(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let shown = path.display().to_string();
    let mut manifest = parse_manifest(&text, &shown, env)?;
    manifest.permissions = resolve_permissions(&manifest, &dir, &shown)?;
    Ok(Loaded {
        path: canonical,
        dir,
        manifest,
    })
}

/// The manifest's `[permissions]` rules with every `path_prefix` expanded (`~` against `$HOME`), resolved against
/// the manifest's directory `dir` and canonicalised (symlinks resolved), as the rules compare them with the
/// canonical paths of calls. A prefix that cannot be resolved (no home for `~`, a path whose parent does not exist,
/// a dangling symlink) is an error naming `file`, the rule's key and the fix. Idempotent: resolving resolved rules
/// changes nothing.
pub fn resolve_permissions(
    manifest: &Manifest,
    dir: &Path,
    file: &str,
) -> Result<Permissions, ManifestError> {
    let ctx = path_ctx(dir);
    let canonical = rule_prefixes(&manifest.permissions, &ctx, file)?
        .into_iter()
        .map(|p| {
            let c = canonical_prefix(Path::new(&p));
            (p, c)
        })
        .collect();
    resolve_rule_prefixes(&manifest.permissions, &ctx, file, &canonical)
}

/// The canonical form of a rule's absolute path prefix: the path itself when it exists, else its parent's canonical
/// path joined with its name.
fn canonical_prefix(p: &Path) -> Result<String, String> {
    let text = |c: PathBuf| {
        c.into_os_string()
            .into_string()
            .map_err(|_| "resolves to a path that is not UTF-8".to_string())
    };
    match std::fs::canonicalize(p) {
        Ok(c) => return text(c),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot be resolved ({e})"))
        }
        Err(_) => {}
    }
    if std::fs::symlink_metadata(p).is_ok() {
        return Err("is a symlink whose target does not exist".into());
    }
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return Err("does not exist".into());
    };
    match std::fs::canonicalize(parent) {
        Ok(c) => text(c.join(name)),
        Err(_) => Err(format!(
            "does not exist, and neither does its parent {}",
            parent.display()
        )),
    }
}

/// Loads sub-manifests named by path, relative to the manifest that names them.
pub struct FsLoader {
    /// The PathCtx every loaded manifest's grants resolve against (the agent's working directory).
    pub ctx: PathCtx,
    env: BTreeMap<String, String>,
}

impl FsLoader {
    /// A loader whose manifests resolve grants against `ctx`.
    pub fn new(ctx: PathCtx) -> FsLoader {
        FsLoader::with_env(ctx, env_map())
    }

    /// A loader whose manifests take `${VAR}` values from `env` only.
    pub fn with_env(ctx: PathCtx, env: BTreeMap<String, String>) -> FsLoader {
        FsLoader { ctx, env }
    }
}

impl ManifestLoader for FsLoader {
    fn load(&mut self, from: &str, path: &str) -> Result<(String, PathCtx, Manifest), String> {
        // `from` is a canonical file path (or `file#key` for an inline manifest inside it)
        let from_file = from.split('#').next().unwrap_or(from);
        let base = Path::new(from_file).parent().unwrap_or(Path::new("/"));
        let target = base.join(path);
        let text = read_text(&target).map_err(|e| e.to_string())?;
        let canonical =
            std::fs::canonicalize(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        let manifest = parse_manifest(&text, &target.display().to_string(), &self.env)
            .map_err(|e| e.to_string())?;
        Ok((canonical.display().to_string(), self.ctx.clone(), manifest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_prefixes_canonicalise_through_symlinks_and_refuse_what_cannot_resolve() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("real/keys")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        let p = |rel: &str| root.join(rel);
        // an existing path through a symlink: its target
        assert_eq!(
            canonical_prefix(&p("link/keys")),
            Ok(format!("{}/real/keys", root.display()))
        );
        // a missing leaf under an existing (symlinked) parent: the parent's canonical path and the name
        assert_eq!(
            canonical_prefix(&p("link/new")),
            Ok(format!("{}/real/new", root.display()))
        );
        // a missing parent, and a dangling symlink, are refused
        assert_eq!(
            canonical_prefix(&p("missing/x")),
            Err(format!(
                "does not exist, and neither does its parent {}/missing",
                root.display()
            ))
        );
        assert_eq!(
            canonical_prefix(&p("dangling")),
            Err("is a symlink whose target does not exist".into())
        );
    }
}
