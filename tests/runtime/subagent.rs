//! `spawn_subagent` through `loom prompt`: explicit sub-manifests (inline and by path), the self-copy, and the
//! spawn-time ceiling check.

use loom_tests::Scratch;

use super::{results, updates};

/// A parent whose scripted first turn calls `tool` with `input`, then says "done".
fn parent(tool_section: &str, call_input: &str) -> String {
    format!(
        r#"[agent]
name = "lead"

[harness]
provider = "test"
script = [[
  {{ call = {{ tool = "spawn_subagent", input = {call_input} }} }},
  {{ say = "done" }},
]]

[session]
provider = "in-memory"

[tools]
read_file = "builtin"
spawn_subagent = "builtin"

[capabilities]
read_file = {{ paths = ["./"] }}
{tool_section}
"#
    )
}

const ECHO_CHILD: &str = r#"{ name = "researcher", harness = { provider = "test", echo = true }, session = { provider = "in-memory" }, tools = { read_file = "builtin" }, capabilities = { read_file = { paths = ["./docs"] } } }"#;

fn run(s: &Scratch) -> Vec<(String, String)> {
    let r = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    r.expect_code(0);
    results(&updates(&r))
}

#[test]
fn an_inline_sub_manifest_runs_one_turn_and_its_answer_is_the_result() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &parent(
            &format!("spawn_subagent = {{ manifest = {ECHO_CHILD} }}"),
            r#"{ prompt = "what is in docs?" }"#,
        ),
    );
    let r = run(&s);
    assert_eq!(
        r,
        [("completed".to_string(), "what is in docs?".to_string())]
    );
}

#[test]
fn a_sub_manifest_wider_than_the_parent_is_refused_at_spawn_before_it_boots() {
    let s = Scratch::new();
    let wide = ECHO_CHILD.replace(r#"paths = ["./docs"]"#, r#"paths = ["/"]"#);
    s.write(
        "agent.toml",
        &parent(
            &format!("spawn_subagent = {{ manifest = {wide} }}"),
            r#"{ prompt = "read everything" }"#,
        ),
    );
    let r = run(&s);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].0, "failed");
    assert!(r[0].1.contains("CapabilityError"), "{}", r[0].1);
    assert!(r[0].1.contains("read_file"), "{}", r[0].1);
    assert!(r[0].1.contains("nothing was started"), "{}", r[0].1);
}

#[test]
fn a_sub_manifest_named_by_path_is_loaded_at_spawn_and_several_need_a_choice() {
    let s = Scratch::new();
    s.write(
        "researcher.toml",
        "[agent]\nname = \"from-file\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\n",
    );
    // one path: no choice needed
    s.write(
        "agent.toml",
        &parent(
            r#"spawn_subagent = { manifest = "./researcher.toml" }"#,
            r#"{ prompt = "hello file" }"#,
        ),
    );
    assert_eq!(
        run(&s),
        [("completed".to_string(), "hello file".to_string())]
    );
    // two: the model must say which, by name
    let two = format!(
        r#"spawn_subagent = [{{ manifest = "./researcher.toml" }}, {{ manifest = {ECHO_CHILD} }}]"#
    );
    s.write("agent.toml", &parent(&two, r#"{ prompt = "which one?" }"#));
    let r = run(&s);
    assert_eq!(r[0].0, "failed");
    assert!(r[0].1.contains("say which with \"agent\""), "{}", r[0].1);
    s.write(
        "agent.toml",
        &parent(&two, r#"{ prompt = "you", agent = "researcher" }"#),
    );
    assert_eq!(run(&s), [("completed".to_string(), "you".to_string())]);
}

#[test]
fn a_self_copy_cannot_spawn_again() {
    let s = Scratch::new();
    // the copy runs the same script: its own spawn_subagent call fails (it was stripped), then it says "done"
    s.write(
        "agent.toml",
        &parent("spawn_subagent = \"*\"", r#"{ prompt = "think harder" }"#),
    );
    let r = run(&s);
    assert_eq!(
        r,
        [("completed".to_string(), "done".to_string())],
        "the copy's answer is the parent's tool result"
    );
}
