use std::path::Path;
use std::sync::Arc;

use loom_local::testing::Grammar;
use loom_local::{JobEvent, Respond, ToolFormat};
use serde_json::json;

use super::config::DEFAULT_MAX_TOKENS;
use super::*;
use crate::model::{ContentBlock, Message, ModelEvent, ModelRequest, Role, StopReason, ToolSpec};
use loom_tools::{builtin_tool, SandboxEnv, ToolEnv, IMPLEMENTED};

fn table(text: &str) -> toml::Table {
    toml::from_str(text).unwrap()
}

#[test]
fn config_defaults_known_models_paths_and_bad_values() {
    let c = LocalConfig::parse(&table(""), Path::new("/m")).unwrap();
    assert!(matches!(c.model, ModelChoice::Known(k) if k.name == "smollm2-135m"));
    assert_eq!(
        (c.context, c.max_tokens),
        (DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS)
    );
    assert!(c.threads >= 1);
    let c = LocalConfig::parse(
        &table("model = \"models/x.gguf\"\nthreads = 2"),
        Path::new("/m"),
    )
    .unwrap();
    assert_eq!(c.model, ModelChoice::Path("/m/models/x.gguf".into()));
    assert_eq!(c.threads, 2);
    let c = LocalConfig::parse(&table("model = \"auto\""), Path::new("/m")).unwrap();
    assert!(
        matches!(c.model, ModelChoice::Auto { recommended, fallback }
        if recommended.name == "qwen2.5-coder-1.5b" && fallback.name == "smollm2-135m")
    );
    for (bad, says) in [
        ("model = \"gpt-9\"", "neither a known model"),
        ("context = 100000000", "context must be"),
        ("context = 256\nmax_tokens = 300", "smaller than context"),
        ("temperature = 9.0", "temperature must be"),
        ("seed = -1", "seed must be"),
        ("stream = true", "unknown key \"stream\""),
    ] {
        let e = LocalConfig::parse(&table(bad), Path::new("/m"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

fn builtin_specs() -> Vec<ToolSpec> {
    let dir = tempfile::tempdir().unwrap();
    let mut specs: Vec<ToolSpec> = IMPLEMENTED
        .iter()
        // built by the runtime (spawn_subagent, tool_search) or with a key (web_search, the Context7 tools, below)
        .filter(|n| !loom_kernel::DELEGATING_TOOLS.contains(n))
        .filter(|n| {
            !matches!(
                **n,
                "web_search"
                    | "tool_search"
                    | "context7_search"
                    | "context7_resolve_library"
                    | "context7_query_docs"
            )
        })
        .map(|name| {
            let env = ToolEnv {
                instance: (*name).to_string(),
                grant: loom_kernel::Grant::Unrestricted,
                ctx: loom_kernel::PathCtx::new(dir.path().to_string_lossy().into_owned(), None),
                cwd: dir.path().to_path_buf(),
                authority: Default::default(),
                undo: Default::default(),
                record: Default::default(),
                processes: Default::default(),
                seen: Default::default(),
            };
            let tool: Arc<dyn loom_tools::Tool> =
                builtin_tool(name, env, &SandboxEnv::default()).unwrap();
            tool.spec()
        })
        .collect();
    let env = ToolEnv {
        instance: "web_search".into(),
        grant: loom_kernel::Grant::Unrestricted,
        ctx: loom_kernel::PathCtx::new("/".to_string(), None),
        cwd: dir.path().to_path_buf(),
        authority: Default::default(),
        undo: Default::default(),
        record: Default::default(),
        processes: Default::default(),
        seen: Default::default(),
    };
    let web =
        loom_tools::WebSearchTool::new(env, loom_protocol::Secret::new("k"), "http://127.0.0.1:9")
            .unwrap();
    specs.push(loom_tools::Tool::spec(&web));
    for name in [
        "context7_search",
        "context7_resolve_library",
        "context7_query_docs",
    ] {
        let env = ToolEnv {
            instance: name.into(),
            grant: loom_kernel::Grant::Unrestricted,
            ctx: loom_kernel::PathCtx::new("/".to_string(), None),
            cwd: dir.path().to_path_buf(),
            authority: Default::default(),
            undo: Default::default(),
            record: Default::default(),
            processes: Default::default(),
            seen: Default::default(),
        };
        let op = loom_tools::Context7Op::of(name).unwrap();
        let c7 = loom_tools::Context7Tool::new(
            op,
            env,
            loom_protocol::Secret::new("k"),
            "http://127.0.0.1:9",
        )
        .unwrap();
        specs.push(loom_tools::Tool::spec(&c7));
    }
    specs
}

/// A value `prop` (a JSON schema) takes: an object or an array item is built from its required properties.
fn sample(tool: &str, prop: &serde_json::Value) -> serde_json::Value {
    // a union type (["integer", "string"]) is sampled by its first member; no type at all takes any JSON
    let ty = prop["type"].as_str().or_else(|| prop["type"][0].as_str());
    match ty {
        _ if prop["enum"].is_array() => prop["enum"][0].clone(),
        Some("string") => json!("x"),
        Some("integer") => json!(3),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(tool, &prop["items"])]),
        Some("object") => {
            let mut o = serde_json::Map::new();
            for r in prop["required"].as_array().cloned().unwrap_or_default() {
                let key = r.as_str().unwrap();
                o.insert(key.to_string(), sample(tool, &prop["properties"][key]));
            }
            serde_json::Value::Object(o)
        }
        None if prop.get("type").is_none() => json!({"any": [1, "json"]}),
        other => panic!("{tool}: add a sample for {other:?}"),
    }
}

#[test]
fn every_built_in_tool_has_a_grammar_that_takes_its_calls() {
    let specs = builtin_specs();
    // spawn_subagent's schema is built per manifest (its agents), tool_search's is the runtime's; the rest are fixed
    // the four background tools are built by the runtime (their table and profiles) like spawn_subagent and delegate
    assert_eq!(specs.len(), IMPLEMENTED.len() - 7);
    let request = ModelRequest {
        tools: specs.clone(),
        ..ModelRequest::default()
    };
    let text = grammar_for(&request, Respond::Either, ToolFormat::Loom, None)
        .unwrap()
        .0;
    let g = Grammar::parse(&text).unwrap();
    // and the lazy grammars of the models' own formats
    let tagged = Grammar::parse(
        &grammar_for(&request, Respond::Either, ToolFormat::Tagged, None)
            .unwrap()
            .0,
    )
    .unwrap();
    let llama = Grammar::parse(
        &grammar_for(&request, Respond::Either, ToolFormat::Llama3, None)
            .unwrap()
            .0,
    )
    .unwrap();
    // one valid call of each, built from the schema's required keys
    for s in &specs {
        let mut input = serde_json::Map::new();
        let required = s.input_schema["required"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for r in required {
            let key = r.as_str().unwrap();
            let v = sample(&s.name, &s.input_schema["properties"][key]);
            input.insert(key.to_string(), v);
        }
        let input = serde_json::Value::Object(input);
        for (f, g) in [
            (ToolFormat::Loom, &g),
            (ToolFormat::Tagged, &tagged),
            (ToolFormat::Llama3, &llama),
        ] {
            let call = f.call_text(&s.name, &input);
            assert!(g.accepts(&call), "{}: {call}", s.name);
            let wrong = f.call_text(&s.name, &json!({"nope": 1}));
            assert!(!g.accepts(&wrong), "{}: {wrong}", s.name);
        }
    }
    assert!(g.accepts("Here is the answer."));
    // the last request of a turn takes no call
    let last = Grammar::parse(
        &grammar_for(&request, Respond::Answer, ToolFormat::Tagged, None)
            .unwrap()
            .0,
    )
    .unwrap();
    assert!(!last.accepts(&loom_local::call_text("bash", &json!({"command": "ls"}))));
}

#[test]
fn the_conversation_maps_onto_chat_messages() {
    let request = ModelRequest {
        system: vec!["Be brief.".into()],
        tools: builtin_specs()
            .into_iter()
            .filter(|t| t.name == "bash")
            .collect(),
        messages: vec![
            Message::user_text("list files"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Thinking {
                        text: "hmm".into(),
                        signature: None,
                    },
                    ContentBlock::ToolUse {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: json!({"command": "ls"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "c1".into(),
                    content: "a.txt".into(),
                    is_error: false,
                }],
            },
        ],
        ..ModelRequest::default()
    };
    let m = chat_messages(&request, false, ToolFormat::Loom, None, &[]);
    let roles: Vec<&str> = m.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(m[0].1.starts_with("Be brief.\n\nYou can use tools."));
    assert!(m[0].1.contains("- bash: "));
    assert_eq!(m[2].1, r#"{"tool": "bash", "input": {"command": "ls"}}"#);
    assert_eq!(m[3].1, "[bash result]\na.txt");
    let last = chat_messages(&request, true, ToolFormat::Loom, None, &[]);
    assert!(last[3]
        .1
        .ends_with("answer now, in plain text, with what you know.)"));

    // Qwen 2.5 and other ChatML models: a tools section, tags for calls and results
    let m = chat_messages(&request, false, ToolFormat::Tagged, None, &[]);
    let roles: Vec<&str> = m.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(m[0].1.starts_with("Be brief.\n\n# Tools\n"), "{}", m[0].1);
    assert!(m[0]
        .1
        .contains("<tools>\n{\"type\": \"function\", \"function\": {"));
    assert_eq!(
        m[2].1,
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
    );
    assert_eq!(m[3].1, "<tool_response>\na.txt\n</tool_response>");

    // Llama 3.x: results in an ipython turn, and the last request's note in a user turn after it
    let m = chat_messages(&request, true, ToolFormat::Llama3, None, &[]);
    let roles: Vec<&str> = m.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "ipython", "user"]);
    assert_eq!(
        m[2].1,
        r#"{"name": "bash", "parameters": {"command": "ls"}}"#
    );
    assert_eq!(m[3].1, "a.txt");
    assert!(m[4].1.starts_with("(The task: "), "{}", m[4].1);
    assert!(m[4].1.contains("\n(No more tool calls"), "{}", m[4].1);
}

/// Feeds `chunks` through the local harness's decoder as one response in loom's format; the events it sends.
fn decode(chunks: &[&str], final_only: bool) -> Vec<ModelEvent> {
    let events: Vec<JobEvent> = chunks
        .iter()
        .map(|c| JobEvent::Text((*c).to_string()))
        .collect();
    decode_events(events, final_only, ToolFormat::Loom, false)
}

/// Feeds engine events through the decoder, then `Done`; the events it sends.
fn decode_events(
    events: Vec<JobEvent>,
    final_only: bool,
    format: ToolFormat,
    hit_limit: bool,
) -> Vec<ModelEvent> {
    let (d, rx) = decoder(final_only, format);
    drive(d, rx, events, hit_limit)
}

type Events = tokio::sync::mpsc::UnboundedReceiver<Result<ModelEvent, crate::HarnessError>>;

/// A decoder for one response in `format` with `read_file` and `bash` granted, and where its events go.
fn decoder(final_only: bool, format: ToolFormat) -> (super::engine_harness::Decoder, Events) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let d = super::engine_harness::Decoder {
        tx,
        text: String::new(),
        sent: 0,
        final_only,
        prompt_tokens: 0,
        call_id: "c1".into(),
        format,
        granted: vec!["read_file".into(), "bash".into()],
        call_from: None,
        answer: None,
        avoid: None,
        repeated: Default::default(),
        discarded: 0,
    };
    (d, rx)
}

/// Feeds `events` and then `Done` through `d`; the events it sent.
fn drive(
    mut d: super::engine_harness::Decoder,
    mut rx: Events,
    events: Vec<JobEvent>,
    hit_limit: bool,
) -> Vec<ModelEvent> {
    for e in events {
        assert!(d.on(e));
    }
    d.on(JobEvent::Done {
        generated: 10,
        hit_limit,
        cancelled: false,
        millis: 1,
    });
    drop(d);
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e.unwrap());
    }
    out
}

fn texts(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn called(events: &[ModelEvent]) -> Option<(String, String)> {
    let name = events.iter().find_map(|e| match e {
        ModelEvent::ToolUseStart { name, .. } => Some(name.clone()),
        _ => None,
    })?;
    let input = events.iter().find_map(|e| match e {
        ModelEvent::ToolUseInputDelta { partial_json, .. } => Some(partial_json.clone()),
        _ => None,
    })?;
    Some((name, input))
}

#[test]
fn a_call_written_as_fenced_json_is_a_call_and_never_shown_as_the_answer() {
    let ev = decode(
        &[
            "I'll read it.\n",
            "``",
            "`json\n{\"tool\": \"read_file\", ",
            "\"input\": {\"path\": \"notes.txt\"}}\n```",
        ],
        false,
    );
    assert_eq!(texts(&ev), "I'll read it.\n");
    assert_eq!(
        called(&ev),
        Some(("read_file".into(), "{\"path\":\"notes.txt\"}".into()))
    );
    assert!(matches!(
        ev.last(),
        Some(ModelEvent::MessageEnd {
            stop_reason: StopReason::ToolUse
        })
    ));
    // an invented tool is still a call: the runtime answers it with an error the model can correct
    let ev = decode(
        &["{\"name\": \"open_file\", \"arguments\": {\"p\": 1}}"],
        false,
    );
    assert_eq!(called(&ev).map(|c| c.0), Some("open_file".into()));
    assert_eq!(texts(&ev), "");
}

#[test]
fn answers_stream_and_code_blocks_stay_answers() {
    let ev = decode(&["The first ", "line is\n", "hello"], false);
    assert_eq!(texts(&ev), "The first line is\nhello");
    assert!(called(&ev).is_none());
    // the first chunk streams before the response ends
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, ModelEvent::TextDelta(_)))
            .count(),
        3
    );
    let code = "Run this:\n```sh\nls -l\n```\nDone.";
    let ev = decode(&[code], false);
    assert_eq!(texts(&ev), code);
    assert!(called(&ev).is_none());
    // on a turn's last request a written call stays text: no call could follow
    let last = "```json\n{\"tool\": \"read_file\", \"input\": {\"path\": \"a\"}}\n```";
    let ev = decode(&[last], true);
    assert_eq!(texts(&ev), last);
    assert!(called(&ev).is_none());
    // the grammar's own call form
    let ev = decode(
        &["{\"tool\": \"read_file\", \"input\": {\"path\": \"a\"}}"],
        false,
    );
    assert_eq!(called(&ev).map(|c| c.0), Some("read_file".into()));
}

#[test]
fn a_call_opened_in_the_model_s_own_format_is_a_call_and_only_the_prose_before_it_is_shown() {
    let text = |t: &str| JobEvent::Text(t.to_string());
    let ev = decode_events(
        vec![
            text("Let me look."),
            JobEvent::Call,
            text("<tool_call>\n{\"name\": \"read_file\", "),
            text("\"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>"),
        ],
        false,
        ToolFormat::Tagged,
        false,
    );
    assert_eq!(texts(&ev), "Let me look.");
    assert_eq!(
        called(&ev),
        Some(("read_file".into(), "{\"path\":\"notes.txt\"}".into()))
    );
    assert!(matches!(
        ev.last(),
        Some(ModelEvent::MessageEnd {
            stop_reason: StopReason::ToolUse
        })
    ));
    // Llama's bare form
    let ev = decode_events(
        vec![
            JobEvent::Call,
            text("{\"name\": \"bash\", \"parameters\": {\"command\": \"ls\"}}"),
        ],
        false,
        ToolFormat::Llama3,
        false,
    );
    assert_eq!(called(&ev).map(|c| c.0), Some("bash".into()));
    assert_eq!(texts(&ev), "");
    // a call the output cap cut off is no call: the text is what there is, and the stop says why
    let ev = decode_events(
        vec![
            JobEvent::Call,
            text("<tool_call>\n{\"name\": \"read_file\", \"argu"),
        ],
        false,
        ToolFormat::Tagged,
        true,
    );
    assert!(called(&ev).is_none());
    assert!(matches!(
        ev.last(),
        Some(ModelEvent::MessageEnd {
            stop_reason: StopReason::MaxTokens
        })
    ));
    // a call in the tagged format written where no trigger watched (the fallback's free text) is found too
    let ev = decode(
        &["<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>"],
        false,
    );
    assert_eq!(called(&ev).map(|c| c.0), Some("read_file".into()));
}

#[test]
fn a_fenced_call_with_prose_after_it_is_a_call_and_the_prose_after_it_is_dropped() {
    let ev = decode(
        &[
            "To find the port, I read the file.\n",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"server.ini\"}}\n```\n",
            "This will show the port, which is 8080.",
        ],
        false,
    );
    assert_eq!(texts(&ev), "To find the port, I read the file.\n");
    assert_eq!(
        called(&ev),
        Some(("read_file".into(), "{\"path\":\"server.ini\"}".into()))
    );
    // a tool the request does not have, with prose after it: an answer, shown whole
    let example = "Like this:\n```json\n{\"name\": \"open_file\", \"arguments\": {}}\n```\nDone.";
    let ev = decode(&[example], false);
    assert!(called(&ev).is_none());
    assert_eq!(texts(&ev), example);
}

/// `tool_choice = "required"`: the answer step is described after the tools, its name is one no granted tool has,
/// an earlier answer is written back as the call that gave it, and the grammar takes a call to it only when given
/// it (not on a turn's first request).
#[test]
fn the_answer_step_is_described_named_apart_and_written_back_as_a_call() {
    let mut tools: Vec<ToolSpec> = builtin_specs()
        .into_iter()
        .filter(|t| t.name == "bash")
        .collect();
    let request = ModelRequest {
        tools: tools.clone(),
        messages: vec![
            Message::user_text("hi"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text {
                    text: "Hello.".into(),
                }],
            },
            Message::user_text("list files"),
        ],
        ..ModelRequest::default()
    };
    let step = AnswerStep::for_request(&request);
    assert_eq!(step.name, "answer");
    let m = chat_messages(&request, false, ToolFormat::Tagged, Some(&step), &[]);
    assert!(
        m[0].1
            .contains("\"name\": \"answer\", \"description\": \"Give the user your final answer"),
        "{}",
        m[0].1
    );
    assert_eq!(
        m[2],
        (
            "assistant".to_string(),
            "<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"text\": \"Hello.\"}}\n</tool_call>".to_string()
        )
    );
    // without the step (tool_choice = "auto"), the answer is plain text
    assert_eq!(
        chat_messages(&request, false, ToolFormat::Tagged, None, &[])[2].1,
        "Hello."
    );
    // a granted tool named `answer` (or `final_answer`) keeps its name; the step takes another
    let mut named = |names: &[&str]| {
        for n in names {
            let mut t = tools[0].clone();
            t.name = (*n).into();
            tools.push(t);
        }
        AnswerStep::for_request(&ModelRequest {
            tools: tools.clone(),
            ..ModelRequest::default()
        })
        .name
    };
    assert_eq!(named(&["answer"]), "final_answer");
    assert_eq!(named(&["final_answer", "answer_"]), "answer__");

    let request = ModelRequest {
        tools: builtin_specs()
            .into_iter()
            .filter(|t| t.name == "bash")
            .collect(),
        ..ModelRequest::default()
    };
    let step = AnswerStep::for_request(&request);
    let call = ToolFormat::Tagged.call_text("answer", &json!({"text": "done"}));
    let with = Grammar::parse(
        &grammar_for(&request, Respond::Call, ToolFormat::Tagged, Some(&step))
            .unwrap()
            .0,
    )
    .unwrap();
    assert!(with.accepts(&call), "{call}");
    assert!(!with.accepts("done"));
    let first = Grammar::parse(
        &grammar_for(&request, Respond::Call, ToolFormat::Tagged, None)
            .unwrap()
            .0,
    )
    .unwrap();
    assert!(!first.accepts(&call));
    assert!(first.accepts(&ToolFormat::Tagged.call_text("bash", &json!({"command": "ls"}))));
}

/// A call to the answer step ends the turn with its text as the answer; it is never a tool call. A call to a tool
/// in the same mode stays a call.
#[test]
fn a_call_to_the_answer_step_is_the_turn_s_answer() {
    let decode_required = |text: &str| {
        // a response that must be a call is one from its first character
        let (mut d, rx) = decoder(false, ToolFormat::Tagged);
        d.call_from = Some(0);
        d.answer = Some(AnswerStep::for_request(&ModelRequest::default()));
        drive(d, rx, vec![JobEvent::Text(text.into())], false)
    };
    let out =
        decode_required(&ToolFormat::Tagged.call_text("answer", &json!({"text": "It is 42."})));
    let texts: Vec<&ModelEvent> = out
        .iter()
        .filter(|e| {
            matches!(
                e,
                ModelEvent::TextDelta(_) | ModelEvent::ToolUseStart { .. }
            )
        })
        .collect();
    assert_eq!(
        texts,
        [&ModelEvent::TextDelta("It is 42.".into())],
        "{out:?}"
    );
    assert!(matches!(
        out.last(),
        Some(ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn
        })
    ));
    let out = decode_required(&ToolFormat::Tagged.call_text("bash", &json!({"command": "ls"})));
    assert!(
        out.iter()
            .any(|e| matches!(e, ModelEvent::ToolUseStart { name, .. } if name == "bash")),
        "{out:?}"
    );
    assert!(
        !out.iter().any(|e| matches!(e, ModelEvent::TextDelta(_))),
        "{out:?}"
    );
    assert!(matches!(
        out.last(),
        Some(ModelEvent::MessageEnd {
            stop_reason: StopReason::ToolUse
        })
    ));
}

/// The conversation of a call (`tool`, `input`) whose result came back, failed or not, as the request's last message.
fn after_call(calls: &[(&str, serde_json::Value)], failed: bool) -> ModelRequest {
    let uses = calls
        .iter()
        .enumerate()
        .map(|(i, (name, input))| ContentBlock::ToolUse {
            id: format!("u{i}"),
            name: name.to_string(),
            input: input.clone(),
        })
        .collect();
    let results = (0..calls.len())
        .map(|i| ContentBlock::ToolResult {
            tool_use_id: format!("u{i}"),
            content: "sh: 0: cannot open hello.sh: No such file".into(),
            is_error: failed,
        })
        .collect();
    ModelRequest {
        messages: vec![
            Message::user_text("write hello.sh and run it"),
            Message {
                role: Role::Assistant,
                content: uses,
            },
            Message {
                role: Role::User,
                content: results,
            },
        ],
        ..ModelRequest::default()
    }
}

/// With the answer step, a request after a result ends with the turn's task and what to do next — only there, so
/// the prompt before it stays as the engine cached it; not on a turn's first request, and not without the step. On
/// the last request the note says to answer now, after the task (a model told only that answered an example's
/// task).
#[test]
fn after_a_result_the_task_is_recalled_at_the_end_of_the_prompt() {
    let mut request = after_call(&[("bash", json!({"command": "sh hello.sh"}))], true);
    request.tools = builtin_specs()
        .into_iter()
        .filter(|t| t.name == "bash")
        .collect();
    let step = AnswerStep::for_request(&request);
    let m = chat_messages(&request, false, ToolFormat::Tagged, Some(&step), &[]);
    let last = m.last().map(|(_, c)| c.clone()).unwrap_or_default();
    assert!(
        last.ends_with(
            "(The task: write hello.sh and run it\nIf a step of it is not done yet, make the call that does it; \
             when every step is done, call answer with the result.)"
        ),
        "{last}"
    );
    // the result itself is still there, before it
    assert!(last.contains("cannot open hello.sh"), "{last}");
    // no step (tool_choice = "auto"): no reminder
    let plain = chat_messages(&request, false, ToolFormat::Tagged, None, &[]);
    assert!(!plain.iter().any(|(_, c)| c.contains("(The task:")));
    // the last request: the task, and the answer-now note instead of the next step
    let last_request = chat_messages(&request, true, ToolFormat::Tagged, Some(&step), &[]);
    let last = last_request
        .last()
        .map(|(_, c)| c.clone())
        .unwrap_or_default();
    assert!(
        last.ends_with("(The task: write hello.sh and run it)\n(No more tool calls are possible in this turn: answer now, in plain text, with what you know.)"),
        "{last}"
    );
    assert!(!last.contains("make the call that does it"), "{last}");
    // a turn's first request: nothing to recall
    let first = ModelRequest {
        tools: request.tools.clone(),
        messages: vec![Message::user_text("write hello.sh and run it")],
        ..ModelRequest::default()
    };
    let m = chat_messages(&first, false, ToolFormat::Tagged, Some(&step), &[]);
    assert_eq!(
        m.last().map(|(_, c)| c.as_str()),
        Some("write hello.sh and run it")
    );
    // a long task is referred to, not repeated
    let mut long = request.clone();
    long.messages[0] = Message::user_text("x".repeat(401));
    let m = chat_messages(&long, false, ToolFormat::Tagged, Some(&step), &[]);
    let last = m.last().map(|(_, c)| c.clone()).unwrap_or_default();
    assert!(last.ends_with("call answer with the result.)"), "{last}");
    assert!(last.contains("(Go on with the task above."), "{last}");
    assert!(!last.contains(&"x".repeat(401)));
    // and on the last request only the answer-now note follows it
    let m = chat_messages(&long, true, ToolFormat::Tagged, Some(&step), &[]);
    let last = m.last().map(|(_, c)| c.clone()).unwrap_or_default();
    assert!(last.ends_with("\n\n(No more tool calls are possible in this turn: answer now, in plain text, with what you know.)"), "{last}");
    assert!(!last.contains("(The task:"), "{last}");
}

/// Only the one call of the previous response, when nothing came after its result, is the call just made.
#[test]
fn the_call_just_made_is_the_previous_response_s_one_call() {
    let run = ("bash", json!({"command": "sh hello.sh"}));
    assert_eq!(
        previous_call(&after_call(std::slice::from_ref(&run), true)),
        Some(("bash".to_string(), json!({"command": "sh hello.sh"})))
    );
    // a call that worked is repeated to no more use than one that failed
    assert_eq!(
        previous_call(&after_call(std::slice::from_ref(&run), false)),
        Some(("bash".to_string(), json!({"command": "sh hello.sh"})))
    );
    // two calls in one response: which to avoid is not clear, so neither is
    let two = after_call(&[run.clone(), ("read_file", json!({"path": "a"}))], true);
    assert_eq!(previous_call(&two), None);
    // the user spoke after the failure: a new prompt, not a repeat
    let mut spoke = after_call(&[run], true);
    spoke.messages.push(Message::user_text("try again"));
    assert_eq!(previous_call(&spoke), None);
    assert_eq!(previous_call(&ModelRequest::default()), None);
}

/// A response that repeats the call to avoid sends nothing and says how many tokens it took; any other response
/// goes out as usual, its usage counting the discarded draws too.
#[test]
fn a_response_repeating_the_call_to_avoid_is_held_back_for_a_redraw() {
    let repeat = ToolFormat::Tagged.call_text("bash", &json!({"command": "sh hello.sh"}));
    let (mut d, mut rx) = decoder(false, ToolFormat::Tagged);
    d.call_from = Some(0);
    d.avoid = Some(("bash".into(), json!({"command": "sh hello.sh"})));
    let repeated = d.repeated.clone();
    assert!(d.on(JobEvent::Text(repeat.clone())));
    assert!(d.on(JobEvent::Done {
        generated: 12,
        hit_limit: false,
        cancelled: false,
        millis: 1,
    }));
    drop(d);
    assert!(rx.try_recv().is_err(), "a held-back response sends nothing");
    assert_eq!(*repeated.lock().unwrap(), Some(12));

    // another call (or the same tool with other input) goes out, with the discarded tokens in its usage
    let (mut d, rx) = decoder(false, ToolFormat::Tagged);
    d.call_from = Some(0);
    d.avoid = Some(("bash".into(), json!({"command": "sh hello.sh"})));
    d.discarded = 12;
    let repeated = d.repeated.clone();
    let other = ToolFormat::Tagged.call_text("bash", &json!({"command": "ls"}));
    let out = drive(d, rx, vec![JobEvent::Text(other)], false);
    assert_eq!(
        called(&out),
        Some(("bash".into(), "{\"command\":\"ls\"}".into()))
    );
    assert!(
        out.iter()
            .any(|e| matches!(e, ModelEvent::Usage(u) if u.output_tokens == 22)),
        "{out:?}"
    );
    assert_eq!(*repeated.lock().unwrap(), None);

    // with nothing to avoid, the repeat is a call like any other
    let (mut d, rx) = decoder(false, ToolFormat::Tagged);
    d.call_from = Some(0);
    let out = drive(d, rx, vec![JobEvent::Text(repeat)], false);
    assert_eq!(
        called(&out),
        Some(("bash".into(), "{\"command\":\"sh hello.sh\"}".into()))
    );
}

const EXAMPLES: &str = r#"
[[examples]]
task = "Count the lines of a.txt."
calls = [
  { tool = "bash", input = { command = "wc -l a.txt" }, result = "3 a.txt\n" },
]
answer = "a.txt has 3 lines."

[[examples]]
task = "Fix b.py."
calls = [
  { tool = "read_file", input = { path = "b.py" }, result = "missing", error = true },
  { tool = "write_file", input = { path = "b.py", content = "print(1)\n" }, result = "wrote 9 bytes to b.py" },
]
answer = "Done."
"#;

/// `examples`: each a task, its calls with their results and the answer; a malformed one is refused naming its key.
#[test]
fn examples_are_parsed_and_a_malformed_one_is_named() {
    let c = LocalConfig::parse(&table(EXAMPLES), Path::new("/m")).unwrap();
    assert_eq!(c.examples.len(), 2);
    assert_eq!(c.examples[0].task, "Count the lines of a.txt.");
    assert_eq!(
        c.examples[0].calls[0].input,
        json!({"command": "wc -l a.txt"})
    );
    assert!(c.examples[1].calls[0].error && !c.examples[1].calls[1].error);
    assert_eq!(c.examples[1].answer, "Done.");
    assert!(LocalConfig::parse(&table(""), Path::new("/m"))
        .unwrap()
        .examples
        .is_empty());
    for (bad, says) in [
        ("examples = \"x\"", "examples must be an array of tables"),
        ("examples = [1]", "examples[1] must be a table"),
        (
            "[[examples]]\ntask = \"t\"\nanswer = \"a\"",
            "examples[1].calls is missing",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = []\nanswer = \"a\"",
            "examples[1].calls must be a non-empty array",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = [{ tool = \"bash\", input = { command = \"ls\" }, result = \"\" }]",
            "examples[1].answer is missing",
        ),
        (
            "[[examples]]\ntask = \"\"\ncalls = [{ tool = \"bash\", input = { command = \"ls\" }, result = \"\" }]\nanswer = \"a\"",
            "examples[1].task must be a non-empty string",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = [{ tool = \"bash\", input = \"ls\", result = \"\" }]\nanswer = \"a\"",
            "examples[1].calls[1].input must be a table",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = [{ tool = \"bash\", input = {}, result = \"\", ok = true }]\nanswer = \"a\"",
            "examples[1].calls[1].ok is not a key here (the keys: tool, input, result, error)",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = [{ tool = \"bash\", input = {} }]\nanswer = \"a\"",
            "examples[1].calls[1].result is missing",
        ),
        (
            "[[examples]]\ntask = \"t\"\ncalls = [{ tool = \"bash\", input = {}, result = \"\" }]\nanswer = \"a\"\nnote = 1",
            "examples[1].note is not a key here (the keys: task, calls, answer)",
        ),
    ] {
        let e = LocalConfig::parse(&table(bad), Path::new("/m"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// The examples come before the conversation as earlier turns in the model's own format: the task, each call and
/// its result (an error marked as one), and the answer written as the call to the answer step; the turn's task is
/// still the one recalled after a result, and only there. An example calling a tool the request does not offer is
/// left out.
#[test]
fn examples_are_written_as_earlier_turns_before_the_conversation() {
    let c = LocalConfig::parse(&table(EXAMPLES), Path::new("/m")).unwrap();
    let tools: Vec<ToolSpec> = builtin_specs()
        .into_iter()
        .filter(|t| ["bash", "read_file", "write_file"].contains(&t.name.as_str()))
        .collect();
    let request = ModelRequest {
        tools: tools.clone(),
        messages: vec![
            Message::user_text("How many lines has c.txt?"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "bash".into(),
                    input: json!({"command": "wc -l c.txt"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "5 c.txt\n".into(),
                    is_error: false,
                }],
            },
        ],
        ..ModelRequest::default()
    };
    let step = AnswerStep::for_request(&request);
    let examples = example_messages(&c.examples, &request);
    assert_eq!(examples.len(), 4 + 6);
    let m = chat_messages(&request, false, ToolFormat::Tagged, Some(&step), &examples);
    let roles: Vec<&str> = m.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant", // the first example
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant", // the second
            "user",
            "assistant",
            "user", // the conversation
        ]
    );
    assert_eq!(m[1].1, "Count the lines of a.txt.");
    assert_eq!(
        m[2].1,
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"wc -l a.txt\"}}\n</tool_call>"
    );
    assert!(m[3].1.contains("3 a.txt"), "{}", m[3].1);
    // an example's result is not followed by a recall (shown there, it made the model do worse)
    assert!(!m[3].1.contains("(The task:"), "{}", m[3].1);
    assert_eq!(
        m[4].1,
        "<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"text\": \"a.txt has 3 lines.\"}}\n</tool_call>"
    );
    assert!(m[7].1.contains("missing"), "{}", m[7].1);
    // an input's keys come in the tool's schema order (path, then content), not the manifest table's sorted one
    let (path, content) = (m[8].1.find("\"path\""), m[8].1.find("\"content\""));
    assert!(
        path.is_some() && content.is_some() && path < content,
        "{}",
        m[8].1
    );
    let failed = ToolFormat::Tagged
        .result_message("read_file", "missing", true)
        .1;
    assert_eq!(m[7].1, failed);
    assert_ne!(
        failed,
        ToolFormat::Tagged
            .result_message("read_file", "missing", false)
            .1
    );
    // the recall after the conversation's result names the conversation's task, not an example's
    assert!(
        m[13].1.contains("(The task: How many lines has c.txt?"),
        "{}",
        m[13].1
    );
    assert_eq!(
        m.iter().filter(|(_, c)| c.contains("(The task:")).count(),
        1
    );
    // without write_file on offer (plan mode), the second example is left out
    let plan = ModelRequest {
        tools: tools
            .iter()
            .filter(|t| t.name != "write_file")
            .cloned()
            .collect(),
        ..request.clone()
    };
    let examples = example_messages(&c.examples, &plan);
    assert_eq!(examples.len(), 4);
    assert_eq!(examples[0], Message::user_text("Count the lines of a.txt."));
}
