//! Per-tool secret filtering through `loom prompt`: a bash command's environment never carries a secret its grant
//! was not given — not the harness's key, not a copy of it under another name, not a secret reached through
//! `env = "*"` or a pattern — and a secret the agent shares (`[agent] secrets`) and the row names exactly arrives
//! with the secrets chain's value.

use loom_tests::Scratch;

use super::{results, sandbox_available, updates};

const ANT: &str = "sk-ant-must-not-leak-1";
const GH_FILE: &str = "gh-from-loom-secrets-2";
const GH_ENV: &str = "gh-from-environment-3";

/// Runs `env` through the bash tool under `bash_grant` and returns what the command saw.
fn env_seen(bash_grant: &str) -> String {
    let s = Scratch::new();
    s.write(".loom-secrets", &format!("GH_TOKEN={GH_FILE}\n"));
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "secrets-e2e"
secrets = ["GH_TOKEN"]

[harness]
provider = "test"
script = [[{{ call = {{ tool = "bash", input = {{ command = "env" }} }} }}, {{ say = "done" }}]]

[session]
provider = "in-memory"

[capabilities]
bash = {bash_grant}

[tools]
bash = "builtin"
"#
        ),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[
            ("ANTHROPIC_API_KEY", ANT),
            ("COPY_OF_KEY", ANT),
            ("LOOM_GH_TOKEN", GH_ENV),
            ("AWS_REGION", "visible-region"),
            ("AWS_SESSION_TOKEN", "aws-visible-not-a-loom-secret"),
        ],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    r[0].1.clone()
}

fn lacks_every_unshared_secret(seen: &str) {
    for leaked in [ANT, "ANTHROPIC_API_KEY=", "LOOM_GH_TOKEN="] {
        assert!(
            !seen.contains(leaked),
            "{leaked} reached the command:\n{seen}"
        );
    }
    // the shared secret's value, if it arrives at all, arrives once, under its own name
    assert!(seen.matches(GH_ENV).count() <= 1, "{seen}");
    assert!(
        !seen.contains(GH_FILE),
        "the project file lost to the environment:\n{seen}"
    );
}

#[test]
fn env_star_passes_everything_but_the_secrets() {
    if !sandbox_available() {
        return;
    }
    let seen = env_seen(r#"{ commands = "*", paths = ["./"], env = "*" }"#);
    lacks_every_unshared_secret(&seen);
    assert!(!seen.contains(GH_ENV), "{seen}");
    // the control: "*" does pass ordinary variables
    assert!(seen.contains("AWS_REGION=visible-region"), "{seen}");
}

#[test]
fn a_pattern_never_passes_a_secret_and_an_exact_name_passes_only_a_shared_one() {
    if !sandbox_available() {
        return;
    }
    let seen = env_seen(
        r#"{ commands = "*", paths = ["./"], env = ["GH_TOKEN", "ANTHROPIC_API_KEY", "COPY_OF_KEY", "AWS_*", "LOOM_*"] }"#,
    );
    lacks_every_unshared_secret(&seen);
    // shared and named: the chain's value (the environment wins over the project's .loom-secrets), under its own
    // name
    assert!(seen.contains(&format!("GH_TOKEN={GH_ENV}")), "{seen}");
    assert!(seen.contains("AWS_SESSION_TOKEN=aws-visible"), "{seen}");
}

#[test]
fn the_unconfined_grant_gets_the_shared_secrets_only() {
    let seen = env_seen(r#""*""#);
    lacks_every_unshared_secret(&seen);
    assert!(seen.contains(&format!("GH_TOKEN={GH_ENV}")), "{seen}");
    assert!(seen.contains("AWS_REGION=visible-region"), "{seen}");
}
