//! Embeds the workspace's `skills/` folder (the bundled Agent Skills) in the runtime: `$OUT_DIR/bundled_skills.rs`
//! holds every skill folder's files as `include_bytes!` of their absolute paths.
//!
//! Why a build script and not the `include_dir` crate: cargo must rebuild when a skill is added, changed or removed,
//! and only `rerun-if-changed` on the folders and files says so on stable Rust.

use std::path::{Path, PathBuf};

fn files(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(t) = e.file_type() else { continue };
        let path = e.path();
        let rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if t.is_dir() {
            files(&path, &rel, out);
        } else if t.is_file() {
            println!("cargo:rerun-if-changed={}", path.display());
            out.push((rel, path));
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut code =
        String::from("/// The bundled skills: (name, [(relative path, bytes)]), sorted by name.\n");
    code.push_str("pub static BUNDLED: &[(&str, SkillFiles)] = &[\n");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    folders.sort();
    for folder in folders {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || !folder.join("SKILL.md").is_file() {
            continue;
        }
        let mut fs = Vec::new();
        files(&folder, "", &mut fs);
        code.push_str(&format!("    ({name:?}, &[\n"));
        for (rel, path) in fs {
            let abs = std::fs::canonicalize(&path).unwrap_or(path);
            code.push_str(&format!(
                "        ({rel:?}, include_bytes!({:?})),\n",
                abs.display().to_string()
            ));
        }
        code.push_str("    ]),\n");
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()))
        .join("bundled_skills.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
