//! `openai` (Responses API): the pure body/decoder, then the HTTP path against a fake server on loopback replaying
//! the API's event sequences, asserting what loom parsed and what it sent.

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

const KEY: &str = "sk-proj-responses-secret-42";

const TEXT_STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are terse.","max_output_tokens":null,"model":"gpt-5.1","output":[],"parallel_tool_calls":true,"previous_response_id":null,"store":false,"tool_choice":"auto","tools":[],"usage":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"delta":"Hello"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"delta":"!"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"text":"Hello!"}

event: response.content_part.done
data: {"type":"response.content_part.done","sequence_number":7,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hello!","annotations":[]}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}}

event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","status":"completed","error":null,"incomplete_details":null,"output":[{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c5","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}

"#;

const TOOL_STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_fc1","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need the file."}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAAABpEnc-rs1-opaque==","summary":[{"type":"summary_text","text":"Need the file."}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"type":"function_call","id":"fc_67ca09c6bedc8190a7abfec07b1a1332","call_id":"call_unLAR8MvFNptuiZK6K6HCy5k","name":"read_file","arguments":"","status":"in_progress"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_67ca09c6bedc8190a7abfec07b1a1332","output_index":1,"delta":"{\"pa"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_67ca09c6bedc8190a7abfec07b1a1332","output_index":1,"delta":"th\":\"notes.txt\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc_67ca09c6bedc8190a7abfec07b1a1332","output_index":1,"arguments":"{\"path\":\"notes.txt\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"type":"function_call","id":"fc_67ca09c6bedc8190a7abfec07b1a1332","call_id":"call_unLAR8MvFNptuiZK6K6HCy5k","name":"read_file","arguments":"{\"path\":\"notes.txt\"}","status":"completed"}}

event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_fc1","object":"response","status":"completed","output":[],"usage":{"input_tokens":60,"output_tokens":20,"total_tokens":80}}}

"#;

/// The reasoning item of `TOOL_STREAM`, as the API returned it.
fn reasoning_item() -> serde_json::Value {
    json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAABpEnc-rs1-opaque==",
           "summary": [{"type": "summary_text", "text": "Need the file."}]})
}

fn config(base: &str) -> OpenAiConfig {
    let t: toml::Table =
        toml::from_str(&format!("model = \"gpt-test\"\napiBase = \"{base}/v1\"")).unwrap();
    OpenAiConfig::from_config(&t).unwrap()
}

fn harness(base: &str) -> Arc<OpenAiHarness> {
    Arc::new(OpenAiHarness::new(config(base), Secret::new(KEY)).unwrap())
}

fn hello() -> ModelRequest {
    ModelRequest {
        system: vec!["You are terse.".into()],
        messages: vec![Message::user_text("hi")],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object"}),
        }],
        ..ModelRequest::default()
    }
}

async fn collect(h: &OpenAiHarness) -> Vec<Result<ModelEvent, HarnessError>> {
    match h.stream(hello(), CancellationToken::new()).await {
        Ok(s) => s.collect().await,
        Err(e) => vec![Err(e)],
    }
}

#[test]
fn effort_is_sent_as_the_reasoning_effort_of_a_reasoning_model_only() {
    let body = |text: &str| {
        let t: toml::Table = toml::from_str(text).unwrap();
        responses_request_body(&hello(), &OpenAiConfig::from_config(&t).unwrap())
    };
    assert_eq!(
        body("model = \"gpt-5-mini\"\neffort = \"low\"")["reasoning"],
        json!({"effort": "low"})
    );
    assert!(body("model = \"gpt-5-mini\"").get("reasoning").is_none());
    assert!(body("model = \"gpt-4.1\"\neffort = \"high\"")
        .get("reasoning")
        .is_none());
    let t: toml::Table = toml::from_str("effort = 3").unwrap();
    assert!(OpenAiConfig::from_config(&t).is_err());
}

#[test]
fn config_defaults_follow_the_seed_and_the_key_is_required() {
    let c = OpenAiConfig::from_config(&toml::Table::new()).unwrap();
    assert_eq!(
        c,
        OpenAiConfig {
            model: "gpt-5.1".into(),
            api_base: "https://api.openai.com/v1".into(),
            max_output_tokens: None,
            stream: true,
            context_window: None,
            effort: None,
        }
    );
    let h = loom_kernel::HarnessSpec {
        provider: "openai".into(),
        config: toml::from_str("apiBase = \"http://127.0.0.1:9/v1\"").unwrap(),
    };
    let err = crate::build_harness(Some(&h), &SecretChain::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    let t: toml::Table = toml::from_str("maxTokens = 5").unwrap();
    let err = OpenAiConfig::from_config(&t).unwrap_err().to_string();
    assert!(err.contains("unknown key \"maxTokens\""), "{err}");
}

#[test]
fn the_body_is_stateless_input_items() {
    let mut req = hello();
    req.messages = vec![
        Message::user_text("read notes.txt"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "Looking.".into(),
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
    c.max_output_tokens = Some(64);
    assert_eq!(
        responses_request_body(&req, &c),
        json!({
            "model": "gpt-test",
            "input": [
                {"role": "user", "content": "read notes.txt"},
                {"role": "assistant", "content": "Looking."},
                {"type": "function_call", "call_id": "call_1", "name": "read_file",
                 "arguments": "{\"path\":\"notes.txt\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "hi"},
            ],
            "store": false,
            "instructions": "You are terse.",
            "max_output_tokens": 64,
            "tools": [{"type": "function", "name": "read_file", "description": "Reads a file.",
                       "parameters": {"type": "object"}}],
            "stream": true,
        })
    );
}

#[test]
fn the_tool_stream_decodes() {
    let mut p = SseParser::default();
    let mut d = ResponsesDecoder::default();
    let got: Vec<ModelEvent> = p
        .feed(TOOL_STREAM.as_bytes())
        .unwrap()
        .into_iter()
        .flat_map(|e| d.decode(&e))
        .map(Result::unwrap)
        .collect();
    let id = "call_unLAR8MvFNptuiZK6K6HCy5k".to_string();
    assert_eq!(
        got,
        vec![
            ModelEvent::MessageStart {
                message_id: "resp_fc1".into()
            },
            ModelEvent::ThinkingDelta("Need the file.".into()),
            ModelEvent::ProviderItem(reasoning_item()),
            ModelEvent::ToolUseStart {
                id: id.clone(),
                name: "read_file".into()
            },
            ModelEvent::ToolUseInputDelta {
                id: id.clone(),
                partial_json: "{\"pa".into()
            },
            ModelEvent::ToolUseInputDelta {
                id: id.clone(),
                partial_json: "th\":\"notes.txt\"}".into()
            },
            ModelEvent::ToolUseEnd { id },
            ModelEvent::Usage(Usage {
                input_tokens: 60,
                output_tokens: 20,
                ..Usage::default()
            }),
            ModelEvent::MessageEnd {
                stop_reason: StopReason::ToolUse
            },
        ]
    );
    assert!(d.done());
}

#[test]
fn a_complete_response_decodes_like_its_stream() {
    let resp = json!({
        "id": "resp_2", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Partial"}]}],
        "usage": {"input_tokens": 5, "output_tokens": 64},
    });
    let got: Vec<ModelEvent> = ResponsesDecoder::default()
        .decode_response(&resp)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(got.contains(&ModelEvent::TextDelta("Partial".into())));
    assert_eq!(
        got.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::MaxTokens
        })
    );
}

#[tokio::test]
async fn text_streams_with_a_bearer_key_to_the_responses_endpoint() {
    let server = FakeServer::start(vec![Reply::sse(TEXT_STREAM)]).await;
    let got: Vec<ModelEvent> = collect(&harness(&server.base))
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
    assert_eq!(
        got.last(),
        Some(&ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn
        })
    );
    let r = &server.requests()[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        r.body,
        responses_request_body(&hello(), &config("http://x"))
    );
}

#[tokio::test]
async fn failures_errors_after_200_cuts_and_garbage_are_classified() {
    let head: String = TEXT_STREAM
        .split("event: response.output_text.done")
        .next()
        .unwrap()
        .into();
    let server = FakeServer::start(vec![
        Reply::json(
            429,
            &[("retry-after", "4")],
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        ),
        Reply::sse(&(head.clone()
            + "event: error\ndata: {\"type\":\"error\",\"code\":\"server_is_overloaded\",\"message\":\"The server is overloaded\",\"param\":null,\"sequence_number\":7}\n\n")),
        Reply::sse(&(head.clone()
            + "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":7,\"response\":{\"id\":\"resp_x\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed\"}}}\n\n")),
        Reply::sse(&head),
        Reply::raw(b"\xff garbage\n\n"),
        Reply::sse("data: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"),
    ])
    .await;
    let h = harness(&server.base);
    let mut last = Vec::new();
    for _ in 0..6 {
        let got = collect(&h).await;
        assert_eq!(got.iter().filter(|e| e.is_err()).count(), 1, "{got:?}");
        last.push(got.last().cloned().unwrap().unwrap_err());
    }
    assert!(matches!(last[0], HarnessError::RateLimited { .. }));
    assert_eq!(last[0].retry_after(), Some(Duration::from_secs(4)));
    assert!(
        matches!(last[1], HarnessError::Overloaded { .. }),
        "{:?}",
        last[1]
    );
    assert!(
        matches!(&last[2], HarnessError::Http { status: 200, message, .. } if message.contains("The model failed")),
        "{:?}",
        last[2]
    );
    assert!(
        matches!(&last[3], HarnessError::Network { message } if message.contains("mid-response")),
        "{:?}",
        last[3]
    );
    assert!(matches!(last[4], HarnessError::Protocol { .. }));
    assert!(matches!(last[5], HarnessError::Protocol { .. }));
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
async fn a_function_call_round_trips_through_the_loop_after_a_529() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the notes say hi").unwrap();
    let server = FakeServer::start(vec![
        Reply::json(
            529,
            &[("retry-after-ms", "750")],
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
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
    // a reasoning model: its reasoning comes back encrypted and is replayed
    let mut reasoning = config(&server.base);
    reasoning.model = "gpt-5.1".into();
    let mut parts = AgentParts::new(
        Arc::new(OpenAiHarness::new(reasoning, Secret::new(KEY)).unwrap()),
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
    assert_eq!(*slept.lock().unwrap(), vec![Duration::from_millis(750)]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let input = reqs[2].body["input"].as_array().unwrap();
    assert!(
        input.contains(
            &json!({"type": "function_call", "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
        "name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"})
        ),
        "{input:#?}"
    );
    assert_eq!(
        input.last(),
        Some(
            &json!({"type": "function_call_output", "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
            "output": "the notes say hi"})
        )
    );
    // every request of a reasoning model asks for the encrypted reasoning (store = false keeps nothing server-side)
    for r in &reqs[1..] {
        assert_eq!(r.body["include"], json!(["reasoning.encrypted_content"]));
    }
    // the reasoning item is replayed verbatim, in its place: right before the call it led to
    let at = |item: &serde_json::Value| input.iter().position(|i| i == item);
    let call = input
        .iter()
        .position(|i| i["type"] == "function_call")
        .unwrap();
    assert_eq!(at(&reasoning_item()), Some(call - 1), "{input:#?}");
    // its summary, streamed as thinking, is not sent a second time as text
    assert!(
        !input
            .iter()
            .any(|i| i["content"].as_str() == Some("Need the file.")),
        "{input:#?}"
    );
}

#[test]
fn reasoning_items_are_replayed_only_to_the_responses_api_and_include_only_for_reasoning_models() {
    let mut request = hello();
    request.messages.push(Message {
        role: crate::model::Role::Assistant,
        content: vec![
            ContentBlock::Thinking {
                text: "Need the file.".into(),
                signature: None,
            },
            ContentBlock::ProviderItem {
                item: reasoning_item(),
            },
            ContentBlock::Text {
                text: "Reading.".into(),
            },
        ],
    });
    let body = responses_request_body(&request, &config("http://x"));
    assert!(body.get("include").is_none(), "gpt-test does not reason");
    let input = body["input"].as_array().unwrap();
    assert_eq!(input[1], reasoning_item());
    assert_eq!(
        input[2],
        json!({"role": "assistant", "content": "Reading."})
    );
    assert!(reasons("gpt-5.1") && reasons("o3-mini") && !reasons("gpt-4.1"));
    // the Anthropic harness leaves another provider's reasoning out
    let anthropic_config = crate::AnthropicConfig::from_config(&toml::Table::new()).unwrap();
    let anthropic = crate::anthropic_request_body(&request, &anthropic_config);
    assert!(
        !anthropic.to_string().contains("gAAAAABpEnc"),
        "{anthropic}"
    );
}
