//! Issue 22 item 5 through the real binary: `--help` says what loom is and explains its terms, `loom help <command>`
//! works, every command takes its manifest the same way (a positional defaulting to ./agent.toml, a directory
//! meaning its agent.toml), `--json` means one thing, and `loom mcp inspect FILE` takes an existing file as a path.

use loom_tests::{workspace_root, Scratch};

fn minimal() -> String {
    std::fs::read_to_string(workspace_root().join("examples/minimal-agent/agent.toml")).unwrap()
}

/// A manifest that boots without a key: the minimal example on the scripted harness.
fn echo_agent() -> String {
    minimal().replace(
        "[harness]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n",
        "[harness]\nprovider = \"test\"\necho = true\n",
    )
}

#[test]
fn help_describes_the_product_and_its_terms() {
    let s = Scratch::new();
    let help = s.loom(&["--help"]);
    help.expect_code(0)
        .stdout_has("capability-secure, manifest-driven agent runtime")
        .stdout_has("ceiling ")
        .stdout_has("tier ")
        .stdout_has("`loom doctor` shows which this host has")
        .stdout_lacks("argument parsing and rendering only");
    // `loom help <command>` is `<command> --help`
    let a = s.loom(&["help", "audit"]);
    a.expect_code(0);
    assert_eq!(a.stdout(), s.loom(&["audit", "--help"]).stdout());
    s.loom(&["help", "permissions", "revoke"])
        .expect_code(0)
        .stdout_has("[MANIFEST] NUMBERS");
    // each command that runs an agent lists its exit codes, 69 and 75 included where they apply
    s.loom(&["help", "prompt"])
        .expect_code(0)
        .stdout_has("75 a transient provider error");
    s.loom(&["help", "run"])
        .expect_code(0)
        .stdout_has("69 --require-tier");
    s.loom(&["acp", "serve", "--help"])
        .expect_code(0)
        .stdout_has("69 --require-tier");
    // every manifest argument is described, and no default is printed twice
    for cmd in [
        &["run", "--help"][..],
        &["install", "--help"],
        &["providers", "list", "--help"],
    ] {
        let h = s.loom(cmd);
        h.expect_code(0)
            .stdout_has("a directory means its agent.toml");
        assert!(
            !h.stdout().contains("(default: agent.toml"),
            "{cmd:?}: {}",
            h.stdout()
        );
    }
}

#[test]
fn every_command_takes_the_manifest_the_same_way() {
    let s = Scratch::new();
    s.write("proj/agent.toml", &echo_agent());
    s.write("proj/a.txt", "alpha");
    let proj = s.path().join("proj");
    let run_in = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new(loom_tests::loom_bin())
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", s.path())
            .env("LOOM_DATA_HOME", s.path().join(".loom-data"))
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // no manifest named: ./agent.toml
    for args in [
        &["audit"][..],
        &["prompt", "hello there"],
        &["explain", "read_file", r#"{"path":"a.txt"}"#],
        &["permissions", "list"],
        &["install"],
        &["providers", "list"],
    ] {
        let (code, out, err) = run_in(&proj, args);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    }
    let (_, out, _) = run_in(&proj, &["prompt", "hello there"]);
    assert_eq!(
        out, "hello there\n",
        "one argument that is no manifest is the prompt"
    );
    // a directory means its agent.toml
    for args in [
        &["audit", "proj"][..],
        &["prompt", "proj", "hi"],
        &["explain", "proj", "read_file", r#"{"path":"proj/a.txt"}"#],
    ] {
        let (code, out, err) = run_in(s.path(), args);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    }
    // a lone existing directory is the manifest, so the prompt comes from stdin (empty here)
    let (code, _, err) = run_in(s.path(), &["prompt", "proj"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the prompt is empty"), "{err}");
    // no ./agent.toml here: the error says so and how to name one
    let (code, _, err) = run_in(s.path(), &["audit"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("there is no agent.toml in the current directory; name the manifest"),
        "{err}"
    );
    // a named path that does not exist is an error, never a fallback to ./agent.toml
    let (code, _, err) = run_in(&proj, &["prompt", "missing.toml", "hi"]);
    assert_eq!(code, 1);
    assert!(err.contains("missing.toml"), "{err}");
    let (code, _, err) = run_in(&proj, &["prompt", "missing.toml"]);
    assert_eq!(
        code, 1,
        "a lone .toml argument is the manifest, not the prompt"
    );
    assert!(err.contains("missing.toml"), "{err}");
    // a number where a manifest may stand is an answer's number
    let (code, _, err) = run_in(&proj, &["permissions", "revoke", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("there is no remembered answer"), "{err}");
}

#[test]
fn json_means_one_thing() {
    let s = Scratch::new();
    s.write("agent.toml", &echo_agent());
    s.loom(&["audit", "--json", "--format", "text"])
        .expect_code(2)
        .stderr_has("--json is --format json");
    let run = s.loom(&["audit", "--json", "--format", "json"]);
    run.expect_code(0);
    assert!(serde_json::from_str::<serde_json::Value>(&run.stdout()).is_ok());
}

#[test]
fn mcp_inspect_takes_an_existing_file_as_a_path() {
    let s = Scratch::new();
    s.write(
        "server.mjs",
        "console.error('no server here'); process.exit(3);\n",
    );
    s.write(
        "d/server.mjs",
        "console.error('no server here'); process.exit(3);\n",
    );
    for spec in ["server.mjs", "d/server.mjs"] {
        let run = s.loom(&["mcp", "inspect", spec]);
        run.expect_code(1)
            .stderr_has("(command node ")
            .stderr_has("no server here")
            .stderr_lacks("npx")
            .stderr_lacks("[providers].")
            .stderr_lacks("try `loom mcp inspect`");
    }
}

#[test]
fn a_missing_baseline_is_named_as_the_baseline() {
    let s = Scratch::new();
    s.write("agent.toml", &echo_agent());
    s.loom(&["audit", "agent.toml", "--baseline", "nope.toml"])
        .expect_code(1)
        .stderr_has("baseline");
}

#[test]
fn lists_have_a_json_form_too() {
    let s = Scratch::new();
    let models = s.loom(&["model", "list", "--json"]);
    models.expect_code(0);
    let doc: serde_json::Value = serde_json::from_str(&models.stdout()).unwrap();
    assert_eq!(doc["version"], 1);
    let names: Vec<&str> = doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"smollm2-135m") && names.contains(&"qwen2.5-coder-1.5b"),
        "{doc}"
    );
    // a manifest with no provider sources: an empty list
    s.write("agent.toml", &echo_agent());
    let none = s.loom(&["providers", "list", "--json"]);
    none.expect_code(0);
    let doc: serde_json::Value = serde_json::from_str(&none.stdout()).unwrap();
    assert_eq!(doc["providers"], serde_json::json!([]));
    // one that is not installed: named with its problem, and the exit code says it is not usable
    s.write(
        "agent.toml",
        &format!(
            "{}\n[providers]\nnotes = {{ path = \"./notes\" }}\n",
            echo_agent()
        ),
    );
    let missing = s.loom(&["providers", "list", "--json"]);
    missing.expect_code(1);
    let doc: serde_json::Value = serde_json::from_str(&missing.stdout()).unwrap();
    assert_eq!(doc["providers"][0]["handle"], "notes");
    assert_eq!(doc["providers"][0]["state"], "missing");
}
