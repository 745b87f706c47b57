//! `loom explain` and `loom permissions` through the real binary: which row, rule and remembered answer decide a
//! call, and remembered answers listed and revoked.

use loom_tests::Scratch;

const MANIFEST: &str = r#"
[agent]
name = "explained"

[harness]
provider = "anthropic"

[session]
provider = "in-memory"

[tools]
bash = { provider = "builtin", tool = "bash", capabilities = [ { commands = ["git"], paths = ["./"] }, { commands = "*", paths = ["./"] } ] }
read_file = { provider = "builtin", tool = "read_file", capabilities = { paths = ["./"] } }

[[permissions.ask_rules]]
tool = "bash"
command_prefix = "git push"

[[permissions.deny_rules]]
tool = "bash"
command_prefix = "git push --force"
"#;

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write("agent.toml", MANIFEST);
    s
}

#[test]
fn explain_names_the_row_the_rule_and_the_verdict_without_a_key_or_a_model() {
    let s = scratch();
    // no ANTHROPIC_API_KEY anywhere: explain never needs the provider
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git push origin main"}"#,
    ])
    .expect_code(0)
    .stdout_has("allowed by row 2 of the grant: { commands = [\"git\"], paths = [\"./\"] }")
    .stdout_has("runs as the argv [\"git\", \"push\", \"origin\", \"main\"] (no shell)")
    .stdout_has(
        "permissions.ask_rules[1] { tool = \"bash\", command_prefix = \"git push\" } matched: ask",
    )
    .stdout_has("verdict  ASK")
    .stdout_has("headless run (loom prompt) refuses it");
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git push --force"}"#,
    ])
    .expect_code(0)
    .stdout_has("permissions.deny_rules[1]")
    .stdout_has("verdict  DENY — a deny rule refuses it inside the grant");
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "ls | wc -l"}"#,
    ])
    .expect_code(0)
    .stdout_has("allowed by row 1 of the grant: { commands = \"*\", paths = [\"./\"] }")
    .stdout_has("runs as `/bin/bash -c`")
    .stdout_has("no [permissions] rule matched")
    .stdout_has("verdict  ALLOW");
    s.loom(&[
        "explain",
        "agent.toml",
        "read_file",
        r#"{"path": "/etc/passwd"}"#,
    ])
    .expect_code(0)
    .stdout_has("DENIED: read_file may not read /etc/passwd")
    .stdout_has("rule     not consulted: a grant denial is final")
    .stdout_has("verdict  DENY — the grant does not allow it");
    // nothing ran: explain never runs the call
    assert!(!s.path().join("out.txt").exists());
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "echo x > out.txt"}"#,
    ])
    .expect_code(0)
    .stdout_has("verdict  ALLOW");
    assert!(
        !s.path().join("out.txt").exists(),
        "explain ran the command"
    );
}

#[test]
fn explain_refuses_bad_input_clearly() {
    let s = scratch();
    s.loom(&["explain", "agent.toml", "nope", "{}"])
        .expect_code(1)
        .stderr_has(
            "there is no tool named \"nope\" in this agent; the tools are: bash, read_file",
        );
    s.loom(&["explain", "agent.toml", "bash", "not json"])
        .expect_code(2)
        .stderr_has("the input is not valid JSON");
    s.loom(&["explain", "agent.toml", "bash", "[1]"])
        .expect_code(2)
        .stderr_has("must be one JSON object");
    s.loom(&["explain", "missing.toml", "bash", "{}"])
        .expect_code(1)
        .stderr_has("missing.toml");
}

#[test]
fn a_remembered_answer_is_shown_listed_and_revoked() {
    let s = scratch();
    s.loom(&["permissions", "list", "agent.toml"])
        .expect_code(0)
        .stdout_has("no remembered answers for agent \"explained\"");
    // what `loom run` or an ACP client writes when the user picks "always" for `git push origin main`
    let store = s.path().join(".loom-data/agents/explained");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join("approvals.json"),
        r#"{"version": 2, "approvals": [
            {"tool": "bash", "command": "git push origin main", "at": 1796056200},
            {"tool": "read_file", "path": "/nowhere/x", "at": 1796056260}
        ]}"#,
    )
    .unwrap();
    s.loom(&["permissions", "list", "agent.toml"])
        .expect_code(0)
        .stdout_has("  1  bash  command \"git push origin main\"  (given 2026-11-30 16:30 UTC)")
        .stdout_has("  2  read_file  path /nowhere/x");
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git push origin main"}"#,
    ])
    .expect_code(0)
    .stdout_has("answered by a remembered \"always\" (command \"git push origin main\"")
    .stdout_has("verdict  ALLOW");
    // the shell-form answer does not answer the argv form with the same text (K15)
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git", "args": ["push", "origin", "main"]}"#,
    ])
    .expect_code(0)
    .stdout_lacks("remembered")
    .stdout_has("verdict  ASK");
    // exactly that command: another push is still asked about, a forced push still denied
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git push origin dev"}"#,
    ])
    .expect_code(0)
    .stdout_has("verdict  ASK");
    s.loom(&["permissions", "revoke", "agent.toml", "3"])
        .expect_code(2)
        .stderr_has("there is no remembered answer number 3 (there are 2)");
    s.loom(&["permissions", "revoke", "agent.toml", "1"])
        .expect_code(0)
        .stdout_has("revoked  bash  command \"git push origin main\"");
    s.loom(&[
        "explain",
        "agent.toml",
        "bash",
        r#"{"command": "git push origin main"}"#,
    ])
    .expect_code(0)
    .stdout_lacks("remembered")
    .stdout_has("verdict  ASK");
    s.loom(&["permissions", "revoke", "agent.toml", "--all"])
        .expect_code(0)
        .stdout_has("revoked  read_file");
    s.loom(&["permissions", "list", "agent.toml"])
        .expect_code(0)
        .stdout_has("no remembered answers");
}

#[test]
fn a_damaged_answers_file_stops_boot_and_is_left_alone() {
    let s = scratch();
    let store = s.path().join(".loom-data/agents/explained");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("approvals.json"), "{oops").unwrap();
    s.loom(&["permissions", "list", "agent.toml"])
        .expect_code(1)
        .stderr_has("approvals.json: not a remembered-answers file");
    s.loom(&["explain", "agent.toml", "bash", r#"{"command": "ls"}"#])
        .expect_code(1)
        .stderr_has("approvals.json");
    assert_eq!(
        std::fs::read_to_string(store.join("approvals.json")).unwrap(),
        "{oops"
    );
}
