//! `[permissions]` deny rules in a real turn (`loom prompt` with the scripted harness): a `~/.ssh` prefix denies the
//! key file the model names, and a `git push` rule denies the composed, optioned and argv forms of it — each next to
//! a call that must not be refused by a rule.

use loom_tests::Scratch;

use super::{results, updates};

#[test]
fn deny_rules_hold_against_the_forms_a_model_would_try() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.path()).unwrap();
    let home = root.join("home");
    s.write("home/.ssh/x", "PRIVATE KEY\n");
    s.write("home/notes.txt", "notes\n");
    let manifest = format!(
        r#"[agent]
name = "ruled-turn"

[harness]
provider = "test"
script = [[
  {{ call = {{ tool = "read_file", input = {{ path = "{home}/.ssh/x" }} }} }},
  {{ call = {{ tool = "read_file", input = {{ path = "{home}/notes.txt" }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "git -C . push" }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "cd . && git push" }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "git", args = ["-C", ".", "push"] }} }} }},
  {{ call = {{ tool = "bash", input = {{ command = "git status" }} }} }},
  {{ say = "done" }},
]]

[session]
provider = "in-memory"

[tools]
bash = {{ provider = "builtin", tool = "bash", capabilities = {{ commands = "*", paths = ["./"] }} }}
read_file = {{ provider = "builtin", tool = "read_file", capabilities = {{ paths = ["~/"] }} }}

[[permissions.deny_rules]]
tool = "bash"
command_prefix = "git push"

[[permissions.deny_rules]]
tool = "read_file"
path_prefix = "~/.ssh"
"#,
        home = home.display()
    );
    s.write("agent.toml", &manifest);
    let home_s = home.display().to_string();
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", home_s.as_str())],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 6, "{r:#?}\n{}", run.stderr());
    let denied = |i: usize, rule: &str| {
        assert_eq!(r[i].0, "failed", "call {i}: {r:#?}");
        assert!(
            r[i].1.contains("refused by a [permissions] deny rule") && r[i].1.contains(rule),
            "call {i}: {}",
            r[i].1
        );
    };
    denied(0, "permissions.deny_rules[2]");
    assert!(!r[0].1.contains("PRIVATE KEY"), "{}", r[0].1);
    // control: the rest of home is read
    assert_eq!(r[1].0, "completed", "{r:#?}");
    assert!(r[1].1.starts_with("notes"), "{}", r[1].1);
    denied(2, "the simple command `git -C . push`");
    denied(3, "the simple command `git push`");
    denied(4, "permissions.deny_rules[1]");
    // control: another git command is not refused by a rule (it may still fail to run: no sandbox, no repository)
    assert!(
        !r[5].1.contains("[permissions]"),
        "git status was refused by a rule: {}",
        r[5].1
    );
}
