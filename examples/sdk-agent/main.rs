//! The SDK shape: `examples/minimal-agent/agent.toml` built in Rust. The manifest is a TOML value checked by the
//! same grammar as a file; the session's compacting layer is an instance built here, so this program keeps a
//! handle's worth of control (a forced compaction) that a manifest on disk leaves to the runtime.
//!
//! Run: `cargo run -p loom-runtime --example sdk-agent -- "your prompt"`. With `ANTHROPIC_API_KEY` set it talks to
//! Claude through the `anthropic` harness spec; without it, a harness instance built in code (the `test` echo
//! harness) answers, so the example runs offline.

use std::path::Path;
use std::sync::Arc;

use loom_harness::{Harness, TestHarness};
use loom_runtime::{
    run_agent, AgentDef, BootOptions, CompactingConfig, CompactingLayer, LayerSlot,
};
use tokio_util::sync::CancellationToken;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is in this directory?".into());
    let cwd = std::env::current_dir()?;
    // with a key, a spec in the harness slot (built by the runtime, the key read through the secrets chain);
    // without one, an instance built in code
    let online = std::env::var_os("ANTHROPIC_API_KEY").is_some();
    let harness: Option<Arc<dyn Harness>> = (!online).then(|| Arc::new(TestHarness::echo()) as _);
    println!("{}", run(&prompt, &cwd, harness)?);
    Ok(())
}

/// Boots the agent in `cwd` — on the `anthropic` spec when `harness` is `None`, else on that instance — runs one
/// turn of `prompt`, compacts, closes, and returns the final text.
fn run(
    prompt: &str,
    cwd: &Path,
    harness: Option<Arc<dyn Harness>>,
) -> Result<String, Box<dyn std::error::Error>> {
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
    if harness.is_none() {
        manifest.insert(
            "harness".into(),
            toml::toml! { provider = "anthropic" model = "claude-sonnet-4-5" }.into(),
        );
    }
    let mut def = AgentDef::new(manifest, cwd);
    // an instance in the harness slot, when given
    def.harness = harness;
    // a heterogeneous session: an instance on top of a named layer
    let (config, _) = CompactingConfig::from_toml(&toml::Table::new(), &cwd.join(".loom"))?;
    def.session = Some(vec![
        LayerSlot::Instance(Box::new(CompactingLayer::heuristic(config)?)),
        LayerSlot::named("in-memory"),
    ]);

    let opts = BootOptions {
        cwd: Some(cwd.to_path_buf()),
        ..BootOptions::default()
    };
    let booted = run_agent(def, opts)?;
    for note in &booted.notes {
        eprintln!("note: {note}");
    }
    let agent = booted.agent;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let out = agent.prompt(prompt, CancellationToken::new()).await;
        if let Some(e) = out.error {
            eprintln!("error: {e}");
        }
        for c in agent.compact_now(CancellationToken::new()).await? {
            eprintln!("{c}");
        }
        agent.close().await?;
        Ok(out.final_text)
    })
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test panics on a failed set-up")]
mod tests {
    use loom_harness::TestStep;

    use super::*;

    fn call(tool: &str, input: serde_json::Value) -> TestStep {
        TestStep::Call {
            tool: tool.into(),
            input_json: input.to_string(),
        }
    }

    /// The example's own code, with a scripted harness in the slot it fills in code: the file tools work inside the
    /// working directory and the manifest's grants refuse a path outside it.
    #[test]
    fn the_sdk_agent_runs_its_tools_with_a_scripted_harness() {
        let dir = tempfile::tempdir().unwrap();
        // loom's data directory (the agent's storage) inside the test's own directory, not the user's home
        std::env::set_var("LOOM_DATA_HOME", dir.path().join(".loom-data"));
        let outside = tempfile::tempdir().unwrap();
        let escape = outside.path().join("escape.txt");
        let script = vec![vec![
            call(
                "write_file",
                serde_json::json!({ "path": "a.txt", "content": "one\n" }),
            ),
            call(
                "edit_file",
                serde_json::json!({ "path": "a.txt", "edits": [{ "old_text": "one", "new_text": "two" }] }),
            ),
            call(
                "write_file",
                serde_json::json!({ "path": escape, "content": "x" }),
            ),
            TestStep::Say("done".into()),
        ]];
        let text = run(
            "go",
            dir.path(),
            Some(Arc::new(TestHarness::scripted(script))),
        )
        .unwrap();
        assert_eq!(text, "done");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert!(!escape.exists(), "a write outside the grant ran");
    }
}
