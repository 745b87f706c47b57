//! Documents that run: every ```` ```toml ```` block in README.md and the examples' READMEs parses as a manifest (a
//! whole manifest also audits), and every shell command in the examples' READMEs that needs no model or API key runs
//! as written, with the exit code its comment promises. A stale sentence in a document fails here.

use loom_tests::{loom_bin, workspace_root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// README.md and every examples/*/README.md, sorted.
fn documents() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut docs = vec![root.join("README.md")];
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path().join("README.md")))
        .filter(|p| p.is_file())
        .collect();
    examples.sort();
    docs.extend(examples);
    docs
}

/// A fenced block: the document, the 1-based line of its opening fence, its text.
struct Block {
    doc: PathBuf,
    line: usize,
    text: String,
}

impl Block {
    fn place(&self) -> String {
        let rel = self.doc.strip_prefix(workspace_root()).unwrap_or(&self.doc);
        format!("{}:{}", rel.display(), self.line)
    }
}

/// The fenced blocks of `doc` whose info string is one of `langs`.
fn blocks(doc: &Path, langs: &[&str]) -> Vec<Block> {
    let text = std::fs::read_to_string(doc).expect("read document");
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = fence.strip_prefix("```") {
                    open = Some((i + 1, langs.contains(&info.trim()), String::new()));
                }
            }
            Some((start, wanted, mut body)) => {
                if fence.starts_with("```") {
                    if wanted {
                        out.push(Block {
                            doc: doc.to_path_buf(),
                            line: start,
                            text: body,
                        });
                    }
                } else {
                    body.push_str(line);
                    body.push('\n');
                    open = Some((start, wanted, body));
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "{}: a fenced block is never closed",
        doc.display()
    );
    out
}

fn is_whole_manifest(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "[agent]") && text.lines().any(|l| l.trim() == "[harness]")
}

#[test]
fn every_toml_block_in_the_docs_parses_as_a_manifest() {
    let env: BTreeMap<String, String> = [("HOME", "/home/user")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut seen = 0;
    let mut failures = Vec::new();
    for doc in documents() {
        for block in blocks(&doc, &["toml"]) {
            seen += 1;
            // A fragment is checked inside the smallest manifest that completes it.
            let mut text = String::new();
            if !block.text.lines().any(|l| l.trim() == "[agent]") {
                text.push_str("[agent]\nname = \"docs\"\n");
            }
            if !block.text.lines().any(|l| l.trim() == "[harness]") {
                text.push_str("[harness]\nprovider = \"test\"\n");
            }
            text.push_str(&block.text);
            if let Err(e) = loom_kernel::parse_manifest(&text, "agent.toml", &env) {
                failures.push(format!("{}: {e}", block.place()));
            }
        }
    }
    assert!(
        seen >= 6,
        "expected the README's manifest blocks, found {seen}"
    );
    assert!(
        failures.is_empty(),
        "toml blocks that do not parse:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_whole_manifest_in_the_docs_audits() {
    let mut seen = 0;
    for doc in documents() {
        for block in blocks(&doc, &["toml"]) {
            if !is_whole_manifest(&block.text) {
                continue;
            }
            seen += 1;
            let scratch = loom_tests::Scratch::new();
            scratch.write("agent.toml", &block.text);
            let run = scratch.loom(&["audit", "agent.toml"]);
            assert_eq!(
                run.code(),
                0,
                "{}: `loom audit` of this manifest exits {}\nstdout:\n{}\nstderr:\n{}",
                block.place(),
                run.code(),
                run.stdout(),
                run.stderr()
            );
        }
    }
    assert!(seen >= 1, "the README's manifest is a whole manifest");
}

/// Commands the test does not run, each with the reason. A command that matches none of these runs.
const NOT_RUN: &[(&str, &str)] = &[
    ("API_KEY", "needs a provider's API key"),
    ("needs ANTHROPIC_API_KEY", "needs a provider's API key"),
    (
        "cargo build",
        "the test binary is already built by this very run",
    ),
    (
        "--example sdk-agent",
        "`cargo test -p loom-runtime --example sdk-agent` runs it with a scripted harness",
    ),
    (
        "loom prompt examples/local-agent",
        "installs a model over the network; tests/runtime's local suite runs the model",
    ),
    (
        "loom run examples/local-agent",
        "interactive; tests/runtime's local suite runs the model",
    ),
    (
        "loom prompt examples/skills-agent",
        "calls the anthropic harness; tests/runtime/skills.rs runs it with the scripted harness",
    ),
];

/// The exit code a command's comment promises (`# exit 3: …`, `# exits 1: …`), else 0.
fn promised_exit(comment: &str) -> i32 {
    let words: Vec<&str> = comment
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for pair in words.windows(2) {
        if matches!(pair[0], "exit" | "exits") {
            if let Ok(code) = pair[1].parse() {
                return code;
            }
        }
    }
    0
}

/// Splits a shell line into the command and its trailing `# comment` (a `#` outside quotes after a space).
fn split_comment(line: &str) -> (String, String) {
    let mut quote: Option<char> = None;
    let chars: Vec<char> = line.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && (i == 0 || chars[i - 1].is_whitespace()) => {
                let cmd: String = chars[..i].iter().collect();
                let comment: String = chars[i + 1..].iter().collect();
                return (cmd.trim().to_string(), comment.trim().to_string());
            }
            None => {}
        }
    }
    (line.trim().to_string(), String::new())
}

/// The example READMEs' shell commands, run from a copy of the repository's examples (a fresh git repository, so
/// `git:HEAD` baselines resolve) with `loom` on PATH and loom's data in the scratch directory.
#[test]
fn every_shell_command_in_the_examples_runs_as_written() {
    let loom = loom_bin();
    let root = workspace_root();
    let scratch = loom_tests::Scratch::new();
    let work = scratch.path().join("repo");
    copy_tracked(&root, "examples", &work);
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(ok, "git {args:?} failed in {}", work.display());
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.name=docs",
        "-c",
        "user.email=docs@example.invalid",
        "commit",
        "-q",
        "-m",
        "examples",
    ]);
    let bin_dir = loom.parent().expect("loom's directory").to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).expect("home");

    let mut ran = 0;
    let mut failures = Vec::new();
    for doc in documents()
        .into_iter()
        .filter(|d| d.starts_with(root.join("examples")))
    {
        for block in blocks(&doc, &["sh", "bash", "shell"]) {
            let mut cwd = work.clone();
            // Join `\` continuations.
            let mut lines: Vec<String> = Vec::new();
            let mut pending = String::new();
            for raw in block.text.lines() {
                if let Some(head) = raw.strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                } else {
                    pending.push_str(raw);
                    lines.push(std::mem::take(&mut pending));
                }
            }
            for line in lines {
                let (command, comment) = split_comment(&line);
                if command.is_empty() {
                    continue;
                }
                let command = command
                    .replace("cargo run -q -p loom-cli --", "loom")
                    .replace("target/debug/loom", "loom");
                if let Some((_, why)) = NOT_RUN
                    .iter()
                    .find(|(needle, _)| command.contains(needle) || comment.contains(needle))
                {
                    println!("{}: not run ({why}): {command}", block.place());
                    continue;
                }
                if let Some(dir) = command.strip_prefix("cd ") {
                    cwd = cwd.join(dir.trim());
                    continue;
                }
                ran += 1;
                let want = promised_exit(&comment);
                let out = Command::new("bash")
                    .args(["-c", &command])
                    .current_dir(&cwd)
                    .env_clear()
                    .env("PATH", &path)
                    .env("HOME", &home)
                    .env("LOOM_DATA_HOME", scratch.path().join(".loom-data"))
                    .env("NO_COLOR", "1")
                    .output()
                    .expect("run bash");
                let code = out.status.code().unwrap_or(-1);
                println!("{}: ran (exit {code}): {command}", block.place());
                if code != want {
                    failures.push(format!(
                        "{}: `{command}` exited {code}, the document promises {want}\nstdout:\n{}\nstderr:\n{}",
                        block.place(),
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
        }
    }
    assert!(
        ran >= 8,
        "expected the examples' commands to run, ran {ran}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Copies the files git tracks under `dir` (so nothing a local run left behind, such as `.loom/` or `node_modules/`).
fn copy_tracked(root: &Path, dir: &str, to: &Path) {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--", dir])
        .current_dir(root)
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    for rel in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).expect("utf-8 path"));
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(root.join(rel), &dest).expect("copy");
    }
}

#[test]
fn the_promised_exit_code_is_read_from_the_comment() {
    assert_eq!(promised_exit("exit 0: contained"), 0);
    assert_eq!(promised_exit("exit 3: bash grew"), 3);
    assert_eq!(promised_exit("exits 1: calendar is rejected"), 1);
    assert_eq!(promised_exit("every tool, grant and schema"), 0);
    assert_eq!(
        split_comment("printf '%s # not a comment' x   # the comment"),
        (
            "printf '%s # not a comment' x".to_string(),
            "the comment".to_string()
        )
    );
}
