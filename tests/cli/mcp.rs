//! `loom mcp inspect`: a server named by path, by npm-style spec and by a manifest's handle; the TOML it prints
//! pastes into a manifest that `loom audit` accepts once its capability lines are uncommented.

use loom_tests::{workspace_root, Scratch};

fn fake() -> String {
    workspace_root()
        .join("tests/mcp-peers/fake.mjs")
        .display()
        .to_string()
}

#[test]
fn inspect_prints_toml_that_pastes_into_an_auditable_manifest() {
    let s = Scratch::new();
    let run = s.loom(&["mcp", "inspect", &fake()]);
    run.expect_code(0)
        .stdout_has("2 tools")
        .stdout_has("[tools.a]\nprovider = \"fake\"\n# tool a")
        .stdout_has("# a = { text = \"*\" }")
        .stdout_has("# b = { text = \"*\" }");
    // paste, prune b, uncomment a's grant: the result audits clean (the server is started again by audit)
    let pasted = run
        .stdout()
        .replace("[tools.b]\nprovider = \"fake\"\n# tool b\n", "")
        .replace("# b = { text = \"*\" }\n", "")
        .replace("# a = { text = \"*\" }", "a = { text = \"*\" }");
    let m = s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"pasted\"\n[harness]\nprovider = \"test\"\necho = true\n\n{pasted}"
        ),
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(0)
        .stdout_has(r#"model sees  {"type":"object","properties":{"text":{"type":"string"}}}"#);
}

#[test]
fn inspect_a_manifest_handle_as_json() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"m\"\n[providers]\nmine = {{ provider = \"mcp-server\", command = \"node\", args = [{:?}, \"malformed\"] }}\n",
            fake()
        ),
    );
    let run = s.loom(&[
        "mcp",
        "inspect",
        "mine",
        "--manifest",
        "agent.toml",
        "--json",
    ]);
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(v["provider"], "mine");
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["broken", "ok"]);
    assert_eq!(
        v["tools"][0]["inputSchema"], "not a schema",
        "the listing is shown as the server sent it"
    );
    // a word that is not a handle is refused with the handles there are
    s.loom(&["mcp", "inspect", "nope", "--manifest", "agent.toml"])
        .expect_code(1)
        .stderr_has("not a [providers] handle")
        .stderr_has("mine");
}

#[test]
fn inspect_a_server_that_does_not_start_fails_with_its_stderr() {
    let s = Scratch::new();
    s.write(
        "broken.mjs",
        "console.error('fake: cannot start, missing config'); process.exit(4);\n",
    );
    s.loom(&["mcp", "inspect", "./broken.mjs"])
        .expect_code(1)
        .stderr_has("cannot start")
        .stderr_has("missing config");
}
