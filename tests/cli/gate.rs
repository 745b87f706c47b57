//! The CI ceiling gate: `loom audit NEW --baseline OLD`.

use std::process::Command;

use loom_tests::{workspace_root, Scratch};

fn ex(file: &str) -> String {
    workspace_root()
        .join("examples/ci-gate")
        .join(file)
        .display()
        .to_string()
}

const GREW: i32 = 3;

#[test]
fn a_contained_manifest_passes() {
    Scratch::new()
        .loom(&[
            "audit",
            &ex("agent.toml"),
            "--baseline",
            &ex("baseline.toml"),
        ])
        .expect_code(0)
        .stdout_has("ceiling gate: passed");
}

#[test]
fn growth_fails_with_its_own_code_and_the_narrowest_fix() {
    Scratch::new()
        .loom(&["audit", &ex("grown.toml"), "--baseline", &ex("baseline.toml")])
        .expect_code(GREW)
        .stdout_has("grew: `bash`")
        .stdout_has("grown:  { commands = \"*\", network = \"*\", paths = [\"./\"] }")
        // the smallest edit: the shell row loses the network it picked up, and stays
        .stdout_has("narrowest change that passes:  bash = [{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }]");
}

#[test]
fn narrowing_passes() {
    // the baseline is wider than the grown file in nothing, but the grown file is wider than the baseline:
    // swapping them must pass (a narrowing change)
    Scratch::new()
        .loom(&[
            "audit",
            &ex("baseline.toml"),
            "--baseline",
            &ex("grown.toml"),
        ])
        .expect_code(0);
}

#[test]
fn sarif_output() {
    let run = Scratch::new().loom(&[
        "audit",
        &ex("grown.toml"),
        "--baseline",
        &ex("baseline.toml"),
        "--format",
        "sarif",
    ]);
    run.expect_code(GREW);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let result = &v["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "loom/ceiling-grew");
    // the grown grant's line in [capabilities] (`bash = [`), not the `bash = "builtin"` entry in [tools]
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        12
    );
}

#[test]
fn a_new_key_and_a_grown_subagent_are_growth() {
    let s = Scratch::new();
    let old = s.write("old.toml", "[agent]\nname = \"a\"\n[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\n");
    let new = s.write(
        "new.toml",
        "[agent]\nname = \"a\"\n[tools]\nread_file = \"builtin\"\nspawn_subagent = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\n[capabilities.spawn_subagent.manifest]\nname = \"r\"\n[capabilities.spawn_subagent.manifest.capabilities]\nread_file = { paths = [\"/\"] }\n",
    );
    s.loom(&[
        "audit",
        new.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ])
    .expect_code(GREW)
    .stdout_has("grew: `spawn_subagent`")
    .stdout_has("in sub-agent spawn_subagent > r");
}

#[test]
fn against_a_git_revision() {
    let s = Scratch::new();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(s.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    s.write("agent.toml", "[agent]\nname = \"a\"\n[tools]\nbash = \"builtin\"\n[capabilities]\nbash = { commands = [\"ls\"] }\n");
    git(&["add", "agent.toml"]);
    git(&["commit", "-qm", "base"]);
    s.loom(&["audit", "agent.toml", "--baseline", "git:HEAD"])
        .expect_code(0);
    s.write("agent.toml", "[agent]\nname = \"a\"\n[tools]\nbash = \"builtin\"\n[capabilities]\nbash = { commands = [\"ls\", \"curl\"] }\n");
    s.loom(&["audit", "agent.toml", "--baseline", "git:HEAD"])
        .expect_code(GREW)
        .stdout_has("grew: `bash`");
    s.loom(&["audit", "agent.toml", "--baseline", "git:no-such-rev"])
        .expect_code(1)
        .stderr_has("no-such-rev");
}

#[test]
fn sarif_without_a_baseline_is_a_usage_error() {
    Scratch::new()
        .loom(&["audit", &ex("agent.toml"), "--format", "sarif"])
        .expect_code(2);
}
