//! The SDK shape: `examples/minimal-agent/agent.toml` built in Rust. The manifest is a TOML value checked by the
//! same grammar as a file; the session's compacting layer is an instance built here, so this program keeps a
//! handle's worth of control (a forced compaction) that a manifest on disk leaves to the runtime.
//!
//! Run: `cargo run -p loom-runtime --example sdk-agent -- "your prompt"`. With `ANTHROPIC_API_KEY` set it talks to
//! Claude through the `anthropic` harness spec; without it, a harness instance built in code (the `test` echo
//! harness) answers, so the example runs offline.

use std::sync::Arc;

use loom_runtime::{
    run_agent, AgentDef, BootOptions, CompactingConfig, CompactingLayer, LayerSlot, TestHarness,
};
use tokio_util::sync::CancellationToken;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is in this directory?".into());
    let cwd = std::env::current_dir()?;

    // the manifest as a value: the same keys as agent.toml, the same closed grammar
    let mut manifest = toml::toml! {
        name = "sdk-agent"
        system_prompt = "You are a careful assistant. Work only inside the current directory."

        [tools]
        read_file = "builtin"
        write_file = "builtin"
        edit_file = "builtin"
        bash = "builtin"

        [capabilities]
        read_file = { paths = ["./"] }
        write_file = { paths = ["./"] }
        edit_file = { paths = ["./"] }
        bash = { commands = "*", paths = ["./"] }
    };
    let online = std::env::var_os("ANTHROPIC_API_KEY").is_some();
    if online {
        // a spec in the harness slot: built by the runtime, the key read through the secrets chain
        manifest.insert(
            "harness".into(),
            toml::toml! { provider = "anthropic" model = "claude-sonnet-4-5" }.into(),
        );
    }
    let mut def = AgentDef::new(manifest, &cwd);
    if !online {
        // an instance in the harness slot
        def.harness = Some(Arc::new(TestHarness::echo()));
    }
    // a heterogeneous session: an instance on top of a named layer
    let (config, _) = CompactingConfig::from_toml(&toml::Table::new(), &cwd.join(".loom"))?;
    def.session = Some(vec![
        LayerSlot::Instance(Box::new(CompactingLayer::heuristic(config)?)),
        LayerSlot::named("in-memory"),
    ]);

    let booted = run_agent(def, BootOptions::default())?;
    for note in &booted.notes {
        eprintln!("note: {note}");
    }
    let agent = booted.agent;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let out = agent.prompt(&prompt, CancellationToken::new()).await;
        println!("{}", out.final_text);
        if let Some(e) = out.error {
            eprintln!("error: {e}");
        }
        for c in agent.compact_now(CancellationToken::new()).await? {
            eprintln!("{c}");
        }
        agent.close().await
    })?;
    Ok(())
}
