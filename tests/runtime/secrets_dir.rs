//! `LOOM_SECRETS_DIR` (issue 24 item 4) through `loom prompt`: the harness key read from a directory laid out as a
//! Kubernetes Secret volume, the environment still first, the directory out of the agent's reach, and a broken entry
//! stopping boot with its name and never its value.

use loom_tests::Scratch;

use super::anthropic::{serve, ANSWER};

const KEY: &str = "sk-ant-from-the-volume";

/// A Kubernetes-style volume at `dir`: `ANTHROPIC_API_KEY -> ..data/ANTHROPIC_API_KEY`, `..data -> ..<stamp>`.
fn volume(dir: &std::path::Path) {
    let stamp = dir.join("..2026_12_03_00_00_00.1");
    std::fs::create_dir_all(&stamp).unwrap();
    std::fs::write(stamp.join("ANTHROPIC_API_KEY"), format!("{KEY}\n")).unwrap();
    std::os::unix::fs::symlink("..2026_12_03_00_00_00.1", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/ANTHROPIC_API_KEY", dir.join("ANTHROPIC_API_KEY")).unwrap();
}

fn agent(base: &str) -> String {
    format!(
        "[agent]\nname = \"vol\"\n[harness]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\napiBase = \"{base}\"\n\
         [session]\nprovider = \"in-memory\"\n[tools]\nread_file = \"builtin\"\n[capabilities]\n\
         read_file = {{ paths = [\"./\"] }}\n"
    )
}

#[test]
fn the_harness_key_comes_from_a_kubernetes_style_volume() {
    let (base, seen) = serve(vec![ANSWER]);
    let s = Scratch::new();
    s.write("agent.toml", &agent(&base));
    let vol = s.path().join("secrets");
    volume(&vol);
    let run = s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("LOOM_SECRETS_DIR", vol.to_str().unwrap())],
    );
    run.expect_code(0).stdout_has("The file says: greetings");
    assert!(!run.stdout().contains(KEY) && !run.stderr().contains(KEY));
    let seen = seen.lock().unwrap();
    let key = seen[0]
        .0
        .iter()
        .find(|(n, _)| n == "x-api-key")
        .map(|(_, v)| v.as_str());
    assert_eq!(key, Some(KEY), "one trailing newline trimmed");
}

#[test]
fn the_environment_comes_first() {
    let (base, seen) = serve(vec![ANSWER]);
    let s = Scratch::new();
    s.write("agent.toml", &agent(&base));
    let vol = s.path().join("secrets");
    volume(&vol);
    s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[
            ("LOOM_SECRETS_DIR", vol.to_str().unwrap()),
            ("ANTHROPIC_API_KEY", "sk-from-env"),
        ],
    )
    .expect_code(0);
    let seen = seen.lock().unwrap();
    let key = seen[0]
        .0
        .iter()
        .find(|(n, _)| n == "x-api-key")
        .map(|(_, v)| v.as_str());
    assert_eq!(key, Some("sk-from-env"));
}

#[test]
fn the_directory_is_out_of_the_agents_reach() {
    let s = Scratch::new();
    // the volume inside the agent's granted root: its files are a secret store the file tools refuse to read
    s.write("agent.toml", &agent("http://127.0.0.1:9"));
    let vol = s.path().join("secrets");
    volume(&vol);
    let run = s.loom_env(
        &[
            "explain",
            "agent.toml",
            "read_file",
            r#"{"path":"secrets/..data/ANTHROPIC_API_KEY"}"#,
        ],
        &[("LOOM_SECRETS_DIR", vol.to_str().unwrap())],
    );
    run.expect_code(0)
        .stdout_has("secret store")
        .stdout_has("DENY");
    assert!(!run.stdout().contains(KEY));
    // control: another file in the same root is readable
    s.write("notes.txt", "hello");
    s.loom_env(
        &[
            "explain",
            "agent.toml",
            "read_file",
            r#"{"path":"notes.txt"}"#,
        ],
        &[("LOOM_SECRETS_DIR", vol.to_str().unwrap())],
    )
    .expect_code(0)
    .stdout_has("ALLOW");
}

#[test]
fn a_broken_entry_stops_boot_with_its_name_and_never_its_value() {
    let s = Scratch::new();
    s.write("agent.toml", &agent("http://127.0.0.1:9"));
    let vol = s.path().join("secrets");
    volume(&vol);
    s.write("elsewhere", "value-outside-the-volume");
    std::os::unix::fs::symlink(s.path().join("elsewhere"), vol.join("LEAK")).unwrap();
    let run = s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("LOOM_SECRETS_DIR", vol.to_str().unwrap())],
    );
    run.expect_code(1)
        .stderr_has("LEAK")
        .stderr_has("leads out of");
    assert!(!run.stderr().contains("value-outside-the-volume") && !run.stderr().contains(KEY));
    s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("LOOM_SECRETS_DIR", "relative/dir")],
    )
    .expect_code(1)
    .stderr_has("LOOM_SECRETS_DIR=relative/dir: must be an absolute path");
}

/// SECURITY.md: a bash grant whose root holds the directory is refused (a directory cannot be masked from the
/// command), in tier A and in tier B; the command never runs, and the value never shows.
#[test]
fn a_bash_grant_over_the_directory_is_refused() {
    if !super::sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let vol = s.path().join("secrets");
    volume(&vol);
    s.write(
        "agent.toml",
        r#"[agent]
name = "vol-bash"
[harness]
provider = "test"
script = [[ { call = { tool = "bash", input = { command = "cat secrets/ANTHROPIC_API_KEY" } } }, { say = "done" } ]]
[session]
provider = "in-memory"
[tools]
bash = "builtin"
[capabilities]
bash = { commands = "*", paths = ["./"] }
"#,
    );
    // in the tier chosen here (A) and in tier B (A removed from the candidates)
    for (tier, disable) in [("A", ""), ("B", "a")] {
        let run = s.loom_env(
            &["prompt", "agent.toml", "go", "--format", "jsonl"],
            &[
                ("LOOM_SECRETS_DIR", vol.to_str().unwrap()),
                ("LOOM_SANDBOX_DISABLE", disable),
            ],
        );
        assert!(!run.stdout().contains(KEY), "{}", run.stdout());
        let ups = super::updates(&run);
        assert_eq!(ups[0]["sandbox"]["tier"], tier, "{}", ups[0]);
        let results = super::results(&ups);
        assert_eq!(results.len(), 1, "{}", run.stdout());
        assert_eq!(results[0].0, "failed");
        assert!(
            results[0].1.contains("cannot hide it"),
            "tier {tier}: {results:?}"
        );
    }
}
