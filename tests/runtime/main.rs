#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests of the runtime through the real binary: `loom prompt` with the scripted `test` harness driving
//! sandboxed bash and the file tools, the update/frame order of `--format jsonl`, boot refusals, the file session
//! across runs (including a torn last line), and Ctrl-C.

mod acp;
mod anthropic;
mod authority;
mod background;
mod coding_tools;
mod compacting;
mod file_races;
mod git_tools;
mod hooks;
mod jobs;
mod local;
mod mcp;
mod mcp_cwd;
mod mcp_hostile;
mod openai_chat;
mod processes;
mod project_run;
mod prompt;
mod providers;
mod record;
mod repl;
mod rules;
mod runs;
mod secrets;
mod secrets_chain;
mod secrets_dir;
mod session;
mod shipped;
mod skill_authority;
mod skills;
mod skills_bundled;
mod subagent;
mod subagent_policy;
mod supervisor;
mod terminal;
mod thinking;
mod torn_log;
mod typed_keys;
mod worktrees;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use loom_tests::{loom_bin, Run, Scratch};

/// Is any sandbox tier usable here? Prints the reason when not. Checked once per test process.
pub fn sandbox_available() -> bool {
    static TIER: OnceLock<Option<String>> = OnceLock::new();
    let tier = TIER.get_or_init(|| {
        let out = Command::new(loom_bin())
            .args(["doctor", "--json"])
            .output()
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["tier"].as_str().map(str::to_string)
    });
    if tier.is_none() {
        eprintln!("SKIPPED: no sandbox backend on this host (see `loom doctor`); bash would refuse to run");
    }
    tier.is_some()
}

/// Parses `--format jsonl` output.
pub fn updates(run: &Run) -> Vec<serde_json::Value> {
    run.stdout()
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{}", run.stderr()))
        })
        .collect()
}

/// A short label per update: `frame:<kind>:<role>` or the `sessionUpdate` name (with the status for updates).
pub fn label(u: &serde_json::Value) -> String {
    match u["sessionUpdate"].as_str().unwrap_or("?") {
        "frame" => format!(
            "frame:{}:{}",
            u["frame"].as_str().unwrap_or(""),
            u["role"].as_str().unwrap_or("")
        ),
        "tool_call_update" => format!("tool_call_update:{}", u["status"].as_str().unwrap_or("")),
        other => other.to_string(),
    }
}

/// The final result text of each call, by call id order of appearance: (status, text).
pub fn results(ups: &[serde_json::Value]) -> Vec<(String, String)> {
    ups.iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .map(|u| {
            let text = u["content"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|b| b["content"]["text"].as_str())
                        .collect::<String>()
                })
                .unwrap_or_default();
            (u["status"].as_str().unwrap_or("").to_string(), text)
        })
        .collect()
}

/// `loom args…` in the scratch directory with a clean environment (its own data home) and all three stdio piped.
pub fn piped(s: &Scratch, args: &[&str]) -> Command {
    let mut cmd = Command::new(loom_bin());
    cmd.args(args)
        .current_dir(s.path())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(key) {
            cmd.env(key, v);
        }
    }
    cmd.env("LOOM_DATA_HOME", s.path().join(".loom-data"));
    cmd
}

/// Runs `loom prompt` with `stdin` as the prompt.
pub fn prompt_stdin(s: &Scratch, args: &[&str], stdin: &str) -> Run {
    let mut child = piped(s, args).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: s.path().to_path_buf(),
        output,
    }
}

/// Starts `loom args…` and returns the child with piped stdout, for tests that interact with a running turn.
pub fn spawn(
    s: &Scratch,
    args: &[&str],
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut cmd = piped(s, args);
    cmd.stdin(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// Reads lines until one satisfies `want`; returns everything read.
pub fn read_until(
    out: &mut BufReader<std::process::ChildStdout>,
    want: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            panic!(
                "the output ended before the expected line; saw:\n{}",
                seen.join("")
            );
        }
        seen.push(line.clone());
        if want(&line) {
            return seen;
        }
    }
}
