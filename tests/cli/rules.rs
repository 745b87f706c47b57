//! `[permissions]` rules fail closed, through the real binary (`loom explain`, `loom audit`): path prefixes are
//! expanded, resolved against the manifest's directory and canonicalised at load, an unresolvable one stops boot and
//! audit, ask / deny command rules see every simple command of a line, through wrappers, global options, absolute
//! paths and argv calls, and unsafe agent identifiers are refused. Each attack sits next to a control that must still
//! be allowed.

use std::path::{Path, PathBuf};

use loom_tests::Scratch;

/// A scratch dir with a home behind a symlink (`home -> real-home`, as `/home -> /var/home` on Fedora Atomic), a
/// `~/.ssh/id` key, and the agent in `agent/` with a `secrets/` folder next to its manifest.
struct Setup {
    s: Scratch,
    /// The canonical scratch directory.
    root: PathBuf,
}

impl Setup {
    fn new(rules: &str) -> Setup {
        let s = Scratch::new();
        let root = std::fs::canonicalize(s.path()).unwrap();
        s.write("real-home/.ssh/id", "KEY\n");
        s.write("real-home/notes.txt", "notes\n");
        std::os::unix::fs::symlink(root.join("real-home"), root.join("home")).unwrap();
        s.write("agent/secrets/k", "agent secret\n");
        s.write("secrets/k", "a project file\n");
        s.write(
            "agent/agent.toml",
            &format!(
                r#"[agent]
name = "ruled"

[harness]
provider = "anthropic"

[session]
provider = "in-memory"

[tools]
bash = {{ provider = "builtin", tool = "bash", capabilities = {{ commands = "*", paths = ["./"] }} }}
run = {{ provider = "builtin", tool = "bash", capabilities = {{ commands = "*", paths = ["./"] }} }}
read_file = {{ provider = "builtin", tool = "read_file", capabilities = {{ paths = ["{root}"] }} }}
{rules}"#,
                root = root.display()
            ),
        );
        Setup { s, root }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// `loom explain agent/agent.toml <tool> <input>` with HOME at the symlinked home.
    fn explain(&self, tool: &str, input: &serde_json::Value) -> loom_tests::Run {
        let home = self.home().display().to_string();
        self.s.loom_env(
            &["explain", "agent/agent.toml", tool, &input.to_string()],
            &[("HOME", home.as_str())],
        )
    }
}

const RULES: &str = r#"
[[permissions.deny_rules]]
tool = "bash"
command_prefix = "git push"

[[permissions.deny_rules]]
tool = "read_file"
path_prefix = "~/.ssh"

[[permissions.deny_rules]]
tool = "read_file"
path_prefix = "./secrets"
"#;

fn command(c: &str) -> serde_json::Value {
    serde_json::json!({ "command": c })
}

fn path(p: &Path) -> serde_json::Value {
    serde_json::json!({ "path": p.display().to_string() })
}

#[track_caller]
fn denied_by(run: &loom_tests::Run, rule: &str) {
    run.expect_code(0)
        .stdout_has(rule)
        .stdout_has("verdict  DENY — a deny rule refuses it inside the grant");
}

#[track_caller]
fn allowed(run: &loom_tests::Run) {
    run.expect_code(0)
        .stdout_has("no [permissions] rule matched")
        .stdout_has("verdict  ALLOW");
}

#[test]
fn a_tilde_prefix_denies_the_canonical_path_behind_a_symlinked_home() {
    let t = Setup::new(RULES);
    // the tool canonicalises home/.ssh/id to real-home/.ssh/id; the rule was canonicalised the same way at load
    denied_by(
        &t.explain("read_file", &path(&t.home().join(".ssh/id"))),
        "permissions.deny_rules[2] { tool = \"read_file\", path_prefix = ",
    );
    denied_by(
        &t.explain("read_file", &path(&t.root.join("real-home/.ssh/id"))),
        "permissions.deny_rules[2]",
    );
    // the resolved prefix is what explain shows
    t.explain("read_file", &path(&t.home().join(".ssh/id")))
        .stdout_has(&format!(
            "path_prefix = \"{}/real-home/.ssh\"",
            t.root.display()
        ));
    // control: the rest of home is readable
    allowed(&t.explain("read_file", &path(&t.home().join("notes.txt"))));
}

#[test]
fn a_relative_prefix_resolves_against_the_manifest_directory() {
    let t = Setup::new(RULES);
    denied_by(
        &t.explain("read_file", &path(&t.root.join("agent/secrets/k"))),
        "permissions.deny_rules[3]",
    );
    // control: `secrets/` in the working directory is another folder
    allowed(&t.explain("read_file", &path(&t.root.join("secrets/k"))));
}

#[test]
fn a_deny_command_rule_sees_every_simple_command() {
    let t = Setup::new(RULES);
    for (attack, matched) in [
        ("git -C . push", "git -C . push"),
        ("git  push", "git push"),
        ("/usr/bin/git push origin", "/usr/bin/git push origin"),
        ("command git push", "git push"),
        ("cd x && git push", "git push"),
        ("cd x; git -c k=v push", "git -c k=v push"),
        ("bash -c 'cd x && git push'", "git push"),
        ("env A=1 git push", "git push"),
        (
            "echo push | xargs git",
            "git <the words xargs reads from stdin>",
        ),
        (
            "true && (git --git-dir=.git push)",
            "git --git-dir=.git push",
        ),
    ] {
        let run = t.explain("bash", &command(attack));
        denied_by(&run, "permissions.deny_rules[1]");
        run.stdout_has(&format!("matched  the simple command `{matched}`"));
    }
    // argv mode is read word by word
    denied_by(
        &t.explain(
            "bash",
            &serde_json::json!({ "command": "git", "args": ["-C", ".", "push"] }),
        ),
        "permissions.deny_rules[1]",
    );
    // a program loom only knows when the line runs falls under the rule: a variable, a shell reading stdin
    for unknown in ["$G push", "echo 'git push' | sh"] {
        t.explain("bash", &command(unknown))
            .stdout_has("whose program loom only knows when it runs")
            .stdout_has("verdict  DENY");
    }
    // so does git with an alias defined on its command line
    t.explain("bash", &command("git -c alias.p=push p"))
        .stdout_has("a command a git alias on the command line defines")
        .stdout_has("verdict  DENY");
    // controls: other git commands, other programs, the words inside quotes
    for control in [
        "git status",
        "git pushx",
        "gitk push",
        "git log push",
        "cd x && git status",
        "echo 'git push'",
        "bash -c 'git pull'",
    ] {
        allowed(&t.explain("bash", &command(control)));
    }
    allowed(&t.explain(
        "bash",
        &serde_json::json!({ "command": "git", "args": ["-C", ".", "status"] }),
    ));
}

#[test]
fn a_rule_for_a_builtin_catches_the_renamed_instance() {
    let t = Setup::new(RULES);
    denied_by(
        &t.explain("run", &command("git -C . push")),
        "permissions.deny_rules[1]",
    );
    allowed(&t.explain("run", &command("git status")));
}

#[test]
fn a_prefix_that_cannot_be_resolved_stops_explain_audit_and_prompt() {
    let t = Setup::new(
        r#"
[[permissions.deny_rules]]
tool = "read_file"
path_prefix = "./missing/deeper"
"#,
    );
    let want = format!(
        "agent/agent.toml: permissions.deny_rules[1].path_prefix: \"./missing/deeper\" ({root}/agent/missing/deeper) \
         does not exist, and neither does its parent {root}/agent/missing; a rule on a path loom cannot resolve \
         would never match (hint: create the path or correct the rule; relative prefixes resolve against the \
         manifest's directory ({root}/agent), `~` against the home directory)",
        root = t.root.display()
    );
    t.explain("read_file", &path(&t.root.join("secrets/k")))
        .expect_code(1)
        .stderr_has(&want);
    t.s.loom(&["audit", "agent/agent.toml"])
        .expect_code(1)
        .stderr_has(&want);
    t.s.loom(&["prompt", "agent/agent.toml", "hi"])
        .expect_code(1)
        .stderr_has(&want);
    // control: once the parent exists, the rule loads (and denies the path when it appears)
    std::fs::create_dir_all(t.root.join("agent/missing")).unwrap();
    t.s.loom(&["audit", "agent/agent.toml"]).expect_code(0);
}

#[test]
fn a_tilde_prefix_without_a_home_stops_boot() {
    let t = Setup::new(RULES);
    t.s.loom_env(
        &[
            "explain",
            "agent/agent.toml",
            "bash",
            &command("ls").to_string(),
        ],
        &[("HOME", "relative/not-a-home")],
    )
    .expect_code(1)
    .stderr_has(
        "permissions.deny_rules[2].path_prefix: \"~/.ssh\" starts with `~`, but loom has no home directory to \
         expand it to (HOME is unset or not absolute) (hint: write the absolute path, or set HOME)",
    );
}

fn id_manifest(id: &str) -> String {
    format!(
        "[agent]\nname = \"a\"\nstorage_id = \"{id}\"\n\n[harness]\nprovider = \"anthropic\"\n\n[session]\n\
         provider = \"in-memory\"\n\n[tools]\nread_file = \"builtin\"\n"
    )
}

#[test]
fn an_unsafe_storage_id_is_refused_by_audit_and_boot() {
    let s = Scratch::new();
    s.write("agent.toml", &id_manifest("../../etc"));
    let want = "agent.toml: agent.storage_id: not a safe identifier: it names the agent's storage directory, so it \
                must be 1-64 characters from A-Z a-z 0-9 . _ - starting with a letter or a digit (hint: storage_id \
                = \"my-agent\"; put a longer display text in description)";
    s.loom(&["audit", "agent.toml"])
        .expect_code(1)
        .stderr_has(want);
    s.loom(&["explain", "agent.toml", "read_file", r#"{"path": "x"}"#])
        .expect_code(1)
        .stderr_has(want);
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has(want);
    // nothing was written outside the data home (LOOM_DATA_HOME is <scratch>/.loom-data: `agents/../../etc`
    // would be <scratch>/etc)
    assert!(!s.path().join("etc").exists());
    assert!(!s.path().join(".loom-data").exists());
    // control: a safe id boots, and its storage lands under the data home
    s.write("agent.toml", &id_manifest("demo.v1"));
    s.loom(&[
        "explain",
        "agent.toml",
        "read_file",
        r#"{"path": "agent.toml"}"#,
    ])
    .expect_code(0);
    assert!(s.path().join(".loom-data/agents/demo.v1").is_dir());
}
