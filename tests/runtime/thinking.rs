//! Extended thinking and the context window through `loom prompt` against a fake Anthropic Messages API: each
//! thinking block comes back to the API with its exact text and signature (and a redacted block with its data)
//! before the call it led to — in the tool loop, and from the `file` session in the next run — and usage updates
//! carry the `contextWindow`, which the `compacting` layer's `token_fraction` measures against.

use loom_tests::Scratch;
use serde_json::json;

use super::anthropic::{serve, ANSWER, TOOL_CALL};
use super::updates;

const KEY: &str = "sk-ant-thinking-e2e-secret";
const SIG: &str = "EuYBCkQYAiJAe2eThinkingSignature0123";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfW";

/// Thinking (signed), a redacted block, then a `read_file` call, as the API streams them.
const THINK_THEN_CALL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_think_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":60,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The answer is in "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hello.txt."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EuYBCkQYAiJAe2eThinkingSignature0123"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfW"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_think","name":"read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"hello.txt\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

"#;

fn agent_toml(base: &str, session: &str) -> String {
    format!(
        r#"[agent]
name = "thinker"

[harness]
provider = "anthropic"
model = "claude-test"
apiBase = "{base}"
contextWindow = 64000
maxTokens = 8192
thinkingBudget = 2048

{session}

[tools]
read_file = {{ capabilities = {{ paths = ["./"] }} }}
"#
    )
}

const FILE_SESSION: &str = "[session]\nprovider = \"file\"\npath = \"session.jsonl\"";

#[test]
fn thinking_signatures_go_back_to_the_api_in_the_tool_loop_and_the_next_run() {
    let (base, seen) = serve(vec![THINK_THEN_CALL, ANSWER]);
    let s = Scratch::new();
    s.write("hello.txt", "greetings");
    s.write("agent.toml", &agent_toml(&base, FILE_SESSION));
    let run = s.loom_env(
        &[
            "prompt",
            "agent.toml",
            "what does hello.txt say?",
            "--format",
            "jsonl",
        ],
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    run.expect_code(0);
    let ups = updates(&run);
    // hosts see the reasoning text; the replay data rides in `_meta`, which ACP clients ignore
    let thought: String = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_thought_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(thought, "The answer is in hello.txt.");
    assert!(ups
        .iter()
        .any(|u| u["sessionUpdate"] == "agent_thought_chunk"
            && u["_meta"]["loom/thinkingSignature"] == SIG));
    // usage updates carry the configured window
    let sizes: Vec<&serde_json::Value> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .map(|u| &u["size"])
        .collect();
    assert!(
        !sizes.is_empty() && sizes.iter().all(|s| **s == json!(64000)),
        "{sizes:?}"
    );

    let replayed = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "The answer is in hello.txt.", "signature": SIG},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "tool_use", "id": "toolu_think", "name": "read_file", "input": {"path": "hello.txt"}},
    ]});
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        // thinkingBudget asks for extended thinking on every request
        for (_, body) in seen.iter() {
            assert_eq!(
                body["thinking"],
                json!({"type": "enabled", "budget_tokens": 2048})
            );
        }
        assert_eq!(seen[1].1["messages"][1], replayed, "{}", seen[1].1);
        assert_eq!(
            seen[1].1["messages"][2]["content"][0]["tool_use_id"],
            "toolu_think"
        );
    }
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert!(!log.contains(KEY));

    // the next run reads the history back from the file and replays the blocks unchanged
    let (base, seen) = serve(vec![ANSWER]);
    s.write("agent.toml", &agent_toml(&base, FILE_SESSION));
    s.loom_env(
        &["prompt", "agent.toml", "thanks"],
        &[("ANTHROPIC_API_KEY", KEY)],
    )
    .expect_code(0);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let msgs = seen[0].1["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "{msgs:#?}");
    assert_eq!(msgs[1], replayed);
    assert_eq!(msgs[4]["content"][0]["text"], "thanks");
}

#[test]
fn token_fraction_compacts_once_the_reported_window_fills() {
    // the first request uses 50 + 20 tokens of a 100-token window: at token_fraction 0.5 the layer compacts
    // before the second request, though the event count is far below the threshold
    let (base, seen) = serve(vec![TOOL_CALL, ANSWER]);
    let s = Scratch::new();
    s.write("hello.txt", "greetings");
    let toml = agent_toml(
        &base,
        "[session]\nlayers = [\"compacting\", \"file\"]\n\n[session.compacting]\ntoken_fraction = 0.5\nkeep = 1\n\n\
         [session.file]\npath = \"session.jsonl\"",
    )
    .replace("contextWindow = 64000", "contextWindow = 100");
    s.write("agent.toml", &toml);
    let run = s.loom_env(
        &["prompt", "agent.toml", "what does hello.txt say?"],
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    run.expect_code(0);
    assert!(
        !run.stderr().contains("token_fraction"),
        "no boot note about token_fraction: {}",
        run.stderr()
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let first = &seen[0].1["messages"];
    assert_eq!(first[0]["content"][0]["text"], "what does hello.txt say?");
    let second = seen[1].1["messages"].as_array().unwrap();
    assert!(
        second[0]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("was compacted")),
        "{second:#?}"
    );
    // the call and its result are kept together after the summary
    assert_eq!(second[1]["content"][0]["type"], "tool_use");
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
}
