//! `project_info`: what a project is — its languages (files counted by extension over a bounded, `.gitignore`-aware
//! walk), its build systems (Cargo, npm/pnpm/yarn, Go, Python, Make) from their files in the project's root, the
//! scripts and members they declare, and the usual entry points. Everything is read beneath the granted root
//! ([`super::walk`]); each file read goes through the kernel's authority check first, as in `grep`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use loom_kernel::{authority_denial, Access, Authority, Request};
use serde_json::{json, Value};

use super::beneath::Target;
use super::ignores::Ignores;
use super::read_call::{path_field, read_call};
use super::walk::{open_file, open_top, walk, EntryKind, Visit, Walked};
use super::{check_fields, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;

/// The most entries the language count visits.
pub const MAX_VISITED: usize = 20_000;
/// The largest build file read.
const MAX_BUILD_FILE_BYTES: u64 = 256 * 1024;

/// Programming languages by file extension (data and documentation formats are not counted).
const LANGUAGES: &[(&str, &str)] = &[
    ("rs", "Rust"),
    ("py", "Python"),
    ("js", "JavaScript"),
    ("mjs", "JavaScript"),
    ("cjs", "JavaScript"),
    ("jsx", "JavaScript"),
    ("ts", "TypeScript"),
    ("tsx", "TypeScript"),
    ("go", "Go"),
    ("java", "Java"),
    ("kt", "Kotlin"),
    ("c", "C"),
    ("h", "C"),
    ("cc", "C++"),
    ("cpp", "C++"),
    ("hpp", "C++"),
    ("cs", "C#"),
    ("rb", "Ruby"),
    ("php", "PHP"),
    ("swift", "Swift"),
    ("sh", "Shell"),
];

/// Entry points looked for, relative to the project root.
const ENTRY_POINTS: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "main.go",
    "main.py",
    "__main__.py",
    "manage.py",
    "app.py",
    "index.js",
    "index.ts",
    "src/index.js",
    "src/index.ts",
    "src/main.ts",
];

/// The `project_info` tool.
#[derive(Debug)]
pub struct ProjectInfoTool {
    /// Where and under which grant it runs.
    pub env: ToolEnv,
}

impl Tool for ProjectInfoTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("project_info")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Describe a project (default {}): its languages, build systems (Cargo, npm/pnpm/yarn, Go, Python, \
                 Make) with their scripts and members, and its usual entry points. Use it first in an unfamiliar \
                 repository. The directory must be inside this tool's grant ({}).",
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The project's root directory. Default \".\"." },
                },
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["path"])?;
        let path_in = path_field(input, &name, "path")?;
        let authority = self.env.authority.clone();
        read_call(
            &self.env,
            path_in,
            Box::new(move |target, root, shown, cancel| {
                describe(&name, target, root, shown, &authority, cancel)
            }),
        )
    }
}

/// Reads `rel` below `top` when the kernel's authority check allows it and it is a small regular file.
fn read_small(
    tool: &str,
    authority: &Authority,
    top: &std::os::fd::OwnedFd,
    root: &Path,
    rel: &str,
) -> Option<String> {
    let request = Request::File {
        path: root.join(rel).display().to_string(),
        access: Access::Read,
    };
    if authority_denial(tool, &request, authority).is_some() {
        return None;
    }
    let file = open_file(top, Path::new(rel)).ok()?;
    let mut text = String::new();
    Read::take(file, MAX_BUILD_FILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn describe(
    tool: &str,
    target: &Target,
    root: &Path,
    shown: &Path,
    authority: &Authority,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    let top = open_top(target, shown)?;
    let exists = |rel: &str| open_file(&top, Path::new(rel)).is_ok();
    let read = |rel: &str| read_small(tool, authority, &top, root, rel);
    let mut build: Vec<String> = Vec::new();
    if let Some(text) = read("Cargo.toml") {
        let parsed: Option<toml::Table> = toml::from_str(&text).ok();
        let mut what = vec!["Cargo (Cargo.toml".to_string()];
        if let Some(t) = &parsed {
            if let Some(n) = t
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(toml::Value::as_str)
            {
                what.push(format!("package {n}"));
            }
            if let Some(m) = t
                .get("workspace")
                .and_then(|w| w.get("members"))
                .and_then(toml::Value::as_array)
            {
                what.push(format!("workspace of {} members", m.len()));
            }
        }
        let lock = if exists("Cargo.lock") {
            "; Cargo.lock"
        } else {
            ""
        };
        build.push(format!(
            "{}{lock}): cargo build, cargo test",
            what.join(", ")
        ));
    }
    if let Some(text) = read("package.json") {
        let manager = if exists("pnpm-lock.yaml") {
            "pnpm"
        } else if exists("yarn.lock") {
            "yarn"
        } else if exists("bun.lockb") || exists("bun.lock") {
            "bun"
        } else {
            "npm"
        };
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let scripts: Vec<String> = parsed
            .as_ref()
            .and_then(|p| p.get("scripts"))
            .and_then(Value::as_object)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        let scripts = if scripts.is_empty() {
            "no scripts".to_string()
        } else {
            format!("scripts: {}", scripts.join(", "))
        };
        build.push(format!("{manager} (package.json; {scripts})"));
    }
    if let Some(text) = read("go.mod") {
        let module = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("module "))
            .map(str::trim)
            .unwrap_or("?");
        build.push(format!(
            "Go (go.mod: module {module}): go build ./..., go test ./..."
        ));
    }
    let python: Vec<&str> = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ]
    .into_iter()
    .filter(|f| exists(f))
    .collect();
    if !python.is_empty() {
        let runner = if exists("pytest.ini")
            || exists("conftest.py")
            || read("pyproject.toml").is_some_and(|t| t.contains("[tool.pytest"))
        {
            "pytest"
        } else {
            "python -m unittest"
        };
        build.push(format!("Python ({}): {runner}", python.join(", ")));
    }
    if exists("Makefile") || exists("makefile") || exists("GNUmakefile") {
        build.push("Make (Makefile)".into());
    }
    let entries: Vec<&str> = ENTRY_POINTS.iter().copied().filter(|e| exists(e)).collect();
    // languages: files by extension, over a bounded walk that skips what grep skips
    let mut ignores = Ignores::new(target, root);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let walked = walk(&top, MAX_VISITED, cancel, &mut |e| {
        if ignores.skips(&top, e, false) {
            return Visit::Skip;
        }
        if e.kind == EntryKind::File {
            let ext = e.rel.extension().and_then(|x| x.to_str()).unwrap_or("");
            if let Some((_, lang)) = LANGUAGES.iter().find(|(x, _)| *x == ext) {
                *counts.entry(lang).or_default() += 1;
            }
        }
        Visit::Continue
    });
    if walked == Walked::Cancelled {
        return Ok(ToolOutput::interrupted(""));
    }
    let mut langs: Vec<(&str, usize)> = counts.into_iter().collect();
    langs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let langs_text = if langs.is_empty() {
        "none recognised".to_string()
    } else {
        let mut t = langs
            .iter()
            .map(|(l, n)| format!("{l} ({n} file{})", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ");
        if walked == Walked::TooMany {
            t.push_str(&format!(" — counted over the first {MAX_VISITED} entries"));
        }
        t
    };
    let guidance: Vec<&str> = loom_kernel::GUIDANCE_FILES
        .into_iter()
        .filter(|g| exists(g))
        .collect();
    let mut lines = vec![
        format!("project    {}", root.display()),
        format!("languages  {langs_text}"),
    ];
    if build.is_empty() {
        lines.push("build      none recognised (no Cargo.toml, package.json, go.mod, pyproject.toml, setup.py, requirements.txt or Makefile in the root)".into());
    }
    for b in &build {
        lines.push(format!("build      {b}"));
    }
    if !entries.is_empty() {
        lines.push(format!("entry      {}", entries.join(", ")));
    }
    if !guidance.is_empty() {
        lines.push(format!(
            "guidance   {} (in the system prompt each turn)",
            guidance.join(", ")
        ));
    }
    Ok(ToolOutput {
        text: lines.join("\n"),
        raw_output: Some(json!({
            "languages": langs.iter().map(|(l, n)| json!({"language": l, "files": n})).collect::<Vec<_>>(),
            "build": build,
            "entryPoints": entries,
        })),
        ..ToolOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    #[tokio::test]
    async fn recognises_cargo_npm_and_python_and_counts_languages() {
        let work = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let p = work.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w("Cargo.toml", "[workspace]\nmembers = [\"a\", \"b\"]\n");
        w("Cargo.lock", "");
        w("src/main.rs", "fn main() {}");
        w("src/lib.rs", "");
        w("web/x.ts", "");
        w(
            "package.json",
            r#"{"scripts": {"test": "jest", "build": "tsc"}}"#,
        );
        w("pnpm-lock.yaml", "");
        w("requirements.txt", "");
        w("target/gen.rs", "");
        w(".gitignore", "target/\n");
        w("AGENTS.md", "rules");
        let e = env("project_info", work.path(), r#"{ read_paths = ["./"] }"#);
        let t = ProjectInfoTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({})).await;
        assert!(!out.is_error, "{}", out.text);
        let want = [
            "languages  Rust (2 files), TypeScript (1 file)",
            "build      Cargo (Cargo.toml, workspace of 2 members; Cargo.lock): cargo build, cargo test",
            "build      pnpm (package.json; scripts: test, build)",
            "build      Python (requirements.txt): python -m unittest",
            "entry      src/main.rs, src/lib.rs",
            "guidance   AGENTS.md (in the system prompt each turn)",
        ];
        for w in want {
            assert!(out.text.contains(w), "{w}\n---\n{}", out.text);
        }
        let empty = tempfile::tempdir().unwrap();
        let e = env("project_info", empty.path(), r#"{ read_paths = ["./"] }"#);
        let t = ProjectInfoTool { env: e.clone() };
        let out = call(&t, AlgebraKind::Files, &e, json!({})).await;
        assert!(
            out.text.contains("build      none recognised"),
            "{}",
            out.text
        );
    }
}
