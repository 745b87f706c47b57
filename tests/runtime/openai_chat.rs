//! `loom prompt` with `provider = "openai-chat"` against a fake Chat Completions server on loopback, as a local
//! server (Ollama, vLLM, llama.cpp) is used: no API key, `apiBase` pointing at it.

use loom_tests::Scratch;

use super::anthropic::serve;
use super::{results, updates};

const TOOL_CALL: &str = r#"data: {"id":"chatcmpl-e2e1","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_e2e","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-e2e1","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"hello.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-e2e1","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;

const ANSWER: &str = r#"data: {"id":"chatcmpl-e2e2","object":"chat.completion.chunk","created":2,"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":"It says "},"finish_reason":null}]}

data: {"id":"chatcmpl-e2e2","object":"chat.completion.chunk","created":2,"model":"llama3.2","choices":[{"index":0,"delta":{"content":"greetings"},"finish_reason":"stop"}]}

data: [DONE]

"#;

#[test]
fn loom_prompt_drives_a_tool_call_through_a_local_chat_completions_server() {
    let (base, seen) = serve(vec![TOOL_CALL, ANSWER]);
    let s = Scratch::new();
    s.write("hello.txt", "greetings");
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "local-e2e"

[harness]
provider = "openai-chat"
model = "llama3.2"
apiBase = "{base}/v1"

[session]
provider = "in-memory"

[capabilities]
read_file = {{ paths = ["./"] }}

[tools]
read_file = "builtin"
"#
        ),
    );
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "what does hello.txt say?",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let ups = updates(&run);
    assert_eq!(
        results(&ups),
        vec![("completed".to_string(), "greetings".to_string())]
    );
    let said: String = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "It says greetings");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].0.iter().all(|(n, _)| n != "authorization"));
    assert_eq!(seen[0].1["model"], "llama3.2");
    // the system message (the environment block) comes first, then the prompt, the call and its result
    let messages = &seen[1].1["messages"];
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("# Environment"),
        "{messages}"
    );
    assert_eq!(
        messages[3],
        serde_json::json!({"role": "tool", "tool_call_id": "call_e2e", "content": "greetings"})
    );
}
