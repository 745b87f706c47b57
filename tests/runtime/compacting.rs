//! The `compacting` session layer through `loom prompt`: a long scripted conversation is compacted while it runs,
//! its summary persists and is what the next run's model sees, the durable log keeps everything; a context
//! overflow from a (fake) Anthropic API compacts once and retries the request.

use loom_tests::Scratch;

use super::anthropic::{serve_status, ANSWER};
use super::{results, updates};

/// Twelve `read_file` calls in one turn, between two remarks.
fn long_script() -> String {
    let mut steps = vec![r#"{ say = "starting" }"#.to_string()];
    for i in 0..12 {
        steps.push(format!(
            r#"{{ call = {{ tool = "read_file", input = {{ path = "notes-{i}.txt" }} }} }}"#
        ));
    }
    steps.push(r#"{ say = "all read" }"#.to_string());
    format!("[[{}]]", steps.join(", "))
}

const SESSION: &str = r#"[session]
layers = ["compacting", "file"]

[session.compacting]
threshold = 12
keep = 4
persist = true

[session.file]
path = "session.jsonl"
"#;

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

#[test]
fn a_long_scripted_conversation_is_compacted_and_the_summary_outlives_the_process() {
    let s = Scratch::new();
    for i in 0..12 {
        s.write(&format!("notes-{i}.txt"), &format!("note number {i}"));
    }
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"long-talker\"\n\n[harness]\nprovider = \"test\"\nscript = {}\n\n{SESSION}\n\
             [tools]\nread_file = {{ capabilities = {{ paths = [\"./\"] }} }}\n",
            long_script()
        ),
    );
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "read all the notes",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 12, "{r:#?}");
    assert_eq!(
        r[11],
        ("completed".to_string(), "note number 11".to_string())
    );

    // compaction happened while the turn ran, and its state was saved
    let state_path = s
        .path()
        .join(".loom-data/agents/long-talker/compacting/state.json");
    let state = read_json(&state_path);
    assert_eq!(state["version"], 1);
    assert!(state["compactions"].as_u64().unwrap() >= 2, "{state}");
    let summary = state["summary"].as_str().unwrap();
    assert!(summary.starts_with("Heuristic summary of"), "{summary}");
    // the first compaction's summary was folded into the later one
    assert!(
        summary.contains("- earlier summary: Heuristic summary of"),
        "{summary}"
    );
    assert!(
        summary
            .contains("- tool read_file: {\"path\":\"notes-4.txt\"} -> completed: note number 4"),
        "{summary}"
    );

    // the durable log below keeps every event (and no usage updates)
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert_eq!(log.matches("\"sessionUpdate\":\"tool_call\"").count(), 12);
    assert!(log.contains("read all the notes") && log.contains("all read"));
    assert!(!log.contains("usage_update"), "{log}");

    // the next run starts from the summary: what its model would see is the summary, the kept events, the prompt
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "what next?",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    run.expect_code(0);
    let preamble = &updates(&run)[0]["preamble"]["events"];
    let events = preamble.as_array().unwrap();
    assert!(events.len() <= 13, "{preamble:#}");
    assert_eq!(events[0]["sessionUpdate"], "user_message_chunk");
    assert!(events[0]["messageId"]
        .as_str()
        .unwrap()
        .starts_with("loom-compaction-"));
    let first = events[0]["content"]["text"].as_str().unwrap();
    assert_eq!(
        first,
        format!(
            "[loom: the earlier part of this conversation was compacted; this is its summary]\n\n{summary}"
        )
    );
    assert_eq!(events[events.len() - 2]["content"]["text"], "all read");
    assert_eq!(events[events.len() - 1]["content"]["text"], "what next?");
    // the summarised events themselves are gone from the view (the first prompt and the first call's input live
    // on only inside the summary)
    let rest = serde_json::Value::from(events[1..].to_vec()).to_string();
    assert!(
        !rest.contains("read all the notes") && !rest.contains("notes-0.txt"),
        "{rest}"
    );
}

/// Nested guidance is shown once per session — but a compaction may summarise the result that carried it away, so
/// after one the next result touching the directory carries it again.
#[test]
fn nested_guidance_comes_back_after_a_compaction() {
    let s = Scratch::new();
    for i in 0..12 {
        s.write(&format!("src/notes-{i}.txt"), &format!("note number {i}"));
    }
    s.write("src/AGENTS.md", "Keep src tidy.\n");
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"long-talker\"\n\n[harness]\nprovider = \"test\"\nscript = {}\n\n{SESSION}\n\
             [tools]\nread_file = {{ capabilities = {{ paths = [\"./\"] }} }}\n",
            long_script().replace("notes-", "src/notes-")
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "read them", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 12, "{r:#?}");
    let carrying: Vec<usize> = (0..12)
        .filter(|i| r[*i].1.contains("<guidance file=\"src/AGENTS.md\">"))
        .collect();
    assert_eq!(carrying.first(), Some(&0), "{r:#?}");
    assert!(
        carrying.len() >= 2 && carrying.len() < 12,
        "shown again after each compaction, not with every result: {carrying:?}"
    );
}

#[test]
fn a_corrupt_state_file_stops_boot_and_names_the_file() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!("[agent]\nname = \"broken\"\n\n[harness]\nprovider = \"test\"\necho = true\n\n{SESSION}"),
    );
    let state = s.write(
        ".loom-data/agents/broken/compacting/state.json",
        "{\"version\":",
    );
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has(&format!("{}: not a compaction state file", state.display()));
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{\"version\":");
}

#[test]
fn without_a_session_table_the_default_chain_runs() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        "[agent]\nname = \"plain\"\n\n[harness]\nprovider = \"test\"\necho = true\n",
    );
    s.loom(&["prompt", "agent.toml", "hello"])
        .expect_code(0)
        .stdout_has("hello");
}

const KEY: &str = "sk-ant-compacting-e2e";

const OVERFLOW: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;

/// Three echoed turns stored in session.jsonl, then the manifest switched to the Anthropic harness at `base`.
fn three_turns_then_anthropic(s: &Scratch, base: &str) {
    let session =
        "[session]\nlayers = [\"compacting\", \"file\"]\n\n[session.compacting]\nkeep = 2\n\n\
                   [session.file]\npath = \"session.jsonl\"\n";
    s.write(
        "agent.toml",
        &format!("[agent]\nname = \"overflowing\"\n\n[harness]\nprovider = \"test\"\necho = true\n\n{session}"),
    );
    for q in ["first", "second", "third"] {
        s.loom(&["prompt", "agent.toml", q]).expect_code(0);
    }
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"overflowing\"\n\n[harness]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\n\
             apiBase = \"{base}\"\n\n{session}"
        ),
    );
}

#[test]
fn a_context_overflow_compacts_the_history_and_retries_once() {
    let (base, seen) = serve_status(vec![(400, OVERFLOW), (200, ANSWER)]);
    let s = Scratch::new();
    three_turns_then_anthropic(&s, &base);
    s.loom_env(
        &["prompt", "agent.toml", "fourth"],
        &[("ANTHROPIC_API_KEY", KEY)],
    )
    .expect_code(0)
    .stdout_has("The file says: greetings");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let messages = |i: usize| seen[i].1["messages"].as_array().unwrap().clone();
    let texts = |i: usize| -> Vec<String> {
        messages(i)
            .iter()
            .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        texts(0),
        ["first", "first", "second", "second", "third", "third", "fourth"]
    );
    // the retry: one summary of the first five events, then the last two
    let retried = texts(1);
    assert_eq!(retried.len(), 3, "{retried:?}");
    assert_eq!(
        retried[0],
        "[loom: the earlier part of this conversation was compacted; this is its summary]\n\nHeuristic summary of 5 \
         earlier events (no model was asked):\n- user: first\n- assistant: first\n- user: second\n- assistant: \
         second\n- user: third"
    );
    assert_eq!(retried[1..], ["third", "fourth"]);
    assert_eq!(messages(1)[0]["role"], "user");

    // nothing was lost from the durable history
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    for t in ["\"first\"", "\"second\"", "\"fourth\"", "greetings"] {
        assert!(log.contains(t), "{t} is missing from\n{log}");
    }
}

#[test]
fn a_second_overflow_ends_the_turn_with_a_clear_error() {
    let (base, seen) = serve_status(vec![(400, OVERFLOW), (400, OVERFLOW)]);
    let s = Scratch::new();
    three_turns_then_anthropic(&s, &base);
    let run = s.loom_env(
        &["prompt", "agent.toml", "fourth"],
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    run.expect_code(1)
        .stderr_has("the conversation no longer fits the model's context window")
        .stderr_has("(it still did not fit after compaction (compacting: compacted 7 events to 3) and one retry)");
    assert!(!run.stderr().contains(KEY));
    assert_eq!(seen.lock().unwrap().len(), 2);
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert!(
        log.contains("\"first\"") && log.contains("\"fourth\""),
        "{log}"
    );
}
