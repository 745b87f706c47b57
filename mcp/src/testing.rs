//! Test support for this crate's tests and other crates' (the `testing` feature): a [`ServerConfig`] that runs
//! tests/mcp-peers/fake.mjs in one of its modes (never answers, crashes mid-call, a malformed schema, a 10 MB
//! result, a changing tool list, …).

use std::path::PathBuf;
use std::time::Duration;

use crate::{Launch, ServerConfig, StdioSpawn};

/// The fake server's script, or `None` (with the reason printed) when node is not installed.
pub fn fake() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp-peers/fake.mjs");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok();
    if !node {
        eprintln!(
            "SKIPPED: node is not installed (.ci/run installs it); the fake MCP server needs it"
        );
        return None;
    }
    Some(path)
}

/// A stdio server config running the fake server in `mode` with `extra` arguments and a call timeout.
pub fn fake_stdio(mode: &str, extra: &[&str], call_ms: u64) -> Option<ServerConfig> {
    let script = fake()?;
    let mut args = vec![script.display().to_string(), mode.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    Some(ServerConfig {
        launch: Launch::Stdio(StdioSpawn {
            program: "node".into(),
            args,
            env: std::env::var("PATH")
                .map(|p| vec![("PATH".to_string(), p)])
                .unwrap_or_default(),
            cwd: std::env::temp_dir(),
        }),
        startup_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_millis(call_ms),
    })
}
