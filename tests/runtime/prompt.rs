//! `loom prompt` with the scripted harness.

use loom_tests::Scratch;

use super::{label, prompt_stdin, read_until, results, sandbox_available, spawn, updates};

const GRANTS: &str = r#"
[session]
provider = "in-memory"

[capabilities]
bash = { commands = "*", paths = ["./"] }
read_file = { paths = ["./"] }

[tools]
bash = "builtin"
read_file = "builtin"
"#;

fn manifest(script: &str) -> String {
    format!(
        "[agent]\nname = \"e2e\"\n\n[harness]\nprovider = \"test\"\nscript = {script}\n{GRANTS}"
    )
}

#[test]
fn bash_is_sandboxed_and_tools_run_after_their_message_ends() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { say = "working" },
  { call = { tool = "bash", input = { command = "echo hello > inside.txt && cat inside.txt" } } },
  { call = { tool = "bash", input = { command = "echo bad > /etc/loom-e2e-outside" } } },
  { call = { tool = "read_file", input = { path = "inside.txt" } } },
  { call = { tool = "read_file", input = { path = "/etc/passwd" } } },
  { say = "all done" },
]]"#,
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let ups = updates(&run);
    // the first line says which sandbox tier confines the commands; the session's updates follow
    assert!(ups[0]["sandbox"]["tier"].is_string(), "{}", ups[0]);
    let labels: Vec<String> = ups[1..]
        .iter()
        .map(label)
        .filter(|l| l != "usage_update")
        .collect();
    // every tool_call comes right after the assistant message_end of the message that made it
    for (i, l) in labels.iter().enumerate() {
        if l == "tool_call" {
            assert_eq!(labels[i - 1], "frame:message_end:assistant", "{labels:#?}");
        }
    }
    assert_eq!(
        labels.first().map(String::as_str),
        Some("frame:turn_start:")
    );
    assert_eq!(labels.last().map(String::as_str), Some("frame:turn_end:"));
    assert_eq!(labels.iter().filter(|l| *l == "tool_call").count(), 4);
    let r = results(&ups);
    assert_eq!(
        r[0],
        ("completed".to_string(), "hello\n".to_string()),
        "{r:#?}"
    );
    assert_eq!(
        r[1].0, "failed",
        "writing outside the workspace must fail: {r:#?}"
    );
    assert!(r[1].1.contains("[exit code"), "{r:#?}");
    assert_eq!(r[2], ("completed".to_string(), "hello\n".to_string()));
    assert_eq!(r[3].0, "failed");
    assert!(r[3].1.contains("outside this tool's grant"), "{r:#?}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("inside.txt")).unwrap(),
        "hello\n"
    );
    assert!(!std::path::Path::new("/etc/loom-e2e-outside").exists());
    let end = ups.last().unwrap();
    assert_eq!(end["stopReason"], "end_turn");
}

#[test]
fn text_format_prints_the_final_message_and_reads_stdin() {
    let s = Scratch::new();
    s.write("agent.toml", "[agent]\nname = \"echo\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n");
    s.loom(&["prompt", "agent.toml", "hello there"])
        .expect_code(0)
        .stdout_has("hello there\n");
    let run = prompt_stdin(&s, &["prompt", "agent.toml"], "from stdin");
    run.expect_code(0).stdout_has("from stdin");
    let empty = prompt_stdin(&s, &["prompt", "agent.toml"], "  \n");
    empty.expect_code(2).stderr_has("the prompt is empty");
}

#[test]
fn unknown_and_malformed_calls_are_fed_back() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[{ call = { tool = "spawn_subagent", input = {} } }, { call = { tool = "read_file", raw = "{oops" } }, { say = "ok" }]]"#,
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert!(
        r[0].0 == "failed" && r[0].1.contains("no tool named \"spawn_subagent\""),
        "{r:#?}"
    );
    assert!(
        r[1].0 == "failed" && r[1].1.contains("not valid JSON"),
        "{r:#?}"
    );
}

#[test]
fn boot_refuses_what_it_does_not_implement_or_cannot_use_by_name() {
    let s = Scratch::new();
    for (text, want) in [
        (
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"small-model-of-parent\"\n",
            "works only in a sub-agent's manifest",
        ),
        (
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n[capabilities]\nweb_search = \"*\"\n[tools]\nweb_search = \"builtin\"\n",
            "tools.web_search: web_search needs the secret BRAVE_SEARCH_API_KEY",
        ),
        (
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n[capabilities]\ndocs = \"*\"\n[tools]\ndocs = { provider = \"builtin\", tool = \"context7_query_docs\" }\n",
            "tools.docs: context7_query_docs needs the secret CONTEXT7_API_KEY",
        ),
        ("[agent]\nname = \"a\"\n", "no [harness]"),
        (
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n[capabilities]\nweb_search = \"*\"\n[tools]\nweb_search = \"anthropic\"\n",
            "are Anthropic server tools, but the harness is \"test\"",
        ),
        (
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n[capabilities]\nweb_fetch = [{ max_uses = 1 }, { max_uses = 2 }]\n[tools]\nweb_fetch = \"anthropic\"\n",
            "tools.web_fetch: web_fetch runs at the provider with one set of limits",
        ),
        (
            "[agent]\nname = \"a\"\nsecrets = [\"LOOM_E2E_MISSING_KEY\"]\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n",
            "LOOM_E2E_MISSING_KEY not set",
        ),
    ] {
        s.write("agent.toml", text);
        s.loom(&["prompt", "agent.toml", "hi"]).expect_code(1).stderr_has(want);
    }
}

#[test]
fn ctrl_c_cancels_the_turn_and_exits_130() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(r#"[[{ call = { tool = "bash", input = { command = "echo started; sleep 60" } } }, { say = "never" }]]"#),
    );
    let (mut child, mut out) = spawn(&s, &["prompt", "agent.toml", "go", "--format", "jsonl"]);
    read_until(&mut out, |l| l.contains("\"in_progress\""));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let rest = read_until(&mut out, |l| l.contains("turn_end"));
    assert!(rest.last().unwrap().contains("\"cancelled\""), "{rest:#?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("\"failed\"") && l.contains("interrupted")),
        "{rest:#?}"
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
}

/// Issue 24 item 5: an engine stopping the job (SIGTERM) cancels the turn like Ctrl-C: exit 130, and the `file`
/// session holds the prompt and the cancelled call, flushed before loom exits.
#[test]
fn sigterm_cancels_the_turn_exits_130_and_the_session_is_flushed() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(r#"[[{ call = { tool = "bash", input = { command = "echo started; sleep 60" } } }, { say = "never" }]]"#)
            .replace("provider = \"in-memory\"", "provider = \"file\"\npath = \"session.jsonl\""),
    );
    let (mut child, mut out) = spawn(
        &s,
        &["prompt", "agent.toml", "stop me", "--format", "jsonl"],
    );
    read_until(&mut out, |l| l.contains("\"in_progress\""));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let rest = read_until(&mut out, |l| l.contains("turn_end"));
    assert!(rest.last().unwrap().contains("\"cancelled\""), "{rest:#?}");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert!(
        log.contains("stop me"),
        "the prompt was not flushed:\n{log}"
    );
    assert!(
        log.contains("echo started; sleep 60"),
        "the call was not flushed:\n{log}"
    );
}

#[test]
fn a_rowed_command_keeps_its_own_grant_inside_a_pipeline() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(outside.join("f.txt"), "rowed data\n").unwrap();
    let o = outside.display();
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "broker"

[harness]
provider = "test"
script = [[
  {{ call = {{ tool = "bash", input = {{ command = "cat {o}/f.txt | tr a-z A-Z" }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "cat", args = ["f.txt"], cwd = "{o}" }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "head -c 100 {o}/f.txt" }} }} }},
  {{ say = "done" }},
]]

[session]
provider = "in-memory"

[capabilities]
bash = [
  {{ commands = "*", paths = ["./"] }},
  {{ commands = ["cat"], read_paths = ["{o}"] }},
]

[tools]
bash = "builtin"
"#
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    // through the shim and the broker, under cat's own row
    assert_eq!(
        r[0],
        ("completed".to_string(), "ROWED DATA\n".to_string()),
        "{r:#?}\n{}",
        run.stderr()
    );
    // argv mode: a direct exec under cat's row
    assert_eq!(
        r[1],
        ("completed".to_string(), "rowed data\n".to_string()),
        "{r:#?}"
    );
    // the general row cannot see the directory
    assert_eq!(r[2].0, "failed", "{r:#?}");
    assert!(!r[2].1.contains("rowed data"), "{r:#?}");
}

#[test]
fn trace_and_preamble() {
    let s = Scratch::new();
    s.write("note.txt", "a note\n");
    s.write(
        "agent.toml",
        &manifest(r#"[[{ think = "hm" }, { call = { tool = "read_file", input = { path = "note.txt" } } }, { say = "read it" }]]"#)
            .replace("[agent]\nname = \"e2e\"\n", "[agent]\nname = \"e2e\"\nsystem_prompt = \"Be brief.\"\n"),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "trace"]);
    run.expect_code(0)
        .stdout_has("user: go\n")
        .stdout_has("thinking: hm\n")
        .stdout_has("read_file {\"path\":\"note.txt\"}\n")
        .stdout_has("ok] a note\n")
        .stdout_has("agent: read it\n[stop] end_turn\n");
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "go",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    run.expect_code(0);
    let first = &updates(&run)[0]["preamble"];
    // the environment block opens the system prompt, then the agent's own prompt
    let system = first["systemPrompt"].as_array().unwrap();
    assert_eq!(system.len(), 2, "{system:?}");
    let env = system[0].as_str().unwrap();
    assert!(
        env.starts_with("# Environment\n\nWorking directory: ")
            && env.contains("\nPlatform: linux ")
            && env.contains("\nGit: not a git repository"),
        "{env}"
    );
    assert_eq!(system[1], "Be brief.");
    assert_eq!(first["events"][0]["content"]["text"], "go");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["bash", "read_file"]);
    s.loom(&["prompt", "agent.toml", "go", "--emit-preamble"])
        .expect_code(2)
        .stderr_has("needs --format jsonl");
}

#[test]
fn the_default_tools_write_edit_and_read_under_the_default_ceiling() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        r#"[agent]
name = "defaults"

[harness]
provider = "test"
script = [[
  { call = { tool = "write_file", input = { path = "notes/a.md", content = "one two three\n", create_dirs = true } } },
  { call = { tool = "edit_file", input = { path = "notes/a.md", edits = [{ old_text = "one", new_text = "1" }, { old_text = "three", new_text = "3" }] } } },
  { call = { tool = "edit_file", input = { path = "notes/a.md", edits = [{ old_text = "1 two", new_text = "x" }, { old_text = "two 3", new_text = "y" }] } } },
  { call = { tool = "read_file", input = { path = "notes/a.md" } } },
  { call = { tool = "write_file", input = { path = "../escape.txt", content = "x" } } },
  { say = "done" },
]]

[session]
provider = "in-memory"
"#,
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let ups = updates(&run);
    let r = results(&ups);
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert_eq!(r[1].0, "completed", "{r:#?}");
    assert!(r[2].0 == "failed" && r[2].1.contains("overlap"), "{r:#?}");
    assert_eq!(r[3], ("completed".to_string(), "1 two 3\n".to_string()));
    assert!(
        r[4].0 == "failed" && r[4].1.contains("outside this tool's grant"),
        "{r:#?}"
    );
    assert!(!s.path().parent().unwrap().join("escape.txt").exists());
    // the edit carries an ACP diff for IDE clients
    let diff = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "call_0_1")
        .unwrap();
    assert_eq!(diff["content"][1]["type"], "diff");
    assert_eq!(diff["content"][1]["oldText"], "one two three\n");
    assert_eq!(diff["content"][1]["newText"], "1 two 3\n");
}

#[test]
fn plan_mode_offers_and_runs_only_tools_that_change_nothing() {
    let s = Scratch::new();
    s.write("a.txt", "alpha");
    s.write(
        "agent.toml",
        r#"[agent]
name = "planner"

[harness]
provider = "test"
script = [[
  { call = { tool = "write_file", input = { path = "b.txt", content = "x" } } },
  { call = { tool = "bash", input = { command = "touch c.txt" } } },
  { call = { tool = "read_file", input = { path = "a.txt" } } },
  { say = "planned" },
]]

[session]
provider = "in-memory"
"#,
    );
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "plan it",
        "--plan",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    run.expect_code(0);
    let ups = updates(&run);
    let tools: Vec<&str> = ups[0]["preamble"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // the default tools are bash, read_file, write_file and edit_file
    assert_eq!(
        tools,
        ["read_file"],
        "the model is not offered tools that change anything"
    );
    // a call of a withheld tool is refused at execution too, and nothing changed on disk
    let r = results(&ups);
    assert_eq!(r.len(), 3, "{r:?}");
    for (status, text) in &r[..2] {
        assert_eq!(status, "failed");
        assert!(text.contains("refused in plan mode"), "{text}");
    }
    assert_eq!(r[2], ("completed".to_string(), "alpha".to_string()));
    assert!(!s.path().join("b.txt").exists() && !s.path().join("c.txt").exists());
    // without --plan the same turn writes
    s.loom(&["prompt", "agent.toml", "do it"]).expect_code(0);
    assert!(s.path().join("b.txt").exists());
}

/// examples/minimal-agent as shipped, with only its `[harness]` swapped for the scripted one: its four tools work
/// inside the working directory and its grants stop them outside it.
#[test]
fn the_minimal_agent_example_runs_its_tools_inside_the_working_directory() {
    if !sandbox_available() {
        return;
    }
    let example = loom_tests::workspace_root().join("examples/minimal-agent/agent.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let scripted = text.replace(
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"",
        r#"provider = "test"
script = [[
  { call = { tool = "write_file", input = { path = "todo.md", content = "- milk\n" } } },
  { call = { tool = "edit_file", input = { path = "todo.md", edits = [{ old_text = "milk", new_text = "bread" }] } } },
  { call = { tool = "bash", input = { command = "wc -l todo.md && cat todo.md" } } },
  { call = { tool = "read_file", input = { path = "todo.md" } } },
  { call = { tool = "bash", input = { command = "cat OUTSIDE > leaked.txt" } } },
  { call = { tool = "read_file", input = { path = "/etc/hostname" } } },
  { say = "done" },
]]"#,
    );
    assert_ne!(
        scripted, text,
        "the example's [harness] changed; update this test"
    );
    let outside = Scratch::new();
    let secret = outside.write("secret.txt", "not for the agent\n");
    let scripted = scripted.replace("OUTSIDE", secret.to_str().unwrap());
    let s = Scratch::new();
    s.write("agent.toml", &scripted);
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 6, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert_eq!(r[1].0, "completed", "{r:#?}");
    assert_eq!(
        r[2],
        ("completed".to_string(), "1 todo.md\n- bread\n".to_string())
    );
    assert_eq!(r[3], ("completed".to_string(), "- bread\n".to_string()));
    assert_eq!(r[4].0, "failed", "{r:#?}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("leaked.txt")).unwrap_or_default(),
        "",
        "nothing outside the working directory may be read"
    );
    assert!(
        r[5].0 == "failed" && r[5].1.contains("outside this tool's grant"),
        "{r:#?}"
    );
}

/// Issue 24 item 1: the tier is chosen by trial, the same way `loom doctor` checks it, and `loom prompt --format
/// jsonl` says which and what it enforced; `LOOM_SANDBOX_DISABLE` removes a tier (so B is tried and chosen), `--tier`
/// names one with no fallback (a disabled one refuses the command, nothing runs), and `--require-tier` exits 69 when
/// its tier's trial fails.
#[test]
fn the_tier_is_chosen_by_trial_and_reported() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(r#"[[{ call = { tool = "bash", input = { command = "echo ran > ran.txt" } } }, { say = "ok" }]]"#),
    );
    let sandbox_line = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["prompt", "agent.toml", "go", "--format", "jsonl"];
        args.extend_from_slice(extra);
        let run = s.loom_env(&args, env);
        let first = updates(&run).into_iter().next().unwrap();
        (run, first["sandbox"].clone())
    };
    let (run, line) = sandbox_line(&[], &[]);
    run.expect_code(0);
    assert_eq!(line["tier"], "A", "{line}");
    assert!(
        line["enforced"].as_str().unwrap().contains("landlock=full"),
        "{line}"
    );
    let (run, line) = sandbox_line(&[("LOOM_SANDBOX_DISABLE", "a")], &[]);
    run.expect_code(0);
    assert_eq!(line["tier"], "B", "{line}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("ran.txt")).unwrap(),
        "ran\n"
    );
    std::fs::remove_file(s.path().join("ran.txt")).unwrap();
    // a named tier that cannot run: the command is refused, not run under another tier
    let (run, _) = sandbox_line(&[("LOOM_SANDBOX_DISABLE", "a")], &["--tier", "a"]);
    let ups = updates(&run);
    let res = results(&ups);
    assert_eq!(res.len(), 1, "{}", run.stdout());
    assert_eq!(res[0].0, "failed");
    assert!(res[0].1.contains("sandbox tier A"), "{res:?}");
    assert!(
        !s.path().join("ran.txt").exists(),
        "the command ran under another tier"
    );
    // --require-tier checks first and exits 69
    s.loom_env(
        &["prompt", "--require-tier", "a", "agent.toml", "go"],
        &[("LOOM_SANDBOX_DISABLE", "a")],
    )
    .expect_code(69)
    .stderr_has("--require-tier: sandbox tier A");
    assert!(!s.path().join("ran.txt").exists());
    s.loom(&["prompt", "--require-tier", "b", "agent.toml", "go"])
        .expect_code(0);
}
