//! The working record through `loom prompt` with the scripted harness: `todo_write` / `task` / `note` / `todo_read`
//! in plan mode (bookkeeping runs, a write does not), invalid checklists, task cycles and dependency order refused
//! with the record unchanged, the plan published as `plan` updates, the record kept across processes of a resumable
//! session and through a compaction, and a record whose session log is gone set aside.

use loom_tests::Scratch;

use super::{results, updates};

const TOOLS: [&str; 4] = ["todo_read", "todo_write", "task", "note"];

/// An agent `recorder` whose one turn makes `calls` (TOML inline call tables), with the record tools and
/// `write_file`, and the session `session` (TOML, with its `[session]` header).
fn manifest(calls: &[&str], session: &str) -> String {
    let steps: String = calls
        .iter()
        .map(|c| format!("  {{ call = {c} }},\n"))
        .collect();
    let tools: String = TOOLS
        .iter()
        .map(|t| format!("{t} = \"builtin\"\n"))
        .collect();
    let caps: String = TOOLS.iter().map(|t| format!("{t} = \"*\"\n")).collect();
    format!(
        "[agent]\nname = \"recorder\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n{steps}  {{ say = \"done\" }},\n]]\n\n\
         {session}\n[tools]\n{tools}write_file = \"builtin\"\n\n[capabilities]\n{caps}write_file = {{ paths = [\"./\"] }}\n"
    )
}

const IN_MEMORY: &str = "[session]\nprovider = \"in-memory\"\n";

#[test]
fn the_record_is_checked_kept_apart_from_the_workspace_and_published_as_the_plan() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            &[
                r#"{ tool = "todo_write", input = { todos = [{ content = "read the code", status = "completed" }, { content = "fix the bug", status = "in_progress" }, { content = "run the tests", status = "pending" }] } }"#,
                r#"{ tool = "todo_write", input = { todos = [{ content = "a", status = "in_progress" }, { content = "b", status = "in_progress" }] } }"#,
                r#"{ tool = "task", input = { action = "create", title = "design" } }"#,
                r#"{ tool = "task", input = { action = "create", title = "build", blocked_by = [1] } }"#,
                r#"{ tool = "task", input = { action = "update", id = 1, blocked_by = [2] } }"#,
                r#"{ tool = "task", input = { action = "update", id = 2, status = "in_progress" } }"#,
                r#"{ tool = "task", input = { action = "update", id = 1, status = "completed" } }"#,
                r#"{ tool = "task", input = { action = "update", id = 2, status = "in_progress" } }"#,
                r#"{ tool = "note", input = { text = "the parser drops the last line", kind = "finding" } }"#,
                r#"{ tool = "note", input = { text = "fix the parser", kind = "goal" } }"#,
                r#"{ tool = "write_file", input = { path = "out.txt", content = "x" } }"#,
                r#"{ tool = "todo_read", input = {} }"#,
            ],
            IN_MEMORY,
        ),
    );
    // the system prompt says how to keep the record, naming the agent's tools
    let shown = s.loom(&[
        "prompt",
        "agent.toml",
        "go",
        "--format",
        "jsonl",
        "--emit-preamble",
        "--plan",
    ]);
    shown.expect_code(0);
    let ups = updates(&shown);
    let preamble = ups[0]["preamble"]["systemPrompt"].to_string();
    assert!(
        preamble.contains("# Working record")
            && preamble.contains("call todo_read, then todo_write"),
        "{preamble}"
    );
    let r = results(&ups);
    assert_eq!(r.len(), 12, "{r:#?}");
    let ok = |i: usize| assert_eq!(r[i].0, "completed", "{i}: {r:#?}");
    let refused = |i: usize, why: &str| {
        assert_eq!(r[i].0, "failed", "{i}: {r:#?}");
        assert!(r[i].1.contains(why), "{i}: {r:#?}");
        assert!(r[i].1.contains("the record is unchanged"), "{i}: {r:#?}");
    };
    ok(0);
    refused(1, "at most one item is in_progress");
    ok(2);
    ok(3);
    refused(4, "dependency cycle");
    refused(5, "task 2 cannot be in_progress before task 1 is completed");
    ok(6);
    ok(7);
    ok(8);
    ok(9);
    // plan mode: the bookkeeping ran, the write did not
    assert_eq!(r[10].0, "failed", "{r:#?}");
    assert!(r[10].1.contains("plan mode"), "{r:#?}");
    assert!(!s.path().join("out.txt").exists());
    assert_eq!(
        r[11].1,
        "Goal: fix the parser\n\nChecklist:\n1. [x] read the code\n2. [~] fix the bug\n3. [ ] run the tests\n\n\
         Tasks:\n[x] task 1: design\n[~] task 2: build (after 1)\n\nNotes:\n- finding: the parser drops the last line"
    );
    // each change was published as the whole plan; refusals published nothing
    let plans: Vec<&serde_json::Value> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 7, "{plans:#?}");
    let last = &plans[plans.len() - 1]["entries"];
    assert_eq!(last[1]["content"], "fix the bug");
    assert_eq!(last[1]["status"], "in_progress");
    assert_eq!(last[4]["content"], "task 2: build");
    assert_eq!(last[4]["priority"], "medium");
}

/// A resumable session (a `file` layer) keeps the record in the agent's storage: the next process reads it, a
/// compaction keeps it in the summary, and once the session log is gone the old record is set aside.
#[test]
fn the_record_outlives_the_process_and_the_compaction_of_a_resumable_session() {
    let session = "[session]\nlayers = [\"compacting\", \"file\"]\n\n[session.compacting]\nthreshold = 6\nkeep = 2\n\
                   persist = true\n\n[session.file]\npath = \"session.jsonl\"\n";
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            &[
                r#"{ tool = "todo_write", input = { todos = [{ content = "keep this", status = "in_progress" }] } }"#,
                r#"{ tool = "note", input = { text = "noted in the first run", kind = "decision" } }"#,
            ],
            session,
        ),
    );
    s.loom(&["prompt", "agent.toml", "first", "--format", "jsonl"])
        .expect_code(0);
    let stored = s.path().join(".loom-data/agents/recorder/record.json");
    let text = std::fs::read_to_string(&stored).unwrap();
    assert!(text.contains("keep this"), "{text}");
    // a second process: todo_read shows what the first wrote; enough calls follow for a compaction
    let mut calls = vec![r#"{ tool = "todo_read", input = {} }"#];
    calls.extend([r#"{ tool = "task", input = { action = "list" } }"#; 6]);
    s.write("agent.toml", &manifest(&calls, session));
    let run = s.loom(&["prompt", "agent.toml", "second", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert!(
        r[0].1.contains("1. [~] keep this") && r[0].1.contains("decision: noted in the first run"),
        "{r:#?}"
    );
    // what the next request would see: the compaction's summary, carrying the record
    let shown = s.loom(&[
        "prompt",
        "agent.toml",
        "third",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    shown.expect_code(0);
    let events = updates(&shown)[0]["preamble"]["events"].clone();
    let first = events[0]["content"]["text"].as_str().unwrap_or_default();
    assert!(
        events[0]["messageId"]
            .as_str()
            .unwrap_or_default()
            .starts_with("loom-compaction-"),
        "{events:#}"
    );
    assert!(
        first.contains("<working-record") && first.contains("1. [~] keep this"),
        "{first}"
    );
    // the log is gone: its record is set aside, and the new session starts empty
    std::fs::remove_file(s.path().join("session.jsonl")).unwrap();
    s.write(
        "agent.toml",
        &manifest(&[r#"{ tool = "todo_read", input = {} }"#], session),
    );
    let fresh = s.loom(&["prompt", "agent.toml", "anew", "--format", "jsonl"]);
    fresh.expect_code(0);
    fresh.stderr_has("was set aside as");
    let r = results(&updates(&fresh));
    assert_eq!(r[0].1, "Checklist:\n(the checklist is empty)", "{r:#?}");
    assert!(s
        .path()
        .join(".loom-data/agents/recorder/record.prev.json")
        .exists());
}

#[test]
fn a_damaged_record_stops_boot_and_names_the_file() {
    let session = "[session]\nlayers = [\"file\"]\n\n[session.file]\npath = \"session.jsonl\"\n";
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(&[r#"{ tool = "todo_read", input = {} }"#], session),
    );
    s.loom(&["prompt", "agent.toml", "first"]).expect_code(0);
    let stored = s.path().join(".loom-data/agents/recorder/record.json");
    s.write(".loom-data/agents/recorder/record.json", "{ not json");
    let run = s.loom(&["prompt", "agent.toml", "again"]);
    assert_ne!(run.code(), 0);
    run.stderr_has(&format!("{}: not a working record", stored.display()));
    assert_eq!(std::fs::read_to_string(&stored).unwrap(), "{ not json");
}
