//! `loom audit` end to end: the tree, JSON, exit codes and bad input.

use loom_tests::{workspace_root, Scratch};

fn example(name: &str) -> String {
    workspace_root()
        .join("examples")
        .join(name)
        .join("agent.toml")
        .display()
        .to_string()
}

#[test]
fn the_minimal_example_audits_clean() {
    let s = Scratch::new();
    s.loom(&["audit", &example("minimal-agent")])
        .expect_code(0)
        .stdout_has("agent     minimal-agent")
        .stdout_has("effective ceiling")
        .stdout_has("{ commands = \"*\", paths = [\"./\"] }")
        .stdout_has(&format!(
            "shell    any command via bash -c; rw: ./ (= {}); ro: none; no network",
            s.path().display()
        ))
        .stdout_has("health    ok");
}

#[test]
fn json_output_is_versioned_and_flags_may_come_first() {
    let s = Scratch::new();
    let run = s.loom(&["audit", "--json", &example("minimal-agent")]);
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(
        v["grants"]["bash"],
        serde_json::json!({ "commands": "*", "paths": ["./"] })
    );
    assert_eq!(v["health"]["ok"], true);
    assert_eq!(v["health"]["rejectedToolGroups"], 0);
    assert!(v["toolGroups"].is_array());
    let after = s.loom(&["audit", &example("minimal-agent"), "--json"]);
    assert_eq!(after.stdout(), run.stdout());
}

#[test]
fn no_sections_means_the_four_tools_and_the_default_ceiling() {
    let s = Scratch::new();
    let m = s.write(
        "agent.toml",
        "[agent]\nname = \"bare\"\n[harness]\nprovider = \"test\"\necho = true\n",
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(0)
        .stdout_has("the default ceiling")
        .stdout_has("read_file  <- builtin")
        .stdout_has("edit_file  <- builtin")
        .stdout_has("session   skills -> compacting -> in-memory  (default chain)");
}

#[test]
fn web_search_shows_the_one_host_it_reaches_and_the_secret_it_needs() {
    let s = Scratch::new();
    let m = s.write(
        "agent.toml",
        "[agent]\nname = \"searcher\"\n[harness]\nprovider = \"test\"\necho = true\n[tools]\nweb_search = \"builtin\"\n[capabilities]\nweb_search = \"*\"\n",
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(0)
        .stdout_has("web_search  <- builtin")
        .stdout_has("reaches  api.search.brave.com only; needs secret BRAVE_SEARCH_API_KEY");
}

#[test]
fn the_gcalcli_capability_set_lists_commands_with_their_own_grants() {
    let s = Scratch::new();
    s.loom(&["audit", &example("ci-gate")])
        .expect_code(0)
        .stdout_has("own grant  gcalcli — carried into pipelines by the broker; rw: ~/.gcalcli (= ")
        .stdout_has("/.gcalcli); ro: none; network")
        .stdout_has("shell    any command via bash -c; rw: ./ (= ");
}

#[test]
fn a_missing_required_kind_fails_the_audit_with_the_partial_tree() {
    let s = Scratch::new();
    let m = s.write("agent.toml", "[agent]\nname = \"x\"\n[tools]\nbash = \"builtin\"\n[capabilities]\nbash = { paths = [\"./\"], netwrk = \"*\" }\n");
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(1)
        .stdout_has("effective ceiling")
        .stdout_has("lacks the required kind `commands`")
        .stdout_has("did you mean `network`?");
}

/// A parent granting `read_file` over `parent_paths`, with an inline researcher sub-agent over `child_paths`.
fn parent_with_researcher(parent_paths: &str, child_paths: &str) -> String {
    format!(
        r#"[agent]
name = "parent"
[harness]
provider = "test"
echo = true
[tools]
spawn_subagent = "builtin"
read_file = "builtin"
[capabilities]
read_file = {{ paths = {parent_paths} }}
[capabilities.spawn_subagent.manifest]
name = "researcher"
[capabilities.spawn_subagent.manifest.tools]
read_file = "builtin"
[capabilities.spawn_subagent.manifest.capabilities]
read_file = {{ paths = {child_paths} }}
"#
    )
}

#[test]
fn a_subagent_that_exceeds_its_parent_fails_the_audit() {
    let s = Scratch::new();
    let m = s.write(
        "agent.toml",
        &parent_with_researcher(r#"["./docs"]"#, r#"["./"]"#),
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(1)
        .stdout_has("spawn_subagent > researcher")
        .stdout_has("EXCEEDS its parent at read_file");
}

#[test]
fn a_contained_subagent_passes() {
    let s = Scratch::new();
    let m = s.write(
        "agent.toml",
        &parent_with_researcher(r#"["./"]"#, r#"["./docs"]"#),
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(0)
        .stdout_has("contained in its parent");
}

#[test]
fn cyclic_subagent_manifests_are_detected() {
    let s = Scratch::new();
    let body = |name: &str, other: &str| {
        format!(
            "[agent]\nname = \"{name}\"\n[tools]\nspawn_subagent = \"builtin\"\n[capabilities]\nspawn_subagent = {{ manifest = \"./{other}.toml\" }}\n"
        )
    };
    s.write("a.toml", &body("a", "b"));
    s.write("b.toml", &body("b", "a"));
    s.loom(&["audit", "a.toml"])
        .expect_code(1)
        .stdout_has("sub-agent cycle");
}

#[test]
fn audit_resolves_mcp_tools_by_starting_their_servers() {
    let fs = loom_tests::workspace_root()
        .join("tests/mcp-peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !fs.exists() {
        eprintln!(
            "SKIPPED: {} is missing; run `npm ci` in tests/mcp-peers (.ci/run does)",
            fs.display()
        );
        return;
    }
    let s = Scratch::new();
    let dir = std::fs::canonicalize(s.path())
        .unwrap()
        .display()
        .to_string();
    let m = s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "m"
[harness]
provider = "test"
echo = true
[providers]
fs_mcp = {{ provider = "mcp-server", command = "node", args = [{fs:?}, {dir:?}] }}
[tools.read_one_doc]
provider = "fs_mcp"
tool = "read_text_file"
[tools.list_directory]
provider = "fs_mcp"
[capabilities]
read_one_doc = {{ path = "/docs/welcome.md" }}
list_directory = {{ path = "*" }}
"#
        ),
    );
    let run = s.loom(&["audit", m.to_str().unwrap()]);
    run.expect_code(0)
        .stdout_has("read_one_doc (= read_text_file)")
        .stdout_has(r#""type":"object","properties":{}}"#)
        .stdout_has(r#""properties":{"path":{"type":"string"}},"required":["path"]}"#);
    assert!(
        !run.stdout().contains("MCP tool was not resolved")
            && !run.stdout().contains("cannot resolve"),
        "{}",
        run.stdout()
    );
    let json = s.loom(&["audit", m.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    let tool = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_one_doc")
        .unwrap();
    assert_eq!(tool["mcp"]["server"], "fs_mcp", "{tool}");
    assert_eq!(
        tool["mcp"]["schema"]["properties"],
        serde_json::json!({}),
        "{tool}"
    );
}

#[test]
fn an_mcp_server_that_does_not_start_is_an_audit_error_naming_it() {
    let s = Scratch::new();
    let fake = loom_tests::workspace_root().join("tests/mcp-peers/fake.mjs");
    let m = s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "m"
[providers]
slow = {{ provider = "mcp-server", command = "node", args = [{:?}, "hang-start"], startup_timeout_ms = 300 }}
[tools]
a = {{ provider = "slow" }}
[capabilities]
a = "*"
"#,
            fake.display().to_string()
        ),
    );
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(1)
        .stdout_has("cannot resolve this tool")
        .stdout_has("[providers].slow")
        .stdout_has("startup_timeout_ms");
}

mod bad_input {
    use super::*;

    #[track_caller]
    fn refused(text: &str, needles: &[&str]) {
        let s = Scratch::new();
        let m = s.write("agent.toml", text);
        let run = s.loom(&["audit", m.to_str().unwrap()]);
        run.expect_code(1);
        for n in needles {
            run.stderr_has(n);
        }
        assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
    }

    #[test]
    fn malformed_toml() {
        refused("[agent\nname = 1", &["agent.toml"]);
    }

    #[test]
    fn unknown_keys_name_the_path_and_the_nearest_key() {
        refused(
            "[agent]\nname = \"x\"\nsytem_prompt = \"hi\"\n",
            &["agent.sytem_prompt", "system_prompt"],
        );
    }

    #[test]
    fn an_undefined_variable_is_named() {
        refused(
            "[agent]\nname = \"${LOOM_TEST_SURELY_UNDEFINED}\"\n",
            &["LOOM_TEST_SURELY_UNDEFINED"],
        );
    }

    #[test]
    fn a_bare_handle_string() {
        refused(
            "[agent]\nname = \"x\"\n[tools]\nfoo = \"nowhere\"\n",
            &["tools.foo", "nowhere"],
        );
    }

    #[test]
    fn a_bare_string_grant() {
        refused(
            "[agent]\nname = \"x\"\n[capabilities]\nbash = \"builtin\"\n",
            &["capabilities.bash", "not a grant"],
        );
    }

    #[test]
    fn a_ten_megabyte_manifest() {
        let big = format!(
            "[agent]\nname = \"x\"\n# {}\n",
            "x".repeat(10 * 1024 * 1024)
        );
        refused(&big, &["1 MiB"]);
    }

    #[test]
    fn ten_thousand_deep_nesting() {
        refused(
            &format!("a = {}{}\n", "[".repeat(10_000), "]".repeat(10_000)),
            &["agent.toml"],
        );
        refused(
            &format!("a = {}1{}\n", "{ b = ".repeat(10_000), " }".repeat(10_000)),
            &["agent.toml"],
        );
    }

    #[test]
    fn a_missing_file() {
        let s = Scratch::new();
        s.loom(&["audit", "nope.toml"])
            .expect_code(1)
            .stderr_has("nope.toml");
    }
}

#[test]
fn audit_shows_which_secrets_each_bash_tool_is_handed() {
    let s = Scratch::new();
    let m = s.write(
        "agent.toml",
        r#"[agent]
name = "secretive"
secrets = ["GH_TOKEN", "GCAL_TOKEN"]
[harness]
provider = "test"
echo = true
[tools]
bash = "builtin"
shell = { provider = "builtin", tool = "bash" }
[capabilities]
bash = [{ commands = "*", paths = ["./"], env = "*" }, { commands = ["gh"], env = ["GH_TOKEN", "ANTHROPIC_API_KEY"] }]
shell = { commands = "*", paths = ["./"], env = ["GCAL_*"] }
"#,
    );
    let run = s.loom(&["audit", m.to_str().unwrap()]);
    run.expect_code(0)
        .stdout_has("secrets  GH_TOKEN  (in its environment")
        .stdout_has("secrets  none  (in its environment");
    let json = s.loom(&["audit", m.to_str().unwrap(), "--format", "json"]);
    json.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    let secrets = |name: &str| {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["secrets"].clone())
            .unwrap()
    };
    assert_eq!(secrets("bash"), serde_json::json!(["GH_TOKEN"]));
    assert_eq!(secrets("shell"), serde_json::json!([]));
}
