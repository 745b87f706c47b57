//! The `anthropic` harness: the pure config/body/decoder pieces, then the real HTTP path against a fake Messages API
//! on loopback that replays the API's event sequences verbatim — asserting what loom parsed and what it sent.

use std::collections::BTreeMap;
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

const KEY: &str = "sk-ant-test-0123456789-secret";

/// A plain text answer, as the API streams it (ping included).
const TEXT_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Thinking with a signature, some text, then a tool_use whose input arrives in several fragments.
const TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should read "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the file."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me look."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"th\": \"not"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"es.txt\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Two signed thinking blocks with a redacted one between them, then a tool_use: each block must come back in the
/// next request as it came, in its place.
const BLOCKS_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Blocks","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":300,"output_tokens":3}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"First, "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the notes."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EuYBCkQYAiJAsigA"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB9URj2pLmN3kF8/dW5hR7xJ"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"Then read it."}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"EuYBCkQYAiJAsigB"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01Blocks","name":"read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"notes.txt\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":120}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// The redacted block's data in [`BLOCKS_STREAM`].
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB9URj2pLmN3kF8/dW5hR7xJ";

fn config(base: &str) -> AnthropicConfig {
    let t: toml::Table =
        toml::from_str(&format!("model = \"claude-test\"\napiBase = \"{base}\"")).unwrap();
    AnthropicConfig::from_config(&t).unwrap()
}

fn harness(base: &str) -> Arc<AnthropicHarness> {
    Arc::new(AnthropicHarness::new(config(base), Secret::new(KEY)).unwrap())
}

fn decode_all(text: &str) -> Vec<Result<ModelEvent, HarnessError>> {
    let mut p = SseParser::default();
    let mut d = AnthropicDecoder::default();
    p.feed(text.as_bytes())
        .unwrap()
        .into_iter()
        .flat_map(|e| d.decode(&e))
        .collect()
}

async fn collect(h: &AnthropicHarness, req: ModelRequest) -> Vec<Result<ModelEvent, HarnessError>> {
    let s = h.stream(req, CancellationToken::new()).await.unwrap();
    s.collect().await
}

fn hello() -> ModelRequest {
    ModelRequest {
        system: vec!["You are terse.".into(), "Project notes.".into()],
        messages: vec![Message::user_text("hi")],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        ..ModelRequest::default()
    }
}

#[test]
fn config_defaults_follow_the_seed_and_bad_values_are_named() {
    let c = AnthropicConfig::from_config(&toml::Table::new()).unwrap();
    assert_eq!(
        c,
        AnthropicConfig {
            model: "claude-sonnet-4-5-latest".into(),
            api_base: "https://api.anthropic.com".into(),
            max_tokens: 4096,
            stream: true,
            context_window: None,
            thinking_budget: None,
            server_tools: Vec::new(),
        }
    );
    for (text, needle) in [
        ("maxTokens = 0", "maxTokens must be a positive integer"),
        ("stream = \"yes\"", "stream must be true or false"),
        (
            "apiBase = \"api.anthropic.com\"",
            "must start with https://",
        ),
        ("modle = \"x\"", "unknown key \"modle\""),
    ] {
        let t: toml::Table = toml::from_str(text).unwrap();
        let err = AnthropicConfig::from_config(&t).unwrap_err().to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
    let t: toml::Table = toml::from_str("apiBase = \"http://127.0.0.1:9/\"").unwrap();
    assert_eq!(
        AnthropicConfig::from_config(&t).unwrap().api_base,
        "http://127.0.0.1:9"
    );
}

#[test]
fn a_missing_key_names_the_secret_and_how_to_set_it() {
    let h = loom_kernel::HarnessSpec {
        provider: "anthropic".into(),
        config: toml::Table::new(),
    };
    let err = crate::build_harness(Some(&h), &SecretChain::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    let chain = SecretChain::standard(
        BTreeMap::from([(ANTHROPIC_API_KEY.to_string(), Secret::new(KEY))]),
        std::path::Path::new("/nonexistent"),
        std::path::Path::new("/nonexistent"),
        &BTreeMap::new(),
    )
    .unwrap();
    let (h, max) = crate::build_harness(Some(&h), &chain).unwrap();
    assert_eq!((h.name(), max), ("anthropic", 16));
    assert!(!format!("{:?}", harness("http://x")).contains(KEY));
}

#[test]
fn the_body_maps_every_block_kind() {
    let mut req = hello();
    req.messages = vec![
        Message::user_text("read notes.txt"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                },
                ContentBlock::Thinking {
                    text: "unsigned thoughts cannot be replayed".into(),
                    signature: None,
                },
                ContentBlock::Text {
                    text: String::new(),
                },
                ContentBlock::Text {
                    text: "Let me look.".into(),
                },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "notes.txt"}),
                },
                ContentBlock::ToolUse {
                    id: "t2".into(),
                    name: "read_file".into(),
                    input: json!("{\"path\": "),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: "hi".into(),
                    is_error: false,
                },
                ContentBlock::ToolResult {
                    tool_use_id: "t2".into(),
                    content: "invalid JSON".into(),
                    is_error: true,
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Text {
                text: String::new(),
            }],
        },
    ];
    let body = request_body(&req, &config("http://x"));
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read notes.txt"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "notes.txt"}},
                    {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"_raw": "{\"path\": "}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "hi", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "invalid JSON", "is_error": true,
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            // cache breakpoints: after the tool list, after the system prompt, after the conversation so far
            "system": [{"type": "text", "text": "You are terse."},
                       {"type": "text", "text": "Project notes.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read_file", "description": "Reads a file.",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                       "cache_control": {"type": "ephemeral"}}],
            "stream": true,
        })
    );
}

#[test]
fn the_tool_stream_decodes_at_every_split_point() {
    let whole = decode_all(TOOL_STREAM);
    let expected = vec![
        ModelEvent::MessageStart {
            message_id: "msg_014p7gG3wDgGV9EUtLvnow3U".into(),
        },
        ModelEvent::Usage(Usage {
            input_tokens: 472,
            output_tokens: 2,
            ..Usage::default()
        }),
        ModelEvent::ThinkingDelta("I should read ".into()),
        ModelEvent::ThinkingDelta("the file.".into()),
        ModelEvent::ThinkingSignature(
            "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into(),
        ),
        ModelEvent::TextDelta("Let me look.".into()),
        ModelEvent::ToolUseStart {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            name: "read_file".into(),
        },
        ModelEvent::ToolUseInputDelta {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            partial_json: String::new(),
        },
        ModelEvent::ToolUseInputDelta {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            partial_json: "{\"pa".into(),
        },
        ModelEvent::ToolUseInputDelta {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            partial_json: "th\": \"not".into(),
        },
        ModelEvent::ToolUseInputDelta {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            partial_json: "es.txt\"}".into(),
        },
        ModelEvent::ToolUseEnd {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
        },
        ModelEvent::Usage(Usage {
            input_tokens: 472,
            output_tokens: 89,
            ..Usage::default()
        }),
        ModelEvent::MessageEnd {
            stop_reason: StopReason::ToolUse,
        },
    ];
    assert_eq!(
        whole.into_iter().collect::<Result<Vec<_>, _>>().unwrap(),
        expected
    );
    let bytes = TOOL_STREAM.as_bytes();
    for split in (0..bytes.len()).step_by(7) {
        let mut p = SseParser::default();
        let mut d = AnthropicDecoder::default();
        let mut got = Vec::new();
        for part in [&bytes[..split], &bytes[split..]] {
            for e in p.feed(part).unwrap() {
                got.extend(d.decode(&e).into_iter().map(Result::unwrap));
            }
        }
        assert_eq!(got, expected, "split at {split}");
        assert!(d.done() && d.finish().is_empty());
    }
}

#[test]
fn signed_and_redacted_thinking_blocks_decode_in_stream_order() {
    let got: Vec<ModelEvent> = decode_all(BLOCKS_STREAM)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let reasoning: Vec<&ModelEvent> = got
        .iter()
        .filter(|e| {
            matches!(
                e,
                ModelEvent::ThinkingDelta(_)
                    | ModelEvent::ThinkingSignature(_)
                    | ModelEvent::RedactedThinking(_)
                    | ModelEvent::ToolUseStart { .. }
            )
        })
        .collect();
    assert_eq!(
        reasoning,
        vec![
            &ModelEvent::ThinkingDelta("First, ".into()),
            &ModelEvent::ThinkingDelta("the notes.".into()),
            &ModelEvent::ThinkingSignature("EuYBCkQYAiJAsigA".into()),
            &ModelEvent::RedactedThinking(REDACTED.into()),
            &ModelEvent::ThinkingDelta("Then read it.".into()),
            &ModelEvent::ThinkingSignature("EuYBCkQYAiJAsigB".into()),
            &ModelEvent::ToolUseStart {
                id: "toolu_01Blocks".into(),
                name: "read_file".into()
            },
        ]
    );
    // a complete message (stream = false) carries the same blocks whole
    let msg = json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "Plan.", "signature": "EuYBsig"},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a"}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    });
    let got: Vec<ModelEvent> = AnthropicDecoder::default()
        .decode_message(&msg)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let at = |e: &ModelEvent| got.iter().position(|g| g == e).unwrap();
    assert!(
        at(&ModelEvent::ThinkingDelta("Plan.".into()))
            < at(&ModelEvent::ThinkingSignature("EuYBsig".into()))
    );
    assert!(
        at(&ModelEvent::ThinkingSignature("EuYBsig".into()))
            < at(&ModelEvent::RedactedThinking(REDACTED.into()))
    );
    // a redacted block without its data is a protocol error, not an empty block replayed later
    let bad = BLOCKS_STREAM.replace(REDACTED, "");
    assert!(decode_all(&bad).iter().any(|e| matches!(
        e,
        Err(HarnessError::Protocol { message }) if message.contains("redacted_thinking block has no data")
    )));
}

#[test]
fn the_body_replays_redacted_thinking_as_its_data() {
    let mut req = hello();
    req.messages = vec![
        Message::user_text("go"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::RedactedThinking {
                    data: REDACTED.into(),
                },
                ContentBlock::Text {
                    text: "Done.".into(),
                },
            ],
        },
    ];
    let body = request_body(&req, &config("http://x"));
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "redacted_thinking", "data": REDACTED}, {"type": "text", "text": "Done."}])
    );
}

#[test]
fn effort_stands_for_a_thinking_budget_within_max_tokens() {
    let budget = |text: &str| {
        let t: toml::Table = toml::from_str(text).unwrap();
        AnthropicConfig::from_config(&t).map(|c| c.thinking_budget)
    };
    assert_eq!(budget("effort = \"low\"").unwrap(), None);
    assert_eq!(
        budget("effort = \"medium\"\nmaxTokens = 32000").unwrap(),
        Some(4096)
    );
    assert_eq!(
        budget("effort = \"high\"\nmaxTokens = 32000").unwrap(),
        Some(16384)
    );
    // the default maxTokens (4096) leaves room for 3072 tokens of thinking
    assert_eq!(budget("effort = \"high\"").unwrap(), Some(3072));
    assert_eq!(budget("effort = \"high\"\nmaxTokens = 2000").unwrap(), None);
    let both = budget("effort = \"high\"\nthinkingBudget = 2048\nmaxTokens = 8192").unwrap_err();
    assert!(both.to_string().contains("keep one"), "{both}");
    let bad = budget("effort = \"max\"").unwrap_err();
    assert!(
        bad.to_string()
            .contains("effort must be \"low\", \"medium\" or \"high\""),
        "{bad}"
    );
}

#[test]
fn a_thinking_budget_turns_extended_thinking_on_within_max_tokens() {
    let t: toml::Table = toml::from_str("thinkingBudget = 2048\nmaxTokens = 8192").unwrap();
    let c = AnthropicConfig::from_config(&t).unwrap();
    assert_eq!(c.thinking_budget, Some(2048));
    let body = request_body(&hello(), &c);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], 8192);
    assert!(request_body(&hello(), &config("http://x"))
        .get("thinking")
        .is_none());
    for text in [
        "thinkingBudget = 512\nmaxTokens = 8192",
        "thinkingBudget = 4096",
        "thinkingBudget = 9000\nmaxTokens = 8192",
    ] {
        let t: toml::Table = toml::from_str(text).unwrap();
        let err = AnthropicConfig::from_config(&t).unwrap_err().to_string();
        assert!(
            err.contains("must be at least 1024 and below maxTokens"),
            "{text}: {err}"
        );
    }
}

#[test]
fn the_context_window_is_the_key_or_the_table() {
    let h = |cfg: &str| {
        let t: toml::Table = toml::from_str(cfg).unwrap();
        AnthropicHarness::new(AnthropicConfig::from_config(&t).unwrap(), Secret::new(KEY)).unwrap()
    };
    assert_eq!(h("").context_window(), Some(200_000));
    assert_eq!(
        h("model = \"claude-opus-4-1\"").context_window(),
        Some(200_000)
    );
    assert_eq!(h("model = \"my-proxy-model\"").context_window(), None);
    let set = h("model = \"my-proxy-model\"\ncontextWindow = 32000");
    assert_eq!(set.context_window(), Some(32_000));
    // the key describes the configured model: a sub-agent's small model uses the table
    assert_eq!(
        set.with_model("claude-haiku-4-5").unwrap().context_window(),
        Some(200_000)
    );
    let t: toml::Table = toml::from_str("contextWindow = 0").unwrap();
    assert!(AnthropicConfig::from_config(&t)
        .unwrap_err()
        .to_string()
        .contains("contextWindow must be a positive integer"));
}

#[test]
fn a_complete_message_decodes_like_its_stream() {
    let msg = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    });
    let got: Vec<ModelEvent> = AnthropicDecoder::default()
        .decode_message(&msg)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(got.contains(&ModelEvent::TextDelta("Reading.".into())));
    assert!(got.contains(&ModelEvent::ToolUseInputDelta {
        id: "toolu_1".into(),
        partial_json: "{\"path\":\"a\"}".into()
    }));
    assert_eq!(
        got.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::ToolUse
        })
    );
}

#[tokio::test]
async fn text_streams_and_the_request_carries_key_version_and_body() {
    let server = FakeServer::start(vec![Reply::sse(TEXT_STREAM)]).await;
    let h = harness(&server.base);
    let events: Vec<ModelEvent> = collect(&h, hello())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello!");
    assert_eq!(
        events.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn
        })
    );
    assert!(events.contains(&ModelEvent::Usage(Usage {
        input_tokens: 25,
        output_tokens: 15,
        ..Usage::default()
    })));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, request_body(&hello(), &config("http://x")));
    assert_eq!(r.body["stream"], json!(true));
    assert_eq!(r.body["max_tokens"], json!(4096));
}

#[tokio::test]
async fn http_failures_are_classified_and_never_echo_the_key() {
    let server = FakeServer::start(vec![
        Reply::json(
            529,
            &[],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::json(
            401,
            &[],
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        ),
        Reply::json(
            400,
            &[],
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        ),
        Reply::json(
            429,
            &[("retry-after", "7")],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
        Reply::json(500, &[], r#"{"type":"error","error":{"type":"api_error"}}"#),
    ])
    .await;
    let h = harness(&server.base);
    let mut errs = Vec::new();
    for _ in 0..5 {
        match h.stream(hello(), CancellationToken::new()).await {
            Err(e) => errs.push(e),
            Ok(_) => panic!("expected an error"),
        }
    }
    assert!(
        matches!(errs[0], HarnessError::Overloaded { .. }),
        "{errs:?}"
    );
    assert!(matches!(errs[1], HarnessError::Auth { .. }), "{errs:?}");
    assert!(
        matches!(errs[2], HarnessError::ContextOverflow { .. }),
        "{errs:?}"
    );
    assert_eq!(errs[3].retry_after(), Some(Duration::from_secs(7)));
    assert!(matches!(errs[3], HarnessError::RateLimited { .. }));
    assert!(matches!(errs[4], HarnessError::Http { status: 500, .. }));
    assert!(errs[4].is_retryable() && !errs[1].is_retryable());
    for e in &errs {
        assert!(!e.to_string().contains(KEY) && !format!("{e:?}").contains(KEY));
    }
    // nothing listens: a network error, retryable, without the key
    let dead = harness("http://127.0.0.1:9");
    let err = dead
        .stream(hello(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, HarnessError::Network { .. }), "{err:?}");
    assert!(!err.to_string().contains(KEY));
}

#[tokio::test]
async fn an_error_event_after_200_is_classified_and_ends_the_stream() {
    let mid = TEXT_STREAM.split("event: content_block_stop").next().unwrap().to_string()
        + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let server = FakeServer::start(vec![Reply::sse(&mid)]).await;
    let got = collect(&harness(&server.base), hello()).await;
    assert!(matches!(got[0], Ok(ModelEvent::MessageStart { .. })));
    assert!(got.contains(&Ok(ModelEvent::TextDelta("Hello".into()))));
    assert!(
        matches!(got.last(), Some(Err(HarnessError::Overloaded { .. }))),
        "{got:?}"
    );
    assert_eq!(got.iter().filter(|e| e.is_err()).count(), 1);
}

#[tokio::test]
async fn a_stream_cut_mid_message_and_garbage_are_clear_errors() {
    let cut = TOOL_STREAM
        .split("event: content_block_stop")
        .take(3)
        .collect::<Vec<_>>()
        .join("event: content_block_stop");
    let server = FakeServer::start(vec![
        Reply::sse(&cut),
        Reply::raw(b"\x00\x01garbage \xff\xfe not an event stream\n\n"),
        Reply::raw(b"data: {not json\n\n"),
        Reply::raw(b"<html>502 Bad Gateway</html>"),
        Reply::sse("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"),
    ])
    .await;
    let h = harness(&server.base);
    let got = collect(&h, hello()).await;
    assert!(got
        .iter()
        .any(|e| matches!(e, Ok(ModelEvent::ToolUseStart { .. }))));
    match got.last() {
        Some(Err(HarnessError::Network { message })) => {
            assert!(message.contains("closed mid-message"), "{message}")
        }
        other => panic!("expected a network error, got {other:?}"),
    }
    for _ in 0..4 {
        let got = collect(&h, hello()).await;
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            matches!(got[0], Err(HarnessError::Protocol { .. })),
            "{got:?}"
        );
    }
}

#[tokio::test]
async fn cancel_ends_a_stalled_stream() {
    let head = TEXT_STREAM.split("event: ping").next().unwrap();
    let mut reply = Reply::sse(head);
    reply.hang = true;
    let server = FakeServer::start(vec![reply]).await;
    let h = harness(&server.base);
    let cancel = CancellationToken::new();
    let mut s = h.stream(hello(), cancel.clone()).await.unwrap();
    assert!(matches!(
        s.next().await,
        Some(Ok(ModelEvent::MessageStart { .. }))
    ));
    assert!(matches!(s.next().await, Some(Ok(ModelEvent::Usage(_)))));
    cancel.cancel();
    assert_eq!(s.next().await, Some(Err(HarnessError::Cancelled)));
    assert_eq!(s.next().await, None);
}

struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Sleeper for Recorder {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(d);
        Box::pin(async {})
    }
}

/// An agent over `dir` with a `read_file` tool granted `./`, the harness, and a recording clock.
fn agent(dir: &std::path::Path, h: Arc<dyn Harness>) -> (Agent, Arc<Mutex<Vec<Duration>>>) {
    let cwd = std::fs::canonicalize(dir).unwrap();
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
        h,
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
    (Agent::new(parts), slept)
}

#[tokio::test]
async fn a_tool_call_runs_through_the_kernel_and_its_result_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the notes say hi").unwrap();
    let server = FakeServer::start(vec![Reply::sse(TOOL_STREAM), Reply::sse(TEXT_STREAM)]).await;
    let (agent, _) = agent(dir.path(), harness(&server.base));
    let out = agent
        .prompt("read notes.txt", CancellationToken::new())
        .await;
    assert_eq!(
        (out.stop, out.final_text.as_str()),
        (TurnStop::EndTurn, "Hello!"),
        "{out:?}"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "read notes.txt", "cache_control": {"type": "ephemeral"}}]}])
    );
    assert_eq!(reqs[0].body["tools"][0]["name"], json!("read_file"));
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    let assistant = &msgs[1];
    assert_eq!(assistant["role"], json!("assistant"));
    // the thinking block comes back first, with its exact text and signature
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "I should read the file.",
               "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"})
    );
    let tool_use = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(
        tool_use,
        &json!({"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "read_file",
                "input": {"path": "notes.txt"}})
    );
    assert!(assistant["content"]
        .as_array()
        .unwrap()
        .contains(&json!({"type": "text", "text": "Let me look."})));
    assert_eq!(
        msgs[2],
        json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "the notes say hi", "is_error": false,
            "cache_control": {"type": "ephemeral"}}]})
    );
}

#[tokio::test]
async fn a_tool_loop_replays_each_thinking_block_with_its_signature_before_the_call() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the notes say hi").unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(BLOCKS_STREAM),
        Reply::sse(TEXT_STREAM),
        Reply::sse(TEXT_STREAM),
    ])
    .await;
    let (agent, _) = agent(dir.path(), harness(&server.base));
    let out = agent
        .prompt("read notes.txt", CancellationToken::new())
        .await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    let out = agent.prompt("thanks", CancellationToken::new()).await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let replayed = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "First, the notes.", "signature": "EuYBCkQYAiJAsigA"},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "thinking", "thinking": "Then read it.", "signature": "EuYBCkQYAiJAsigB"},
        {"type": "tool_use", "id": "toolu_01Blocks", "name": "read_file", "input": {"path": "notes.txt"}},
    ]});
    // the second request of the tool loop, and the next turn too (the in-memory layer keeps every delta)
    assert_eq!(reqs[1].body["messages"][1], replayed);
    assert_eq!(reqs[2].body["messages"][1], replayed);
    assert_eq!(
        reqs[2].body["messages"][3],
        json!({"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]})
    );
}

#[tokio::test]
async fn invalid_tool_json_is_an_error_result_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bad = TOOL_STREAM.replace(r#"es.txt\"}"#, r#"es.txt"#);
    let server = FakeServer::start(vec![Reply::sse(&bad), Reply::sse(TEXT_STREAM)]).await;
    let (agent, _) = agent(dir.path(), harness(&server.base));
    let out = agent
        .prompt("read notes.txt", CancellationToken::new())
        .await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    let reqs = server.requests();
    let result = &reqs[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], json!("tool_result"));
    assert_eq!(result["is_error"], json!(true), "{result}");
    let tool_use = reqs[1].body["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .cloned()
        .unwrap();
    assert!(tool_use["input"].is_object(), "{tool_use}");
}

#[tokio::test]
async fn a_429_waits_the_providers_hint_on_the_injected_clock_then_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::json(
            429,
            &[("retry-after", "3")],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
        ),
        Reply::json(
            529,
            &[("retry-after-ms", "250")],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::sse(TEXT_STREAM),
    ])
    .await;
    let (agent, slept) = agent(dir.path(), harness(&server.base));
    let out = agent.prompt("hi", CancellationToken::new()).await;
    assert_eq!(
        (out.stop, out.final_text.as_str()),
        (TurnStop::EndTurn, "Hello!")
    );
    assert_eq!(
        *slept.lock().unwrap(),
        vec![Duration::from_secs(3), Duration::from_millis(250)]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(
        reqs[0].body, reqs[2].body,
        "a retry resends the same request"
    );
}

#[tokio::test]
async fn stream_false_reads_one_json_message() {
    let message = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Whole answer."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":4}}"#;
    let server = FakeServer::start(vec![Reply::json(200, &[], message)]).await;
    let mut c = config(&server.base);
    c.stream = false;
    let h = AnthropicHarness::new(c, Secret::new(KEY)).unwrap();
    let got: Vec<ModelEvent> = collect(&h, hello())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(got.contains(&ModelEvent::TextDelta("Whole answer.".into())));
    assert_eq!(
        got.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn
        })
    );
    assert_eq!(server.requests()[0].body.get("stream"), None);
}

#[tokio::test]
async fn cancelling_a_turn_mid_stream_ends_it_as_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let head = TEXT_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap();
    let mut reply = Reply::sse(head);
    reply.hang = true;
    let server = FakeServer::start(vec![reply]).await;
    let (agent, _) = agent(dir.path(), harness(&server.base));
    let updates = agent.subscribe(loom_protocol::bus::Capacity::Unbounded);
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    // cancel once the first text chunk reached the subscribers: the stream is then stalled on the socket
    tokio::spawn(async move {
        loop {
            match updates.try_recv() {
                Some(loom_protocol::update::SessionUpdate::AgentMessageChunk(_)) => break,
                Some(_) => {}
                None => tokio::task::yield_now().await,
            }
        }
        c2.cancel();
    });
    let out = agent.prompt("hi", cancel).await;
    assert_eq!(out.stop, TurnStop::Cancelled, "{out:?}");
}

/// A web search by the server tool, as the Messages API streams it: text, the `server_tool_use` with its input as
/// JSON deltas, the `web_search_tool_result` whole in its start event, then cited text and the usage.
const SERVER_TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01GWebSearch","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":2679,"output_tokens":3}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll search for that."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\": \"python 3.13 release date\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","content":[{"type":"web_search_result","title":"What's New In Python 3.13","url":"https://docs.python.org/3/whatsnew/3.13.html","encrypted_content":"EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5","page_age":"October 7, 2024"}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"text","text":"","citations":[]}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","cited_text":"Python 3.13 was released on October 7, 2024.","url":"https://docs.python.org/3/whatsnew/3.13.html","title":"What's New In Python 3.13","encrypted_index":"Eo8BCioIAhgBIiQyYjQ0"}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"It came out on October 7, 2024."}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":10682,"output_tokens":510,"server_tool_use":{"web_search_requests":1}}}

event: message_stop
data: {"type":"message_stop"}

"#;

#[tokio::test]
async fn a_server_web_search_is_offered_with_the_grants_limits_kept_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(SERVER_TOOL_STREAM),
        Reply::sse(TEXT_STREAM),
    ])
    .await;
    // the kernel turns the grant into the provider's limits
    let t: toml::Table =
        toml::from_str(r#"g = { max_uses = 3, allowed_domains = ["docs.python.org"] }"#).unwrap();
    let def = crate::server_tool_definition(
        "anthropic",
        "web_search",
        &Grant::from_toml(&t["g"]).unwrap(),
    )
    .unwrap();
    let h = harness(&server.base).with_server_tools(vec![def]).unwrap();
    let (agent, _) = agent(dir.path(), h);
    let out = agent
        .prompt("when did python 3.13 come out?", CancellationToken::new())
        .await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    assert!(
        out.final_text.contains("It came out on October 7, 2024."),
        "{out:?}"
    );
    let out = agent.prompt("thanks", CancellationToken::new()).await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        2,
        "the server tool ran at the provider: no tool loop"
    );
    let tools = reqs[0].body["tools"].as_array().unwrap();
    assert_eq!(tools[0]["name"], json!("read_file"));
    assert_eq!(
        tools[1],
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3,
               "allowed_domains": ["docs.python.org"]})
    );
    // web_search needs no beta flag (web_fetch does)
    assert!(!reqs[0].headers.iter().any(|(k, _)| k == "anthropic-beta"));
    // the whole exchange goes back in order: the call with its input, the result as it came, the cited answer
    assert_eq!(
        reqs[1].body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "I'll search for that."},
            {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "name": "web_search",
             "input": {"query": "python 3.13 release date"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "content": [
                {"type": "web_search_result", "title": "What's New In Python 3.13",
                 "url": "https://docs.python.org/3/whatsnew/3.13.html",
                 "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5", "page_age": "October 7, 2024"}]},
            {"type": "text", "text": "It came out on October 7, 2024."},
        ]})
    );
}

#[test]
fn web_fetch_is_defined_and_only_anthropic_has_server_tools() {
    let def =
        crate::server_tool_definition("anthropic", "web_fetch", &Grant::Unrestricted).unwrap();
    assert_eq!(
        def,
        json!({"type": "web_fetch_20250910", "name": "web_fetch"})
    );
    assert!(crate::server_tool_definition("openai", "web_search", &Grant::Unrestricted).is_err());
    let mut c = config("http://x");
    c.server_tools = vec![def];
    let body = request_body(&hello(), &c);
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
    // a server tool block is replayed only to Anthropic; OpenAI's reasoning is not
    let item = json!({"type": "reasoning", "id": "rs_1"});
    assert_eq!(block(&ContentBlock::ProviderItem { item }), None);
    let echo: toml::Table = toml::from_str("echo = true").unwrap();
    let test: Arc<dyn Harness> = Arc::new(crate::TestHarness::from_config(&echo).unwrap());
    assert!(test.with_server_tools(vec![]).is_none());
}

#[tokio::test]
async fn a_paused_server_turn_is_sent_back_and_goes_on() {
    // the stream stops after the server_tool_use with `pause_turn`: the search is still running at the provider
    let cut = SERVER_TOOL_STREAM
        .find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2")
        .unwrap();
    let paused = format!(
        "{}event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"pause_turn\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":40}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
        &SERVER_TOOL_STREAM[..cut]
    );
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(&paused), Reply::sse(TEXT_STREAM)]).await;
    let (agent, _) = agent(dir.path(), harness(&server.base));
    let out = agent.prompt("search it", CancellationToken::new()).await;
    assert_eq!(out.stop, TurnStop::EndTurn, "{out:?}");
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        2,
        "one turn, and the paused message went back to the provider"
    );
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant", "{messages:#?}");
    assert_eq!(
        last["content"][1],
        json!({"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "name": "web_search",
               "input": {"query": "python 3.13 release date"}})
    );
}

/// A cached request: Anthropic reports the tokens read from and written to the prompt cache beside the uncached
/// input; loom counts all three as input and keeps the two cache counts apart for the usage update.
#[test]
fn cache_reads_and_writes_are_reported_apart() {
    let stream = TEXT_STREAM.replace(
        r#""usage":{"input_tokens":25,"output_tokens":1}"#,
        r#""usage":{"input_tokens":25,"cache_creation_input_tokens":1200,"cache_read_input_tokens":3400,"output_tokens":1}"#,
    );
    assert_ne!(stream, TEXT_STREAM, "the fixture changed");
    let events: Vec<ModelEvent> = decode_all(&stream)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events[1],
        ModelEvent::Usage(Usage {
            input_tokens: 25 + 1200 + 3400,
            output_tokens: 1,
            cache_read_tokens: 3400,
            cache_write_tokens: 1200,
        })
    );
}
