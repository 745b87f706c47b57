//! The skills session through the real `loom` binary: the default chain finds skills in `.agents/skills`, the
//! catalog lists only accepted ones, `read_skill` activates, lists and reads (never outside a skill's folder), and an
//! accepted skill's bash row joins the bash grant.

use loom_tests::skills_fixture::write_skills;
use loom_tests::Scratch;

use super::{results, updates};

const HOST: &str = r#"
[tools]
bash = { capabilities = { commands = "*", paths = ["./"] } }

[capabilities]
bash = { commands = ["dig"], network = "*" }
"#;

fn agent(s: &Scratch, session: &str, script: &str) {
    s.write(
        "agent.toml",
        &format!("[agent]\nname = \"skills-e2e\"\n[harness]\nprovider = \"test\"\nscript = {script}\n{session}\n{HOST}"),
    );
}

fn home(s: &Scratch) -> String {
    s.path().join("home").display().to_string()
}

/// What the model would see first (`--emit-preamble`), with HOME in the scratch dir.
fn preamble(s: &Scratch) -> serde_json::Value {
    let args = [
        "prompt",
        "agent.toml",
        "go",
        "--format",
        "jsonl",
        "--emit-preamble",
    ];
    let run = s.loom_env(&args, &[("HOME", &home(s))]);
    run.expect_code(0);
    updates(&run)[0]["preamble"].clone()
}

#[test]
fn read_skill_activates_lists_and_reads_through_the_real_binary() {
    let s = Scratch::new();
    write_skills(&s, ".agents/skills");
    agent(
        &s,
        "",
        r#"[[
  { call = { tool = "read_skill", input = { skill = "pdf-processing" } } },
  { call = { tool = "read_skill", input = { skill = "pdf-processing", path = "scripts/extract.py" } } },
  { call = { tool = "read_skill", input = { skill = "pdf-processing", path = "../../../outside/SKILL.md" } } },
  { call = { tool = "read_skill", input = { skill = "calendar" } } },
  { call = { tool = "read_skill", input = { skill = "linked" } } },
  { say = "done" },
]]"#,
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0);
    let dir =
        std::fs::canonicalize(s.path().join(".agents/skills/pdf-processing")).unwrap_or_default();
    let dir = dir.display();
    let r = results(&updates(&run));
    assert_eq!(r.len(), 5, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert!(
        r[0].1.starts_with(&format!(
            "<skill name=\"pdf-processing\" directory=\"{dir}\">\n# PDF processing\n\nRun scripts/extract.py on the file.\n</skill>"
        )),
        "{}",
        r[0].1
    );
    assert!(r[0].1.contains("\n- scripts/extract.py"), "{}", r[0].1);
    assert_eq!(
        r[1],
        ("completed".to_string(), "print('extracted')\n".to_string())
    );
    assert_eq!(r[2].0, "failed");
    assert!(
        r[2].1
            .contains(&format!("outside the skill's folder {dir}")),
        "{}",
        r[2].1
    );
    assert!(r[2].1.contains("give a path inside it"), "{}", r[2].1);
    assert!(!r[2].1.contains("secret instructions"));
    // the rejected skill and the malformed one are invisible
    for (i, name) in [(3, "calendar"), (4, "linked")] {
        assert_eq!(r[i].0, "failed");
        // the skills listed: the workspace's accepted ones and the bundled ones, never the invisible ones
        let text = &r[i].1;
        assert!(
            text.contains(&format!(
                "there is no skill named \"{name}\"; the skills are: "
            )),
            "{text}"
        );
        let listed: Vec<&str> = text
            .split("the skills are: ")
            .nth(1)
            .unwrap_or_default()
            .split(", ")
            .collect();
        assert!(
            listed.contains(&"dns-lookup") && listed.contains(&"pdf-processing"),
            "{text}"
        );
        assert!(
            !listed.contains(&"calendar") && !listed.contains(&"linked"),
            "{text}"
        );
    }
    // boot said why each skill is missing, with its path and the fix
    run.stderr_has("calendar/SKILL.md) is inactive: bash: it requests")
        .stderr_has("to accept it, add to [capabilities] in")
        .stderr_has("broken-yaml/SKILL.md: frontmatter: line 3")
        .stderr_has("wrong-name/SKILL.md: name: the name \"right-name\" does not match the skill's folder \"wrong-name\"")
        .stderr_has("set `name: wrong-name`")
        .stderr_has("linked/SKILL.md: it is a symlink to")
        .stderr_has("copy the file into the folder");
}

#[test]
fn the_catalog_lists_accepted_skills_and_a_skill_row_joins_the_bash_grant() {
    let s = Scratch::new();
    write_skills(&s, "skills");
    agent(
        &s,
        "[session]\nlayers = [\"skills\", \"in-memory\"]\n[session.skills]\nroots = [\"./skills\"]\n",
        "[[{ say = \"hi\" }]]",
    );
    let pre = &preamble(&s);
    let system = pre["systemPrompt"].to_string();
    assert!(system.contains("- dns-lookup ("), "{system}");
    assert!(
        system.contains(
            "): Look up DNS records with dig. Use when the user asks what a domain resolves to."
        ),
        "{system}"
    );
    assert!(system.contains("- pdf-processing ("), "{system}");
    assert!(
        !system.contains("calendar") && !system.contains("wrong-name"),
        "{system}"
    );
    let tools = pre["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["bash", "read_skill"]);
    let bash = tools[0]["description"].as_str().unwrap_or_default();
    assert!(
        bash.contains(
            r#"[{ commands = "*", paths = ["./"] }, { commands = ["dig"], network = "*" }]"#
        ),
        "the dns-lookup row joined the bash grant: {bash}"
    );
}

#[test]
fn without_skills_there_is_no_catalog_and_no_read_skill() {
    let s = Scratch::new();
    // the default chain, without the skills built into loom
    agent(
        &s,
        "[session]\nlayers = [\"skills\", \"compacting\", \"in-memory\"]\n[session.skills]\nbundled = false\n",
        "[[{ say = \"hi\" }]]",
    );
    let pre = &preamble(&s);
    // only the environment block: no catalog
    let system = pre["systemPrompt"].as_array().unwrap();
    assert_eq!(system.len(), 1, "{system:?}");
    assert!(
        system[0].as_str().unwrap().starts_with("# Environment"),
        "{system:?}"
    );
    let names: Vec<String> = pre["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["bash"]);
}

#[test]
fn a_skill_shipping_its_own_mcp_server_runs_only_with_consent() {
    let s = Scratch::new();
    let fake = loom_tests::workspace_root().join("tests/mcp-peers/fake.mjs");
    let server = std::fs::read_to_string(&fake).unwrap_or_default();
    s.write(".agents/skills/echo-notes/server.mjs", &server);
    s.write(
        ".agents/skills/echo-notes/SKILL.md",
        "---\nname: echo-notes\ndescription: Echo a note through the skill's own MCP server.\nmetadata:\n  loom.providers: |\n    notes = { provider = \"mcp-server\", command = \"node\", args = [\"${SKILL_DIR}/server.mjs\", \"paged\"] }\n  loom.tools: |\n    echo_note = { provider = \"notes\", tool = \"a\" }\n---\nCall echo_note.\n",
    );
    let script =
        r#"[[{ call = { tool = "echo_note", input = { text = "hi" } } }, { say = "done" }]]"#;
    // without consent: the skill is inactive, boot names the paste-ready consent line, the tool does not exist
    agent(&s, "", script);
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0)
        .stderr_has("skill echo-notes (")
        .stderr_has("ships its own implementation")
        .stderr_has("echo_note = {}");
    let r = results(&updates(&run));
    assert!(
        r[0].0 == "failed" && r[0].1.contains("no tool named \"echo_note\""),
        "{r:#?}"
    );
    // with consent (the instance named in [capabilities], and [consent] naming the skill and what it ships, as
    // boot printed it) the skill's server runs
    let stderr = run.stderr();
    let consent = stderr
        .split("add to [consent] in ")
        .nth(1)
        .and_then(|rest| rest.split_once(": "))
        .map(|(_, line)| line.lines().next().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(
        consent.starts_with("echo_note = { skill = \"echo-notes\", sha256 = \""),
        "{stderr}"
    );
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"skills-e2e\"\n[harness]\nprovider = \"test\"\nscript = {script}\n{HOST}echo_note = \"*\"\n[consent]\n{consent}\n"
        ),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(
        r[0],
        (
            "completed".to_string(),
            "a got {\"text\":\"hi\"}".to_string()
        ),
        "{}",
        run.stderr()
    );
}

#[test]
fn the_skills_agent_example_runs_each_tier() {
    let example = loom_tests::workspace_root().join("examples/skills-agent");
    let s = Scratch::new();
    let m = example.join("agent.toml").display().to_string();
    s.loom_env(&["audit", &m], &[("HOME", &home(&s))])
        .expect_code(1)
        .stdout_has("skill calendar  [INACTIVE]")
        .stdout_has("skill dns-lookup  [ACTIVE]")
        .stdout_has("skill echo-notes  [ACTIVE]")
        .stdout_has("skill haiku  [ACTIVE]")
        .stdout_has("skill word-count  [ACTIVE]")
        // the test's HOME is inside the directory it runs from, so `./` covers it: a warning
        .stdout_has("(2 tools, 1 error, 1 warning, 1 rejected tool group)")
        .stdout_has("which covers your home directory");
    // the same manifest with the scripted harness, next to the same skills
    let text = std::fs::read_to_string(example.join("agent.toml")).unwrap_or_default();
    let scripted = text.replace(
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"",
        r#"provider = "test"
script = [[
  { call = { tool = "read_skill", input = { skill = "haiku" } } },
  { call = { tool = "read_skill", input = { skill = "haiku", path = "references/examples.md" } } },
  { call = { tool = "echo_note", input = { text = "hello" } } },
  { call = { tool = "read_skill", input = { skill = "calendar" } } },
  { say = "done" },
]]"#,
    );
    assert_ne!(
        scripted, text,
        "the example's [harness] changed; update this test"
    );
    s.write("agent.toml", &scripted);
    let skills = example.join("skills");
    std::os::unix::fs::symlink(&skills, s.path().join("skills")).unwrap_or_default();
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0).stderr_has("skill calendar (");
    let r = results(&updates(&run));
    assert_eq!(r.len(), 4, "{r:#?}");
    assert!(r[0].1.starts_with("<skill name=\"haiku\""), "{r:#?}");
    assert!(r[0].1.contains("- references/examples.md"), "{r:#?}");
    assert!(r[1].1.starts_with("An old silent pond"), "{r:#?}");
    assert_eq!(
        r[2],
        ("completed".to_string(), "note: hello".to_string()),
        "{}",
        run.stderr()
    );
    assert!(
        r[3].1.contains("there is no skill named \"calendar\""),
        "{r:#?}"
    );
}
