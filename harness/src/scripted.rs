//! The `test` harness: deterministic, scripted, no model.
//!
//! `[harness] provider = "test"` with either `echo = true` (each response replays the latest user message and ends
//! the turn) or `script = [[ step, … ], [ … ]]`: one list of steps per user turn. A step is `{ say = "…" }` (text),
//! `{ think = "…" }` (reasoning), `{ echo = true }` (the latest user message's text, as text),
//! `{ call = { tool = "…", input = { … } } }` (a tool call) or `{ stop = true }`
//! (the answer ends here, with no call, so the turn ends). Within a turn, each model request consumes steps up to
//! and including the next `call` or `stop` (or to the end), so a call is followed by the rest of the turn after its
//! result comes back, and the steps after a `stop` answer a request the runtime makes anyway (a Stop hook sending
//! the model back to work). A call may give
//! `raw = "…"` instead of `input` to send that text verbatim as the call's JSON (to exercise invalid input).

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{EventStream, Harness, HarnessConfigError, HarnessError};
use crate::model::{ContentBlock, ModelEvent, ModelRequest, Role, StopReason, Usage};

/// One scripted step.
#[derive(Debug, Clone, PartialEq)]
pub enum TestStep {
    /// Say this text.
    Say(String),
    /// Think this text.
    Think(String),
    /// Say the latest user message's text.
    Echo,
    /// Call a tool with this JSON input text (normally serialised from `input`; verbatim from `raw`).
    Call {
        /// The tool instance.
        tool: String,
        /// The input as JSON text.
        input_json: String,
    },
    /// End the turn here.
    Stop,
}

/// The steps of one user turn.
pub type TestTurn = Vec<TestStep>;

#[derive(Debug, Default)]
struct Cursor {
    /// The runtime's turn number the cursor belongs to.
    turn: Option<u64>,
    /// Index of the script turn in use.
    index: usize,
    /// Next step within it.
    step: usize,
    /// Script turns started so far.
    started: usize,
}

/// The scripted harness.
#[derive(Debug)]
pub struct TestHarness {
    echo: bool,
    script: Vec<TestTurn>,
    cursor: Mutex<Cursor>,
}

impl TestHarness {
    /// An echo harness.
    pub fn echo() -> TestHarness {
        TestHarness {
            echo: true,
            script: Vec::new(),
            cursor: Mutex::default(),
        }
    }

    /// A scripted harness.
    pub fn scripted(script: Vec<TestTurn>) -> TestHarness {
        TestHarness {
            echo: false,
            script,
            cursor: Mutex::default(),
        }
    }

    /// Builds the harness from `[harness]` config (`echo`, `script`).
    pub fn from_config(config: &toml::Table) -> Result<TestHarness, HarnessConfigError> {
        let bad = |m: String| HarnessConfigError::Invalid(m);
        let echo = match config.get("echo") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(bad("echo must be true or false".into())),
        };
        let mut script = Vec::new();
        if let Some(v) = config.get("script") {
            let turns = v
                .as_array()
                .ok_or_else(|| bad("script must be an array of turns (arrays of steps)".into()))?;
            for (t, turn) in turns.iter().enumerate() {
                let steps = turn.as_array().ok_or_else(|| {
                    bad(format!(
                        "script[{t}] must be an array of steps, e.g. [{{ say = \"hi\" }}]"
                    ))
                })?;
                let mut out = Vec::new();
                for (s, step) in steps.iter().enumerate() {
                    out.push(parse_step(step).map_err(|m| bad(format!("script[{t}][{s}]: {m}")))?);
                }
                script.push(out);
            }
        }
        if !echo && config.get("script").is_none() {
            return Err(bad(
                "the test harness needs echo = true or a script, e.g. script = [[{ say = \"hi\" }]]".into(),
            ));
        }
        Ok(TestHarness {
            echo: echo && config.get("script").is_none(),
            script,
            cursor: Mutex::default(),
        })
    }

    fn events(&self, request: &ModelRequest) -> Result<Vec<ModelEvent>, HarnessError> {
        let message_id = format!("test-{}-{}", request.turn, request.request_in_turn);
        let mut events = vec![ModelEvent::MessageStart {
            message_id: message_id.clone(),
        }];
        let end = |events: &mut Vec<ModelEvent>, stop_reason| {
            events.push(ModelEvent::Usage(Usage {
                input_tokens: 0,
                output_tokens: 0,
                ..Usage::default()
            }));
            events.push(ModelEvent::MessageEnd { stop_reason });
        };
        if self.echo {
            events.push(ModelEvent::TextDelta(latest_user_text(request)));
            end(&mut events, StopReason::EndTurn);
            return Ok(events);
        }
        let mut c = self.cursor.lock().map_err(|_| HarnessError::Protocol {
            message: "test harness: state poisoned".into(),
        })?;
        if c.turn != Some(request.turn) {
            c.turn = Some(request.turn);
            c.index = c.started;
            c.started += 1;
            c.step = 0;
        }
        let Some(steps) = self.script.get(c.index) else {
            return Err(HarnessError::Protocol {
                message: format!(
                    "test harness: the script has {} turn(s); there is no script for turn {}",
                    self.script.len(),
                    c.index + 1
                ),
            });
        };
        let mut stop = StopReason::EndTurn;
        while c.step < steps.len() {
            let i = c.step;
            c.step += 1;
            match &steps[i] {
                TestStep::Say(t) => events.push(ModelEvent::TextDelta(t.clone())),
                TestStep::Think(t) => events.push(ModelEvent::ThinkingDelta(t.clone())),
                TestStep::Echo => events.push(ModelEvent::TextDelta(latest_user_text(request))),
                TestStep::Stop => break,
                TestStep::Call { tool, input_json } => {
                    let id = format!("call_{}_{}", c.index, i);
                    events.push(ModelEvent::ToolUseStart {
                        id: id.clone(),
                        name: tool.clone(),
                    });
                    events.push(ModelEvent::ToolUseInputDelta {
                        id: id.clone(),
                        partial_json: input_json.clone(),
                    });
                    events.push(ModelEvent::ToolUseEnd { id });
                    stop = StopReason::ToolUse;
                    break;
                }
            }
        }
        end(&mut events, stop);
        Ok(events)
    }
}

/// The text of the latest user message that has text.
fn latest_user_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| {
            m.role == Role::User
                && m.content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::Text { .. }))
        })
        .map(|m| m.text())
        .unwrap_or_default()
}

fn parse_step(step: &toml::Value) -> Result<TestStep, String> {
    let t = step
        .as_table()
        .ok_or("a step is a table: { say = \"…\" }, { think = \"…\" }, { call = { tool, input } } or { stop = true }")?;
    if t.len() != 1 {
        return Err("a step has exactly one of say, think, echo, call, stop".into());
    }
    let text = |v: &toml::Value, k: &str| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{k} takes a string"))
    };
    match t.iter().next() {
        Some((k, v)) if k == "say" => Ok(TestStep::Say(text(v, k)?)),
        Some((k, v)) if k == "think" => Ok(TestStep::Think(text(v, k)?)),
        Some((k, v)) if k == "echo" => match v {
            toml::Value::Boolean(true) => Ok(TestStep::Echo),
            _ => Err("echo takes true".into()),
        },
        Some((k, v)) if k == "stop" => match v {
            toml::Value::Boolean(true) => Ok(TestStep::Stop),
            _ => Err("stop takes true".into()),
        },
        Some((k, v)) if k == "call" => {
            let c = v
                .as_table()
                .ok_or("call takes { tool = \"…\", input = { … } }")?;
            for key in c.keys() {
                if !["tool", "input", "raw"].contains(&key.as_str()) {
                    return Err(format!(
                        "call: unknown key {key:?} (expected tool, input or raw)"
                    ));
                }
            }
            let tool = c
                .get("tool")
                .and_then(toml::Value::as_str)
                .ok_or("call needs tool = \"<instance name>\"")?
                .to_string();
            let input_json = match (c.get("input"), c.get("raw")) {
                (Some(_), Some(_)) => return Err("call takes input or raw, not both".into()),
                (_, Some(raw)) => text(raw, "raw")?,
                (Some(input), None) => {
                    if !input.is_table() {
                        return Err("call.input must be a table".into());
                    }
                    serde_json::to_string(input).map_err(|e| format!("call.input: {e}"))?
                }
                (None, None) => "{}".to_string(),
            };
            Ok(TestStep::Call { tool, input_json })
        }
        Some((k, _)) => Err(format!(
            "unknown step {k:?} (expected say, think, echo, call or stop)"
        )),
        None => Err("an empty step".into()),
    }
}

impl Harness for TestHarness {
    fn name(&self) -> &str {
        "test"
    }

    /// The scripted harness has one model, `test`.
    fn model(&self) -> Option<String> {
        Some("test".into())
    }

    fn stream(
        &self,
        request: ModelRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        let events = self.events(&request);
        Box::pin(async move {
            let events = events?;
            let stream: EventStream = Box::pin(futures::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use futures::StreamExt;

    fn harness(toml_text: &str) -> TestHarness {
        let t: toml::Table = toml::from_str(toml_text).unwrap();
        TestHarness::from_config(&t).unwrap()
    }

    async fn run(h: &TestHarness, turn: u64, n: u32) -> Vec<ModelEvent> {
        let req = ModelRequest {
            messages: vec![Message::user_text("hello")],
            turn,
            request_in_turn: n,
            ..ModelRequest::default()
        };
        let s = h.stream(req, CancellationToken::new()).await.unwrap();
        s.map(|e| e.unwrap()).collect().await
    }

    #[tokio::test]
    async fn echo_replays_the_user_message() {
        let h = harness("echo = true");
        let ev = run(&h, 0, 0).await;
        assert!(ev.contains(&ModelEvent::TextDelta("hello".into())));
        assert_eq!(
            ev.last(),
            Some(&ModelEvent::MessageEnd {
                stop_reason: StopReason::EndTurn
            })
        );
    }

    #[tokio::test]
    async fn each_request_consumes_steps_up_to_the_next_call() {
        let h = harness(
            r#"script = [[{ say = "a" }, { call = { tool = "bash", input = { command = "ls" } } }, { say = "b" }],
                         [{ think = "hm" }, { stop = true }, { say = "never" }]]"#,
        );
        let first = run(&h, 0, 0).await;
        assert!(first.contains(&ModelEvent::TextDelta("a".into())));
        assert!(first.contains(&ModelEvent::ToolUseInputDelta {
            id: "call_0_1".into(),
            partial_json: r#"{"command":"ls"}"#.into()
        }));
        assert_eq!(
            first.last(),
            Some(&ModelEvent::MessageEnd {
                stop_reason: StopReason::ToolUse
            })
        );
        let second = run(&h, 0, 1).await;
        assert!(second.contains(&ModelEvent::TextDelta("b".into())));
        assert_eq!(
            second.last(),
            Some(&ModelEvent::MessageEnd {
                stop_reason: StopReason::EndTurn
            })
        );
        let third = run(&h, 1, 0).await;
        assert!(third.contains(&ModelEvent::ThinkingDelta("hm".into())));
        assert!(!third.contains(&ModelEvent::TextDelta("never".into())));
        assert_eq!(
            third.last(),
            Some(&ModelEvent::MessageEnd {
                stop_reason: StopReason::EndTurn
            })
        );
        // only a request the runtime makes anyway after the answer ended (a Stop hook's) gets the steps after it
        let fourth = run(&h, 1, 1).await;
        assert!(fourth.contains(&ModelEvent::TextDelta("never".into())));
        let out = h
            .stream(
                ModelRequest {
                    turn: 2,
                    ..ModelRequest::default()
                },
                CancellationToken::new(),
            )
            .await;
        assert!(matches!(out, Err(HarnessError::Protocol { .. })));
    }

    #[test]
    fn bad_scripts_are_refused_with_the_step() {
        for (text, want) in [
            (
                r#"script = [[{ sing = "x" }]]"#,
                "script[0][0]: unknown step \"sing\"",
            ),
            (
                r#"script = [[{ call = { input = {} } }]]"#,
                "call needs tool",
            ),
            (r#"script = ["x"]"#, "script[0] must be an array"),
            ("", "needs echo = true or a script"),
        ] {
            let t: toml::Table = toml::from_str(text).unwrap();
            let err = TestHarness::from_config(&t).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
