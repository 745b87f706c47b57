//! The skills built into loom (the workspace's `skills/` folder, embedded by `runtime/build.rs`), written out under
//! loom's data directory so the skills layer reads them like any other root — the lowest one.
//!
//! The folder is named by a digest of the embedded content (`<data>/bundled-skills/<digest>`), written whole (a
//! temporary folder renamed into place) and checked against the embedded bytes once per process ([`root`]): a folder
//! that differs in any way (a changed, added or removed file, a symlink) is replaced. loom's data directory is an
//! authority file, so the agent cannot change it; the check keeps anything else from doing so unseen by the next
//! loom process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// One bundled skill's files: (path relative to its folder, content).
pub type SkillFiles = &'static [(&'static str, &'static [u8])];

include!(concat!(env!("OUT_DIR"), "/bundled_skills.rs"));

fn digest() -> String {
    let mut h = Sha256::new();
    for (name, files) in BUNDLED {
        h.update(name.as_bytes());
        h.update([0]);
        for (rel, bytes) in *files {
            h.update(rel.as_bytes());
            h.update([0]);
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where the bundled skills live under `data_home`.
pub fn root_in(data_home: &Path) -> PathBuf {
    data_home.join("bundled-skills").join(digest())
}

/// [`materialize`], once per process and data directory: boot, audit and every sub-agent's boot share the checked
/// folder instead of reading it again (loom's data directory is out of the agent's reach meanwhile).
pub fn root(data_home: &Path) -> Result<Option<PathBuf>, String> {
    static DONE: std::sync::Mutex<BTreeMap<PathBuf, PathBuf>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(root) = done.get(data_home) {
        return Ok(Some(root.clone()));
    }
    let root = materialize(data_home)?;
    if let Some(r) = &root {
        done.insert(data_home.to_path_buf(), r.clone());
    }
    Ok(root)
}

/// Writes the bundled skills under `data_home` unless they are there exactly, and returns their root (`None`: loom
/// was built without any). The error says what failed and where.
pub fn materialize(data_home: &Path) -> Result<Option<PathBuf>, String> {
    if BUNDLED.is_empty() {
        return Ok(None);
    }
    let dir = root_in(data_home);
    if matches(&dir) {
        return Ok(Some(dir));
    }
    let parent = dir.parent().unwrap_or(data_home);
    let fail = |what: &str, p: &Path, e: std::io::Error| {
        format!(
            "cannot {what} {}: {e} (loom's bundled skills are written to its data directory)",
            p.display()
        )
    };
    std::fs::create_dir_all(parent).map_err(|e| fail("create", parent, e))?;
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let tmp = parent.join(format!(".tmp-{unique}"));
    let written = write_all(&tmp);
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(fail("write", &tmp, e));
    }
    if std::fs::rename(&tmp, &dir).is_ok() {
        return Ok(Some(dir));
    }
    // another process put it there first, or what is there differs: keep a good one, replace a bad one
    if matches(&dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(Some(dir));
    }
    let old = parent.join(format!(".old-{unique}"));
    std::fs::rename(&dir, &old).map_err(|e| fail("move aside", &dir, e))?;
    let placed = std::fs::rename(&tmp, &dir).map_err(|e| fail("place", &dir, e));
    let _ = std::fs::remove_dir_all(&old);
    placed?;
    Ok(Some(dir))
}

fn write_all(root: &Path) -> std::io::Result<()> {
    for (name, files) in BUNDLED {
        for (rel, bytes) in *files {
            let p = root.join(name).join(rel);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::write(&p, bytes)?;
        }
    }
    Ok(())
}

/// True when `dir` holds exactly the bundled skills: the same folders and files (regular, no symlinks), the same bytes.
fn matches(dir: &Path) -> bool {
    let mut want: BTreeSet<PathBuf> = BTreeSet::new();
    for (name, files) in BUNDLED {
        want.insert(PathBuf::from(name));
        for (rel, bytes) in *files {
            let rel_path = Path::new(name).join(rel);
            let mut d = rel_path.parent();
            while let Some(p) = d.filter(|p| !p.as_os_str().is_empty()) {
                want.insert(p.to_path_buf());
                d = p.parent();
            }
            match std::fs::symlink_metadata(dir.join(&rel_path)) {
                Ok(m) if m.is_file() && m.len() == bytes.len() as u64 => {}
                _ => return false,
            }
            if std::fs::read(dir.join(&rel_path)).ok().as_deref() != Some(*bytes) {
                return false;
            }
            want.insert(rel_path);
        }
    }
    let mut have = BTreeSet::new();
    if !walk(dir, Path::new(""), &mut have) {
        return false;
    }
    have == want
}

/// Every entry below `dir` (relative); false when one is neither a regular file nor a directory.
fn walk(dir: &Path, rel: &Path, out: &mut BTreeSet<PathBuf>) -> bool {
    let Ok(rd) = std::fs::read_dir(dir.join(rel)) else {
        return false;
    };
    for e in rd.filter_map(Result::ok) {
        let r = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                out.insert(r.clone());
                if !walk(dir, &r, out) {
                    return false;
                }
            }
            Ok(t) if t.is_file() => {
                out.insert(r);
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quality gate every bundled skill passes: valid frontmatter naming its folder, a description that says when
    /// to use it, a body under the re-injection cap, no tool or provider requests (authority-free: `read_skill`
    /// only), and no absolute paths (they would not exist on the user's machine). The problems found, one per line.
    fn lint(name: &str, files: &[(&str, &[u8])]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut bad = |m: String| problems.push(format!("skills/{name}: {m}"));
        let Some((_, md)) = files.iter().find(|(r, _)| *r == "SKILL.md") else {
            bad("no SKILL.md".into());
            return problems;
        };
        let text = String::from_utf8_lossy(md);
        match loom_kernel::parse_skill_md(&text, name, "SKILL.md") {
            Err(e) => bad(format!("{e}")),
            Ok(doc) => {
                if !doc.description.to_ascii_lowercase().contains("use when") {
                    bad(format!(
                        "the description does not say when to use it (\"Use when …\"): {:?}",
                        doc.description
                    ));
                }
                let body = doc.body.trim().chars().count();
                let cap = crate::session::skills::MAX_KEPT_CHARS;
                if !(200..=cap).contains(&body) {
                    bad(format!(
                        "the body is {body} characters; keep it between 200 and {cap}"
                    ));
                }
                if doc.loom_tools.is_some()
                    || doc.loom_providers.is_some()
                    || text.contains("allowed-tools")
                {
                    bad("it asks for tools; a bundled skill is instructions only".into());
                }
            }
        }
        if text
            .split("---")
            .nth(1)
            .unwrap_or_default()
            .contains("metadata")
        {
            bad("it has metadata; a bundled skill's frontmatter is name and description".into());
        }
        for (rel, bytes) in files {
            if *rel == "loom.toml" {
                bad("a loom.toml sidecar asks for tools".into());
            }
            let t = String::from_utf8_lossy(bytes);
            for (i, line) in t.lines().enumerate() {
                let absolute = line
                    .split(|c: char| c.is_whitespace() || "`'\"(<[=,".contains(c))
                    .any(|w| {
                        (w.starts_with('/')
                            && w[1..].starts_with(|c: char| c.is_ascii_alphabetic())
                            && w[1..].contains('/'))
                            || w.starts_with("~/")
                            || w.get(1..3) == Some(":\\")
                    });
                if absolute {
                    bad(format!("{rel}:{}: an absolute path: {line}", i + 1));
                }
            }
        }
        problems
    }

    #[test]
    fn every_bundled_skill_passes_the_lint() {
        assert!(
            BUNDLED.len() >= 20,
            "loom ships at least 20 skills; skills/ has {}",
            BUNDLED.len()
        );
        let problems: Vec<String> = BUNDLED.iter().flat_map(|(n, f)| lint(n, f)).collect();
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn the_lint_catches_what_it_is_for() {
        let body = "Step. ".repeat(50);
        let good = format!(
            "---\nname: ok\ndescription: Does a thing. Use when a thing is needed.\n---\n{body}"
        );
        assert_eq!(
            lint("ok", &[("SKILL.md", good.as_bytes())]),
            Vec::<String>::new()
        );
        for (text, extra, needle) in [
            (good.replace("Use when", "For"), None, "does not say when"),
            (
                good.replace("name: ok", "name: other"),
                None,
                "does not match",
            ),
            (
                good.replace(&body, "Short."),
                None,
                "the body is 6 characters",
            ),
            (
                good.replace(&body, &"x".repeat(9000)),
                None,
                "the body is 9000",
            ),
            (
                good.replace(
                    "---\nStep",
                    "metadata:\n  loom.tools: |\n    bash = {}\n---\nStep",
                ),
                None,
                "asks for tools",
            ),
            (
                good.replace("Step.", "Run /usr/bin/env now."),
                None,
                "an absolute path",
            ),
            (
                good.replace("Step.", "Edit ~/.bashrc."),
                None,
                "an absolute path",
            ),
            (good.clone(), Some(("loom.toml", "[tools]\n")), "sidecar"),
        ] {
            let mut files: Vec<(&str, &[u8])> = vec![("SKILL.md", text.as_bytes())];
            if let Some((rel, t)) = extra {
                files.push((rel, t.as_bytes()));
            }
            let found = lint("ok", &files).join("\n");
            assert!(found.contains(needle), "{needle:?} not found in {found:?}");
        }
    }

    #[test]
    fn materialized_once_and_replaced_when_anything_differs() {
        if BUNDLED.is_empty() {
            eprintln!("SKIPPED: loom was built without bundled skills (skills/ is empty)");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = materialize(d.path()).unwrap().unwrap();
        let (name, files) = BUNDLED[0];
        let skill_md = root.join(name).join("SKILL.md");
        assert_eq!(
            std::fs::read(&skill_md).unwrap(),
            files.iter().find(|(r, _)| *r == "SKILL.md").unwrap().1
        );
        // the same folder again, untouched
        let mtime = std::fs::metadata(&skill_md).unwrap().modified().unwrap();
        assert_eq!(materialize(d.path()).unwrap().unwrap(), root);
        assert_eq!(
            std::fs::metadata(&skill_md).unwrap().modified().unwrap(),
            mtime
        );
        // a changed file, an added skill, a symlink: each replaced by the embedded content
        for tamper in [
            |root: &Path, name: &str| {
                std::fs::write(root.join(name).join("SKILL.md"), "changed").unwrap()
            },
            |root: &Path, _: &str| {
                std::fs::create_dir_all(root.join("planted")).unwrap();
                std::fs::write(root.join("planted/SKILL.md"), "---\nname: planted\n---\n").unwrap();
            },
            |root: &Path, name: &str| {
                std::fs::remove_file(root.join(name).join("SKILL.md")).unwrap();
                std::os::unix::fs::symlink("/etc/hostname", root.join(name).join("SKILL.md"))
                    .unwrap();
            },
        ] {
            tamper(&root, name);
            assert!(!matches(&root));
            assert_eq!(materialize(d.path()).unwrap().unwrap(), root);
            assert!(matches(&root), "not restored");
        }
    }
}
