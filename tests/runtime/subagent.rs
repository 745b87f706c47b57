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

const SPAWN_CALL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_lead_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_spawn","name":"spawn_subagent","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\": \"summarise hello.txt\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

"#;

#[test]
fn small_model_of_parent_clones_the_parents_harness_with_the_small_model() {
    let key = "sk-ant-subagent-secret";
    // the parent asks for a sub-agent; the sub-agent answers; the parent answers
    let (base, seen) = super::anthropic::serve(vec![
        SPAWN_CALL,
        super::anthropic::ANSWER,
        super::anthropic::ANSWER,
    ]);
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "lead"

[harness]
provider = "anthropic"
model = "claude-test"
apiBase = "{base}"
maxTokens = 1000

[session]
provider = "in-memory"

[tools]
spawn_subagent = "builtin"

[capabilities.spawn_subagent.manifest]
name = "summariser"
harness = {{ provider = "small-model-of-parent" }}
session = {{ provider = "in-memory" }}
tools = {{}}
capabilities = {{}}
"#
        ),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "summarise it", "--format", "jsonl"],
        &[("ANTHROPIC_API_KEY", key)],
    );
    run.expect_code(0);
    assert!(!run.stdout().contains(key) && !run.stderr().contains(key));
    assert_eq!(
        results(&updates(&run)),
        [(
            "completed".to_string(),
            "The file says: greetings".to_string()
        )]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    let (child_headers, child) = &seen[1];
    assert_eq!(seen[0].1["model"], "claude-test");
    assert_eq!(child["model"], "claude-haiku-4-5", "{child}");
    assert_eq!(
        child["max_tokens"], 1000,
        "the rest of the parent's config is kept"
    );
    assert_eq!(
        child["messages"][0]["content"][0]["text"], "summarise hello.txt",
        "{child}"
    );
    assert!(child_headers
        .iter()
        .any(|(n, v)| n == "x-api-key" && v == key));
    assert_eq!(seen[2].1["model"], "claude-test");
}
