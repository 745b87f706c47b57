//! The coding tools' performance targets (issue 19), as benchmarks, not timed tests:
//! - `grep_10k`: the `grep` tool over a 10,000-file tree (decided by the kernel, then run) against `rg` run as a
//!   process on the same tree (skipped, with the reason, when `rg` is not installed);
//! - `find_symbol_loom`: `find_symbol` over this repository (target 100 ms);
//! - `prompt_assembly`: the system prompt an agent assembles for a request (the environment block outside a git
//!   repository, the agent's prompt, `AGENTS.md`, `CLAUDE.md`, three `.loom/rules`), through `Agent::preamble`;
//! - `git_probe`: the sandboxed `git status` the environment block runs once per turn inside a repository (skipped
//!   unless `target/release/loom-sandbox-exec` is built).
//!
//! Run: `cargo bench -p loom-benches --bench coding -- --warm-up-time 1 --measurement-time 5`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use loom_harness::TestHarness;
use loom_kernel::{decide, AlgebraKind, Decision, Grant, PathCtx};
use loom_runtime::{Agent, AgentParts, Chain, MemoryLayer};
use loom_tools::{builtin_tool, SandboxEnv, ToolCtx, ToolEnv};
use tokio_util::sync::CancellationToken;

/// A tree of 100 directories of 100 files, each 40 lines of ordinary text; 10 files (one in every 10th directory)
/// hold the needle, so both searches read every file.
fn tree(root: &Path) {
    for d in 0..100 {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            let mut text = String::new();
            for l in 0..40 {
                text.push_str(&format!(
                    "line {l} of file {f} in directory {d}: some ordinary words here\n"
                ));
            }
            if f == 7 && d % 10 == 0 {
                text.push_str("the NEEDLE_4711 is here\n");
            }
            std::fs::write(dir.join(format!("file{f:03}.txt")), text).unwrap();
        }
    }
}

/// The built-in `name` with `read_paths = [root]`, and its path context and grant.
fn read_tool(name: &str, root: &Path) -> (Arc<dyn loom_tools::Tool>, PathCtx, Grant) {
    let ctx = PathCtx::new(root.to_string_lossy().into_owned(), None);
    let t: toml::Table = toml::from_str(&format!(
        "g = {{ read_paths = [{:?}] }}",
        root.display().to_string()
    ))
    .unwrap();
    let grant = Grant::from_toml(&t["g"]).unwrap();
    let env = ToolEnv {
        instance: name.into(),
        grant: grant.clone(),
        ctx: ctx.clone(),
        cwd: root.to_path_buf(),
        authority: Default::default(),
        undo: Default::default(),
        record: Default::default(),
        processes: Default::default(),
        seen: Default::default(),
    };
    (
        builtin_tool(name, env, &SandboxEnv::default()).unwrap(),
        ctx,
        grant,
    )
}

/// One call as the turn loop makes it: prepare, the kernel's decision, the run.
fn call(
    rt: &tokio::runtime::Runtime,
    (tool, ctx, grant): &(Arc<dyn loom_tools::Tool>, PathCtx, Grant),
    input: &serde_json::Value,
) -> loom_tools::ToolOutput {
    let p = tool.prepare(input).unwrap();
    let Decision::Allow(auth) = decide(tool.name(), AlgebraKind::Files, ctx, grant, &p.request)
    else {
        panic!("denied")
    };
    rt.block_on((p.run)(
        auth,
        ToolCtx {
            more: Vec::new(),
            cancel: CancellationToken::new(),
            progress: Arc::new(|_| {}),
            history: None,
            client_fs: None,
            terminals: None,
        },
    ))
}

fn grep_10k(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    tree(&root);
    let tool = read_tool("grep", &root);
    let input = serde_json::json!({ "pattern": "NEEDLE_[0-9]+" });
    let mut g = c.benchmark_group("grep_10k");
    g.sample_size(20);
    g.bench_function("loom_grep_tool", |b| {
        b.iter(|| {
            let out = call(&rt, &tool, &input);
            assert_eq!(out.text.matches("NEEDLE_4711").count(), 10, "{}", out.text);
        })
    });
    match Command::new("rg").arg("--version").output() {
        Ok(o) if o.status.success() => {
            g.bench_function("rg_process", |b| {
                b.iter(|| {
                    let out = Command::new("rg")
                        .args(["-n", "NEEDLE_[0-9]+", "."])
                        .current_dir(&root)
                        .output()
                        .unwrap();
                    assert_eq!(
                        String::from_utf8_lossy(&out.stdout)
                            .matches("NEEDLE_4711")
                            .count(),
                        10
                    );
                })
            });
        }
        _ => eprintln!(
            "SKIPPED grep_10k/rg_process: `rg` is not installed (apt-get install ripgrep)"
        ),
    }
    g.finish();
}

fn prompt_assembly(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        cwd.join("AGENTS.md"),
        "Run the tests before you say done.\n".repeat(40),
    )
    .unwrap();
    std::fs::write(
        cwd.join("CLAUDE.md"),
        "Prefer small functions.\n".repeat(40),
    )
    .unwrap();
    std::fs::create_dir_all(cwd.join(".loom/rules")).unwrap();
    for (n, t) in [
        ("a.md", "General rule one.\n"),
        ("b.md", "General rule two.\n"),
        ("c.md", "---\npaths: [src/**/*.rs]\n---\nA path rule.\n"),
    ] {
        std::fs::write(cwd.join(".loom/rules").join(n), t).unwrap();
    }
    let ctx = PathCtx::new(cwd.to_string_lossy().into_owned(), None);
    let chain = Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap();
    let mut parts = AgentParts::new(Arc::new(TestHarness::echo()), chain, ctx);
    parts.system = vec!["You are a careful coding agent.".into()];
    parts.guidance = Some(cwd.clone());
    parts.environment = Some((cwd.clone(), None));
    let agent = Agent::new(parts);
    let mut g = c.benchmark_group("prompt_assembly");
    g.bench_function("guidance_and_rules", |b| {
        b.iter(|| {
            let p = rt.block_on(agent.preamble("x")).unwrap();
            assert_eq!(p.system_prompt.len(), 6, "{:?}", p.system_prompt);
        })
    });
    g.finish();
}

fn git_probe(c: &mut Criterion) {
    let exe = std::env::current_exe().unwrap();
    let inner: Option<PathBuf> = exe
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("loom-sandbox-exec"))
        .filter(|p| p.is_file());
    let Some(inner) = inner else {
        eprintln!(
            "SKIPPED git_probe: build the inner stage first (cargo build --release -p loom-sandbox --bin loom-sandbox-exec)"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = std::fs::canonicalize(dir.path()).unwrap();
    let git = |args: &[&str]| {
        assert!(Command::new("git")
            .args(["-c", "user.email=b@example.com", "-c", "user.name=b"])
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap()
            .success());
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "one"]);
    let sandbox = SandboxEnv {
        inner_exe: Some(inner),
        ..SandboxEnv::default()
    };
    let mut g = c.benchmark_group("git_probe");
    g.sample_size(20);
    g.bench_function("work_tree_dirty", |b| {
        b.iter(|| {
            let dirty = rt
                .block_on(loom_tools::work_tree_dirty(
                    &repo,
                    &sandbox,
                    &CancellationToken::new(),
                ))
                .unwrap();
            assert!(!dirty);
        })
    });
    g.finish();
}

/// `find_symbol` over this repository (the loom workspace, its `target/` left out by `.gitignore`).
fn find_symbol_loom(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root =
        std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()).unwrap();
    let tool = read_tool("find_symbol", &root);
    let mut g = c.benchmark_group("find_symbol_loom");
    g.sample_size(20);
    for name in ["decide", "Authorization"] {
        let input = serde_json::json!({ "name": name });
        g.bench_function(name, |b| {
            b.iter(|| {
                let out = call(&rt, &tool, &input);
                assert!(
                    out.text.contains("kernel/src/policy/decide"),
                    "{}",
                    out.text
                );
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    grep_10k,
    find_symbol_loom,
    prompt_assembly,
    git_probe
);
criterion_main!(benches);
