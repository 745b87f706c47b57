//! The bounds a provider endpoint cannot push loom past (security review 2, N12), through the real HTTP path of the
//! `anthropic` harness against the fake server on loopback: one event's data, a non-streamed body, and the wait a
//! `retry-after` hint asks for.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::client::MAX_JSON_BODY;
use super::fake_server::{FakeServer, Reply};
use super::{AnthropicConfig, AnthropicHarness, Harness, HarnessError, MAX_SSE_EVENT};
use crate::model::{Message, ModelEvent, ModelRequest};
use loom_protocol::update::TurnStop;
use loom_protocol::Secret;
use loom_runtime::{Agent, AgentParts};
use loom_runtime::{Chain, MemoryLayer};
use loom_runtime::{Sleeper, MAX_RETRY_AFTER};

const ANSWER: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_b","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"fine"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

"#;

fn harness(base: &str, stream: bool) -> Arc<AnthropicHarness> {
    let t: toml::Table =
        toml::from_str(&format!("model = \"claude-test\"\napiBase = \"{base}\"")).unwrap();
    let mut c = AnthropicConfig::from_config(&t).unwrap();
    c.stream = stream;
    Arc::new(AnthropicHarness::new(c, Secret::new("sk-ant-bounds")).unwrap())
}

fn hello() -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user_text("hi")],
        ..ModelRequest::default()
    }
}

/// The events of one request; a request refused before its first event is that one error.
async fn collect(h: &AnthropicHarness) -> Vec<Result<ModelEvent, HarnessError>> {
    match h.stream(hello(), CancellationToken::new()).await {
        Ok(s) => s.collect().await,
        Err(e) => vec![Err(e)],
    }
}

fn protocol_message(got: &[Result<ModelEvent, HarnessError>]) -> String {
    match got.last() {
        Some(Err(HarnessError::Protocol { message })) => message.clone(),
        other => panic!("expected a protocol error last, got {other:?}"),
    }
}

#[tokio::test]
async fn an_event_of_endless_data_lines_fails_the_request() {
    // each line is short (1 MiB, far under the line bound); together they pass the event bound
    let line = format!("data: {}\n", "x".repeat(1024 * 1024));
    let lines = MAX_SSE_EVENT / (1024 * 1024) + 1;
    let mut body = String::from("event: content_block_delta\n");
    for _ in 0..lines {
        body.push_str(&line);
    }
    body.push('\n');
    let server = FakeServer::start(vec![Reply::raw(body.as_bytes()), Reply::sse(ANSWER)]).await;
    let h = harness(&server.base, true);
    let got = collect(&h).await;
    assert_eq!(got.len(), 1, "nothing decoded before the error");
    let m = protocol_message(&got);
    assert!(m.contains("more than 16 MiB of data"), "{m}");
    // the control: an ordinary stream on the same harness
    let got = collect(&h).await;
    assert!(got.iter().all(Result::is_ok), "{got:?}");
    assert!(got.contains(&Ok(ModelEvent::TextDelta("fine".into()))));
}

#[tokio::test]
async fn a_non_streamed_body_past_its_bound_fails_the_request() {
    let message = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Whole."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#;
    // valid JSON, padded with whitespace past the bound
    let huge = format!("{message}{}", " ".repeat(MAX_JSON_BODY));
    let server = FakeServer::start(vec![
        Reply::json(200, &[], &huge),
        Reply::json(200, &[], message),
    ])
    .await;
    let h = harness(&server.base, false);
    let got = collect(&h).await;
    let m = protocol_message(&got);
    assert!(m.contains("response body is longer than"), "{m}");
    let got = collect(&h).await;
    assert!(
        got.contains(&Ok(ModelEvent::TextDelta("Whole.".into()))),
        "{got:?}"
    );
}

struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Sleeper for Recorder {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(d);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_huge_retry_after_waits_the_cap_not_the_hint() {
    let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let server = FakeServer::start(vec![
        Reply::json(429, &[("retry-after", "1e9")], limited),
        Reply::json(429, &[("retry-after-ms", "99999999999")], limited),
        Reply::json(429, &[("retry-after", "7")], limited),
        Reply::sse(ANSWER),
    ])
    .await;
    let ctx = loom_kernel::PathCtx::new("/", None);
    let mut parts = AgentParts::new(
        harness(&server.base, true),
        Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap(),
        ctx,
    );
    let slept = Arc::new(Mutex::new(Vec::new()));
    parts.sleeper = Arc::new(Recorder(slept.clone()));
    let out = Agent::new(parts)
        .prompt("hi", CancellationToken::new())
        .await;
    assert_eq!(
        (out.stop, out.final_text.as_str()),
        (TurnStop::EndTurn, "fine")
    );
    assert_eq!(
        *slept.lock().unwrap(),
        vec![MAX_RETRY_AFTER, MAX_RETRY_AFTER, Duration::from_secs(7)]
    );
    assert_eq!(MAX_RETRY_AFTER, Duration::from_secs(60));
}
