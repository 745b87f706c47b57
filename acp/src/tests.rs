//! The pure half of the ACP server: framing, replies, prompt content, stop reasons. The server itself is driven
//! end to end through the real binary in tests/runtime/acp.rs (raw JSON-RPC lines and a real ACP client).

use serde_json::{json, Value};

use crate::wire::*;
use loom_jsonrpc::INVALID_PARAMS;
use loom_protocol::update::{Chunk, Content, SessionUpdate, TurnStop};

#[test]
fn a_notice_reaches_the_client_as_a_thought() {
    // a notice (a compaction failure, a layer running reduced) is for the user, never part of the conversation: ACP
    // has no frame for it, so the client sees it as a thought
    let wire = session_update("s1", &SessionUpdate::notice("x")).unwrap();
    assert_eq!(
        wire["params"]["update"]["sessionUpdate"],
        "agent_thought_chunk"
    );
}

#[test]
fn session_updates_have_the_json_rpc_shape() {
    let chunk = SessionUpdate::AgentMessageChunk(Chunk {
        content: Content::text("hi"),
        message_id: None,
    });
    assert_eq!(
        session_update("s1", &chunk),
        Some(
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}})
        )
    );
    // frames and the echoed prompt stay off the wire
    let frame = SessionUpdate::frame(loom_protocol::update::FrameKind::TurnStart, None, None);
    assert_eq!(session_update("s1", &frame), None);
    let user = SessionUpdate::UserMessageChunk(Chunk {
        content: Content::text("go"),
        message_id: None,
    });
    assert_eq!(session_update("s1", &user), None);
    let unsized_usage: SessionUpdate =
        serde_json::from_value(json!({"sessionUpdate": "usage_update", "used": 5})).unwrap();
    assert_eq!(session_update("s1", &unsized_usage), None);
}

#[test]
fn initialize_advertises_protocol_1_and_what_prompts_may_carry() {
    let r = initialize_result("anthropic", false);
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["agentCapabilities"]["loadSession"], false);
    assert_eq!(
        r["agentCapabilities"]["promptCapabilities"],
        json!({"image": false, "audio": false, "embeddedContext": true})
    );
    assert_eq!(r["authMethods"], json!([]));
}

#[test]
fn a_replay_carries_the_users_messages_too() {
    let user = SessionUpdate::UserMessageChunk(Chunk {
        content: Content::text("earlier"),
        message_id: Some("m1".into()),
    });
    let n = replay_update("file:/s.jsonl", &user).unwrap();
    assert_eq!(n["method"], "session/update");
    assert_eq!(n["params"]["sessionId"], "file:/s.jsonl");
    assert_eq!(n["params"]["update"]["sessionUpdate"], "user_message_chunk");
    assert_eq!(n["params"]["update"]["content"]["text"], "earlier");
    // everything else replays exactly as it streamed live, and what never goes on the wire stays off it
    let agent = SessionUpdate::AgentMessageChunk(Chunk {
        content: Content::text("hi"),
        message_id: None,
    });
    assert_eq!(replay_update("s", &agent), session_update("s", &agent));
    let frame = SessionUpdate::frame(loom_protocol::update::FrameKind::TurnStart, None, None);
    assert_eq!(replay_update("s", &frame), None);
    assert_eq!(
        initialize_result("test", true)["agentCapabilities"]["loadSession"],
        true
    );
    assert_eq!(
        crate::server::durable_id(std::path::Path::new("/d/session.jsonl")),
        "file:/d/session.jsonl"
    );
}

#[test]
fn session_new_and_load_params_are_checked() {
    use crate::server::session_cwd;
    let ok = json!({"sessionId": "s", "cwd": "/w", "mcpServers": []});
    assert_eq!(session_cwd(&ok, "session/load").unwrap(), "/w");
    assert_eq!(
        session_cwd(&json!({"cwd": "/w"}), "session/new").unwrap(),
        "/w"
    );
    for (params, needle) in [
        (json!({}), "\"cwd\" must be a string"),
        (json!({"cwd": 3}), "\"cwd\" must be a string"),
        (json!({"cwd": "w"}), "must be an absolute path"),
        (
            json!({"cwd": "/w", "mcpServers": {}}),
            "\"mcpServers\" must be an array",
        ),
        (
            json!({"cwd": "/w", "mcpServers": [{"name": "x"}]}),
            "session/load: mcpServers: loom does not connect",
        ),
    ] {
        let e = session_cwd(&params, "session/load").unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS, "{params}");
        assert!(e.message.contains(needle), "{params}: {}", e.message);
    }
}

#[test]
fn the_model_is_a_config_option_that_takes_only_the_manifests_model() {
    let opts = config_options(Some("claude-x"));
    assert_eq!(opts[0]["id"], "model");
    assert_eq!(opts[0]["category"], "model");
    assert_eq!(opts[0]["type"], "select");
    assert_eq!(opts[0]["currentValue"], "claude-x");
    assert_eq!(
        opts[0]["options"],
        json!([{"value": "claude-x", "name": "claude-x"}])
    );
    assert_eq!(config_options(None), json!([]));
    let set = |p: Value, model: Option<&str>| check_config_value(&p, model, "/a/agent.toml");
    assert_eq!(
        set(
            json!({"configId": "model", "value": "claude-x"}),
            Some("claude-x")
        ),
        Ok(())
    );
    for (params, model, needle) in [
        (
            json!({"configId": "model", "value": "gpt-9"}),
            Some("claude-x"),
            "model \"gpt-9\" is not offered: /a/agent.toml configures \"claude-x\"",
        ),
        (
            json!({"configId": "temperature", "value": "1"}),
            Some("claude-x"),
            "unknown configId \"temperature\"",
        ),
        (
            json!({"configId": "model", "value": "m"}),
            None,
            "options: none",
        ),
        (
            json!({"configId": "model", "type": "boolean", "value": true}),
            Some("m"),
            "is a select option",
        ),
        (
            json!({"configId": "model", "value": 3}),
            Some("m"),
            "\"value\" must be a string",
        ),
        (
            json!({"value": "m"}),
            Some("m"),
            "\"configId\" must be a string",
        ),
    ] {
        let e = set(params.clone(), model).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS, "{params}");
        assert!(e.message.contains(needle), "{params}: {}", e.message);
    }
}

#[test]
fn prompt_content_becomes_the_turns_text() {
    let ok = |blocks: Value| prompt_text(&json!({ "prompt": blocks }));
    assert_eq!(
        ok(json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])).unwrap(),
        "a\nb"
    );
    assert_eq!(
        ok(json!([
            {"type": "text", "text": "see"},
            {"type": "resource", "resource": {"uri": "file:///x.rs", "text": "fn x() {}"}},
            {"type": "resource_link", "uri": "file:///y", "name": "y"}
        ]))
        .unwrap(),
        "see\n[resource file:///x.rs]\nfn x() {}\n[resource link y file:///y]"
    );
    let err = |blocks: Value, needle: &str| {
        let e = ok(blocks).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains(needle), "{}", e.message);
    };
    err(
        json!([{"type": "image", "data": "", "mimeType": "image/png"}]),
        "promptCapabilities.image",
    );
    err(
        json!([{"type": "audio", "data": "", "mimeType": "audio/wav"}]),
        "promptCapabilities.audio",
    );
    err(
        json!([{"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}}]),
        "not text",
    );
    err(
        json!([{"type": "video"}]),
        "unknown content block type \"video\"",
    );
    err(json!([{"type": "text"}]), "needs \"text\"");
    err(json!([]), "empty");
    err(json!("hi"), "must be an array");
}

#[test]
fn stop_reasons_map_to_acp() {
    assert_eq!(stop_reason(TurnStop::EndTurn), Some("end_turn"));
    assert_eq!(stop_reason(TurnStop::MaxTokens), Some("max_tokens"));
    assert_eq!(
        stop_reason(TurnStop::MaxTurnRequests),
        Some("max_turn_requests")
    );
    assert_eq!(stop_reason(TurnStop::Refusal), Some("refusal"));
    assert_eq!(stop_reason(TurnStop::Cancelled), Some("cancelled"));
    assert_eq!(stop_reason(TurnStop::Error), None);
}

/// The asker seam the server plugs into: what is asked, and what each answer does.
#[test]
fn allow_always_is_accepted_only_when_it_was_offered() {
    use crate::server::answer_of;
    use loom_runtime::AskAnswer;
    let picked = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
    assert_eq!(
        answer_of(&picked("allow_always"), true),
        AskAnswer::AllowAlways
    );
    assert!(matches!(
        answer_of(&picked("allow_always"), false),
        AskAnswer::Reject(_)
    ));
    assert_eq!(
        answer_of(&picked("allow_once"), false),
        AskAnswer::AllowOnce
    );
    assert!(matches!(
        answer_of(&picked("reject_once"), true),
        AskAnswer::Reject(_)
    ));
    assert!(matches!(
        answer_of(&json!({"outcome": {"outcome": "cancelled"}}), true),
        AskAnswer::Reject(_)
    ));
}

mod asker {
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;
    use loom_kernel::{AlgebraKind, Grant, PathCtx};
    use tokio_util::sync::CancellationToken;

    use loom_harness::TestHarness;
    use loom_protocol::update::{SessionUpdate, ToolStatus};
    use loom_protocol::Capacity;
    use loom_runtime::ApprovalStore;
    use loom_runtime::{Agent, AgentParts, AskAnswer, Asker, PermissionAsk, ToolSlot};
    use loom_runtime::{Chain, MemoryLayer};
    use loom_tools::{builtin_tool, SandboxEnv, ToolEnv};

    /// Answers every ask with `answer` and records what it was asked.
    struct Recorder {
        answer: AskAnswer,
        asked: Mutex<Vec<PermissionAsk>>,
    }

    impl Asker for Recorder {
        fn ask(&self, ask: PermissionAsk) -> BoxFuture<'static, AskAnswer> {
            if let Ok(mut a) = self.asked.lock() {
                a.push(ask);
            }
            let answer = self.answer.clone();
            Box::pin(async move { answer })
        }
    }

    /// Runs one turn of `script` with read_file granted under the temp dir, `rules` as `[permissions]`, and an
    /// asker answering `answer`: (the asks, each call's (status, text)).
    async fn run(
        script: &str,
        rules: &str,
        answer: AskAnswer,
    ) -> (Vec<PermissionAsk>, Vec<(ToolStatus, String)>) {
        let dir = tempfile::tempdir().unwrap();
        run_with(script, rules, answer, None, dir.path()).await
    }

    /// [`run`] with remembered answers kept in `approvals`.
    async fn run_with(
        script: &str,
        rules: &str,
        answer: AskAnswer,
        approvals: Option<Arc<ApprovalStore>>,
        dir: &std::path::Path,
    ) -> (Vec<PermissionAsk>, Vec<(ToolStatus, String)>) {
        std::fs::write(dir.join("a.txt"), "x").unwrap();
        std::fs::write(dir.join("b.txt"), "y").unwrap();
        let cwd = std::fs::canonicalize(dir).unwrap();
        let t: toml::Table = toml::from_str(&format!("script = {script}")).unwrap();
        let harness = Arc::new(TestHarness::from_config(&t).unwrap());
        let m = loom_kernel::parse_manifest(
            &format!("[agent]\nname = \"a\"\n{rules}"),
            "agent.toml",
            &Default::default(),
        )
        .unwrap();
        let ctx = PathCtx::new(cwd.to_string_lossy().into_owned(), None);
        let g: toml::Table = toml::from_str(r#"g = { paths = ["./"] }"#).unwrap();
        let grant = Grant::from_toml(&g["g"]).unwrap();
        let env = ToolEnv {
            instance: "read_file".into(),
            grant: grant.clone(),
            ctx: ctx.clone(),
            cwd,
            authority: Default::default(),
            undo: Default::default(),
            record: Default::default(),
            processes: Default::default(),
            seen: Default::default(),
        };
        let mut parts = AgentParts::new(
            harness,
            Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap(),
            ctx,
        );
        parts.permissions = m.permissions;
        parts.tools.insert(
            "read_file".into(),
            ToolSlot {
                tool: builtin_tool("read_file", env, &SandboxEnv::default()).unwrap(),
                algebra: AlgebraKind::Files,
                grant,
            },
        );
        let recorder = Arc::new(Recorder {
            answer,
            asked: Mutex::new(Vec::new()),
        });
        parts.asker = Some(recorder.clone());
        parts.approvals = approvals;
        let agent = Agent::new(parts);
        let sub = agent.subscribe(Capacity::Unbounded);
        agent.prompt("go", CancellationToken::new()).await;
        let results = std::iter::from_fn(|| sub.try_recv())
            .filter_map(|u| match u {
                SessionUpdate::ToolCallUpdate(t) if t.status != Some(ToolStatus::InProgress) => {
                    Some((t.status.unwrap(), t.text()))
                }
                _ => None,
            })
            .collect();
        let asked = recorder.asked.lock().unwrap().clone();
        (asked, results)
    }

    const ASK_READS: &str = "[[permissions.ask_rules]]\ntool = \"read_file\"\n";

    #[tokio::test]
    async fn allow_once_runs_the_call_and_reject_refuses_it() {
        let script = r#"[[{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "done" }]]"#;
        let (asked, r) = run(script, ASK_READS, AskAnswer::AllowOnce).await;
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].call.title, "read_file");
        assert_eq!(asked[0].call.status, ToolStatus::Pending);
        assert!(asked[0].reason.contains("ask rule"), "{}", asked[0].reason);
        assert_eq!(r, vec![(ToolStatus::Completed, "x".to_string())]);

        let (asked, r) = run(
            script,
            ASK_READS,
            AskAnswer::Reject("the user said no".into()),
        )
        .await;
        assert_eq!(asked.len(), 1);
        assert_eq!(r[0].0, ToolStatus::Failed);
        assert!(
            r[0].1.contains("ask rule") && r[0].1.contains("the user said no"),
            "{}",
            r[0].1
        );
    }

    #[tokio::test]
    async fn a_kernel_denial_or_a_deny_rule_is_never_asked_about() {
        // outside the grant: the kernel denies before any rule is consulted
        let outside = r#"[[{ call = { tool = "read_file", input = { path = "/etc/passwd" } } }, { say = "done" }]]"#;
        let (asked, r) = run(outside, ASK_READS, AskAnswer::AllowOnce).await;
        assert!(asked.is_empty(), "{asked:?}");
        assert_eq!(r[0].0, ToolStatus::Failed);
        assert!(r[0].1.contains("outside this tool's grant"), "{}", r[0].1);
        // deny beats ask
        let inside = r#"[[{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "done" }]]"#;
        let rules = format!("{ASK_READS}[[permissions.deny_rules]]\ntool = \"read_file\"\n");
        let (asked, r) = run(inside, &rules, AskAnswer::AllowOnce).await;
        assert!(asked.is_empty(), "{asked:?}");
        assert!(r[0].1.contains("deny rule"), "{}", r[0].1);
    }

    #[tokio::test]
    async fn an_always_answer_is_remembered_for_that_call_only() {
        let store_dir = tempfile::tempdir().unwrap();
        let store = Arc::new(ApprovalStore::open(store_dir.path()).unwrap());
        let work = tempfile::tempdir().unwrap();
        let a = r#"{ call = { tool = "read_file", input = { path = "a.txt" } } }"#;
        let b = r#"{ call = { tool = "read_file", input = { path = "b.txt" } } }"#;
        // a is asked about and remembered, so the second a is not asked about; b is another call
        let script = format!("[[{a}, {a}, {b}, {{ say = \"done\" }}]]");
        let (asked, r) = run_with(
            &script,
            ASK_READS,
            AskAnswer::AllowAlways,
            Some(store.clone()),
            work.path(),
        )
        .await;
        let paths: Vec<String> = asked
            .iter()
            .map(|q| q.call.raw_input["path"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(paths, ["a.txt", "b.txt"]);
        assert!(asked.iter().all(|q| q.rememberable));
        assert!(r.iter().all(|(s, _)| *s == ToolStatus::Completed), "{r:?}");
        let kept = ApprovalStore::open(store_dir.path()).unwrap().entries();
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(kept.iter().all(|k| k.approval.tool == "read_file"));

        // a later run with the same store: neither is asked about, even by an asker that would refuse
        let script = format!("[[{a}, {b}, {{ say = \"done\" }}]]");
        let (asked, r) = run_with(
            &script,
            ASK_READS,
            AskAnswer::Reject("no".into()),
            Some(store.clone()),
            work.path(),
        )
        .await;
        assert!(asked.is_empty(), "{asked:?}");
        assert!(r.iter().all(|(s, _)| *s == ToolStatus::Completed), "{r:?}");

        // a remembered answer never overrides a deny rule
        let rules = format!("{ASK_READS}[[permissions.deny_rules]]\ntool = \"read_file\"\n");
        let script = format!("[[{a}, {{ say = \"done\" }}]]");
        let (asked, r) = run_with(
            &script,
            &rules,
            AskAnswer::AllowAlways,
            Some(store.clone()),
            work.path(),
        )
        .await;
        assert!(asked.is_empty());
        assert!(r[0].1.contains("deny rule"), "{}", r[0].1);

        // the doom-loop guard's ask is about this run: "always" is not offered and nothing is remembered
        let script = format!("[[{a}, {a}, {a}, {{ say = \"done\" }}]]");
        let (asked, _) = run_with(
            &script,
            ASK_READS,
            AskAnswer::AllowAlways,
            Some(store.clone()),
            work.path(),
        )
        .await;
        assert_eq!(asked.len(), 1);
        assert!(!asked[0].rememberable && asked[0].reason.contains("appears stuck"));
        assert_eq!(
            ApprovalStore::open(store_dir.path())
                .unwrap()
                .entries()
                .len(),
            2
        );
    }

    #[tokio::test]
    async fn the_doom_loop_guard_asks_too() {
        let call = r#"{ call = { tool = "read_file", input = { path = "a.txt" } } }"#;
        let script = format!("[[{call}, {call}, {call}, {{ say = \"done\" }}]]");
        let (asked, r) = run(&script, "", AskAnswer::AllowOnce).await;
        assert_eq!(asked.len(), 1, "only the repeat is asked about");
        assert!(
            asked[0].reason.contains("appears stuck"),
            "{}",
            asked[0].reason
        );
        assert!(r.iter().all(|(s, _)| *s == ToolStatus::Completed), "{r:?}");
    }
}
