//! What loom's ACP server writes, read by the official ACP schema types (`agent-client-protocol-schema`, v1): each
//! message must deserialize into the type the protocol names for it, and everything loom sent must come back when
//! the typed value is serialized again — so no field is misnamed, mistyped, or unknown to the schema (the schema
//! types drop a field they do not know). The schema may add fields of its own defaults on the way back, and it
//! leaves out a value equal to its default; the one such value loom sends is listed in [`SCHEMA_DEFAULTS`].

use agent_client_protocol_schema::v1 as acp;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::wire::*;
use loom_protocol::update::{
    Chunk, Content, Location, SessionUpdate, ThoughtChunk, ToolCall, ToolCallContent,
    ToolCallUpdate, ToolKind, ToolStatus, TurnStop, UsageUpdate,
};

/// Values loom states that the schema types leave out because they equal the default: a new tool call's status.
const SCHEMA_DEFAULTS: &[(&str, &str)] = &[("update.status", "pending")];

/// The paths of what `sent` has and `back` lacks or holds differently.
fn lost(sent: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, back) {
        (Value::Object(s), Value::Object(b)) => {
            for (k, v) in s {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(bv) => lost(v, bv, &p, out),
                    None if SCHEMA_DEFAULTS.contains(&(p.as_str(), v.as_str().unwrap_or(""))) => {}
                    None => out.push(format!("{p} (dropped)")),
                }
            }
        }
        (Value::Array(s), Value::Array(b)) if s.len() == b.len() => {
            for (i, (v, bv)) in s.iter().zip(b).enumerate() {
                lost(v, bv, &format!("{path}[{i}]"), out);
            }
        }
        (s, b) if s == b => {}
        (s, b) => out.push(format!("{path}: sent {s}, read back {b}")),
    }
}

#[track_caller]
fn round_trips<T: DeserializeOwned + Serialize>(what: &str, wire: &Value) {
    let typed: T = match serde_json::from_value(wire.clone()) {
        Ok(t) => t,
        Err(e) => panic!(
            "{what}: not a valid {}: {e}\n{wire:#}",
            std::any::type_name::<T>()
        ),
    };
    let back = serde_json::to_value(&typed).unwrap();
    let mut out = Vec::new();
    lost(wire, &back, "", &mut out);
    assert!(
        out.is_empty(),
        "{what}: {out:?}\nsent {wire:#}\nread back {back:#}"
    );
}

fn call() -> ToolCall {
    ToolCall {
        tool_call_id: "call_1".into(),
        title: "read_file".into(),
        kind: ToolKind::Read,
        status: ToolStatus::Pending,
        raw_input: json!({"path": "notes.txt"}),
        content: vec![],
        locations: vec![Location {
            path: "/w/notes.txt".into(),
        }],
    }
}

#[test]
fn every_session_update_loom_sends_is_a_schema_session_notification() {
    let text = |t: &str| Chunk {
        content: Content::text(t),
        message_id: None,
    };
    let updates = [
        (
            "agent message",
            SessionUpdate::AgentMessageChunk(text("hi")),
        ),
        (
            "user message (replayed)",
            SessionUpdate::UserMessageChunk(text("hello")),
        ),
        (
            "thought",
            SessionUpdate::AgentThoughtChunk(ThoughtChunk::text("thinking", None)),
        ),
        ("notice", SessionUpdate::notice("compaction failed")),
        ("tool call", SessionUpdate::ToolCall(call())),
        (
            "tool call with content",
            SessionUpdate::ToolCall(ToolCall {
                kind: ToolKind::Execute,
                status: ToolStatus::InProgress,
                content: vec![ToolCallContent::Terminal {
                    terminal_id: "term_1".into(),
                }],
                ..call()
            }),
        ),
        (
            "tool call update",
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: "call_1".into(),
                status: Some(ToolStatus::Completed),
                content: Some(vec![
                    ToolCallContent::Content {
                        content: Content::text("first line"),
                    },
                    ToolCallContent::Diff {
                        path: "/w/out.txt".into(),
                        old_text: Some("a".into()),
                        new_text: "b".into(),
                    },
                    ToolCallContent::Diff {
                        path: "/w/new.txt".into(),
                        old_text: None,
                        new_text: "c".into(),
                    },
                ]),
                raw_output: Some(json!({"exitCode": 0})),
            }),
        ),
        (
            "failed tool call",
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: "call_2".into(),
                status: Some(ToolStatus::Failed),
                content: None,
                raw_output: None,
            }),
        ),
        (
            "usage",
            SessionUpdate::UsageUpdate(UsageUpdate {
                used: 1200,
                size: Some(128_000),
                meta: Some(loom_protocol::UsageMeta {
                    cache_read_tokens: 900,
                    cache_write_tokens: 200,
                }),
            }),
        ),
        (
            "plan",
            SessionUpdate::Plan(loom_protocol::update::Plan {
                entries: ["pending", "in_progress", "completed"]
                    .iter()
                    .map(|st| loom_protocol::update::PlanEntry {
                        content: format!("step {st}"),
                        priority: "medium".into(),
                        status: (*st).into(),
                    })
                    .collect(),
            }),
        ),
        (
            "record tool call",
            SessionUpdate::ToolCall(ToolCall {
                kind: ToolKind::Think,
                ..call()
            }),
        ),
    ];
    for (what, update) in updates {
        let wire = replay_update("sess_1", &update).unwrap_or_else(|| panic!("{what}: not sent"));
        assert_eq!(wire["method"], "session/update");
        round_trips::<acp::SessionNotification>(what, &wire["params"]);
    }
}

#[test]
fn the_answers_and_the_permission_request_are_the_schema_types() {
    for load in [false, true] {
        round_trips::<acp::InitializeResponse>("initialize", &initialize_result("anthropic", load));
    }
    for model in [Some("claude-x"), None] {
        let new_session = json!({
            "sessionId": "sess_1",
            "modes": modes(false),
            "configOptions": config_options(model),
        });
        round_trips::<acp::NewSessionResponse>("session/new", &new_session);
    }
    round_trips::<acp::SessionModeState>("modes (plan)", &modes(true));
    for stop in [
        TurnStop::EndTurn,
        TurnStop::MaxTokens,
        TurnStop::MaxTurnRequests,
        TurnStop::Refusal,
        TurnStop::Cancelled,
    ] {
        let reason = stop_reason(stop).unwrap();
        round_trips::<acp::PromptResponse>("session/prompt", &json!({"stopReason": reason}));
    }
    for always in [false, true] {
        let params = permission_request("sess_1", &call(), "an ask rule matched", always);
        round_trips::<acp::RequestPermissionRequest>("session/request_permission", &params);
    }
}

#[test]
#[should_panic(expected = "misnamed (dropped)")]
fn a_field_the_schema_does_not_know_is_caught() {
    round_trips::<acp::PromptResponse>(
        "session/prompt",
        &json!({"stopReason": "end_turn", "misnamed": true}),
    );
}

#[test]
#[should_panic(expected = "not a valid")]
fn a_value_of_the_wrong_type_is_caught() {
    round_trips::<acp::PromptResponse>("session/prompt", &json!({"stopReason": "finished"}));
}
