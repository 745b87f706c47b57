//! The tree hash `.loom/lock.toml` pins (defined in runtime/PROVIDERS.md, "The tree hash"), and the copy `loom
//! install` makes of a path source. Symlinks are never followed; one that is absolute or leaves the tree is refused.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// Names never copied from a path source (version-control metadata).
pub const SKIPPED: &[&str] = &[".git"];

/// One entry of a tree, by relative path.
enum Entry {
    Dir,
    File { exec: bool, size: u64 },
    Link(String),
}

/// Lists `root`'s entries (relative `/`-separated paths, sorted by bytes), refusing escaping symlinks and special
/// files. `skip` names are left out at every depth.
fn entries(root: &Path, skip: &[&str]) -> Result<Vec<(String, Entry)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let list =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for item in list {
            let item = item.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let name = item.file_name();
            let Some(name) = name.to_str() else {
                return Err(format!(
                    "{}: a file name that is not UTF-8 cannot be pinned",
                    item.path().display()
                ));
            };
            if skip.contains(&name) {
                continue;
            }
            if name.contains('\n') {
                return Err(format!(
                    "{}: a file name with a newline cannot be pinned",
                    item.path().display()
                ));
            }
            let child = rel.join(name);
            let key = child.to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(item.path())
                .map_err(|e| format!("cannot stat {}: {e}", item.path().display()))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                let target = std::fs::read_link(item.path())
                    .map_err(|e| format!("cannot read the link {}: {e}", item.path().display()))?;
                if !stays_inside(&rel, &target) {
                    return Err(format!(
                        "{} is a symlink to {} outside the provider's directory; loom refuses to install or run \
                         it (make it a relative link inside the directory, or copy the file)",
                        item.path().display(),
                        target.display()
                    ));
                }
                out.push((key, Entry::Link(target.to_string_lossy().into_owned())));
            } else if ft.is_dir() {
                out.push((key, Entry::Dir));
                stack.push(child);
            } else if ft.is_file() {
                out.push((
                    key,
                    Entry::File {
                        exec: meta.permissions().mode() & 0o111 != 0,
                        size: meta.len(),
                    },
                ));
            } else {
                return Err(format!(
                    "{} is neither a file, a directory nor a symlink; a provider cannot hold it",
                    item.path().display()
                ));
            }
        }
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// True when the link at `<dir>/<name>` pointing to `target` resolves (lexically) inside the tree.
fn stays_inside(dir: &Path, target: &Path) -> bool {
    let mut depth: i64 = dir.components().count() as i64;
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn file_sha(path: &Path) -> Result<String, String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The tree hash of `root` (see runtime/PROVIDERS.md): every entry, nothing skipped.
pub fn tree_hash(root: &Path) -> Result<String, String> {
    hash_entries(root, &[])
}

fn hash_entries(root: &Path, skip: &[&str]) -> Result<String, String> {
    let mut h = Sha256::new();
    for (rel, e) in entries(root, skip)? {
        let record = match e {
            Entry::Dir => format!("d {rel}\n"),
            Entry::File { exec, size } => format!(
                "f {} {size} {} {rel}\n",
                if exec { "755" } else { "644" },
                file_sha(&root.join(&rel))?
            ),
            Entry::Link(target) => format!("l {target} {rel}\n"),
        };
        h.update(record.as_bytes());
    }
    Ok(hex(&h.finalize()))
}

/// The tree hash a path source would materialise to: [`tree_hash`] of what [`copy_tree`] copies (the source less
/// [`SKIPPED`] names), so it equals the hash of a fresh install of it.
pub fn source_hash(root: &Path) -> Result<String, String> {
    let canon = std::fs::canonicalize(root)
        .map_err(|e| format!("cannot read the source directory {}: {e}", root.display()))?;
    hash_entries(&canon, SKIPPED)
}

/// Copies the tree at `from` into the new directory `to` (files, directories, in-tree symlinks; execute bits kept),
/// leaving out [`SKIPPED`] names.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let list = entries(from, SKIPPED)?;
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for (rel, e) in list {
        let (src, dst) = (from.join(&rel), to.join(&rel));
        let res = match e {
            Entry::Dir => std::fs::create_dir_all(&dst),
            Entry::File { exec, .. } => std::fs::copy(&src, &dst).and_then(|_| {
                let mode = if exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode))
            }),
            Entry::Link(target) => std::os::unix::fs::symlink(target, &dst),
        };
        res.map_err(|e| format!("cannot copy {} to {}: {e}", src.display(), dst.display()))?;
    }
    Ok(())
}

/// Removes `dir` and everything in it, when it exists.
pub fn remove_tree(dir: &Path) {
    if std::fs::symlink_metadata(dir).is_ok() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_sees_contents_modes_names_and_empty_dirs() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir_all(a.join("lib")).unwrap();
        std::fs::write(a.join("index.mjs"), "x").unwrap();
        std::fs::write(a.join("lib/u.mjs"), "y").unwrap();
        std::os::unix::fs::symlink("lib/u.mjs", a.join("alias.mjs")).unwrap();
        let h0 = tree_hash(&a).unwrap();
        let b = t.path().join("b");
        copy_tree(&a, &b).unwrap();
        assert_eq!(tree_hash(&b).unwrap(), h0, "a copy hashes the same");
        std::fs::write(a.join("index.mjs"), "z").unwrap();
        let h1 = tree_hash(&a).unwrap();
        assert_ne!(h1, h0);
        std::fs::set_permissions(a.join("index.mjs"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let h2 = tree_hash(&a).unwrap();
        assert_ne!(h2, h1);
        std::fs::create_dir(a.join("empty")).unwrap();
        assert_ne!(tree_hash(&a).unwrap(), h2);
        std::fs::rename(a.join("empty"), a.join("other")).unwrap();
        let h3 = tree_hash(&a).unwrap();
        std::fs::rename(a.join("other"), a.join("empty")).unwrap();
        assert_ne!(tree_hash(&a).unwrap(), h3);
    }

    #[test]
    fn escaping_symlinks_are_refused_and_git_is_not_copied() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir_all(a.join(".git")).unwrap();
        std::fs::write(a.join(".git/HEAD"), "ref").unwrap();
        std::fs::write(a.join("f"), "x").unwrap();
        let b = t.path().join("b");
        copy_tree(&a, &b).unwrap();
        assert!(!b.join(".git").exists());
        std::os::unix::fs::symlink("../../etc/passwd", a.join("up")).unwrap();
        assert!(tree_hash(&a).unwrap_err().contains("outside"));
        std::fs::remove_file(a.join("up")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.join("abs")).unwrap();
        assert!(copy_tree(&a, &t.path().join("c")).is_err());
        assert!(stays_inside(Path::new("x"), Path::new("../y")));
        assert!(!stays_inside(Path::new("x"), Path::new("../../y")));
    }
}
