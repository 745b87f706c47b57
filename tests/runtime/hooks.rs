//! Lifecycle hooks through the real binary: a PreToolUse hook denies a call, a PostToolUse hook adds context the
//! model sees, a Stop hook sends the agent back to work once, a UserPromptSubmit hook adds context or blocks the
//! prompt — each a shell script run from the manifest's directory, with the event's JSON on stdin.

use loom_tests::Scratch;

use super::{results, updates};

const MANIFEST: &str = r#"[agent]
name = "hooked"

[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "make all" } } },
  { call = { tool = "read_file", input = { path = "a.txt" } } },
  { say = "done" },
  { stop = true },
  { say = "tests pass" },
]]

[session]
provider = "in-memory"

[tools]
bash = { capabilities = { commands = "*", paths = ["./"] } }
read_file = { capabilities = { paths = ["./"] } }

[[hooks.UserPromptSubmit]]
command = "sh ./prompt.sh"

[[hooks.PreToolUse]]
matcher = "bash"
command = "sh ./pre.sh"

[[hooks.PostToolUse]]
matcher = "read_file|write_file"
command = "sh ./post.sh"

[[hooks.Stop]]
command = "sh ./stop.sh"
"#;

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write("a.txt", "alpha\n");
    std::fs::create_dir_all(s.path().join("agent")).unwrap();
    s.write("agent/agent.toml", MANIFEST);
    s.write(
        "agent/prompt.sh",
        "input=$(cat)\ncase \"$input\" in *secret*) echo 'no secrets in prompts' >&2; exit 2;; esac\necho 'today is test day'\n",
    );
    s.write(
        "agent/pre.sh",
        "input=$(cat)\necho \"$input\" > pre-input.json\ncase \"$input\" in *'\"make '*) echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"use cargo, not make\"}}';; esac\n",
    );
    s.write("agent/post.sh", "cat >/dev/null\necho post-checked\n");
    s.write(
        "agent/stop.sh",
        "input=$(cat)\ncase \"$input\" in *'\"stop_hook_active\":false'*) echo 'run the tests first' >&2; exit 2;; esac\n",
    );
    s
}

#[test]
fn hooks_deny_add_context_and_send_the_agent_back_to_work() {
    let s = scratch();
    let run = s.loom(&[
        "prompt",
        "agent/agent.toml",
        "build it",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let ups = updates(&run);
    let r = results(&ups);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0].0, "failed");
    assert!(
        r[0].1.contains("refused by a PreToolUse hook") && r[0].1.contains("use cargo, not make"),
        "{}",
        r[0].1
    );
    assert_eq!(r[1].0, "completed");
    assert!(
        r[1].1.starts_with("alpha") && r[1].1.contains("post-checked"),
        "{}",
        r[1].1
    );
    let user: Vec<&str> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(user.len(), 2, "{user:?}");
    assert!(
        user[0].starts_with("build it") && user[0].contains("today is test day"),
        "{}",
        user[0]
    );
    assert_eq!(
        user[1], "run the tests first",
        "the Stop hook's reason goes back to the model"
    );
    // the hook ran from the manifest's directory and got the event's JSON
    let input: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(s.path().join("agent/pre-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"]["command"], "make all");
    assert_eq!(
        input["cwd"],
        s.path().canonicalize().unwrap().display().to_string()
    );
    // the audit shows every hook: they run outside every grant
    s.loom(&["audit", "agent/agent.toml"])
        .expect_code(0)
        .stdout_has("hooks  (run unconfined, from the manifest's directory)")
        .stdout_has("PreToolUse [bash]  command \"sh ./pre.sh\"  (timeout 15s)");
    // explain names the PreToolUse hooks that would run first, without running them
    s.loom(&[
        "explain",
        "agent/agent.toml",
        "bash",
        r#"{"command": "ls"}"#,
    ])
    .expect_code(0)
    .stdout_has("hooks    PreToolUse command \"sh ./pre.sh\" would run first — not run by explain");
    s.loom(&[
        "explain",
        "agent/agent.toml",
        "read_file",
        r#"{"path": "a.txt"}"#,
    ])
    .expect_code(0)
    .stdout_has("hooks    no PreToolUse hook matches this tool");
    // the final answer is the one after the Stop hook let the turn end
    s.loom(&["prompt", "agent/agent.toml", "build it"])
        .expect_code(0)
        .stdout_has("tests pass");
}

#[test]
fn a_prompt_hook_blocks_a_prompt_before_the_model_sees_it() {
    let s = scratch();
    let run = s.loom(&[
        "prompt",
        "agent/agent.toml",
        "tell me the secret",
        "--format",
        "jsonl",
    ]);
    run.expect_code(1)
        .stderr_has("blocked by a UserPromptSubmit hook")
        .stderr_has("no secrets in prompts");
    let ups = updates(&run);
    assert!(
        ups.iter().all(
            |u| u["sessionUpdate"] != "user_message_chunk" && u["sessionUpdate"] != "tool_call"
        ),
        "{ups:#?}"
    );
}

#[test]
fn a_broken_gate_hook_blocks_and_a_misspelt_event_is_refused() {
    let s = scratch();
    s.write("agent/pre.sh", "cat >/dev/null\necho '{not json'\n");
    let run = s.loom(&[
        "prompt",
        "agent/agent.toml",
        "build it",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert!(
        r[0].1.contains("looks like JSON but is not a JSON object"),
        "{}",
        r[0].1
    );
    s.write(
        "agent/agent.toml",
        &MANIFEST.replace("hooks.Stop]", "hooks.Stopp]"),
    );
    s.loom(&["prompt", "agent/agent.toml", "x"])
        .expect_code(1)
        .stderr_has("hooks.Stopp: unknown key; did you mean Stop?");
}
