//! A sub-agent keeps its parent's deny and ask rules and PreToolUse hooks (kernel review K8, issue 25): a call the
//! parent's deny rule refuses is refused when a sub-agent makes it, and the parent's hook sees the sub-agent's calls.
//! Through `loom prompt` and `loom audit`, next to an allowed control.

use loom_tests::Scratch;

use super::{results, updates};

const PARENT: &str = r#"[agent]
name = "lead"
[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "rm -rf victim" } } },
  { call = { tool = "spawn_subagent", input = { prompt = "clean up" } } },
  { say = "done" },
]]
[session]
provider = "in-memory"
[tools]
bash = "builtin"
spawn_subagent = "builtin"
[capabilities]
bash = { commands = "*", paths = ["./"] }
spawn_subagent = { manifest = "./helper.toml" }
[[permissions.deny_rules]]
tool = "bash"
command_prefix = "rm -rf"
[[hooks.PreToolUse]]
matcher = "bash"
command = "cat >> hook.log; echo >> hook.log"
"#;

const HELPER: &str = r#"[agent]
name = "helper"
[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "rm -rf victim" } } },
  { call = { tool = "bash", input = { command = "echo child-ok > child.txt" } } },
  { say = "helper done" },
]]
[session]
provider = "in-memory"
[tools]
bash = "builtin"
[capabilities]
bash = { commands = "*", paths = ["./"] }
[[permissions.allow_rules]]
tool = "bash"
"#;

#[test]
fn a_sub_agent_keeps_its_parents_deny_rules_and_pre_tool_use_hooks() {
    if !super::sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write("victim/keep.txt", "precious\n");
    s.write("agent.toml", PARENT);
    s.write("helper.toml", HELPER);
    s.loom(&["audit", "agent.toml"])
        .stdout_has("spawn_subagent > helper")
        .stdout_has(
            "every sub-agent keeps this agent's 1 deny rules, 0 ask rules and 1 PreToolUse hooks",
        );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(r[0].1.contains("deny rule"), "{r:#?}");
    assert_eq!(r[1].0, "completed", "{r:#?}\n{}", run.stderr());
    // the sub-agent's rm -rf was refused by the parent's rule, whatever its own allow rule says
    assert!(
        s.path().join("victim/keep.txt").exists(),
        "the sub-agent removed what the parent's deny rule protects"
    );
    // the control: the sub-agent's other call ran
    assert_eq!(
        std::fs::read_to_string(s.path().join("child.txt")).unwrap_or_default(),
        "child-ok\n"
    );
    // the parent's hook saw the sub-agent's calls (it ran from the parent's directory)
    let log = std::fs::read_to_string(s.path().join("hook.log")).unwrap_or_default();
    assert!(log.contains("echo child-ok"), "{log}");
}

/// A parent whose `viewer` is `read_file`, spawning a helper whose `viewer` is `write_file` (kernel review K4, issue 25
/// item 2): the same key names another tool, so spawn refuses it, whatever the grant; the control helper names the
/// same tool and runs.
fn keyed(helper_tool: &str) -> (String, String) {
    let parent = r#"[agent]
name = "lead"
[harness]
provider = "test"
script = [[
  { call = { tool = "spawn_subagent", input = { prompt = "look" } } },
  { say = "done" },
]]
[session]
provider = "in-memory"
[tools]
viewer = { provider = "builtin", tool = "read_file" }
spawn_subagent = "builtin"
[capabilities]
viewer = { paths = ["./"] }
spawn_subagent = { manifest = "./helper.toml" }
"#
    .to_string();
    let helper = format!(
        r#"[agent]
name = "helper"
[harness]
provider = "test"
script = [[
  {{ say = "helper done" }},
]]
[session]
provider = "in-memory"
[tools]
viewer = {{ provider = "builtin", tool = "{helper_tool}" }}
[capabilities]
viewer = {{ paths = ["./"] }}
"#
    );
    (parent, helper)
}

#[test]
fn spawn_refuses_a_sub_agent_whose_key_names_another_tool() {
    let s = Scratch::new();
    let (parent, helper) = keyed("write_file");
    s.write("agent.toml", &parent);
    s.write("helper.toml", &helper);
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "failed", "{r:#?}\n{}", run.stderr());
    assert!(
        r[0].1
            .contains("`viewer` names built-in write_file (was built-in read_file)"),
        "{r:#?}"
    );
    // the control: the helper's `viewer` is the parent's tool, and it runs
    let (parent, helper) = keyed("read_file");
    s.write("agent.toml", &parent);
    s.write("helper.toml", &helper);
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "completed", "{r:#?}\n{}", run.stderr());
}
