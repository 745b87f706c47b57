//! The newcomer's mistakes (shared/reviews/newcomer-walkthrough.md): each one `loom audit` fails with a message that
//! names the key and the fix, and the same manifest does not boot — "if `loom audit` exits 0, `loom prompt` boots".

use loom_tests::Scratch;

const HEAD: &str = "[agent]\nname = \"newcomer\"\n";
const TEST_HARNESS: &str = "[harness]\nprovider = \"test\"\necho = true\n";

/// (what the newcomer wrote after [agent], what audit says, what boot says — `None`: boot starts)
fn mistakes() -> Vec<(&'static str, String, &'static str, Option<&'static str>)> {
    vec![
        (
            "an unknown built-in",
            format!("{TEST_HARNESS}[tools]\nread_files = \"builtin\"\n"),
            // the list is the kernel's, in its order
            String::leak(format!(
                "tools.read_files: boot refuses this: there is no built-in tool named \"read_files\" (built-ins: {}); \
                 did you mean \"read_file\"?",
                loom_kernel::BUILTIN_TOOLS.join(", ")
            )),
            Some("tools.read_files: there is no built-in tool named \"read_files\""),
        ),
        (
            "a misspelt harness provider",
            "[harness]\nprovider = \"antropic\"\n".to_string(),
            "[harness].provider: boot refuses this: \"antropic\" is not a harness of this build of loom",
            Some("[harness].provider: \"antropic\" is not a harness of this build of loom"),
        ),
        (
            "no [harness]",
            String::new(),
            "[harness]: boot refuses this: the manifest has no [harness]; add one, e.g. [harness] provider = \"anthropic\"",
            Some("[harness]: the manifest has no [harness]"),
        ),
        (
            "a [tools] entry nothing grants",
            format!(
                "{TEST_HARNESS}[tools]\nread_file = \"builtin\"\nwrite_file = \"builtin\"\n[capabilities]\nread_file = {{ paths = [\"./\"] }}\n"
            ),
            "tools.write_file: nothing grants this tool, so every call to it would be refused: grant it in \
             [capabilities].write_file (or remove the entry)",
            None,
        ),
        (
            "a misspelt [capabilities] key",
            format!("{TEST_HARNESS}[tools]\nread_file = \"builtin\"\n[capabilities]\nread_fle = {{ paths = [\"./\"] }}\n"),
            "[capabilities].read_fle: no [tools] entry is named `read_fle`; did you mean `read_file`, which nothing grants?",
            None,
        ),
    ]
}

#[test]
fn audit_fails_on_each_mistake_and_boot_agrees() {
    for (what, body, audit_says, boot_says) in mistakes() {
        let s = Scratch::new();
        s.write("agent.toml", &format!("{HEAD}{body}"));
        let audit = s.loom(&["audit", "agent.toml"]);
        assert_eq!(audit.code(), 1, "{what}: audit exit\n{}", audit.stdout());
        assert!(
            audit.stdout().contains(audit_says),
            "{what}: audit does not say\n  {audit_says}\n{}",
            audit.stdout()
        );
        // the JSON document says so too
        let json = s.loom(&["audit", "--json", "agent.toml"]);
        assert_eq!(json.code(), 1, "{what}: audit --json exit");
        let doc: serde_json::Value =
            serde_json::from_str(&json.stdout()).expect("audit --json prints JSON");
        assert_eq!(doc["health"]["ok"], false, "{what}");
        if let Some(says) = boot_says {
            s.loom(&["prompt", "agent.toml", "hi"])
                .expect_code(1)
                .stderr_has(says);
        }
    }
}

#[test]
fn a_fixed_manifest_audits_clean_and_boots() {
    // the control: the same shapes written right
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!("{HEAD}{TEST_HARNESS}[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = {{ paths = [\"./\"] }}\n"),
    );
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_lacks("boot refuses")
        .stdout_lacks("nothing grants this tool");
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(0)
        .stdout_has("hi");
}

#[test]
fn a_manifest_that_does_not_parse_still_gets_a_json_document() {
    let s = Scratch::new();
    s.write("agent.toml", "[agent\n");
    let run = s.loom(&["audit", "--json", "agent.toml"]);
    assert_eq!(run.code(), 1);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout()).expect("JSON on stdout");
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["health"]["ok"], false);
    assert!(
        doc["loadError"]
            .as_str()
            .unwrap()
            .contains("invalid TOML at line 1"),
        "{doc}"
    );
    assert!(
        run.stderr().contains("invalid TOML at line 1"),
        "{}",
        run.stderr()
    );
    // a missing file too
    let run = s.loom(&["audit", "--json", "nowhere.toml"]);
    assert_eq!(run.code(), 1);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout()).expect("JSON on stdout");
    assert_eq!(doc["manifest"], "nowhere.toml");
}

#[test]
fn audit_shows_where_relative_grants_land_and_warns_when_that_is_home() {
    let s = Scratch::new();
    let example = std::fs::read_to_string(
        loom_tests::workspace_root().join("examples/minimal-agent/agent.toml"),
    )
    .unwrap();
    s.write("proj/agent.toml", &example);
    let here = std::fs::canonicalize(s.path())
        .unwrap()
        .display()
        .to_string();
    // run from the home directory, as a newcomer in a fresh terminal would: `./` is the whole home
    let from_home = s.loom_env(&["audit", "proj/agent.toml"], &[("HOME", &here)]);
    from_home
        .expect_code(0)
        .stdout_has(&format!("roots  rw: ./ (= {here}); ro: none"))
        .stdout_has(
            "warning  grant path `./` (bash, edit_file, read_file, write_file): `./` resolves to",
        )
        .stdout_has("which covers your home directory");
    // run from the project: no warning (the control)
    let proj = format!("{here}/proj");
    let out = std::process::Command::new(loom_tests::loom_bin())
        .args(["audit", "agent.toml"])
        .current_dir(&proj)
        .env("HOME", &here)
        .env("LOOM_DATA_HOME", s.path().join(".loom-data"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("roots  rw: ./ (= {proj}); ro: none")),
        "{stdout}"
    );
    assert!(!stdout.contains("warning  grant path"), "{stdout}");
    // a grant that climbs out with `..` is named wherever loom runs
    s.write(
        "proj/climb.toml",
        &format!("{HEAD}{TEST_HARNESS}[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = {{ read_paths = [\"../\"] }}\n"),
    );
    s.loom(&["audit", "proj/climb.toml"])
        .expect_code(0)
        .stdout_has("grant path `../` (read_file): `../` climbs out with `..`");
}

/// Where a message is expected.
#[derive(Clone, Copy, Debug)]
enum Stream {
    Out,
    Err,
}

/// One of the walkthrough's ten mistakes: the minimal example with `from` replaced by `to` (or a file of its own),
/// the command the newcomer ran, its exit code (as README.md documents them) and the exact message.
struct Mistake {
    what: &'static str,
    edit: Option<(&'static str, &'static str)>,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    code: i32,
    says: Vec<(Stream, String)>,
}

fn minimal() -> String {
    std::fs::read_to_string(loom_tests::workspace_root().join("examples/minimal-agent/agent.toml"))
        .unwrap()
}

fn ten_mistakes() -> Vec<Mistake> {
    use Stream::{Err, Out};
    vec![
        Mistake {
            what: "1. a typo in a key",
            edit: Some(("system_prompt =", "sytem_prompt =")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(Err, "loom: agent.toml: agent.sytem_prompt: unknown key; did you mean system_prompt?".into())],
        },
        Mistake {
            what: "1b. a typo in [session]",
            edit: Some(("layers = [\"compacting\"", "layer = [\"compacting\"")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(Err, "loom: agent.toml: session.layer: unknown key; did you mean layers?".into())],
        },
        Mistake {
            what: "2. a missing [harness]",
            edit: Some(("[harness]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n", "")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(
                Out,
                "error    [harness]: boot refuses this: the manifest has no [harness]; add one, e.g. [harness] \
                 provider = \"anthropic\""
                    .into(),
            )],
        },
        Mistake {
            what: "3. a wrong tool name in [tools]",
            edit: Some(("read_file = \"builtin\"", "read_files = \"builtin\"")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(
                Out,
                format!(
                    "error    tools.read_files: boot refuses this: there is no built-in tool named \"read_files\" \
                     (built-ins: {}); did you mean \"read_file\"?",
                    loom_kernel::BUILTIN_TOOLS.join(", ")
                ),
            )],
        },
        Mistake {
            what: "4. a grant for a tool that does not exist",
            edit: Some(("read_file = { paths", "reed_file = { paths")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![
                (
                    Out,
                    "warning  [capabilities].reed_file: no [tools] entry is named `reed_file`; did you mean \
                     `read_file`, which nothing grants?"
                        .into(),
                ),
                (
                    Out,
                    "error    tools.read_file: nothing grants this tool, so every call to it would be refused: grant \
                     it in [capabilities].read_file (or remove the entry); [capabilities].reed_file looks like a \
                     misspelling of it"
                        .into(),
                ),
            ],
        },
        Mistake {
            what: "4b. a grant keyed by a built-in no [tools] entry offers",
            edit: Some(("[capabilities]\n", "[capabilities]\nweb_search = { network = \"*\" }\n")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 0,
            says: vec![(
                Out,
                "warning  [capabilities].web_search: grants a tool nothing here offers: no [tools] entry and no \
                 contribution names `web_search` (add `web_search = \"builtin\"` to [tools] to offer the built-in)"
                    .into(),
            )],
        },
        Mistake {
            what: "5. a relative path outside the project",
            edit: Some(("write_file = { paths = [\"./\"] }", "write_file = { paths = [\"../\"] }")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 0,
            says: vec![(Out, "warning  grant path `../` (write_file): `../` climbs out with `..`".into())],
        },
        Mistake {
            what: "6. running from another directory: the home directory",
            edit: None,
            args: &["audit", "agent.toml"],
            env: &[("HOME", "{scratch}")],
            code: 0,
            says: vec![
                (Out, "rw: ./ (= {scratch})".into()),
                (Out, "which covers your home directory".into()),
            ],
        },
        Mistake {
            what: "8. a path that does not exist",
            edit: None,
            args: &["audit", "examples/minimal/agent.toml"],
            env: &[],
            code: 1,
            says: vec![(
                Err,
                "loom: examples/minimal/agent.toml: cannot read the manifest: No such file or directory".into(),
            )],
        },
        Mistake {
            what: "8b. a directory for the manifest means its agent.toml",
            edit: None,
            args: &["audit", "."],
            env: &[],
            code: 0,
            says: vec![(Out, "health    ok".into())],
        },
        Mistake {
            what: "7. a missing API key",
            edit: None,
            args: &["prompt", "agent.toml", "write a haiku about tea"],
            env: &[],
            code: 1,
            says: vec![
                (
                    Err,
                    "agent.toml: [harness]: needs the secret ANTHROPIC_API_KEY: export it (ANTHROPIC_API_KEY or \
                     LOOM_ANTHROPIC_API_KEY) or add it to your user secrets file {home}/.config/loom/secrets.toml \
                     (TOML, one `ANTHROPIC_API_KEY = \"value\"` line per secret;"
                        .into(),
                ),
                // and whether the keychain can be asked here (this build has it; the host may lack secret-tool)
                (Err, "the OS keychain".into()),
            ],
        },
        Mistake {
            what: "10. loom run without the key fails before the REPL opens",
            edit: None,
            args: &["run", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(Err, "[harness]: needs the secret ANTHROPIC_API_KEY: export it".into())],
        },
        Mistake {
            what: "9. malformed TOML",
            edit: Some(("name = \"minimal-agent\"", "name = \"minimal-agent")),
            args: &["audit", "agent.toml"],
            env: &[],
            code: 1,
            says: vec![(Err, "loom: agent.toml: invalid TOML at line 3, column 22: invalid basic string".into())],
        },
    ]
}

#[test]
fn the_ten_newcomer_mistakes_get_their_exact_messages() {
    for m in ten_mistakes() {
        let s = Scratch::new();
        let mut text = minimal();
        if let Some((from, to)) = m.edit {
            assert!(
                text.contains(from),
                "{}: the example no longer has {from:?}",
                m.what
            );
            text = text.replacen(from, to, 1);
        }
        s.write("agent.toml", &text);
        // a home of the test's own: no key, no user secrets file, whatever the machine has
        let home = s.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let home = home.display().to_string();
        let scratch = std::fs::canonicalize(s.path())
            .unwrap()
            .display()
            .to_string();
        let mut env = vec![("HOME".to_string(), home.clone())];
        env.extend(
            m.env
                .iter()
                .map(|(k, v)| (k.to_string(), v.replace("{scratch}", &scratch))),
        );
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let run = s.loom_env(m.args, &env);
        assert_eq!(
            run.code(),
            m.code,
            "{}: exit\nstdout:\n{}\nstderr:\n{}",
            m.what,
            run.stdout(),
            run.stderr()
        );
        for (stream, says) in &m.says {
            let says = says.replace("{home}", &home).replace("{scratch}", &scratch);
            let got = match stream {
                Stream::Out => run.stdout(),
                Stream::Err => run.stderr(),
            };
            assert!(
                got.contains(says.as_str()),
                "{}: {stream:?} lacks\n  {says}\ngot:\n{got}",
                m.what
            );
        }
    }
}

/// The walkthrough's row 29: `loom install` in a manifest with no sources says so and writes nothing (no lock, no
/// `.loom/`); `--frozen` agrees.
#[test]
fn install_with_nothing_to_install_writes_nothing() {
    let s = Scratch::new();
    s.write("agent.toml", &minimal());
    for args in [&["install"][..], &["install", "--frozen"][..]] {
        s.loom(args).expect_code(0).stdout_has("nothing to install");
        assert!(!s.path().join(".loom").exists(), "{args:?} created .loom/");
    }
}
