//! The kernel review's smaller findings through the real binary (K11, K14, K16), each next to its allowed control.

use loom_tests::{workspace_root, Scratch};

const HEAD: &str = "[agent]\nname = \"small\"\n[harness]\nprovider = \"test\"\necho = true\n";

#[test]
fn k11_a_row_for_a_program_that_runs_code_is_shown_as_a_shell() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!("{HEAD}[tools]\nbash = \"builtin\"\n[capabilities]\nbash = [{{ commands = \"*\", paths = [\"./\"] }}, {{ commands = [\"git\"], paths = [\"./\"], network = \"*\" }}]\n"),
    );
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("warning  tools.bash row 2: git runs code its arguments choose")
        .stdout_has("in effect any command with the row's own paths, network and secrets");
    // the control: a row for a program that does not run its arguments
    s.write(
        "agent.toml",
        &format!("{HEAD}[tools]\nbash = \"builtin\"\n[capabilities]\nbash = [{{ commands = \"*\", paths = [\"./\"] }}, {{ commands = [\"gcalcli\"], network = \"*\" }}]\n"),
    );
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_lacks("runs code its arguments choose");
}

#[test]
fn k14_a_host_rule_that_could_never_match_is_refused() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!("{HEAD}[[permissions.deny_rules]]\ntool = \"bash\"\nhost = \"pastebin.com\"\n"),
    );
    s.loom(&["audit", "agent.toml"])
        .expect_code(1)
        .stderr_has("permissions.deny_rules[1].host: only the built-in web_search reports the host a call reaches");
    s.loom(&["prompt", "agent.toml", "hi"]).expect_code(1);
    // the control: on web_search it loads
    s.write(
        "agent.toml",
        &format!("{HEAD}[tools]\nbash = \"builtin\"\nweb_search = \"builtin\"\n[capabilities]\nbash = {{ commands = \"*\", paths = [\"./\"] }}\nweb_search = \"*\"\n[[permissions.deny_rules]]\ntool = \"web_search\"\nhost = \"pastebin.com\"\n"),
    );
    s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("BRAVE_SEARCH_API_KEY", "test-key")],
    )
    .expect_code(0);
}

#[test]
fn k16_a_star_nested_in_an_mcp_argument_is_refused_not_sent() {
    let s = Scratch::new();
    let server = workspace_root().join("examples/mcp-agent/server.mjs");
    let manifest = |folder: &str| {
        format!(
            "{HEAD}[providers]\nnotes = {{ provider = \"mcp-server\", command = \"node\", args = [{:?}] }}\n[tools]\nremember = {{ provider = \"notes\", tool = \"add_note\" }}\n[capabilities]\nremember = {{ folder = {folder}, title = \"*\", text = \"*\" }}\n",
            server.display().to_string()
        )
    };
    s.write("agent.toml", &manifest("{ any = \"*\" }"));
    s.loom(&["audit", "agent.toml"])
        .expect_code(1)
        .stdout_has("the grant's `folder.any` is \"*\" inside argument `folder`");
    // the control: the argument bound to a literal
    s.write("agent.toml", &manifest("\"work\""));
    s.loom(&["audit", "agent.toml"]).expect_code(0);
}

#[test]
fn k12_audit_shows_the_grant_a_skill_widens_as_it_runs() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!("{HEAD}[tools]\nbash = {{ capabilities = {{ commands = [\"ls\"] }} }}\n[capabilities]\nbash = [{{ commands = [\"ls\"] }}, {{ commands = [\"gh\"], network = \"*\" }}]\n"),
    );
    s.write(
        ".agents/skills/gh/SKILL.md",
        "---\nname: gh\ndescription: GitHub CLI.\n---\nUse gh.\n",
    );
    s.write(
        ".agents/skills/gh/loom.toml",
        "[tools]\nbash = { capabilities = { commands = [\"gh\"], network = \"*\" } }\n",
    );
    let home = s.path().join("home").display().to_string();
    s.loom_env(&["audit", "agent.toml"], &[("HOME", &home)])
        .expect_code(0)
        .stdout_has("grant  [{ commands = [\"gh\"], network = \"*\" }, { commands = [\"ls\"] }]")
        .stdout_has(
            "own grant  gh — carried into pipelines by the broker; rw: none; ro: none; network",
        )
        .stdout_has("tools.bash: its grant as shown includes the rows skill gh adds at boot");
    // the control: without the skill, the grant is the manifest's alone
    std::fs::remove_dir_all(s.path().join(".agents")).unwrap();
    s.loom_env(&["audit", "agent.toml"], &[("HOME", &home)])
        .expect_code(0)
        .stdout_has("grant  { commands = [\"ls\"] }  (inline)")
        .stdout_lacks("own grant  gh");
}
