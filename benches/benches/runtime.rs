//! Runtime overhead per turn with the scripted `test` harness: no model time, so what is measured is the turn loop
//! itself — frames and updates on the bus, the session push/pull, history to messages, and for a tool turn the
//! kernel's decision and the tool's effect. Run: `cargo bench -p loom-benches --bench runtime`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use loom_harness::{Harness, TestHarness};
use loom_kernel::{AlgebraKind, Grant, PathCtx};
use loom_protocol::Capacity;
use loom_runtime::{Agent, AgentParts, Chain, MemoryLayer, ToolSlot};
use loom_tools::{builtin_tool, SandboxEnv, ToolEnv};
use tokio_util::sync::CancellationToken;

/// How many turns one agent takes before a fresh one replaces it (untimed), so history stays session-sized.
const TURNS_PER_AGENT: u64 = 100;

fn agent(harness: Arc<dyn Harness>, tools: BTreeMap<String, ToolSlot>, ctx: &PathCtx) -> Agent {
    let chain = Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap();
    let mut parts = AgentParts::new(harness, chain, ctx.clone());
    parts.tools = tools;
    Agent::new(parts)
}

fn read_file_slot(dir: &std::path::Path, ctx: &PathCtx) -> BTreeMap<String, ToolSlot> {
    let t: toml::Table = toml::from_str(&format!(
        "g = {{ paths = [{:?}] }}",
        dir.display().to_string()
    ))
    .unwrap();
    let grant = Grant::from_toml(&t["g"]).unwrap();
    let env = ToolEnv {
        instance: "read_file".into(),
        grant: grant.clone(),
        ctx: ctx.clone(),
        cwd: dir.to_path_buf(),
        authority: Default::default(),
        undo: Default::default(),
        record: Default::default(),
        processes: Default::default(),
        seen: Default::default(),
    };
    let tool = builtin_tool("read_file", env, &SandboxEnv::default()).unwrap();
    BTreeMap::from([(
        "read_file".to_string(),
        ToolSlot {
            tool,
            algebra: AlgebraKind::Files,
            grant,
        },
    )])
}

fn bench_turns(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(cwd.join("notes.txt"), "a small file\n".repeat(20)).unwrap();
    let ctx = PathCtx::new(cwd.to_string_lossy().into_owned(), None);
    let mut g = c.benchmark_group("turn");

    // one user message, one echoed answer; a renderer subscribed as `loom prompt` has one
    g.bench_function("echo", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let a = agent(Arc::new(TestHarness::echo()), BTreeMap::new(), &ctx);
                let sub = a.subscribe(Capacity::Bounded(1024));
                let n = (iters - done).min(TURNS_PER_AGENT);
                let start = Instant::now();
                for _ in 0..n {
                    let out = rt.block_on(a.prompt("hello there", CancellationToken::new()));
                    assert_eq!(out.final_text, "hello there");
                    while sub.try_recv().is_some() {}
                }
                spent += start.elapsed();
                done += n;
            }
            spent
        })
    });

    // a turn with one tool call: two model requests, the kernel's decision, read_file's effect, the result stored
    let script: toml::Table = toml::from_str(
        r#"script = [[ { call = { tool = "read_file", input = { path = "notes.txt" } } }, { say = "read it" } ]]"#,
    )
    .unwrap();
    g.bench_function("one_read_file_call", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                // the script holds one turn, so each turn gets a fresh agent (built untimed)
                let h = Arc::new(TestHarness::from_config(&script).unwrap());
                let a = agent(h, read_file_slot(&cwd, &ctx), &ctx);
                let sub = a.subscribe(Capacity::Bounded(1024));
                let start = Instant::now();
                let out = rt.block_on(a.prompt("read the notes", CancellationToken::new()));
                while sub.try_recv().is_some() {}
                spent += start.elapsed();
                assert_eq!(out.final_text, "read it");
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(benches, bench_turns);
criterion_main!(benches);
