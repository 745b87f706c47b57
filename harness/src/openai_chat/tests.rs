//! `openai-chat`: the pure body/decoder, then the HTTP path against a fake Chat Completions server on loopback
//! replaying the API's chunk sequences, asserting what loom parsed and what it sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use loom_kernel::{AlgebraKind, Grant, PathCtx};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::fake_server::{FakeServer, Reply};
use crate::model::{Message, ToolSpec};
use crate::SseParser;
use loom_protocol::update::TurnStop;
use loom_runtime::SecretChain;
use loom_runtime::Sleeper;
use loom_runtime::{Agent, AgentParts, ToolSlot};
use loom_runtime::{Chain, MemoryLayer};
use loom_tools::{builtin_tool, SandboxEnv, ToolEnv};

const KEY: &str = "sk-proj-test-secret-0123456789";

const TEXT_STREAM: &str = r#"data: {"id":"chatcmpl-AZx1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-AZx1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":3,"total_tokens":22}}

data: [DONE]

"#;

const TOOL_STREAM: &str = r#"data: {"id":"chatcmpl-AZx2","object":"chat.completion.chunk","created":1732000001,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"read_file","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx2","object":"chat.completion.chunk","created":1732000001,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx2","object":"chat.completion.chunk","created":1732000001,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"notes"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx2","object":"chat.completion.chunk","created":1732000001,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":".txt\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-AZx2","object":"chat.completion.chunk","created":1732000001,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: [DONE]

"#;

fn config(base: &str) -> OpenAiChatConfig {
    let t: toml::Table =
        toml::from_str(&format!("model = \"gpt-test\"\napiBase = \"{base}/v1\"")).unwrap();
    OpenAiChatConfig::from_config(&t).unwrap()
}

fn harness(base: &str, key: Option<&str>) -> Arc<OpenAiChatHarness> {
    Arc::new(OpenAiChatHarness::new(config(base), key.map(Secret::new)).unwrap())
}

fn hello() -> ModelRequest {
    ModelRequest {
        system: vec!["You are terse.".into(), "Notes.".into()],
        messages: vec![Message::user_text("hi")],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object"}),
        }],
        ..ModelRequest::default()
    }
}

async fn collect(h: &OpenAiChatHarness) -> Vec<Result<ModelEvent, HarnessError>> {
    match h.stream(hello(), CancellationToken::new()).await {
        Ok(s) => s.collect().await,
        Err(e) => vec![Err(e)],
    }
}

#[test]
fn config_defaults_and_the_key_rule() {
    let c = OpenAiChatConfig::from_config(&toml::Table::new()).unwrap();
    assert_eq!(
        c,
        OpenAiChatConfig {
            model: "gpt-5.1".into(),
            api_base: "https://api.openai.com/v1".into(),
            max_output_tokens: None,
            stream: true,
            context_window: None,
        }
    );
    let h = |cfg: &str| loom_kernel::HarnessSpec {
        provider: "openai-chat".into(),
        config: toml::from_str(cfg).unwrap(),
    };
    let none = SecretChain::default();
    let err = crate::build_harness(Some(&h("")), &none)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    // a local server needs no key
    let (built, _) = crate::build_harness(
        Some(&h(
            "apiBase = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3.2\"",
        )),
        &none,
    )
    .unwrap();
    assert_eq!(built.name(), "openai-chat");
    let t: toml::Table = toml::from_str("maxOutputTokens = -1").unwrap();
    assert!(OpenAiChatConfig::from_config(&t).is_err());
}

#[test]
fn the_body_maps_tool_calls_and_results() {
    let mut req = hello();
    req.messages = vec![
        Message::user_text("read notes.txt"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    text: "not replayed".into(),
                    signature: None,
                },
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "notes.txt"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "call_1".into(),
                content: "hi".into(),
                is_error: false,
            }],
        },
    ];
    let mut c = config("http://x");
    c.max_output_tokens = Some(100);
    assert_eq!(
        chat_request_body(&req, &c),
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse.\n\nNotes."},
                {"role": "user", "content": "read notes.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
            ],
            "max_completion_tokens": 100,
            "tools": [{"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
                                                        "parameters": {"type": "object"}}}],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn the_tool_stream_decodes() {
    let mut p = SseParser::default();
    let mut d = ChatDecoder::default();
    let got: Vec<ModelEvent> = p
        .feed(TOOL_STREAM.as_bytes())
        .unwrap()
        .into_iter()
        .flat_map(|e| d.decode(&e))
        .map(Result::unwrap)
        .collect();
    let id = "call_DdmO9pD3xa9XTPNJ32zg2hcA".to_string();
    let delta = |s: &str| ModelEvent::ToolUseInputDelta {
        id: id.clone(),
        partial_json: s.into(),
    };
    assert_eq!(
        got,
        vec![
            ModelEvent::MessageStart {
                message_id: "chatcmpl-AZx2".into()
            },
            ModelEvent::ToolUseStart {
                id: id.clone(),
                name: "read_file".into()
            },
            delta("{\"pa"),
            delta("th\": \"notes"),
            delta(".txt\"}"),
            ModelEvent::ToolUseEnd { id: id.clone() },
            ModelEvent::MessageEnd {
                stop_reason: StopReason::ToolUse
            },
        ]
    );
    assert!(d.done());
}

#[tokio::test]
async fn text_streams_with_a_bearer_key_and_the_body_loom_sent() {
    let server = FakeServer::start(vec![Reply::sse(TEXT_STREAM), Reply::sse(TEXT_STREAM)]).await;
    let got: Vec<ModelEvent> = collect(&harness(&server.base, Some(KEY)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let text: String = got
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello!");
    assert!(got.contains(&ModelEvent::Usage(Usage {
        input_tokens: 19,
        output_tokens: 3,
        ..Usage::default()
    })));
    assert_eq!(
        got.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn
        })
    );
    // without a key (a local server): no authorization header at all
    collect(&harness(&server.base, None)).await;
    let reqs = server.requests();
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        reqs[0].body,
        chat_request_body(&hello(), &config("http://x"))
    );
    assert_eq!(reqs[1].header("authorization"), None);
}

#[tokio::test]
async fn failures_errors_after_200_cuts_and_garbage_are_classified() {
    let cut = TOOL_STREAM
        .split("\n\n")
        .take(2)
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n\n";
    let server = FakeServer::start(vec![
        Reply::json(
            429,
            &[("retry-after-ms", "1200")],
            r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        ),
        Reply::json(
            401,
            &[],
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        ),
        Reply::json(
            400,
            &[],
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ),
        Reply::sse(&(TEXT_STREAM.split("\n\n").take(2).collect::<Vec<_>>().join("\n\n")
            + "\n\ndata: {\"error\":{\"message\":\"The server is overloaded\",\"type\":\"server_error\",\"code\":\"overloaded\"}}\n\n")),
        Reply::sse(&cut),
        Reply::raw(b"\xff\xfe\x00garbage\n\n"),
        Reply::raw(b"<html>bad gateway</html>"),
    ])
    .await;
    let h = harness(&server.base, Some(KEY));
    let mut last = Vec::new();
    for _ in 0..7 {
        let got = collect(&h).await;
        assert_eq!(got.iter().filter(|e| e.is_err()).count(), 1, "{got:?}");
        last.push(got.last().cloned().unwrap().unwrap_err());
    }
    assert!(matches!(last[0], HarnessError::RateLimited { .. }));
    assert_eq!(last[0].retry_after(), Some(Duration::from_millis(1200)));
    assert!(matches!(last[1], HarnessError::Auth { .. }));
    assert!(matches!(last[2], HarnessError::ContextOverflow { .. }));
    assert!(
        matches!(last[3], HarnessError::Overloaded { .. }),
        "{:?}",
        last[3]
    );
    assert!(
        matches!(&last[4], HarnessError::Network { message } if message.contains("mid-message")),
        "{:?}",
        last[4]
    );
    assert!(matches!(last[5], HarnessError::Protocol { .. }));
    assert!(matches!(last[6], HarnessError::Protocol { .. }));
    assert!(last.iter().all(|e| !e.to_string().contains(KEY)));
}

struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Sleeper for Recorder {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(d);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_tool_call_round_trips_through_the_loop_after_a_429() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the notes say hi").unwrap();
    let server = FakeServer::start(vec![
        Reply::json(
            429,
            &[("retry-after", "2")],
            r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
        ),
        Reply::sse(TOOL_STREAM),
        Reply::sse(TEXT_STREAM),
    ])
    .await;
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let ctx = PathCtx::new(cwd.to_string_lossy().into_owned(), None);
    let t: toml::Table = toml::from_str("g = { paths = [\"./\"] }").unwrap();
    let g = Grant::from_toml(&t["g"]).unwrap();
    let env = ToolEnv {
        instance: "read_file".into(),
        grant: g.clone(),
        ctx: ctx.clone(),
        cwd,
        authority: Default::default(),
        undo: Default::default(),
        record: Default::default(),
        processes: Default::default(),
        seen: Default::default(),
    };
    let mut parts = AgentParts::new(
        harness(&server.base, Some(KEY)),
        Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap(),
        ctx,
    );
    parts.tools.insert(
        "read_file".into(),
        ToolSlot {
            tool: builtin_tool("read_file", env, &SandboxEnv::default()).unwrap(),
            algebra: AlgebraKind::for_builtin("read_file"),
            grant: g,
        },
    );
    let slept = Arc::new(Mutex::new(Vec::new()));
    parts.sleeper = Arc::new(Recorder(slept.clone()));
    let agent = Agent::new(parts);
    let out = agent
        .prompt("read notes.txt", CancellationToken::new())
        .await;
    assert_eq!(
        (out.stop, out.final_text.as_str()),
        (TurnStop::EndTurn, "Hello!"),
        "{out:?}"
    );
    assert_eq!(*slept.lock().unwrap(), vec![Duration::from_secs(2)]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let msgs = &reqs[2].body["messages"];
    assert_eq!(
        msgs[0],
        json!({"role": "user", "content": "read notes.txt"})
    );
    assert_eq!(
        msgs[1],
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]})
    );
    assert_eq!(
        msgs[2],
        json!({"role": "tool", "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "content": "the notes say hi"})
    );
}
